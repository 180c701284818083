use super::*;
use crate::tag::{LayoutKind, TagLayout, matches};
use seeded_rng::Rng;

fn layouts() -> Vec<TagLayout> {
    [LayoutKind::Tag1, LayoutKind::Tag2, LayoutKind::Full]
        .into_iter()
        .map(|k| TagLayout::with_kind(k, 0xAAAA_AAAA_AAAA_AAAA).unwrap())
        .collect()
}

fn req(cid: u32, tag: i32, sync: bool, kind: SendKind, len: u64) -> SendRequest {
    SendRequest {
        cid,
        src_rank: 7,
        tag,
        sync,
        kind,
        len,
    }
}

fn limits(inject_size: u64, max_msg_size: u64) -> SendLimits {
    SendLimits {
        inject_size,
        max_msg_size,
    }
}

fn plan(l: &TagLayout, sync: bool, kind: SendKind, len: u64) -> SendPlan {
    plan_send(l, &limits(64, 1 << 20), &req(3, 42, sync, kind, len)).unwrap()
}

#[test]
fn an_inject_size_of_zero_injects_nothing_not_even_empty_messages() {
    for l in layouts() {
        for len in [0, 1, 64] {
            let p = plan_send(
                &l,
                &limits(0, 1 << 20),
                &req(3, 42, false, SendKind::Blocking, len),
            );
            assert!(!p.unwrap().inject, "{len} B");
        }
    }
}

#[test]
fn plans_inject_small_sends_of_either_kind_and_ack_exactly() {
    for l in layouts() {
        let p = plan(&l, false, SendKind::Blocking, 64);
        assert!(p.inject && p.ack_recv.is_none() && !l.is_sync_send(p.bits));
        assert!(!plan(&l, false, SendKind::Blocking, 65).inject);
        assert!(plan(&l, false, SendKind::Nonblocking, 0).inject);
        assert!(!plan(&l, false, SendKind::Nonblocking, 65).inject);
        let p = plan(&l, true, SendKind::Nonblocking, 10);
        assert!(l.is_sync_send(p.bits));
        let a = p.ack_recv.unwrap();
        assert_eq!((a.match_bits, a.ignore_bits), (l.ack_bits(p.bits), 0));
        assert_eq!(p.cq_data, l.cq_data(7));
        assert_eq!(p.cq_data.is_some(), l.kind() == LayoutKind::Full);
        let e = plan_send(
            &l,
            &limits(64, 10),
            &req(3, 42, false, SendKind::Blocking, 11),
        )
        .unwrap_err();
        assert_eq!(e, SendPlanError::TooBig { len: 11, max: 10 });
        assert!(e.to_string().contains("maximum message size"));
        let e = plan_send(
            &l,
            &limits(64, 10),
            &req(u32::MAX, 42, false, SendKind::Blocking, 1),
        );
        assert!(matches!(e, Err(SendPlanError::Tag(_))));
    }
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Data,
    DataErr(OpError),
    Ack,
    AckErr(OpError),
}

fn feed(t: &mut SendTracker, e: Ev) -> SendStep {
    match e {
        Ev::Data => t.on_data_complete(),
        Ev::DataErr(x) => t.on_data_error(x),
        Ev::Ack => t.on_ack_complete(),
        Ev::AckErr(x) => t.on_ack_error(x),
    }
}

#[test]
fn send_tracker_needs_both_legs_in_either_order() {
    let l = &layouts()[0];
    let sync = plan(l, true, SendKind::Nonblocking, 100);
    for order in [[Ev::Data, Ev::Ack], [Ev::Ack, Ev::Data]] {
        let mut t = SendTracker::new(&sync);
        assert_eq!(t.after_post(), SendStep::Wait);
        assert_eq!(feed(&mut t, order[0]), SendStep::Wait);
        assert_eq!(feed(&mut t, order[1]), SendStep::Complete(Ok(())));
        assert!(t.is_complete());
        assert_eq!(feed(&mut t, order[0]), SendStep::Wait);
    }
    // Injected synchronous send: only the ACK is awaited.
    let inj = plan(l, true, SendKind::Blocking, 8);
    let mut t = SendTracker::new(&inj);
    assert_eq!(t.after_post(), SendStep::Wait);
    assert_eq!(t.on_ack_complete(), SendStep::Complete(Ok(())));
    // Injected ordinary send: complete on post.
    let mut t = SendTracker::new(&plan(l, false, SendKind::Blocking, 8));
    assert_eq!(t.after_post(), SendStep::Complete(Ok(())));
    assert_eq!(t.after_post(), SendStep::Wait);
}

#[test]
fn data_failure_cancels_the_ack_receive_and_waits_for_it() {
    let l = &layouts()[1];
    let sync = plan(l, true, SendKind::Nonblocking, 100);
    let mut t = SendTracker::new(&sync);
    assert_eq!(t.on_data_error(OpError::Other(5)), SendStep::CancelAckRecv);
    assert!(!t.is_complete(), "the ACK receive still owns its context");
    assert_eq!(
        t.on_ack_error(OpError::Canceled),
        SendStep::Complete(Err(SendError::Internal(5)))
    );
    // The cancel lost the race: the ACK came anyway; the data error still wins.
    let mut t = SendTracker::new(&sync);
    assert_eq!(t.on_data_error(OpError::Truncated), SendStep::CancelAckRecv);
    assert_eq!(
        t.on_ack_complete(),
        SendStep::Complete(Err(SendError::Truncated))
    );
    // The ACK receive failed on its own: wait for the data, then report.
    let mut t = SendTracker::new(&sync);
    assert_eq!(t.on_ack_error(OpError::Other(9)), SendStep::Wait);
    assert_eq!(
        t.on_data_complete(),
        SendStep::Complete(Err(SendError::Internal(9)))
    );
    // Posting the ACK receive failed: nothing else is outstanding.
    let mut t = SendTracker::new(&sync);
    assert_eq!(
        t.on_ack_post_failed(OpError::Other(12)),
        SendStep::Complete(Err(SendError::Internal(12)))
    );
    // An unexpected cancellation of a send is reported as such.
    let mut t = SendTracker::new(&plan(l, false, SendKind::Nonblocking, 100));
    assert_eq!(
        t.on_data_error(OpError::Canceled),
        SendStep::Complete(Err(SendError::Canceled))
    );
}

#[test]
fn random_event_streams_complete_exactly_once() {
    let mut rng = Rng::new(77);
    let l = &layouts()[2];
    let errs = [OpError::Truncated, OpError::Canceled, OpError::Other(3)];
    for _ in 0..20_000 {
        let sync = rng.percent(50);
        let kind = if rng.percent(50) {
            SendKind::Blocking
        } else {
            SendKind::Nonblocking
        };
        let p = plan(l, sync, kind, rng.below(128));
        let mut t = SendTracker::new(&p);
        let mut completes = usize::from(matches!(t.after_post(), SendStep::Complete(_)));
        let mut cancel_asked = false;
        let mut saw_error = false;
        for _ in 0..rng.below(6) {
            let e = match rng.below(4) {
                0 => Ev::Data,
                1 => Ev::DataErr(errs[rng.below(3) as usize]),
                2 => Ev::Ack,
                _ => Ev::AckErr(errs[rng.below(3) as usize]),
            };
            match feed(&mut t, e) {
                SendStep::Wait => {}
                SendStep::CancelAckRecv => {
                    assert!(sync && !cancel_asked && !t.is_complete());
                    cancel_asked = true;
                }
                SendStep::Complete(r) => {
                    completes += 1;
                    saw_error = r.is_err();
                }
            }
        }
        assert!(completes <= 1);
        assert_eq!(completes == 1, t.is_complete());
        if saw_error {
            assert!(t.is_complete());
        }
    }
}

/// The receiver side of a full exchange: what a message tagged `bits` produces.
fn receive(
    l: &TagLayout,
    path_mrecv: bool,
    bits: u64,
    cq: u64,
    len: u64,
    posted: u64,
) -> RecvCompletion {
    let (m, ig) = l.recv_match(3, None, None).unwrap();
    assert!(matches(m, ig, bits), "the receive must match the send");
    let ev = if len > posted && path_mrecv {
        RecvEvent::from_error(OpError::Truncated, bits, cq, len)
    } else {
        RecvEvent::Completed {
            bits,
            cq_data: cq,
            len,
        }
    };
    if !path_mrecv {
        return complete_receive(l, RecvPath::Recv, posted, ev);
    }
    let found = ProbeEvent::Found {
        bits,
        cq_data: cq,
        len,
    };
    // A peek yields a status and no ACK.
    assert!(matches!(
        complete_probe(l, None, found),
        ProbeOutcome::Found(_)
    ));
    let ProbeOutcome::Claimed(msg) = complete_probe(l, Some(ig), found) else {
        panic!("improbe must claim");
    };
    assert_eq!((msg.bits(), msg.ignore_bits()), (bits, ig));
    assert_eq!(msg.status().count, len);
    // Some providers leave the claim completion's tag empty: the claim's bits count.
    let ev = match ev {
        RecvEvent::Completed { len, .. } => RecvEvent::Completed {
            bits: 0,
            cq_data: 0,
            len,
        },
        other => other,
    };
    complete_receive(l, RecvPath::Mrecv(msg), posted, ev)
}

#[test]
fn every_consuming_path_acknowledges_a_synchronous_send() {
    for l in layouts() {
        for mrecv in [false, true] {
            for (len, posted) in [(10u64, 10u64), (0, 0), (11, 10)] {
                for sync in [false, true] {
                    let p = plan_send(
                        &l,
                        &limits(0, u64::MAX),
                        &req(3, 42, sync, SendKind::Nonblocking, len),
                    )
                    .unwrap();
                    let c = receive(&l, mrecv, p.bits, p.cq_data.unwrap_or(0), len, posted);
                    assert_eq!(c.status.source, Some(7));
                    assert_eq!(c.status.tag, Some(42));
                    assert_eq!(c.status.count, len.min(posted));
                    assert_eq!(c.status.error.is_some(), len > posted);
                    assert_eq!(c.ack.is_some(), sync, "{l:?} mrecv={mrecv} len={len}");
                    let mut t = SendTracker::new(&p);
                    assert_eq!(
                        t.on_data_complete(),
                        if sync {
                            SendStep::Wait
                        } else {
                            SendStep::Complete(Ok(()))
                        }
                    );
                    if let Some(ack) = c.ack {
                        assert_eq!((ack.cid, ack.to_rank), (3, 7));
                        let a = p.ack_recv.unwrap();
                        assert!(matches(a.match_bits, a.ignore_bits, ack.bits));
                        assert_eq!(t.on_ack_complete(), SendStep::Complete(Ok(())));
                    }
                }
            }
        }
    }
}

#[test]
fn unmatched_completions_never_acknowledge() {
    for l in layouts() {
        let c = complete_receive(&l, RecvPath::Recv, 8, RecvEvent::Canceled);
        assert!(c.status.cancelled && c.ack.is_none() && c.status.source.is_none());
        let c = complete_receive(&l, RecvPath::Recv, 8, RecvEvent::Failed(5));
        assert_eq!(c.status.error, Some(RecvError::Internal(5)));
        assert!(c.ack.is_none());
        let ack = l.ack_bits(l.send_bits(1, 1, 1, true).unwrap());
        let ev = RecvEvent::Completed {
            bits: ack,
            cq_data: 1,
            len: 0,
        };
        let c = complete_receive(&l, RecvPath::Recv, 0, ev);
        assert_eq!(c.status.error, Some(RecvError::MatchedAck));
        assert!(c.ack.is_none(), "an ACK is never acknowledged");
        assert_eq!(
            complete_probe(&l, None, ProbeEvent::NoMessage),
            ProbeOutcome::NotFound
        );
        assert_eq!(
            complete_probe(&l, Some(0), ProbeEvent::Failed(2)),
            ProbeOutcome::Failed(2)
        );
        assert_eq!(
            RecvEvent::from_error(OpError::Canceled, 1, 2, 3),
            RecvEvent::Canceled
        );
    }
}

#[test]
fn negative_tags_survive_the_status_in_every_layout() {
    for l in layouts() {
        let mut r = req(0, l.min_tag(), true, SendKind::Nonblocking, 1);
        r.src_rank = 1;
        let p = plan_send(&l, &limits(0, 9), &r).unwrap();
        let ev = RecvEvent::Completed {
            bits: p.bits,
            cq_data: p.cq_data.unwrap_or(0),
            len: 1,
        };
        let c = complete_receive(&l, RecvPath::Recv, 1, ev);
        assert_eq!(c.status.tag, Some(l.min_tag()));
        assert_eq!(c.status.source, Some(1));
    }
}

#[test]
fn a_claimed_receive_is_truncated_only_when_the_claimed_message_does_not_fit() {
    // rxd (libfabric 1.17) answers a claimed receive into a larger buffer with FI_ETRUNC
    // and the delivered length, tag and data zeroed; a real truncation has the message
    // longer than the buffer.
    for l in layouts() {
        let p = plan_send(
            &l,
            &limits(0, u64::MAX),
            &req(3, 42, true, SendKind::Nonblocking, 5),
        )
        .unwrap();
        let (_, ig) = l.recv_match(3, None, None).unwrap();
        let found = ProbeEvent::Found {
            bits: p.bits,
            cq_data: p.cq_data.unwrap_or(0),
            len: 5,
        };
        let ProbeOutcome::Claimed(msg) = complete_probe(&l, Some(ig), found) else {
            panic!("improbe must claim");
        };
        for (posted, truncated) in [(5u64, false), (64, false), (4, true), (0, true)] {
            let ev = RecvEvent::from_error(OpError::Truncated, 0, 0, 5.min(posted));
            let c = complete_receive(&l, RecvPath::Mrecv(msg), posted, ev);
            assert_eq!(c.status.error.is_some(), truncated, "{l:?} posted {posted}");
            assert_eq!(c.status.count, 5.min(posted));
            assert_eq!((c.status.source, c.status.tag), (Some(7), Some(42)));
            assert!(
                c.ack.is_some(),
                "matched: the synchronous sender is acknowledged"
            );
        }
        // A plain receive trusts the provider: no claim tells the message's length.
        let ev = RecvEvent::from_error(OpError::Truncated, p.bits, p.cq_data.unwrap_or(0), 5);
        let c = complete_receive(&l, RecvPath::Recv, 64, ev);
        assert_eq!(c.status.error, Some(RecvError::Truncated));
    }
}
