use seeded_rng::Rng;

use super::send::{Leg, Legs, Path, Step};
use super::wire::{self, DecodeError, HEADER_LEN, Message};
use super::{ANY, Envelope, Matcher, Order, Pattern, Reorder, Sequencer};

fn env(cid: u32, source: u32, tag: i32) -> Envelope {
    Envelope { cid, source, tag }
}

#[test]
fn every_kind_round_trips() {
    let e = env(7, 3, -12);
    let mut eager = Vec::new();
    wire::encode_eager(e, (17, 1 << 40 | 3), Some(99), b"payload", &mut eager);
    assert_eq!(eager.len(), HEADER_LEN + 7);
    assert_eq!(
        wire::decode(&eager),
        Ok(Message::Eager {
            env: e,
            seq: 17,
            origin: 1 << 40 | 3,
            sync: Some(99),
            payload: b"payload"
        })
    );
    let mut empty = Vec::new();
    wire::encode_eager(e, (u32::MAX, u64::MAX), None, &[], &mut empty);
    assert_eq!(
        wire::decode(&empty),
        Ok(Message::Eager {
            env: e,
            seq: u32::MAX,
            origin: u64::MAX,
            sync: None,
            payload: &[]
        })
    );
    let rts = wire::encode_rts(e, (3, 9), 1 << 40, 5, 0xdead_beef_0000, u64::MAX);
    assert_eq!(
        wire::decode(&rts),
        Ok(Message::Rts {
            env: e,
            seq: 3,
            origin: 9,
            len: 1 << 40,
            id: 5,
            addr: 0xdead_beef_0000,
            key: u64::MAX
        })
    );
    assert_eq!(
        wire::decode(&wire::encode_ack(u64::MAX)),
        Ok(Message::Ack { id: u64::MAX })
    );
    for failed in [false, true] {
        assert_eq!(
            wire::decode(&wire::encode_fin(1, failed)),
            Ok(Message::Fin { id: 1, failed })
        );
    }
}

#[test]
fn malformed_messages_are_refused() {
    let mut eager = Vec::new();
    wire::encode_eager(env(1, 1, 1), (0, 0), None, b"abcd", &mut eager);
    assert_eq!(
        wire::decode(&eager[..HEADER_LEN - 1]),
        Err(DecodeError::Short(HEADER_LEN - 1))
    );
    assert_eq!(
        wire::decode(&eager[..HEADER_LEN + 3]),
        Err(DecodeError::Length {
            header: 4,
            payload: 3
        })
    );
    let mut extra = eager.clone();
    extra.push(0);
    assert!(matches!(
        wire::decode(&extra),
        Err(DecodeError::Length { .. })
    ));
    let mut kind = eager.clone();
    kind[0] = 9;
    assert_eq!(wire::decode(&kind), Err(DecodeError::Kind(9)));
    for at in [2, 3, 52, 55] {
        let mut reserved = eager.clone();
        reserved[at] = 1;
        assert_eq!(
            wire::decode(&reserved),
            Err(DecodeError::Reserved),
            "byte {at}"
        );
    }
    let mut flags = wire::encode_ack(1);
    flags[1] = 1;
    assert_eq!(wire::decode(&flags), Err(DecodeError::Flags(1)));
    let mut fin_sync = wire::encode_fin(1, false);
    fin_sync[1] = 1;
    assert_eq!(wire::decode(&fin_sync), Err(DecodeError::Flags(1)));
    // Every error explains itself.
    for e in [
        DecodeError::Short(1),
        DecodeError::Kind(9),
        DecodeError::Flags(4),
        DecodeError::Reserved,
        DecodeError::Length {
            header: 1,
            payload: 2,
        },
    ] {
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn decoding_arbitrary_bytes_never_panics() {
    let mut rng = Rng::new(11);
    for _ in 0..20_000 {
        let mut b = vec![0u8; rng.below(80) as usize];
        rng.fill(&mut b);
        if rng.percent(50) && b.len() >= 4 {
            b[0] = rng.range(1, 5) as u8;
            b[1] = 0;
            b[2] = 0;
            b[3] = 0;
        }
        let _ = wire::decode(&b);
    }
}

#[test]
fn wildcards_follow_mpi() {
    let any = Pattern::from_mpi(4, ANY, ANY);
    assert!(any.matches(&env(4, 9, 0)));
    assert!(any.matches(&env(4, 9, i32::MAX)));
    assert!(!any.matches(&env(4, 9, -3)), "ANY_TAG takes internal tags");
    assert!(!any.matches(&env(5, 9, 0)), "other communicator");
    let internal = Pattern::from_mpi(4, 2, -3);
    assert!(internal.matches(&env(4, 2, -3)));
    assert!(!internal.matches(&env(4, 1, -3)));
    assert!(!Pattern::from_mpi(4, -2, 1).matches(&env(4, u32::MAX - 1, 1)));
}

#[test]
fn receives_take_the_oldest_fitting_message() {
    let mut m: Matcher<&str, u32> = Matcher::default();
    assert_eq!(m.arrive(env(1, 0, 5), || 1), None);
    assert_eq!(m.arrive(env(1, 1, 6), || 2), None);
    assert_eq!(m.arrive(env(1, 0, 6), || 3), None);
    // A specific tag skips older messages with other tags.
    let (r, e, msg) = m.post(Pattern::from_mpi(1, 0, 6), "a").unwrap();
    assert_eq!((r, e, msg), ("a", env(1, 0, 6), 3));
    // Probing leaves the message; claiming removes it.
    assert_eq!(
        m.probe(&Pattern::from_mpi(1, ANY, ANY)).map(|(_, &v)| v),
        Some(1)
    );
    assert_eq!(
        m.claim(&Pattern::from_mpi(1, 1, ANY)),
        Some((env(1, 1, 6), 2))
    );
    assert_eq!(m.queued(), (0, 1));
    // Posted receives are matched in posting order.
    assert!(m.post(Pattern::from_mpi(2, ANY, ANY), "x").is_none());
    assert!(m.post(Pattern::from_mpi(2, 3, 7), "y").is_none());
    assert_eq!(m.arrive(env(2, 3, 7), || 0), Some("x"));
    assert_eq!(m.arrive(env(2, 3, 7), || 0), Some("y"));
    // Cancel removes only what is still posted.
    assert!(m.post(Pattern::from_mpi(2, ANY, 1), "z").is_none());
    assert_eq!(m.cancel(|r| *r == "z"), Some("z"));
    assert_eq!(m.cancel(|r| *r == "z"), None);
    assert_eq!(m.arrive(env(2, 0, 1), || 4), None);
}

/// Random posts, arrivals, probes and cancels on a few communicators, sources and tags:
/// no posted receive ever fits a queued message (either would have taken the other),
/// and messages from one source that one receive pattern fits are consumed in the
/// order they arrived.
#[test]
fn random_traffic_keeps_mpi_matching_rules() {
    for seed in 0..200 {
        let mut rng = Rng::new(seed);
        let mut m: Matcher<(usize, Pattern), (usize, Envelope)> = Matcher::default();
        let mut arrived = 0usize;
        let mut consumed: Vec<(Pattern, usize, Envelope)> = Vec::new();
        let pick_tag = |rng: &mut Rng| rng.range(0, 4) as i32 - 1;
        let mut handle = 0usize;
        for _ in 0..400 {
            match rng.below(5) {
                0 | 1 => {
                    let e = env(rng.below(2) as u32, rng.below(3) as u32, {
                        let t = pick_tag(&mut rng);
                        if t == ANY { -5 } else { t }
                    });
                    let seq = arrived;
                    arrived += 1;
                    if let Some((_, p)) = m.arrive(e, || (seq, e)) {
                        consumed.push((p, seq, e));
                    }
                }
                2 => {
                    let src = rng.range(0, 4) as i32 - 1;
                    let p = Pattern::from_mpi(rng.below(2) as u32, src, pick_tag(&mut rng));
                    handle += 1;
                    if let Some(((_, p), e, (seq, _))) = m.post(p, (handle, p)) {
                        consumed.push((p, seq, e));
                    }
                }
                3 => {
                    let p = Pattern::from_mpi(rng.below(2) as u32, ANY, ANY);
                    if let Some((e, (_, e2))) = m.probe(&p) {
                        assert_eq!(e, e2);
                        assert!(p.matches(e));
                    }
                }
                _ => {
                    let h = rng.range(1, handle as u64 + 2) as usize;
                    let _ = m.cancel(|(x, _)| *x == h);
                }
            }
            // Nothing posted fits anything queued.
            for (p, _) in m.posted_for_tests() {
                for (e, _) in m.unexpected_for_tests() {
                    assert!(!p.matches(e), "seed {seed}: {p:?} left beside {e:?}");
                }
            }
        }
        // Non-overtaking: per pattern and source, sequence numbers only grow.
        for (i, (p, seq, e)) in consumed.iter().enumerate() {
            assert!(p.matches(e));
            for (p2, seq2, e2) in &consumed[i + 1..] {
                if p2 == p && e2.source == e.source && e2.cid == e.cid && p.matches(e2) {
                    assert!(seq2 > seq, "seed {seed}: {e2:?} overtook {e:?}");
                }
            }
        }
    }
}

#[test]
fn senders_number_each_channel_from_zero() {
    let mut s = Sequencer::default();
    assert_eq!((s.next((1, 2)), s.next((1, 2)), s.next((1, 3))), (0, 1, 0));
}

/// Messages of several channels arrive in random order (each channel's numbers shuffled
/// within a window, channels interleaved, some duplicated), some channels starting just
/// before the numbers wrap: every message is handed out once, in each channel's send
/// order, and nothing stays parked.
#[test]
fn reorder_restores_send_order_per_channel() {
    for seed in 0..300 {
        let mut rng = Rng::new(seed);
        let channels = 1 + rng.below(4) as usize;
        let n = 1 + rng.below(60) as u32;
        let mut r: Reorder<usize, u32> = Reorder::default();
        let mut starts = Vec::new();
        let mut queues: Vec<std::collections::VecDeque<u32>> = Vec::new();
        for c in 0..channels {
            let start = if rng.percent(30) { u32::MAX - 20 } else { 0 };
            r.start_at(c, start);
            starts.push(start);
            let mut order: Vec<u32> = (0..n).collect();
            // Shuffle within windows of up to 8: a provider reorders neighbours only.
            for w in order.chunks_mut(1 + rng.below(8) as usize) {
                for i in (1..w.len()).rev() {
                    w.swap(i, rng.below(i as u64 + 1) as usize);
                }
            }
            queues.push(order.into_iter().collect());
        }
        let mut delivered: Vec<Vec<u32>> = vec![Vec::new(); channels];
        while queues.iter().any(|q| !q.is_empty()) {
            let c = rng.below(channels as u64) as usize;
            let Some(k) = queues[c].pop_front() else {
                continue;
            };
            let seq = starts[c].wrapping_add(k);
            for _ in 0..1 + usize::from(rng.percent(5)) {
                match r.order(c, seq) {
                    Order::Next => {
                        delivered[c].push(k);
                        while let Some(m) = r.handled(c) {
                            delivered[c].push(m);
                        }
                    }
                    Order::Early => r.park(c, seq, k),
                    Order::Stale => {}
                }
            }
        }
        for (c, d) in delivered.iter().enumerate() {
            assert_eq!(d, &(0..n).collect::<Vec<_>>(), "seed {seed} channel {c}");
        }
        assert_eq!(r.parked(), 0, "seed {seed}");
    }
}

#[test]
fn numbers_behind_are_stale_and_ahead_early_across_the_wrap() {
    let mut r: Reorder<u8, ()> = Reorder::default();
    r.start_at(0, u32::MAX);
    assert_eq!(r.order(0, u32::MAX), Order::Next);
    assert_eq!(r.order(0, 0), Order::Early);
    assert_eq!(r.order(0, (1 << 31) - 2), Order::Early);
    assert_eq!(r.order(0, u32::MAX - 1), Order::Stale);
    assert_eq!(r.order(0, 1 << 31), Order::Stale);
    assert_eq!(r.handled(0), None);
    assert_eq!(r.order(0, 0), Order::Next);
}

#[test]
fn messages_take_the_path_their_size_fits() {
    // shm: 4096-byte inject size, 16 KiB receive buffers.
    let (eager_max, inject) = (16384 - HEADER_LEN, 4096);
    assert_eq!(Path::of(0, eager_max, inject), Path::Inject);
    assert_eq!(
        Path::of(inject - HEADER_LEN, eager_max, inject),
        Path::Inject
    );
    assert_eq!(
        Path::of(inject - HEADER_LEN + 1, eager_max, inject),
        Path::Sent
    );
    assert_eq!(Path::of(eager_max, eager_max, inject), Path::Sent);
    assert_eq!(Path::of(eager_max + 1, eager_max, inject), Path::Rendezvous);
    // Receive buffers no larger than the inject size: nothing is sent with a completion.
    assert_eq!(Path::of(100, 100, 100 + HEADER_LEN), Path::Inject);
    assert_eq!(Path::of(101, 100, 100 + HEADER_LEN), Path::Rendezvous);
}

#[test]
fn a_send_ends_when_every_awaited_event_came() {
    // Injected, not synchronous: nothing to wait for.
    assert!(!Legs::new(Path::Inject, false).waits());
    // Injected synchronous: the Ack.
    let mut l = Legs::new(Path::Inject, true);
    assert_eq!(l.on(Leg::Completion, false), Step::Unexpected);
    assert_eq!(l.on(Leg::Ack, false), Step::Done { failed: false });
    assert!(!l.waits());
    assert_eq!(l.on(Leg::Ack, false), Step::Unexpected);
    // Sent synchronous: completion and Ack in either order; the message is done at
    // its completion, and a failure sticks.
    let mut l = Legs::new(Path::Sent, true);
    assert_eq!(
        l.on(Leg::Ack, false),
        Step::Wait {
            message_done: false
        }
    );
    assert_eq!(l.on(Leg::Completion, true), Step::Done { failed: true });
    let mut l = Legs::new(Path::Sent, true);
    assert_eq!(
        l.on(Leg::Completion, true),
        Step::Wait { message_done: true }
    );
    assert_eq!(l.on(Leg::Ack, false), Step::Done { failed: true });
    // Sent, not synchronous (a detached buffered send): its completion alone.
    let mut l = Legs::new(Path::Sent, false);
    assert_eq!(l.on(Leg::Ack, false), Step::Unexpected);
    assert_eq!(l.on(Leg::Completion, false), Step::Done { failed: false });
    // Rendezvous, synchronous or not: the Fin, which doubles as the Ack.
    for sync in [false, true] {
        let mut l = Legs::new(Path::Rendezvous, sync);
        assert_eq!(l.on(Leg::Ack, false), Step::Unexpected);
        assert_eq!(l.on(Leg::Completion, false), Step::Unexpected);
        assert!(l.waits());
        assert_eq!(l.on(Leg::Fin, sync), Step::Done { failed: sync });
        assert_eq!(l.on(Leg::Fin, false), Step::Unexpected);
    }
}
