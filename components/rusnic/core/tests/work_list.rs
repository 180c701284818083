//! The Endpoint drives only connections with work: a hub talks to many spokes over a lossy
//! simulated network, every message must arrive whole and in order, and once everything
//! is acknowledged the hub's list of connections with work is empty (an idle pass walks
//! nothing); traffic started after that still flows, losses included.

use rusnic_core::{Config, Endpoint, Event, Instant};

const HUB: u64 = 1;
const SPOKES: u64 = 12;
const MS: u64 = 1_000_000;

/// A deterministic drop decision per datagram (xorshift).
struct Loss {
    state: u64,
    percent: u64,
}

impl Loss {
    fn drop(&mut self) -> bool {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state % 100 < self.percent
    }
}

struct Net {
    hub: Endpoint,
    spokes: Vec<Endpoint>,
    /// What each spoke received from the hub, and the hub from each spoke.
    at_spoke: Vec<Vec<(u8, Vec<u8>)>>,
    at_hub: Vec<Vec<(u8, Vec<u8>)>>,
    now: u64,
    loss: Loss,
}

fn spoke_id(i: usize) -> u64 {
    HUB + 1 + i as u64
}

impl Net {
    fn new(percent: u64) -> Net {
        let cfg = Config::default();
        let mut hub = Endpoint::new(cfg.clone(), HUB).expect("valid config");
        let mut spokes = Vec::new();
        for i in 0..SPOKES as usize {
            let id = spoke_id(i);
            hub.add_peer(id, 10 + i as u16, 200 + i as u16);
            let mut s = Endpoint::new(cfg.clone(), id).expect("valid config");
            s.add_peer(HUB, 200 + i as u16, 10 + i as u16);
            spokes.push(s);
        }
        Net {
            hub,
            spokes,
            at_spoke: vec![Vec::new(); SPOKES as usize],
            at_hub: vec![Vec::new(); SPOKES as usize],
            now: 0,
            loss: Loss {
                state: 0x9E37_79B9_7F4A_7C15,
                percent,
            },
        }
    }

    /// One pass of every endpoint: datagrams out (some dropped) and delivered at once,
    /// then events, then due timers; returns whether anything moved.
    fn pass(&mut self) -> bool {
        let now = Instant(self.now);
        let mut moved = false;
        while let Some((peer, t)) = self.hub.poll_transmit(now) {
            moved = true;
            if !self.loss.drop() {
                let i = (peer - HUB - 1) as usize;
                self.spokes[i].handle_datagram(now, t.channel, Some(HUB), &t.to_vec());
            }
        }
        for i in 0..self.spokes.len() {
            while let Some((_, t)) = self.spokes[i].poll_transmit(now) {
                moved = true;
                if !self.loss.drop() {
                    self.hub
                        .handle_datagram(now, t.channel, Some(spoke_id(i)), &t.to_vec());
                }
            }
        }
        while let Some((peer, e)) = self.hub.poll_event() {
            moved = true;
            if let Event::Deliver { tag, data } = e {
                self.at_hub[(peer - HUB - 1) as usize].push((tag, data));
                self.hub.repost_rx_buffers(peer, 1);
            }
        }
        for i in 0..self.spokes.len() {
            while let Some((_, e)) = self.spokes[i].poll_event() {
                moved = true;
                if let Event::Deliver { tag, data } = e {
                    self.at_spoke[i].push((tag, data));
                    self.spokes[i].repost_rx_buffers(HUB, 1);
                }
            }
        }
        self.hub.flush_delayed_acks();
        for s in &mut self.spokes {
            s.flush_delayed_acks();
        }
        moved
    }

    /// Runs passes, jumping virtual time to the next timer whenever nothing moved, until
    /// no endpoint has a timer left and a pass moves nothing (or the time limit).
    fn settle(&mut self, limit_ms: u64) {
        let end = self.now + limit_ms * MS;
        while self.now < end {
            if self.pass() {
                self.now += 2_000;
                continue;
            }
            let next = std::iter::once(self.hub.next_timeout())
                .chain(self.spokes.iter().map(Endpoint::next_timeout))
                .flatten()
                .min();
            let Some(t) = next else {
                return;
            };
            self.now = self.now.max(t.0);
            let now = Instant(self.now);
            self.hub.handle_timeout(now);
            for s in &mut self.spokes {
                s.handle_timeout(now);
            }
        }
        panic!("the network did not settle in {limit_ms} ms of virtual time");
    }

    fn send_round(&mut self, round: u8) {
        for i in 0..SPOKES as usize {
            let id = spoke_id(i);
            let small = vec![round ^ i as u8; 40];
            let large: Vec<u8> = (0..5000u32).map(|b| (b as u8) ^ round ^ i as u8).collect();
            self.hub
                .send(id, u64::from(round) * 100 + 1, round, &small)
                .unwrap();
            self.hub
                .send(id, u64::from(round) * 100 + 2, round, &large)
                .unwrap();
            self.spokes[i]
                .send(HUB, u64::from(round) * 100 + 3, round, &small)
                .unwrap();
        }
    }

    fn check_round(&self, round: u8, expect: usize) {
        for i in 0..SPOKES as usize {
            let got = &self.at_spoke[i];
            assert_eq!(got.len(), expect * 2, "spoke {i} after round {round}");
            let (tag, small) = &got[got.len() - 2];
            let (_, large) = &got[got.len() - 1];
            assert_eq!(
                (*tag, small.as_slice()),
                (round, &vec![round ^ i as u8; 40][..])
            );
            assert!(
                large
                    .iter()
                    .enumerate()
                    .all(|(b, &v)| v == (b as u8) ^ round ^ i as u8)
            );
            assert_eq!(self.at_hub[i].len(), expect, "hub from spoke {i}");
        }
    }
}

fn run(percent: u64) {
    let mut net = Net::new(percent);
    // Connectivity checks first, then three rounds, each after everything went quiet.
    net.settle(10_000);
    for round in 1..=3u8 {
        net.send_round(round);
        net.settle(60_000);
        net.check_round(round, usize::from(round));
        assert_eq!(
            net.hub.listed_peers(),
            0,
            "round {round}: every connection acknowledged and idle, none left to walk"
        );
        assert!(net.hub.next_timeout().is_none());
    }
}

#[test]
fn idle_connections_leave_the_list_and_come_back_with_traffic() {
    run(0);
}

#[test]
fn lost_datagrams_are_recovered_by_listed_connections() {
    run(10);
}
