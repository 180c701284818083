//! Fast boxes under contention: writer threads sharing one box (a `SharedFboxWriter`, as
//! the glue does) and a writer process, against one reader, over a small ring so that it
//! is full and wraps all the time. Every message must arrive exactly once, intact, with its
//! tag, and each writer's messages in order.

mod common;

use std::time::Duration;

use common::{ChildProc, child_role, report, spawn, unique_name, var};
use rsmcuda_shm::{FboxReader, LayoutParams, Retry, Segment, SegmentName, SharedFboxWriter};

fn params(fbox_bytes: u32) -> LayoutParams {
    LayoutParams {
        nranks: 2,
        fifo_size: 2,
        eager_size: 64,
        eager_count: 1,
        max_size: 64,
        max_count: 0,
        fbox_bytes,
    }
}

/// Length of message `i` of writer `w`: 12 ..= max, varying so records wrap at every
/// possible offset.
fn len_of(w: u32, i: u64, max: usize) -> usize {
    12 + ((i * 7 + u64::from(w) * 3) % (max as u64 - 11)) as usize
}

fn byte_of(w: u32, i: u64, k: usize) -> u8 {
    (i as u8).wrapping_mul(31) ^ (w as u8) ^ (k as u8)
}

/// Sends `n` messages as writer `w`, retrying while the box is full or another thread
/// writes it; returns the retries.
fn write_all(out: &SharedFboxWriter, w: u32, n: u64) -> u64 {
    let mut full = 0;
    for i in 0..n {
        loop {
            let len = len_of(w, i, out.max_message());
            let sent = out.try_send((i % 251) as u8, len, |buf| {
                buf[..4].copy_from_slice(&w.to_ne_bytes());
                buf[4..12].copy_from_slice(&i.to_ne_bytes());
                for (k, x) in buf.iter_mut().enumerate().skip(12) {
                    *x = byte_of(w, i, k);
                }
                len
            });
            if sent == Some(true) {
                break;
            }
            full += 1;
            std::thread::yield_now();
        }
    }
    full
}

/// Receives `writers * n` messages and checks them.
fn read_all(r: &mut FboxReader, writers: usize, n: u64, max: usize) {
    let mut next = vec![0u64; writers];
    let mut got = 0u64;
    let mut idle = 0u64;
    while got < writers as u64 * n {
        let k = r
            .poll(16, |tag, p| {
                assert!(p.len() >= 12, "short message: {} bytes", p.len());
                let w = u32::from_ne_bytes(p[..4].try_into().unwrap());
                let i = u64::from_ne_bytes(p[4..12].try_into().unwrap());
                assert!((w as usize) < writers, "unknown writer {w}");
                assert_eq!(i, next[w as usize], "writer {w}: out of order");
                assert_eq!(p.len(), len_of(w, i, max), "writer {w} message {i}: length");
                assert_eq!(tag, (i % 251) as u8, "writer {w} message {i}: tag");
                for (k, &x) in p.iter().enumerate().skip(12) {
                    assert_eq!(x, byte_of(w, i, k), "writer {w} message {i} byte {k}");
                }
                next[w as usize] += 1;
            })
            .unwrap();
        got += k as u64;
        if k == 0 {
            idle += 1;
            assert!(idle < 50_000_000, "reader starved at {got}: {next:?}");
            std::thread::yield_now();
        } else {
            idle = 0;
        }
    }
    assert_eq!(r.poll(16, |_, _| panic!("extra message")).unwrap(), 0);
    assert!(next.iter().all(|&c| c == n));
}

#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    assert_eq!(role, "fbox-writer");
    let name = SegmentName::new(&var("SEG")).unwrap();
    let n: u64 = var("N").parse().unwrap();
    let seg = Segment::attach(&name, 1, &Retry::default()).unwrap();
    let out = SharedFboxWriter::new(seg.fbox_writer(0).unwrap());
    let full = write_all(&out, 0, n);
    report(&format!("done full={full}"));
}

#[test]
fn threads_3x100k_through_a_256_byte_box() {
    const W: u32 = 3;
    const N: u64 = 100_000;
    let name = unique_name("fbox-threads");
    let seg = Segment::create(&name, &params(256), 0).unwrap();
    let peer = Segment::attach(&name, 1, &Retry::default()).unwrap();
    assert!(seg.fbox_writer(0).is_none(), "no box to oneself");
    let mut reader = seg.fbox_reader(1).unwrap();
    let out = SharedFboxWriter::new(peer.fbox_writer(0).unwrap());
    let max = out.max_message();
    assert_eq!(max, 56);
    std::thread::scope(|s| {
        for w in 0..W {
            let out = &out;
            s.spawn(move || write_all(out, w, N));
        }
        read_all(&mut reader, W as usize, N, max);
    });
}

#[test]
fn process_200k_through_a_512_byte_box() {
    const N: u64 = 200_000;
    let name = unique_name("fbox-procs");
    let seg = Segment::create(&name, &params(512), 0).unwrap();
    let mut reader = seg.fbox_reader(1).unwrap();
    let mut kid: ChildProc = spawn(
        "fbox-writer",
        &[("SEG", name.as_str().to_owned()), ("N", N.to_string())],
    );
    read_all(&mut reader, 1, N, 512 / 4 - 8);
    let line = kid.expect_line();
    eprintln!("child: {line}");
    kid.wait_ok();
}

#[test]
fn readiness_and_sizes() {
    let name = unique_name("fbox-ready");
    let seg = Segment::create(&name, &params(1024), 0).unwrap();
    let peer = Segment::attach(&name, 1, &Retry::default()).unwrap();
    let mut r = seg.fbox_reader(1).unwrap();
    let mut w = peer.fbox_writer(0).unwrap();
    let probe = r.probe();
    assert!(!probe.ready(r.position()));
    assert!(!w.try_send(1, w.max_message() + 1, |_| unreachable!("too large")));
    assert!(w.try_send(7, 3, |b| {
        b.copy_from_slice(b"abc");
        3
    }));
    assert!(probe.ready(r.position()));
    let mut seen = Vec::new();
    assert_eq!(r.poll(8, |t, p| seen.push((t, p.to_vec()))).unwrap(), 1);
    assert_eq!(seen, vec![(7, b"abc".to_vec())]);
    assert!(!probe.ready(r.position()));
    // Fill it: the writer must refuse before overwriting anything unread.
    let mut sent = 0;
    while w.try_send(2, 100, |b| {
        b.fill(0xab);
        100
    }) {
        sent += 1;
        assert!(
            sent < 100,
            "a 1 KiB box cannot take 100 messages of 100 bytes"
        );
    }
    assert!(sent >= 1);
    let mut got = 0;
    while got < sent {
        got += r
            .poll(3, |t, p| {
                assert_eq!(t, 2);
                assert!(p.iter().all(|&b| b == 0xab));
            })
            .unwrap();
    }
    assert!(!probe.ready(r.position()));
    std::thread::sleep(Duration::from_millis(1));
    // No fast boxes configured: no handles.
    let name = unique_name("fbox-none");
    let seg = Segment::create(&name, &params(0), 0).unwrap();
    assert!(seg.fbox_reader(1).is_none());
    // Rank 1 never attaches, so the name is not unlinked by the last attach.
    seg.unlink_if_leader_on_failure().unwrap();
    assert!(seg.is_unlinked(), "{} left in /dev/shm", name.as_str());
}
