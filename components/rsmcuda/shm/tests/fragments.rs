//! Fragment pools and "fragment return as the ACK": in-process checks of every rule, and
//! a cross-process echo that moves messages of all sizes through both pools.

mod common;

use std::collections::VecDeque;
use std::time::Duration;

use common::{child_role, report, spawn, unique_name, var};
use rsmcuda_shm::{
    FifoKind, FifoReader, FifoValue, FifoWriter, FragError, LayoutParams, PoolKind, Retry, Segment,
    SegmentName,
};

fn params() -> LayoutParams {
    LayoutParams {
        nranks: 2,
        fifo_size: 16,
        eager_size: 200,
        eager_count: 4,
        max_size: 5000,
        max_count: 2,
        fbox_bytes: 0,
    }
}

/// Tiny deterministic PRNG (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn pattern(seq: u64, len: usize) -> impl Iterator<Item = u8> {
    (0..len).map(move |i| (seq as usize * 31 + i * 7) as u8)
}

#[test]
fn round_trip_in_process() {
    let name = unique_name("frag-rt");
    let s0 = Segment::create(&name, &params(), 0).unwrap();
    let s1 = Segment::try_attach(&name, 1).unwrap().unwrap();
    let mut pool0 = s0.frag_pool().unwrap();
    assert!(s0.frag_pool().is_err(), "pool is claimed once");
    let mut r0 = s0.fifo_reader().unwrap();
    let mut r1 = s1.fifo_reader().unwrap();
    let to1 = s0.fifo_writer(1).unwrap();
    let to0 = s1.fifo_writer(0).unwrap();

    let mut f = pool0.alloc(150).unwrap();
    assert_eq!((f.kind(), f.capacity()), (PoolKind::Eager, 200));
    pool0.payload_mut(&mut f)[..5].copy_from_slice(b"hello");
    pool0.set_user(&mut f, 42);
    let off = f.offset();
    let v = pool0.post(f, 5, 0x41).unwrap();
    assert_eq!(pool0.in_flight(), 1);
    to1.push(v).unwrap();

    let got = r1.pop().unwrap();
    assert_eq!(got.kind(), FifoKind::Send);
    let inc = r1.incoming(got).unwrap();
    assert_eq!(
        (inc.sender(), inc.tag(), inc.len(), inc.user()),
        (0, 0x41, 5, 42)
    );
    assert_eq!(inc.payload(), b"hello");
    let (owner, ack) = inc.into_ack(true);
    assert_eq!(owner, 0);
    to0.push(ack).unwrap();

    let back = r0.pop().unwrap();
    let info = pool0.complete(back.value()).unwrap();
    assert_eq!(
        (info.offset, info.ok, info.kind),
        (off, true, PoolKind::Eager)
    );
    assert_eq!(pool0.in_flight(), 0);
    // Duplicate or forged ACKs are refused, never double-freed.
    assert_eq!(
        pool0.complete(back.value()),
        Err(FragError::NotInFlight(off))
    );
    assert!(matches!(
        pool0.complete(FifoValue::send(off)),
        Err(FragError::NotAnAck(_))
    ));
    assert!(matches!(
        pool0.complete(FifoValue::ack(off + 64, true)),
        Err(FragError::BadOffset(_))
    ));
    let foreign = s1.layout().frag_off(1, PoolKind::Eager, 0);
    assert!(matches!(
        pool0.complete(FifoValue::ack(foreign, true)),
        Err(FragError::NotMine { owner: 1, .. })
    ));
    // Error status travels back.
    let f = pool0.alloc(1).unwrap();
    let v = pool0.post(f, 1, 1).unwrap();
    let got = push_pop(&to1, &mut r1, v);
    let (_, ack) = r1.incoming(got).unwrap().into_ack(false);
    assert!(!pool0.complete(ack).unwrap().ok);
}

/// An ACK through `reclaim` leaves the fragment with its owner: not reusable by `alloc`
/// until freed, postable again, and a second ACK for it is refused.
#[test]
fn reclaim_keeps_the_fragment_owned() {
    let name = unique_name("frag-reclaim");
    let s0 = Segment::create(&name, &params(), 0).unwrap();
    let s1 = Segment::try_attach(&name, 1).unwrap().unwrap();
    let mut pool0 = s0.frag_pool().unwrap();
    let mut r1 = s1.fifo_reader().unwrap();
    let to1 = s0.fifo_writer(1).unwrap();
    let before = pool0.available(PoolKind::Max);
    let f = pool0.alloc(4000).unwrap();
    let off = f.offset();
    let v = pool0.post(f, 10, 7).unwrap();
    let got = push_pop(&to1, &mut r1, v);
    let (_, ack) = r1.incoming(got).unwrap().into_ack(true);
    let (mut token, info) = pool0.reclaim(ack).unwrap();
    assert_eq!(
        (info.offset, info.kind, token.offset()),
        (off, PoolKind::Max, off)
    );
    assert_eq!(pool0.in_flight(), 0);
    assert_eq!(pool0.available(PoolKind::Max), before - 1, "still owned");
    assert_eq!(pool0.reclaim(ack).err(), Some(FragError::NotInFlight(off)));
    pool0.payload_mut(&mut token)[0] = 9;
    let v = pool0.post(token, 1, 7).unwrap();
    let got = push_pop(&to1, &mut r1, v);
    let (_, ack) = r1.incoming(got).unwrap().into_ack(true);
    pool0.complete(ack).unwrap();
    assert_eq!(pool0.available(PoolKind::Max), before);
}

/// Pushes `v` to a FIFO and pops it again from its reader.
fn push_pop(w: &FifoWriter, r: &mut FifoReader, v: FifoValue) -> rsmcuda_shm::Received {
    w.push(v).unwrap();
    r.pop().unwrap()
}

#[test]
fn pool_rules() {
    let name = unique_name("frag-pool");
    let s0 = Segment::create(&name, &params(), 0).unwrap();
    let s1 = Segment::try_attach(&name, 1).unwrap().unwrap();
    let mut pool = s0.frag_pool().unwrap();
    assert!(pool.alloc(5001).is_none(), "larger than max");
    let eager: Vec<_> = (0..4).map(|_| pool.alloc(200).unwrap()).collect();
    assert_eq!(pool.available(PoolKind::Eager), 0);
    // Eager exhausted: alloc(len) does not silently fall back to a max fragment.
    assert!(pool.alloc(10).is_none());
    let m = pool.alloc(201).unwrap();
    assert_eq!(m.kind(), PoolKind::Max);
    // Over-long post frees the fragment and reports.
    let e = pool.post(m, 5001, 0).unwrap_err();
    assert!(matches!(e, FragError::BadLength { capacity: 5000, .. }));
    assert_eq!(pool.available(PoolKind::Max), 2);
    // LIFO: the last freed comes back first.
    let offs: Vec<u64> = eager.iter().map(|f| f.offset()).collect();
    for f in eager {
        pool.free(f);
    }
    assert_eq!(pool.alloc(1).unwrap().offset(), offs[3]);
    // A receiver refuses anything that is not a real SEND.
    let mut r1 = s1.fifo_reader().unwrap();
    let to1 = s0.fifo_writer(1).unwrap();
    let got = push_pop(&to1, &mut r1, FifoValue::send(64));
    let e = r1.incoming(got).unwrap_err();
    assert_eq!(e, FragError::BadOffset(64));
    let got = push_pop(&to1, &mut r1, FifoValue::ack(offs[0], true));
    let e = r1.incoming(got).unwrap_err();
    assert!(matches!(e, FragError::NotASend(_)));
    // A SEND of a real fragment that was never posted: its header is still zero (headers
    // are written by `post`, not at creation).
    let got = push_pop(&to1, &mut r1, FifoValue::send(offs[0]));
    assert_eq!(
        r1.incoming(got).unwrap_err(),
        FragError::CorruptHeader(offs[0])
    );
}

#[test]
#[should_panic(expected = "did not allocate it")]
fn token_from_another_pool_is_refused() {
    let a = Segment::create(
        &unique_name("tok-a"),
        &LayoutParams {
            nranks: 1,
            ..params()
        },
        0,
    )
    .unwrap();
    let b = Segment::create(
        &unique_name("tok-b"),
        &LayoutParams {
            nranks: 1,
            ..params()
        },
        0,
    )
    .unwrap();
    let mut pa = a.frag_pool().unwrap();
    let pb = b.frag_pool().unwrap();
    let mut f = pa.alloc(1).unwrap();
    let _ = pb.payload_mut(&mut f);
}

const ECHO_MSGS: u64 = 3000;

/// Rank 1 in the cross-process echo: every SEND is copied out and ACKed at once, then
/// sent back to rank 0 in one of our own fragments as soon as one is free.
fn echo_server(name: &SegmentName) {
    let seg = Segment::attach(name, 1, &Retry::default()).unwrap();
    let mut pool = seg.frag_pool().unwrap();
    let mut reader = seg.fifo_reader().unwrap();
    let to0 = seg.fifo_writer(0).unwrap();
    let mut pending: VecDeque<FifoValue> = VecDeque::new();
    let mut backlog: VecDeque<(Vec<u8>, u8, u64)> = VecDeque::new();
    let mut received = 0;
    while received < ECHO_MSGS || !backlog.is_empty() || pool.in_flight() > 0 {
        while let Some(&v) = pending.front() {
            if to0.push(v).is_err() {
                break;
            }
            pending.pop_front();
        }
        while let Some((data, _, _)) = backlog.front() {
            let Some(mut f) = pool.alloc(data.len()) else {
                break;
            };
            let (data, tag, user) = backlog.pop_front().unwrap();
            pool.payload_mut(&mut f)[..data.len()].copy_from_slice(&data);
            pool.set_user(&mut f, user);
            pending.push_back(pool.post(f, data.len(), tag).unwrap());
        }
        let Some(got) = reader.pop() else {
            std::thread::yield_now();
            continue;
        };
        match got.kind() {
            FifoKind::Ack => {
                pool.complete(got.value()).unwrap();
            }
            FifoKind::Send => {
                let inc = reader.incoming(got).unwrap();
                backlog.push_back((inc.payload().to_vec(), inc.tag(), inc.user()));
                let (owner, ack) = inc.into_ack(true);
                assert_eq!(owner, 0);
                pending.push_back(ack);
                received += 1;
            }
            FifoKind::Reserved(t) => panic!("reserved type {t}"),
        }
    }
    report("echo done");
}

#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    assert_eq!(role, "echo");
    echo_server(&SegmentName::new(&var("SEG")).unwrap());
}

#[test]
fn cross_process_echo_all_sizes() {
    let p = LayoutParams {
        nranks: 2,
        fifo_size: 8,
        eager_size: 256,
        eager_count: 16,
        max_size: 8192,
        max_count: 8,
        fbox_bytes: 0,
    };
    let name = unique_name("echo");
    let seg = Segment::create(&name, &p, 0).unwrap();
    let mut kid = spawn("echo", &[("SEG", name.as_str().to_owned())]);
    let mut pool = seg.frag_pool().unwrap();
    let mut reader = seg.fifo_reader().unwrap();
    let to1 = seg.fifo_writer(1).unwrap();
    while !seg.all_attached() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut pending: VecDeque<FifoValue> = VecDeque::new();
    let (mut sent, mut echoed) = (0u64, 0u64);
    while echoed < ECHO_MSGS || pool.in_flight() > 0 || !pending.is_empty() {
        while let Some(&v) = pending.front() {
            if to1.push(v).is_err() {
                break;
            }
            pending.pop_front();
        }
        // Keep at most 4 messages unanswered so the echo server never runs dry.
        if sent < ECHO_MSGS && sent - echoed < 4 {
            let len = match rng.next() % 4 {
                0 => 0,
                1 => 256,
                2 => 257,
                _ => (rng.next() % 8193) as usize,
            };
            if let Some(mut f) = pool.alloc(len) {
                let buf = pool.payload_mut(&mut f);
                for (d, s) in buf.iter_mut().zip(pattern(sent, len)) {
                    *d = s;
                }
                pool.set_user(&mut f, sent);
                pending.push_back(pool.post(f, len, (sent % 256) as u8).unwrap());
                sent += 1;
            }
        }
        let Some(got) = reader.pop() else {
            std::thread::yield_now();
            continue;
        };
        match got.kind() {
            FifoKind::Ack => {
                assert!(pool.complete(got.value()).unwrap().ok);
            }
            FifoKind::Send => {
                let inc = reader.incoming(got).unwrap();
                let seq = inc.user();
                assert_eq!(seq, echoed, "echoes come back in order");
                assert_eq!(inc.tag(), (seq % 256) as u8);
                assert!(inc.payload().iter().copied().eq(pattern(seq, inc.len())));
                let (owner, ack) = inc.into_ack(true);
                assert_eq!(owner, 1);
                pending.push_back(ack);
                echoed += 1;
            }
            FifoKind::Reserved(t) => panic!("reserved type {t}"),
        }
    }
    assert_eq!(kid.expect_line(), "echo done");
    kid.wait_ok();
}
