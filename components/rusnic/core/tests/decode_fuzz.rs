//! Poor man's fuzzing of the decoder and the receive path: seeded random and mutated
//! datagrams must be rejected cleanly (counted, no panic) or, if accepted, re-encode
//! byte-identically; a connection fed garbage keeps working.

use rusnic_core::crc::crc32c;
use rusnic_core::fault::Rng;
use rusnic_core::wire::{self, AckInfo, Channel, ChunkInfo, Kind, Packet, Probe, SackBlock};
use rusnic_core::{Config, Connection, ConnectionParams, Event, Instant, Key};

fn valid_samples(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let payload: Vec<u8> = (0..rng.below(300)).map(|i| i as u8).collect();
    for kind in [Kind::Ack, Kind::Frag, Kind::Chunk, Kind::Ping, Kind::Pong] {
        let ch = if rng.chance(0.5) {
            Channel::Data
        } else {
            Channel::Priority
        };
        let mut p = Packet::new(kind, ch, 0xA);
        match kind {
            Kind::Ack => {
                p.ack = Some(AckInfo {
                    ack: rng.next_u64() as u16,
                    credits: rng.below(64) as u16,
                });
                for _ in 0..rng.below(9) {
                    p.sacks.push(SackBlock {
                        start: rng.next_u64() as u16,
                        len: rng.range(1, 50) as u16,
                    });
                }
            }
            Kind::Frag | Kind::Chunk => {
                p.seq = rng.next_u64() as u16;
                p.ack = Some(AckInfo { ack: 3, credits: 4 });
                p.payload = &payload;
                if rng.chance(0.3) {
                    p.put_addr = Some(rng.next_u64());
                } else {
                    p.tag = rng.next_u64() as u8;
                }
                if kind == Kind::Chunk {
                    if payload.is_empty() {
                        continue;
                    }
                    let off = rng.below(100) as u32;
                    p.chunk = Some(ChunkInfo {
                        frag_id: rng.range(1, 5) as u32,
                        frag_size: off + payload.len() as u32 + rng.below(10) as u32,
                        offset: off,
                    });
                }
            }
            Kind::Ping => {
                p.probe = Some(Probe {
                    nonce: 1,
                    size: (wire::SMALL_PROBE_LEN + payload.len()) as u32,
                });
                p.payload = &payload;
            }
            Kind::Pong => {
                p.probe = Some(Probe {
                    nonce: 1,
                    size: 1000,
                })
            }
        }
        out.push(p.to_vec());
    }
    out
}

/// A valid CRC (bytes 24..28, which hold the CRC XORed with the tag) and, where the
/// shape fields allow, a valid tag for the zero key (28..32), so mutations reach the
/// checks behind them.
fn reseal(b: &mut [u8]) {
    if b.len() < wire::HEADER_LEN {
        return;
    }
    let mut v = b[..24].to_vec();
    v.extend_from_slice(&b[32..]);
    let crc = crc32c(&v);
    let kind = match b[2] {
        1 => Some(Kind::Ack),
        2 => Some(Kind::Frag),
        3 => Some(Kind::Chunk),
        4 => Some(Kind::Ping),
        5 => Some(Kind::Pong),
        _ => None,
    };
    if let Some(kind) = kind {
        let hlen = wire::header_len(kind, usize::from(b[6]), b[4] & wire::flags::PUT != 0);
        if hlen <= b.len() {
            let mut m = b[..24].to_vec();
            m.extend_from_slice(&crc.to_le_bytes());
            m.extend_from_slice(&b[32..hlen]);
            let tag = Key::ZERO.tag(&m);
            b[28..32].copy_from_slice(&tag.to_le_bytes());
        }
    }
    let tag = u32::from_le_bytes([b[28], b[29], b[30], b[31]]);
    b[24..28].copy_from_slice(&(crc ^ tag).to_le_bytes());
}

#[test]
fn random_and_mutated_bytes_never_panic() {
    let mut rng = Rng::new(0xF022);
    let cfg = Config {
        connectivity_check: false,
        ..Config::default()
    };
    let mut conn = Connection::new(
        cfg,
        ConnectionParams {
            local_id: 0xB,
            peer_id: 0xA,
            local_isn: 0,
            peer_isn: 3,
            seed: 0,
        },
    )
    .unwrap();
    let (mut accepted, mut rejected) = (0u64, 0u64);
    let iterations = 200_000;
    for i in 0..iterations {
        let mut d = if i % 4 == 0 {
            let mut d = vec![0u8; rng.below(120) as usize];
            rng.fill(&mut d);
            if rng.chance(0.5) && d.len() > 2 {
                d[0] = wire::MAGIC;
                d[1] = wire::VERSION;
            }
            d
        } else {
            let s = valid_samples(&mut rng);
            s[rng.below(s.len() as u64) as usize].clone()
        };
        for _ in 0..rng.below(4) {
            if d.is_empty() {
                break;
            }
            match rng.below(5) {
                0 => {
                    let j = rng.below(d.len() as u64) as usize;
                    d[j] ^= 1 << rng.below(8);
                }
                1 => {
                    let j = rng.below(d.len() as u64) as usize;
                    d[j] = rng.next_u64() as u8;
                }
                2 => d.truncate(rng.below(d.len() as u64) as usize),
                3 => d.push(rng.next_u64() as u8),
                _ => {
                    // Small header fields set to edge values, the interesting ones.
                    let j = rng.below(d.len().min(wire::HEADER_LEN) as u64) as usize;
                    d[j] = [0u8, 1, 0xff, 0x7f, 0x80][rng.below(5) as usize];
                }
            }
        }
        if rng.chance(0.7) {
            reseal(&mut d); // so mutations get past the CRC and reach the field checks
            if rng.chance(0.1) && d.len() >= wire::HEADER_LEN {
                // Someone else's tag with a valid CRC: a foreign datagram.
                let delta = (rng.next_u64() as u32).max(1).to_le_bytes();
                for i in 0..4 {
                    d[24 + i] ^= delta[i];
                    d[28 + i] ^= delta[i];
                }
            }
        }
        match wire::decode(&d) {
            Ok(p) => {
                accepted += 1;
                assert_eq!(p.to_vec(), d, "accepted datagrams are canonical");
            }
            Err(_) => rejected += 1,
        }
        let ch = if rng.chance(0.5) {
            Channel::Data
        } else {
            Channel::Priority
        };
        conn.handle_datagram(Instant(i), ch, &d);
        while let Some(t) = conn.poll_transmit(Instant(i)) {
            wire::decode(&t.to_vec()).expect("we only emit valid datagrams");
        }
        while let Some(e) = conn.poll_event() {
            if matches!(e, Event::Deliver { .. } | Event::Put { .. }) {
                conn.repost_rx_buffers(1);
            }
        }
        if i % 1000 == 0 {
            conn.handle_timeout(Instant(i));
        }
    }
    assert!(
        accepted > 10_000 && rejected > 10_000,
        "both paths exercised: {accepted}/{rejected}"
    );
    let s = conn.stats();
    assert_eq!(s.num_total_recvs, iterations);
    assert!(
        s.num_crc_errors > 0
            && s.num_malformed_recvs > 0
            && s.num_truncated_recvs > 0
            && s.num_bad_version_recvs > 0
            && s.num_foreign_recvs > 0,
        "{s:?}"
    );
    assert!(conn.rx_in_glue() <= u32::from(conn.config().rx_buffers));
}
