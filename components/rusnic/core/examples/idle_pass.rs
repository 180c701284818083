//! The cost of one idle driving pass of an [`Endpoint`] (what the BTL's progress does when
//! nothing arrived: flush delayed ACKs, ask the next timeout, poll for a datagram and an
//! event) against the number of peers. The Endpoint walks every connection in each of
//! these calls, so the pass grows with the job; this prints by how much.
//!
//!   cargo run --release -p rusnic-core --example idle_pass [PEERS...]
use rusnic_core::{Config, Endpoint, Instant};

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
    for n in counts {
        let Ok(mut e) = Endpoint::new(Config::default(), 0) else {
            eprintln!("idle_pass: the default configuration was refused");
            std::process::exit(1);
        };
        for p in 1..=n {
            e.add_peer(p, 1, 1);
        }
        // Nobody answers: run the connections' timers out until nothing is pending.
        let mut now = Instant(1_000_000_000);
        for _ in 0..100 {
            now = now.plus(10_000_000);
            e.handle_timeout(now);
            while e.poll_transmit(now).is_some() {}
            while e.poll_event().is_some() {}
        }
        let reps = 2000;
        let mut busy = 0u64;
        let start = std::time::Instant::now();
        for _ in 0..reps {
            e.flush_delayed_acks();
            busy += u64::from(e.next_timeout().is_some());
            busy += u64::from(e.poll_transmit(now).is_some());
            busy += u64::from(e.poll_event().is_some());
        }
        let per_pass = start.elapsed().as_nanos() as f64 / f64::from(reps);
        println!("{n:>6} peers: {per_pass:>9.0} ns a pass ({busy} calls found work)");
    }
}
