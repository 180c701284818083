//! Deterministic network simulator in the style of quinn-proto's `tests/util.rs`:
//! N endpoints on a virtual clock over a seeded network with loss, duplication,
//! reordering, delay, corruption, truncation, path-MTU limits and stalled receivers.
//! After every step it checks exactly-once, in-order, byte-exact delivery, bounded
//! memory and that no receiver was overrun; `drive_bounded` turns a livelock into an error.
#![allow(dead_code)] // each test binary uses a different subset

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

mod check;
mod memory;

use rusnic_core::fault::{FaultConfig, FaultInjector, Rng};
use rusnic_core::wire::{self, Kind};
use rusnic_core::{Channel, Config, Endpoint, Instant, SendError};

pub const US: u64 = 1_000;
pub const MS: u64 = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StallKind {
    /// The upper layer keeps deliveries (does not repost receive buffers).
    NoRepost,
    /// The process stops progressing: no input handled, nothing sent, no timers.
    NoProgress,
}

#[derive(Clone, Copy, Debug)]
pub struct Stall {
    pub node: usize,
    pub kind: StallKind,
    pub start: u64,
    pub len: u64,
}

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub nodes: usize,
    pub proto: Config,
    /// Per-node override of `proto` (misconfiguration tests).
    pub node_proto: Vec<(usize, Config)>,
    pub faults: FaultConfig,
    pub delay_min: u64,
    pub delay_max: u64,
    /// Each (from, to, channel) stream delivers in order, like a real link; reordering
    /// then comes from the fault injector and from the two channels. When false, every
    /// datagram gets an independent delay (chaotic reordering).
    pub fifo: bool,
    pub messages_per_pair: usize,
    /// Message sizes are drawn up to this (a quarter of them tiny).
    pub max_msg: usize,
    pub put_fraction: f64,
    /// Receivers place PUT data on arrival through a `PutTarget` (the BTL's way)
    /// instead of taking in-order `Event::Put`s.
    pub place_puts: bool,
    /// Data segments checksum their payload (false: header only, both ways; only
    /// sound without payload corruption).
    pub payload_crc: bool,
    /// Initial sequence numbers just below the 16-bit wrap.
    pub isn_near_wrap: bool,
    pub stalls: Vec<Stall>,
    /// Data-channel datagrams larger than this vanish.
    pub path_mtu: Option<usize>,
    /// Every datagram to this node vanishes.
    pub black_hole: Option<usize>,
    /// Mutation: the network drops every data segment it has carried before, which
    /// disables retransmission. The checker must then report missing deliveries.
    pub drop_retransmissions: bool,
    /// Mutation: flip a payload byte and re-seal the CRC. The checker must notice.
    pub evil_payload: f64,
    /// Receivers may see overruns (senders misconfigured on purpose).
    pub allow_overruns: bool,
    /// Connection errors expected (unreachable peers).
    pub allow_errors: bool,
}

impl SimConfig {
    pub fn new(seed: u64) -> SimConfig {
        SimConfig {
            seed,
            nodes: 2,
            proto: sim_proto(),
            node_proto: Vec::new(),
            faults: FaultConfig::default(),
            delay_min: 5 * US,
            delay_max: 20 * US,
            fifo: true,
            messages_per_pair: 20,
            max_msg: 4000,
            put_fraction: 0.2,
            place_puts: false,
            payload_crc: true,
            isn_near_wrap: false,
            stalls: Vec::new(),
            path_mtu: None,
            black_hole: None,
            drop_retransmissions: false,
            evil_payload: 0.0,
            allow_overruns: false,
            allow_errors: false,
        }
    }

    pub fn lossy(mut self, p: f64) -> Self {
        self.faults = FaultConfig {
            drop: p,
            duplicate: p / 2.0,
            reorder: p,
            corrupt: p / 2.0,
            truncate: p / 4.0,
        };
        self
    }
}

/// Protocol settings scaled to the simulated network (tens of µs latency).
pub fn sim_proto() -> Config {
    Config {
        window: 64,
        rx_buffers: 32,
        rto_initial: 500 * US,
        rto_min: 200 * US,
        rto_max: 20 * MS,
        ack_delay: 20 * US,
        ack_every: 4,
        mtu_priority: 300,
        mtu_data: 1000,
        tiny_size: 200,
        max_fragment_size: 20_000,
        max_reassemblies: 3,
        max_queued_fragments: 8,
        connectivity_retries: 40,
        connectivity_timeout: 2 * MS,
        backoff_min: 50 * US,
        backoff_max: 2 * MS,
        ..Config::default()
    }
}

#[derive(Clone, Debug)]
enum MsgKind {
    Send { tag: u8 },
    Put { addr: u64 },
}

#[derive(Clone, Debug)]
struct Msg {
    kind: MsgKind,
    data: Vec<u8>,
}

/// Traffic and checker state for one ordered pair (src → dst).
#[derive(Debug, Default)]
struct Pair {
    msgs: Vec<Msg>,
    /// Next message the sender will try to queue.
    queued: usize,
    /// Next message the receiver must get.
    received: usize,
    /// Bytes of the current PUT already written.
    put_offset: usize,
    /// Per message, which bytes a `PutTarget` received (PUTs in `place_puts` mode only).
    placed: Vec<Vec<bool>>,
    completed: Vec<bool>,
    n_completed: usize,
}

struct Node {
    ep: Endpoint,
    /// Deliveries not yet reposted because of a NoRepost stall.
    owed: Vec<u64>,
    /// Datagrams that arrived during a NoProgress stall.
    inbox: Vec<(u64, Channel, Vec<u8>)>,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: u64,
    order: u64,
    to: usize,
    from: usize,
    channel: u8,
    bytes: Vec<u8>,
}

pub struct Sim {
    pub cfg: SimConfig,
    pub now: u64,
    nodes: Vec<Node>,
    /// pairs[src][dst]
    pairs: Vec<Vec<Pair>>,
    net: BinaryHeap<Reverse<InFlight>>,
    order: u64,
    rng: Rng,
    /// injectors[from][to][channel]
    injectors: Vec<Vec<[FaultInjector; 2]>>,
    seen_data: HashSet<(usize, usize, u16, u32)>,
    /// Latest arrival time per (from, to, channel) stream, for FIFO links.
    last_at: std::collections::HashMap<(usize, usize, u8), u64>,
    pub errors: Vec<(usize, u64, String)>,
    pub verified: usize,
    pub steps: u64,
}

fn node_id(i: usize) -> u64 {
    0x5EED_0000_0000 + i as u64 * 7919
}

impl Sim {
    pub fn new(cfg: SimConfig) -> Sim {
        let mut rng = Rng::new(cfg.seed);
        let n = cfg.nodes;
        let isn = |rng: &mut Rng| {
            if cfg.isn_near_wrap {
                u16::MAX - rng.below(40) as u16
            } else {
                rng.next_u64() as u16
            }
        };
        // isns[a][b]: a's ISN towards b.
        let isns: Vec<Vec<u16>> = (0..n)
            .map(|_| (0..n).map(|_| isn(&mut rng)).collect())
            .collect();
        let mut nodes = Vec::new();
        for (a, isn_row) in isns.iter().enumerate() {
            let proto = cfg
                .node_proto
                .iter()
                .find(|(i, _)| *i == a)
                .map_or(cfg.proto.clone(), |(_, c)| c.clone());
            let mut ep = Endpoint::new(proto, node_id(a)).expect("valid sim config");
            for b in (0..n).filter(|&b| b != a) {
                ep.add_peer(node_id(b), isn_row[b], isns[b][a]);
                ep.set_payload_crc(node_id(b), cfg.payload_crc, cfg.payload_crc);
            }
            nodes.push(Node {
                ep,
                owed: Vec::new(),
                inbox: Vec::new(),
            });
        }
        let mut pairs: Vec<Vec<Pair>> = (0..n)
            .map(|_| (0..n).map(|_| Pair::default()).collect())
            .collect();
        for (a, row) in pairs.iter_mut().enumerate() {
            for (b, pair) in row.iter_mut().enumerate() {
                if a == b {
                    continue;
                }
                for idx in 0..cfg.messages_per_pair as u64 {
                    let len = if rng.chance(0.25) {
                        rng.below(64) as usize
                    } else {
                        rng.below(cfg.max_msg as u64 + 1) as usize
                    };
                    let mut data = vec![0u8; len];
                    rng.fill(&mut data);
                    let kind = if rng.chance(cfg.put_fraction) {
                        // Each message in a 4 GiB slot of its own: regions never overlap.
                        MsgKind::Put {
                            addr: 0x7f00_0000_0000 + (idx << 32) + rng.below(1 << 20) * 64,
                        }
                    } else {
                        MsgKind::Send {
                            tag: rng.below(256) as u8,
                        }
                    };
                    pair.msgs.push(Msg { kind, data });
                }
                pair.completed = vec![false; pair.msgs.len()];
                pair.placed = pair
                    .msgs
                    .iter()
                    .map(|m| match m.kind {
                        MsgKind::Put { .. } if cfg.place_puts => vec![false; m.data.len()],
                        _ => Vec::new(),
                    })
                    .collect();
            }
        }
        let injectors = (0..n)
            .map(|a| {
                (0..n)
                    .map(|b| {
                        let s = cfg.seed ^ ((a as u64) << 40) ^ ((b as u64) << 20);
                        [
                            FaultInjector::new(s ^ 1, cfg.faults.clone()),
                            FaultInjector::new(s ^ 2, cfg.faults.clone()),
                        ]
                    })
                    .collect()
            })
            .collect();
        Sim {
            now: 0,
            nodes,
            pairs,
            net: BinaryHeap::new(),
            order: 0,
            rng,
            injectors,
            seen_data: HashSet::new(),
            last_at: std::collections::HashMap::new(),
            errors: Vec::new(),
            verified: 0,
            steps: 0,
            cfg,
        }
    }

    pub fn endpoint(&self, i: usize) -> &Endpoint {
        &self.nodes[i].ep
    }

    fn stalled(&self, node: usize, kind: StallKind) -> bool {
        self.cfg.stalls.iter().any(|s| {
            s.node == node && s.kind == kind && (s.start..s.start + s.len).contains(&self.now)
        })
    }

    /// Every message delivered and every send completed.
    pub fn done(&self) -> bool {
        self.pairs
            .iter()
            .flatten()
            .all(|p| p.received == p.msgs.len() && p.n_completed == p.msgs.len())
    }

    pub fn delivered(&self) -> usize {
        self.pairs.iter().flatten().map(|p| p.received).sum()
    }

    /// Steps until `cond` holds (or nothing is scheduled); errors after `max_steps`.
    pub fn drive_until(
        &mut self,
        max_steps: u64,
        cond: impl Fn(&Sim) -> bool,
    ) -> Result<(), String> {
        self.pump()?;
        while !cond(self) {
            if self.steps >= max_steps {
                return Err(format!(
                    "seed {}: condition not reached after {max_steps} steps",
                    self.cfg.seed
                ));
            }
            if !self.step()? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Runs until done; an error names the first violated invariant, or reports a
    /// livelock/deadlock after `max_steps`.
    pub fn drive_bounded(&mut self, max_steps: u64) -> Result<(), String> {
        self.pump()?;
        while !self.done() {
            if self.steps >= max_steps {
                return Err(format!(
                    "seed {}: not done after {max_steps} steps at t={} ns: {}",
                    self.cfg.seed,
                    self.now,
                    self.progress_report()
                ));
            }
            if !self.step()? {
                return Err(format!(
                    "seed {}: deadlock at t={} ns (no datagram, no timer): {}",
                    self.cfg.seed,
                    self.now,
                    self.progress_report()
                ));
            }
        }
        Ok(())
    }

    pub fn progress_report(&self) -> String {
        let mut s = String::new();
        for (a, row) in self.pairs.iter().enumerate() {
            for (b, p) in row.iter().enumerate() {
                if a != b {
                    s += &format!(
                        "[{a}->{b}: rx {}/{} done {}] ",
                        p.received,
                        p.msgs.len(),
                        p.n_completed
                    );
                }
            }
        }
        s
    }

    /// Advances the clock to the next datagram, timer or stall boundary and handles it.
    /// Returns false when nothing at all is scheduled.
    pub fn step(&mut self) -> Result<bool, String> {
        self.steps += 1;
        let mut next: Option<u64> = self.net.peek().map(|Reverse(f)| f.at);
        for (i, n) in self.nodes.iter().enumerate() {
            if self.stalled(i, StallKind::NoProgress) {
                continue;
            }
            if let Some(t) = n.ep.next_timeout() {
                next = Some(next.map_or(t.0, |x| x.min(t.0)));
            }
        }
        for s in &self.cfg.stalls {
            let end = s.start + s.len;
            if end > self.now {
                let b = if s.start > self.now { s.start } else { end };
                next = Some(next.map_or(b, |x| x.min(b)));
            }
        }
        let Some(t) = next else { return Ok(false) };
        self.now = self.now.max(t);
        let now = Instant(self.now);

        if self.net.peek().is_some_and(|Reverse(f)| f.at <= self.now) {
            let Some(Reverse(f)) = self.net.pop() else {
                unreachable!()
            };
            let ch = if f.channel == 0 {
                Channel::Priority
            } else {
                Channel::Data
            };
            if self.stalled(f.to, StallKind::NoProgress) {
                self.nodes[f.to].inbox.push((node_id(f.from), ch, f.bytes));
            } else {
                self.receive(now, f.to, f.from, ch, &f.bytes)?;
            }
        }
        for i in 0..self.nodes.len() {
            if self.stalled(i, StallKind::NoProgress) {
                continue;
            }
            let inbox = std::mem::take(&mut self.nodes[i].inbox);
            for (from, ch, bytes) in inbox {
                let from = self.index_of(from);
                self.receive(now, i, from, ch, &bytes)?;
            }
            if self.nodes[i].ep.next_timeout().is_some_and(|t| t <= now) {
                self.nodes[i].ep.handle_timeout(now);
            }
        }
        self.pump()?;
        Ok(true)
    }

    /// Feeds sends, polls every output of every progressing node, checks invariants.
    fn pump(&mut self) -> Result<(), String> {
        let now = Instant(self.now);
        for i in 0..self.nodes.len() {
            if self.stalled(i, StallKind::NoProgress) {
                continue;
            }
            // Like a progress loop: until an iteration produces nothing new.
            loop {
                let mut busy = false;
                self.feed(i)?;
                while let Some((peer, t)) = self.nodes[i].ep.poll_transmit(now) {
                    let to = self.index_of(peer);
                    self.transmit(i, to, t.channel, t.to_vec());
                    busy = true;
                }
                while let Some((peer, ev)) = self.nodes[i].ep.poll_event() {
                    let from = self.index_of(peer);
                    self.on_event(i, from, ev)?;
                    busy = true;
                }
                if !self.stalled(i, StallKind::NoRepost) {
                    for peer in std::mem::take(&mut self.nodes[i].owed) {
                        self.nodes[i].ep.repost_rx_buffers(peer, 1);
                        busy = true;
                    }
                }
                if !busy {
                    break;
                }
            }
            let mut out = Vec::new();
            for to in 0..self.nodes.len() {
                for c in 0..2 {
                    self.injectors[i][to][c].flush(&mut out);
                    for d in out.drain(..) {
                        self.net_push(i, to, c as u8, d);
                    }
                }
            }
        }
        self.check_invariants()
    }

    fn index_of(&self, id: u64) -> usize {
        ((id - node_id(0)) / 7919) as usize
    }

    fn feed(&mut self, a: usize) -> Result<(), String> {
        for b in 0..self.nodes.len() {
            if a == b {
                continue;
            }
            loop {
                let p = &self.pairs[a][b];
                if p.queued == p.msgs.len() {
                    break;
                }
                let idx = p.queued;
                let m = &p.msgs[idx];
                let r = match m.kind {
                    MsgKind::Send { tag } => {
                        self.nodes[a].ep.send(node_id(b), idx as u64, tag, &m.data)
                    }
                    MsgKind::Put { addr } => {
                        self.nodes[a].ep.put(node_id(b), idx as u64, addr, &m.data)
                    }
                };
                match r {
                    Ok(()) => self.pairs[a][b].queued += 1,
                    Err(SendError::Busy) => break,
                    Err(SendError::Failed) if self.cfg.allow_errors => break,
                    Err(e) => {
                        return Err(format!("seed {}: send {a}->{b} #{idx}: {e}", self.cfg.seed));
                    }
                }
            }
        }
        Ok(())
    }

    fn transmit(&mut self, from: usize, to: usize, ch: Channel, mut d: Vec<u8>) {
        if let Ok(p) = wire::decode(&d)
            && matches!(p.kind, Kind::Frag | Kind::Chunk)
        {
            if self.cfg.drop_retransmissions {
                let key = (from, to, p.seq, rusnic_core::crc::crc32c(p.payload));
                if !self.seen_data.insert(key) {
                    return;
                }
            }
            if !p.payload.is_empty() && self.rng.chance(self.cfg.evil_payload) {
                let mut payload = p.payload.to_vec();
                payload[0] ^= 0x5a;
                let mut q = p;
                q.payload = &payload;
                d = q.to_vec();
            }
        }
        let mut out = Vec::new();
        self.injectors[from][to][ch as usize].process(d, &mut out);
        for d in out {
            self.net_push(from, to, ch as u8, d);
        }
    }

    fn net_push(&mut self, from: usize, to: usize, channel: u8, bytes: Vec<u8>) {
        if self.cfg.black_hole == Some(to) || self.cfg.black_hole == Some(from) {
            return;
        }
        if channel == 1 && self.cfg.path_mtu.is_some_and(|m| bytes.len() > m) {
            return;
        }
        let mut at = self.now + self.rng.range(self.cfg.delay_min, self.cfg.delay_max);
        if self.cfg.fifo {
            let last = self.last_at.entry((from, to, channel)).or_insert(0);
            at = at.max(*last);
            *last = at;
        }
        self.order += 1;
        self.net.push(Reverse(InFlight {
            at,
            order: self.order,
            to,
            from,
            channel,
            bytes,
        }));
    }
}
