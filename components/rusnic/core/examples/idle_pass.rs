//! The cost of one idle driving pass of an [`Endpoint`] (what the BTL's progress does when
//! nothing arrived: flush delayed ACKs, ask the next timeout, poll for a datagram and an
//! event) against the number of peers, after every peer passed its connectivity check
//! and exchanged a message both ways with this one and everything went quiet.
//!
//!   cargo run --release -p rusnic-core --example idle_pass [PEERS...]
use rusnic_core::{Config, Endpoint, Event, Instant};

const HUB: u64 = 1;

/// Delivers everything until nothing moves, jumping to the next timer when idle.
fn settle(hub: &mut Endpoint, spokes: &mut [Endpoint], now: &mut u64) {
    for _ in 0..100_000 {
        let t = Instant(*now);
        let mut moved = false;
        while let Some((peer, d)) = hub.poll_transmit(t) {
            moved = true;
            spokes[(peer - HUB - 1) as usize].handle_datagram(t, d.channel, Some(HUB), &d.to_vec());
        }
        for (i, s) in spokes.iter_mut().enumerate() {
            while let Some((_, d)) = s.poll_transmit(t) {
                moved = true;
                hub.handle_datagram(t, d.channel, Some(HUB + 1 + i as u64), &d.to_vec());
            }
        }
        while let Some((peer, e)) = hub.poll_event() {
            moved = true;
            if matches!(e, Event::Deliver { .. }) {
                hub.repost_rx_buffers(peer, 1);
            }
        }
        for s in spokes.iter_mut() {
            while let Some((_, e)) = s.poll_event() {
                moved = true;
                if matches!(e, Event::Deliver { .. }) {
                    s.repost_rx_buffers(HUB, 1);
                }
            }
        }
        if moved {
            *now += 1_000;
            continue;
        }
        let next = std::iter::once(hub.next_timeout())
            .chain(spokes.iter().map(Endpoint::next_timeout))
            .flatten()
            .min();
        let Some(next) = next else {
            return;
        };
        *now = (*now).max(next.0);
        hub.handle_timeout(Instant(*now));
        for s in spokes.iter_mut() {
            s.handle_timeout(Instant(*now));
        }
    }
    eprintln!("idle_pass: the peers did not settle");
    std::process::exit(1);
}

fn main() {
    let counts: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let counts = if counts.is_empty() {
        vec![16, 128, 1024]
    } else {
        counts
    };
    let cfg = Config::default();
    for n in counts {
        let Ok(mut hub) = Endpoint::new(cfg.clone(), HUB) else {
            eprintln!("idle_pass: the default configuration was refused");
            std::process::exit(1);
        };
        let mut spokes = Vec::new();
        for i in 0..n {
            let id = HUB + 1 + i;
            hub.add_peer(id, 7, 9);
            let Ok(mut s) = Endpoint::new(cfg.clone(), id) else {
                std::process::exit(1);
            };
            s.add_peer(HUB, 9, 7);
            spokes.push(s);
        }
        let mut now = 0;
        settle(&mut hub, &mut spokes, &mut now);
        for (i, s) in spokes.iter_mut().enumerate() {
            let id = HUB + 1 + i as u64;
            let sent = hub.send(id, 1, 1, b"ping").and(s.send(HUB, 1, 1, b"pong"));
            if sent.is_err() {
                eprintln!("idle_pass: a send was refused");
                std::process::exit(1);
            }
        }
        settle(&mut hub, &mut spokes, &mut now);
        let reps = 2000;
        let mut busy = 0u64;
        let start = std::time::Instant::now();
        for _ in 0..reps {
            hub.flush_delayed_acks();
            busy += u64::from(hub.next_timeout().is_some());
            busy += u64::from(hub.poll_transmit(Instant(now)).is_some());
            busy += u64::from(hub.poll_event().is_some());
        }
        let per_pass = start.elapsed().as_nanos() as f64 / f64::from(reps);
        println!(
            "{n:>6} peers: {per_pass:>9.0} ns a pass ({} connections listed, {busy} calls found work)",
            hub.listed_peers()
        );
    }
}
