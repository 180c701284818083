//! What the protocol costs in CPU per message, without sockets: two endpoints pass their
//! datagrams to each other in memory, with the BTL's settings between processes of one
//! node (64 KiB datagrams, header-only CRC, 256 KiB PUT pieces). Timings for comparing
//! builds, not checks:
//!
//! ```sh
//! cargo test --release -p rusnic-core --test cost -- --ignored --nocapture
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/deps/cost-* \
//!     --ignored --test-threads=1          # instructions, independent of the machine's load
//! ```
//!
//! Only API that every version of the core since the PUT work has, so the same file
//! runs against an older build.

use std::sync::Arc;

use rusnic_core::{Config, Endpoint, Event, Instant, PutTarget, Shared};

const MS: u64 = 1_000_000;

fn pair() -> (Endpoint, Endpoint) {
    let cfg = Config {
        connectivity_check: false,
        mtu_data: 65507,
        rx_buffers: 128,
        max_fragment_size: 256 * 1024,
        rto_initial: 100 * MS,
        rto_min: 100 * MS,
        ..Config::default()
    };
    let mut a = Endpoint::new(cfg.clone(), 1).unwrap();
    let mut b = Endpoint::new(cfg, 2).unwrap();
    a.add_peer(2, 10, 20);
    b.add_peer(1, 20, 10);
    a.set_payload_crc(2, false, false);
    b.set_payload_crc(1, false, false);
    (a, b)
}

struct Region(Vec<u8>);

impl PutTarget for Region {
    fn place(&mut self, addr: u64, data: &[u8]) -> bool {
        let o = addr as usize;
        let Some(dst) = self.0.get_mut(o..o + data.len()) else {
            return false;
        };
        dst.copy_from_slice(data);
        true
    }
}

/// Hands everything `from` has to send to `to`; the number of datagrams.
fn flow(from: &mut Endpoint, to: &mut Endpoint, now: Instant, region: &mut Region) -> usize {
    let mut n = 0;
    while let Some((_, t)) = from.poll_transmit(now) {
        let bytes = t.to_vec();
        to.handle_datagram_into(now, t.channel, None, &bytes, region);
        n += 1;
    }
    n
}

/// Drains `e`'s events, reposting delivered buffers; how many deliveries.
fn settle(e: &mut Endpoint) -> usize {
    let mut delivered = 0;
    while let Some((peer, ev)) = e.poll_event() {
        if matches!(ev, Event::Deliver { .. }) {
            e.repost_rx_buffers(peer, 1);
            delivered += 1;
        }
    }
    delivered
}

fn iterations(default: u32) -> u32 {
    std::env::var("RUSNIC_COST_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
#[ignore = "a timing, not a check"]
fn pingpong_8_bytes() {
    let (mut a, mut b) = pair();
    let mut region = Region(Vec::new());
    let n = iterations(200_000);
    let start = std::time::Instant::now();
    let mut datagrams = 0;
    for i in 0..u64::from(n) {
        let now = Instant(i * 1_000);
        a.send(2, 2 * i, 1, &[7u8; 8]).unwrap();
        datagrams += flow(&mut a, &mut b, now, &mut region);
        assert_eq!(settle(&mut b), 1);
        b.send(1, 2 * i + 1, 1, &[8u8; 8]).unwrap();
        datagrams += flow(&mut b, &mut a, now, &mut region);
        assert_eq!(settle(&mut a), 1);
    }
    let ns = start.elapsed().as_nanos() as f64 / f64::from(2 * n);
    println!(
        "8 B one-way: {ns:.1} ns per message ({:.2} datagrams each)",
        datagrams as f64 / f64::from(2 * n)
    );
}

#[test]
#[ignore = "a timing, not a check"]
fn put_4_mib() {
    const PIECE: usize = 256 * 1024;
    let (mut a, mut b) = pair();
    let mut region = Region(vec![0; 4 << 20]);
    // The pieces as the BTL's put hands them over, lent (not copied) to the core.
    let pieces: Vec<Shared> = (0..(4 << 20) / PIECE)
        .map(|_| Arc::new(vec![0x5Au8; PIECE]) as Shared)
        .collect();
    let n = iterations(200);
    let start = std::time::Instant::now();
    let mut datagrams = 0;
    let mut id = 0;
    for i in 0..u64::from(n) {
        let now = Instant(i * 1_000_000);
        for (k, piece) in pieces.iter().enumerate() {
            a.put_shared(2, id, (k * PIECE) as u64, piece.clone(), PIECE)
                .unwrap();
            id += 1;
        }
        loop {
            let moved = flow(&mut a, &mut b, now, &mut region);
            b.flush_delayed_acks();
            let back = flow(&mut b, &mut a, now, &mut region);
            settle(&mut a);
            datagrams += moved + back;
            if moved + back == 0 {
                break;
            }
        }
    }
    assert!(region.0.iter().all(|&x| x == 0x5A));
    let us = start.elapsed().as_nanos() as f64 / 1e3 / f64::from(n);
    println!(
        "4 MiB PUT: {us:.1} us per message ({:.1} datagrams each, memory copies included)",
        datagrams as f64 / f64::from(n)
    );
}
