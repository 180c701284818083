//! Tail-loss probing: a lost last datagram of a ping-pong is recovered after two round
//! trips and the ACK delay, not after the retransmission timeout.

use rusnic_core::wire;
use rusnic_core::{Config, Connection, Instant};

mod scenario;

use scenario::{MS, US, cfg, deliver, delivered, drain, pair_with_isns, warm_up};

fn pair() -> (Connection, Connection) {
    // A timeout far above the probe's, so which one recovered is plain.
    pair_with_isns(
        Config {
            rto_min: MS,
            ..cfg()
        },
        100,
        200,
    )
}

#[test]
fn a_lost_ping_is_probed_after_two_round_trips_and_the_ack_delay() {
    let (mut a, mut b) = pair();
    let now = warm_up(&mut a, &mut b);
    let srtt = a.srtt().expect("measured");
    a.send(99, 1, &[3; 8]).unwrap();
    let lost = drain(&mut a, now);
    assert_eq!(lost.len(), 1);
    let probe_at = a.next_timeout().expect("a timer runs").0;
    assert_eq!(probe_at - now, 2 * srtt + 50 * US, "2 SRTT + ack_delay");
    assert!(probe_at - now < a.rto(), "sooner than the timeout");
    a.handle_timeout(Instant(probe_at));
    let probe = drain(&mut a, probe_at);
    assert_eq!(probe.len(), 1);
    let (p, q) = (probe[0].to_vec(), lost[0].to_vec());
    let (p, q) = (wire::decode(&p).unwrap(), wire::decode(&q).unwrap());
    assert_eq!(
        (p.seq, p.payload),
        (q.seq, q.payload),
        "the lost segment again"
    );
    assert_eq!(a.stats().num_tail_probes, 1);
    assert_eq!(a.stats().num_timeout_retrans, 0);
    deliver(&mut b, &probe, probe_at + 10 * US);
    assert_eq!(delivered(&mut b), 1);
}

#[test]
fn a_lost_pong_is_probed_by_its_sender() {
    let (mut a, mut b) = pair();
    let now = warm_up(&mut a, &mut b);
    a.send(99, 1, &[3; 8]).unwrap();
    deliver(&mut b, &drain(&mut a, now), now + 10 * US);
    assert_eq!(delivered(&mut b), 1);
    b.send(99, 1, &[4; 8]).unwrap();
    let lost = drain(&mut b, now + 10 * US);
    assert_eq!(lost.len(), 1, "the pong (carrying the ACK of the ping)");
    let probe_at = b.next_timeout().expect("a timer runs").0;
    assert!(probe_at - (now + 10 * US) < b.rto());
    b.handle_timeout(Instant(probe_at));
    let probe = drain(&mut b, probe_at);
    deliver(&mut a, &probe, probe_at + 10 * US);
    assert_eq!(delivered(&mut a), 1);
    assert_eq!(b.stats().num_tail_probes, 1);
    assert_eq!(b.stats().num_timeout_retrans, 0);
}

#[test]
fn one_probe_per_flight_then_the_timer() {
    let (mut a, mut b) = pair();
    let now = warm_up(&mut a, &mut b);
    a.send(99, 1, &[3; 8]).unwrap();
    drain(&mut a, now); // lost
    let probe_at = a.next_timeout().unwrap().0;
    a.handle_timeout(Instant(probe_at));
    drain(&mut a, probe_at); // the probe is lost too
    // No second probe: the retransmission timeout, running from the probe, resends.
    let (resent, at) = loop {
        let t = a.next_timeout().expect("the retransmission timer runs").0;
        a.handle_timeout(Instant(t));
        let r = drain(&mut a, t);
        if !r.is_empty() {
            break (r, t);
        }
    };
    assert!(at >= probe_at + a.rto() / 2, "{} µs", (at - now) / US);
    deliver(&mut b, &resent, at + 10 * US);
    assert_eq!(delivered(&mut b), 1);
    assert_eq!(a.stats().num_tail_probes, 1);
    assert_eq!(a.stats().num_timeout_retrans, 1);
}

#[test]
fn no_probe_before_a_round_trip_was_measured() {
    let (mut a, _b) = pair();
    a.send(1, 1, &[1; 8]).unwrap();
    drain(&mut a, 0);
    assert_eq!(a.next_timeout(), Some(Instant(MS)), "rto_initial alone");
}
