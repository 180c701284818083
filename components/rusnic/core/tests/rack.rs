//! Time-based (RACK) loss detection, datagram by datagram: a lost retransmission is
//! repaired as soon as a later transmission is acknowledged, not by the retransmission
//! timeout; reordering within the reordering window and the priority channel overtaking
//! the data channel cause no retransmission.

use rusnic_core::{Config, Connection, Instant, Transmit};

mod scenario;

use scenario::{MS, US, cfg, deliver, delivered, drain, pair_with_isns, seq_of, warm_up};

fn pair(rack: bool, tail_probe: bool) -> (Connection, Connection) {
    let c = Config {
        // A timeout far above everything else, so which mechanism recovered is plain.
        rto_min: MS,
        rack,
        tail_probe,
        ..cfg()
    };
    pair_with_isns(c, 100, 200)
}

/// Runs `a`'s timers up to `until`; the datagrams they made, with the time.
fn run_timers(a: &mut Connection, until: u64) -> Option<(u64, Vec<Transmit>)> {
    while let Some(t) = a.next_timeout().map(|t| t.0).filter(|&t| t <= until) {
        a.handle_timeout(Instant(t));
        let out = drain(a, t);
        if !out.is_empty() {
            return Some((t, out));
        }
    }
    None
}

/// Ten 500-byte fragments (data channel), the third lost; B's SACK makes A resend it, and
/// that retransmission is lost too; two more fragments follow it. Returns the time their
/// ACK reached A and that time's SACK news processed, and the lost segment's number.
fn lose_a_retransmission(a: &mut Connection, b: &mut Connection, t0: u64) -> (u64, u16) {
    for i in 0..10 {
        a.send(100 + i, 2, &[i as u8; 500]).unwrap();
    }
    let mut first = drain(a, t0);
    assert_eq!(first.len(), 10);
    let lost = first.remove(2);
    deliver(b, &first, t0 + 10 * US);
    let ack = drain(b, t0 + 10 * US);
    deliver(a, &ack, t0 + 20 * US);
    let resend = drain(a, t0 + 20 * US);
    assert_eq!(
        resend.len(),
        1,
        "the hole is resent (3 segments SACKed above it)"
    );
    assert_eq!(seq_of(&resend[0]), seq_of(&lost));
    assert_eq!(a.stats().num_fast_retrans, 1);
    // The retransmission is lost; the next fragments, sent 1 µs after it, arrive.
    a.send(200, 2, &[7; 500]).unwrap();
    a.send(201, 2, &[8; 500]).unwrap();
    let later = drain(a, t0 + 21 * US);
    assert_eq!(later.len(), 2);
    deliver(b, &later, t0 + 31 * US);
    assert_eq!(delivered(b), 2, "the two before the hole");
    let ack = drain(b, t0 + 31 * US);
    deliver(a, &ack, t0 + 41 * US);
    (t0 + 41 * US, seq_of(&lost))
}

#[test]
fn a_lost_retransmission_is_resent_when_a_later_segment_is_acknowledged() {
    let (mut a, mut b) = pair(true, true);
    let t0 = warm_up(&mut a, &mut b);
    let (now, lost) = lose_a_retransmission(&mut a, &mut b, t0);
    // Sent 1 µs before the newest SACKed segment, whose round trip was 20 µs: expected
    // by t0 + 20 + 20 µs, lost once 5 µs of reordering window passed too.
    assert!(drain(&mut a, now).is_empty(), "not yet: within the window");
    let (at, again) = run_timers(&mut a, now + MS).expect("resent before the timeout");
    assert_eq!(
        at,
        t0 + 45 * US,
        "its sending time + the later one's RTT + reo_wnd"
    );
    assert_eq!(again.len(), 1);
    assert_eq!(seq_of(&again[0]), lost);
    assert_eq!(a.stats().num_rack_retrans, 1);
    assert_eq!(a.stats().num_timeout_retrans, 0);
    assert_eq!(a.stats().num_tail_probes, 0);
    deliver(&mut b, &again, at + 10 * US);
    assert_eq!(
        delivered(&mut b),
        10,
        "the hole and everything held above it"
    );
    deliver(&mut a, &drain(&mut b, at + 10 * US), at + 20 * US);
    assert_eq!(a.in_flight(), 0);
}

#[test]
fn without_rack_a_lost_retransmission_waits_for_the_timeout() {
    let (mut a, mut b) = pair(false, false);
    let t0 = warm_up(&mut a, &mut b);
    let (now, lost) = lose_a_retransmission(&mut a, &mut b, t0);
    let (at, again) = run_timers(&mut a, now + 10 * MS).expect("the timeout resends");
    assert!(at >= t0 + 20 * US + MS, "rto_min after the retransmission");
    assert_eq!(seq_of(&again[0]), lost);
    assert_eq!(a.stats().num_rack_retrans, 0);
    assert_eq!(a.stats().num_timeout_retrans, 1);
}

#[test]
fn reordering_within_the_window_is_not_loss() {
    let (mut a, mut b) = pair(true, true);
    let t0 = warm_up(&mut a, &mut b);
    // Two data segments sent 1 µs apart; the second overtakes the first.
    a.send(100, 2, &[1; 500]).unwrap();
    let first = drain(&mut a, t0);
    a.send(101, 2, &[2; 500]).unwrap();
    let second = drain(&mut a, t0 + US);
    deliver(&mut b, &second, t0 + 11 * US);
    deliver(&mut a, &drain(&mut b, t0 + 11 * US), t0 + 21 * US);
    // The first is due by t0 + 20 µs (+ 5 µs window); it arrives 3 µs late.
    assert!(drain(&mut a, t0 + 21 * US).is_empty());
    deliver(&mut b, &first, t0 + 13 * US);
    assert_eq!(delivered(&mut b), 2);
    b.flush_delayed_ack();
    deliver(&mut a, &drain(&mut b, t0 + 13 * US), t0 + 23 * US);
    assert_eq!(a.in_flight(), 0);
    assert!(run_timers(&mut a, t0 + 10 * MS).is_none());
    assert_eq!(a.stats().num_resends, 0);
    assert_eq!(a.stats().num_rack_retrans, 0);
}

#[test]
fn a_segment_missing_past_the_window_is_resent_by_the_reordering_timer() {
    let (mut a, mut b) = pair(true, false);
    let t0 = warm_up(&mut a, &mut b);
    a.send(100, 2, &[1; 500]).unwrap();
    let first = drain(&mut a, t0);
    a.send(101, 2, &[2; 500]).unwrap();
    let second = drain(&mut a, t0 + US);
    deliver(&mut b, &second, t0 + 11 * US);
    deliver(&mut a, &drain(&mut b, t0 + 11 * US), t0 + 21 * US);
    let (at, again) = run_timers(&mut a, t0 + MS).expect("resent before the timeout");
    assert_eq!(at, t0 + 25 * US);
    assert_eq!(seq_of(&again[0]), seq_of(&first[0]));
    assert_eq!(a.stats().num_rack_retrans, 1);
    assert_eq!(
        a.stats().num_fast_retrans,
        0,
        "one SACKed segment: below dupthresh"
    );
}

#[test]
fn the_priority_channel_overtaking_the_data_channel_is_not_loss() {
    let (mut a, mut b) = pair(true, false);
    let t0 = warm_up(&mut a, &mut b);
    // A data segment, then a tiny one on the priority channel 1 µs later that arrives
    // 40 µs earlier (the data channel is busy).
    a.send(100, 2, &[1; 500]).unwrap();
    let data = drain(&mut a, t0);
    a.send(101, 2, &[2; 8]).unwrap();
    let tiny = drain(&mut a, t0 + US);
    assert_eq!(tiny[0].channel, rusnic_core::Channel::Priority);
    deliver(&mut b, &tiny, t0 + 11 * US);
    deliver(&mut a, &drain(&mut b, t0 + 11 * US), t0 + 21 * US);
    assert!(run_timers(&mut a, t0 + 50 * US).is_none());
    deliver(&mut b, &data, t0 + 51 * US);
    assert_eq!(delivered(&mut b), 2);
    b.flush_delayed_ack();
    deliver(&mut a, &drain(&mut b, t0 + 51 * US), t0 + 61 * US);
    assert_eq!(a.in_flight(), 0);
    assert_eq!(a.stats().num_resends, 0);
}

/// A slow receiver: the timeout resends the first of four segments while all four wait
/// at B. B's ACK of the first two (originals, 40 µs after the resend: more than the
/// 20 µs minimum RTT) is no evidence against the two sent before the timeout, which B
/// holds too: RACK resends nothing. (It used to take the ACK for the copy just resent,
/// newer than segments 3 and 4, and resend those at once.)
#[test]
fn acks_of_originals_after_a_timeout_do_not_condemn_older_segments() {
    let (mut a, mut b) = pair(true, false);
    let t0 = warm_up(&mut a, &mut b);
    a.send(100, 2, &[1; 500]).unwrap();
    a.send(101, 2, &[2; 500]).unwrap();
    let first = drain(&mut a, t0);
    a.send(102, 2, &[3; 500]).unwrap();
    a.send(103, 2, &[4; 500]).unwrap();
    let second = drain(&mut a, t0 + 500 * US);
    assert_eq!((first.len(), second.len()), (2, 2));
    let (at, resent) = run_timers(&mut a, t0 + MS).expect("the timeout fires");
    assert_eq!(at, t0 + MS);
    assert_eq!(resent.len(), 1, "the oldest of the two expired ones");
    assert_eq!(a.stats().num_timeout_retrans, 1);
    // B wakes up and reads the first two originals, then acknowledges them.
    deliver(&mut b, &first, at + 30 * US);
    assert_eq!(delivered(&mut b), 2);
    b.flush_delayed_ack();
    deliver(&mut a, &drain(&mut b, at + 30 * US), at + 40 * US);
    assert_eq!(a.in_flight(), 2);
    assert!(
        drain(&mut a, at + 40 * US).is_empty(),
        "segments 3 and 4 are not lost"
    );
    assert!(run_timers(&mut a, at + 100 * US).is_none());
    assert_eq!(a.stats().num_rack_retrans, 0);
    // B reads the other two: all acknowledged, nothing more was resent.
    deliver(&mut b, &second, at + 50 * US);
    assert_eq!(delivered(&mut b), 2);
    b.flush_delayed_ack();
    deliver(&mut a, &drain(&mut b, at + 50 * US), at + 60 * US);
    assert_eq!(a.in_flight(), 0);
    assert_eq!(a.stats().num_resends, 1);
}
