//! What the hand-driven scenario tests (connection.rs, foreign.rs, tail_loss.rs,
//! rack.rs) share: time units, two peer identities, a small configuration whose
//! windows, MTUs and timers are easy to reason about datagram by datagram, and the
//! moves of a test that passes datagrams between two connections by hand.

// Each test crate includes this module and uses a different part of it.
#![allow(dead_code)]

use rusnic_core::{Config, Connection, ConnectionParams, Instant, Transmit, wire};

pub const US: u64 = 1_000;
pub const MS: u64 = 1_000_000;
pub const A: u64 = 0xA;
pub const B: u64 = 0xB;

pub fn cfg() -> Config {
    Config {
        window: 64,
        rx_buffers: 32,
        rto_initial: MS,
        rto_min: 200 * US,
        rto_max: 50 * MS,
        ack_delay: 50 * US,
        ack_every: 4,
        mtu_priority: 300,
        mtu_data: 1000,
        tiny_size: 200,
        max_fragment_size: 10_000,
        connectivity_check: false,
        ..Config::default()
    }
}

/// A (local id A, initial sequence `isn_a`) and B (`isn_b`) configured with `c`.
pub fn pair_with_isns(c: Config, isn_a: u16, isn_b: u16) -> (Connection, Connection) {
    let side = |local_id, peer_id, local_isn, peer_isn, seed| {
        Connection::new(
            c.clone(),
            ConnectionParams {
                local_id,
                peer_id,
                local_isn,
                peer_isn,
                seed,
            },
        )
        .unwrap()
    };
    (side(A, B, isn_a, isn_b, 1), side(B, A, isn_b, isn_a, 2))
}

/// Everything `c` wants to send at `now`.
pub fn drain(c: &mut Connection, now: u64) -> Vec<Transmit> {
    std::iter::from_fn(|| c.poll_transmit(Instant(now))).collect()
}

/// Hands `ts` to `to` at `now`.
pub fn deliver(to: &mut Connection, ts: &[Transmit], now: u64) {
    for t in ts {
        to.handle_datagram(Instant(now), t.channel, &t.to_vec());
    }
}

/// Fragments delivered since the last call (their receive buffers given back).
pub fn delivered(c: &mut Connection) -> usize {
    let n = std::iter::from_fn(|| c.poll_event())
        .filter(|e| matches!(e, rusnic_core::Event::Deliver { .. }))
        .count();
    c.repost_rx_buffers(n as u32);
    n
}

/// The sequence number of a transmitted datagram.
pub fn seq_of(t: &Transmit) -> u16 {
    wire::decode(&t.to_vec()).unwrap().seq
}

/// Ten clean 8-byte round trips of 20 µs: both sides have a smoothed and a minimum RTT
/// of 20 µs (A's from its pings, B's from its pongs acknowledged by the next ping).
/// Returns the time after them.
pub fn warm_up(a: &mut Connection, b: &mut Connection) -> u64 {
    let mut now = 0;
    for i in 0..10 {
        a.send(i, 1, &[1; 8]).unwrap();
        deliver(b, &drain(a, now), now + 10 * US);
        now += 10 * US;
        assert_eq!(delivered(b), 1);
        b.send(i, 1, &[2; 8]).unwrap();
        deliver(a, &drain(b, now), now + 10 * US);
        now += 10 * US;
        assert_eq!(delivered(a), 1);
    }
    now
}
