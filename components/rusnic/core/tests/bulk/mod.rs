//! A bulk transfer through a modelled loopback: what mpibench's 4 MiB `bw` test asks of
//! rusnic (16 messages of 4 MiB per iteration, each cut by ob1 into 256 KiB PUTs of
//! 64 KiB datagrams, then a 4-byte reply), with the BTL's default settings and its
//! progress loop, on a virtual clock.
//!
//! The model of one rank's progress call (`btl/src/module.rs`, `engine.rs`): the clock is
//! read once; every datagram that arrived is handled (priority channel first), each
//! costing CPU time (a 64 KiB receive is a kernel copy); if nothing arrived, delayed ACKs
//! are flushed; timers run; then up to 128 datagrams are polled and sent, each costing its
//! copy, all stamped with the call's clock reading. The next call starts when this one's
//! work is done, or, when it had none, at the next arrival or timer. A datagram reaches
//! the peer's socket when its send finished plus a small wire delay, and is lost with a
//! fixed probability in either direction on both channels (nftables drops a whole UDP
//! datagram).
#![allow(dead_code)] // each test binary uses a different subset

use std::collections::VecDeque;
use std::sync::Arc;

use rusnic_core::fault::Rng;
use rusnic_core::wire::HEADER_LEN;
use rusnic_core::{
    Channel, Config, Connection, ConnectionParams, Event, Instant, PutTarget, ResendCause, Shared,
    Stats,
};

pub const US: u64 = 1_000;
pub const MS: u64 = 1_000_000;

/// The BTL's defaults between two processes of one node (`btl/src/params.rs`).
pub fn btl_config() -> Config {
    Config {
        window: 4096,
        rx_buffers: 128,
        rto_initial: 5 * MS,
        rto_min: MS,
        rto_max: 20 * MS,
        ack_delay: 50 * US,
        ack_every: 16,
        mtu_priority: 768 + HEADER_LEN as u16,
        mtu_data: 65507,
        tiny_size: 768,
        max_fragment_size: 256 * 1024,
        max_reassemblies: 16,
        max_queued_fragments: 65536,
        connectivity_check: false,
        ..Config::default()
    }
}

#[derive(Clone, Debug)]
pub struct Model {
    pub seed: u64,
    pub loss: f64,
    pub cfg: Config,
    /// Bytes per iteration (mpibench: a window of 16 × 4 MiB).
    pub iteration_bytes: usize,
    pub iterations: usize,
    /// Size of one PUT (ob1's `rdma_pipeline_frag_size`).
    pub put_size: usize,
    /// CPU time per datagram sent or received, plus per byte (ns per KiB).
    pub per_datagram: u64,
    pub per_kib: u64,
    /// From the end of a send to the peer's socket.
    pub wire: u64,
    /// Datagrams per transmit batch.
    pub tx_batch: usize,
    /// Chance that a progress call is followed by a pause (the rank descheduled, or
    /// busy in the application), and the longest pause (uniform from 0): a loaded host.
    pub pause: f64,
    pub pause_max: u64,
}

impl Model {
    pub fn new(seed: u64, loss: f64) -> Model {
        Model {
            seed,
            loss,
            cfg: btl_config(),
            iteration_bytes: 64 << 20,
            iterations: 8,
            put_size: 256 << 10,
            // About 6.5 GB/s for 64 KiB datagrams, the lossless rate measured here.
            per_datagram: 1_000,
            per_kib: 150,
            wire: 2 * US,
            tx_batch: 128,
            pause: 0.0,
            pause_max: 0,
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Simulated time of all iterations.
    pub elapsed: u64,
    pub bytes: u64,
    pub sender: Stats,
    pub receiver: Stats,
    /// Time the sender had data to send and sent nothing (window, credit or resend
    /// backlog empty while waiting for ACKs or timers), summed.
    pub stalled: u64,
    /// Stalls longer than 500 µs (a retransmission timeout).
    pub long_stalls: u64,
    /// The sender's smoothed RTT at the end.
    pub srtt: u64,
    pub rto: u64,
    /// Resends (either way) that arrived at a receiver that already had the segment, by
    /// cause: fast, RACK, timeout, tail probe.
    pub spurious: [u64; 4],
}

impl Outcome {
    /// MB/s (10^6 bytes per second).
    pub fn bandwidth(&self) -> f64 {
        self.bytes as f64 * 1e3 / self.elapsed as f64
    }
}

struct Datagram {
    at: u64,
    channel: Channel,
    bytes: Vec<u8>,
    /// What queued it, for a resend.
    cause: Option<ResendCause>,
}

fn cause_index(c: ResendCause) -> usize {
    match c {
        ResendCause::Fast => 0,
        ResendCause::Rack => 1,
        ResendCause::Timeout => 2,
        ResendCause::TailProbe => 3,
    }
}

/// Arrivals a receiver found it already had.
fn duplicates(s: &Stats) -> u64 {
    s.num_dup_recvs + s.num_oow_low_recvs
}

struct Node {
    conn: Connection,
    /// Per channel, in arrival order.
    inbox: [VecDeque<Datagram>; 2],
    /// When the current progress call's work is done.
    busy_until: u64,
    /// A command was queued: the next progress call sends it.
    kick: bool,
    /// Draws the pauses.
    rng: Rng,
}

/// Accepts every PUT without copying (the copy is in the cost model).
struct Sink;

impl PutTarget for Sink {
    fn place(&mut self, _addr: u64, _data: &[u8]) -> bool {
        true
    }
}

const REPLY_TAG: u8 = 7;

fn index(ch: Channel) -> usize {
    match ch {
        Channel::Priority => 0,
        Channel::Data => 1,
    }
}

fn new_node(cfg: &Config, local: u64, peer: u64, seed: u64) -> Node {
    let mut conn = Connection::new(
        cfg.clone(),
        ConnectionParams {
            local_id: local,
            peer_id: peer,
            local_isn: (local * 1000) as u16,
            peer_isn: (peer * 1000) as u16,
            seed,
        },
    )
    .unwrap();
    conn.set_payload_crc(false, false);
    Node {
        conn,
        inbox: [VecDeque::new(), VecDeque::new()],
        busy_until: 0,
        kick: false,
        rng: Rng::new(seed ^ 0x9e37_79b9_7f4a_7c15),
    }
}

impl Node {
    fn next_arrival(&self) -> Option<u64> {
        self.inbox
            .iter()
            .filter_map(|q| q.front().map(|d| d.at))
            .min()
    }

    /// When this node's next progress call has something to do.
    fn next_work(&self) -> Option<u64> {
        let kick = self.kick.then_some(self.busy_until);
        let t = [
            kick,
            self.next_arrival(),
            self.conn.next_timeout().map(|i| i.0),
        ]
        .into_iter()
        .flatten()
        .min()?;
        Some(t.max(self.busy_until))
    }
}

/// One progress call at `t`; returns the datagrams sent, with their departure times, and
/// the events.
fn progress(
    node: &mut Node,
    m: &Model,
    t: u64,
    out: &mut Vec<(u64, Channel, Vec<u8>, Option<ResendCause>)>,
    spurious: &mut [u64; 4],
) -> Vec<Event> {
    let now = Instant(t);
    node.kick = false;
    let mut cost = 0;
    let mut received = 0;
    for ch in [Channel::Priority, Channel::Data] {
        let q = &mut node.inbox[index(ch)];
        while q.front().is_some_and(|d| d.at <= t) {
            let d = q.pop_front().unwrap();
            let before = duplicates(node.conn.stats());
            node.conn.handle_datagram_into(now, ch, &d.bytes, &mut Sink);
            if let Some(c) = d.cause
                && duplicates(node.conn.stats()) > before
            {
                spurious[cause_index(c)] += 1;
            }
            cost += m.per_datagram + d.bytes.len() as u64 * m.per_kib / 1024;
            received += 1;
        }
    }
    if received == 0 {
        node.conn.flush_delayed_ack();
    }
    if node.conn.next_timeout().is_some_and(|d| d <= now) {
        node.conn.handle_timeout(now);
    }
    loop {
        let mut n = 0;
        while n < m.tx_batch {
            let resends = node.conn.stats().num_resends;
            let Some(tx) = node.conn.poll_transmit(now) else {
                break;
            };
            n += 1;
            let cause = if node.conn.stats().num_resends > resends {
                node.conn.last_resend_cause()
            } else {
                None
            };
            let bytes = tx.to_vec();
            cost += m.per_datagram + bytes.len() as u64 * m.per_kib / 1024;
            out.push((t + cost, tx.channel, bytes, cause));
        }
        if n < m.tx_batch {
            break;
        }
    }
    node.busy_until = t + cost;
    if m.pause > 0.0 && node.rng.chance(m.pause) {
        node.busy_until += node.rng.below(m.pause_max + 1);
    }
    let events: Vec<Event> = std::iter::from_fn(|| node.conn.poll_event()).collect();
    let held = events
        .iter()
        .filter(|e| matches!(e, Event::Deliver { .. } | Event::Put { .. }))
        .count();
    node.conn.repost_rx_buffers(held as u32);
    events
}

/// Runs the model: `iterations` × (`iteration_bytes` of PUTs from A to B, then a 4-byte
/// reply from B), returning the simulated time and both sides' counters.
pub fn run(m: &Model) -> Outcome {
    let mut rng = Rng::new(m.seed);
    let mut nodes = [
        new_node(&m.cfg, 1, 2, m.seed),
        new_node(&m.cfg, 2, 1, m.seed ^ 0x55),
    ];
    let source: Shared = Arc::new(vec![0u8; m.put_size]);
    let puts = m.iteration_bytes / m.put_size;
    let mut t = 0u64;
    let mut stalled = 0;
    let mut long_stalls = 0;
    let mut next_id = 0u64;
    let mut spurious = [0; 4];
    for _ in 0..m.iterations {
        for i in 0..puts {
            next_id += 1;
            nodes[0]
                .conn
                .put_shared(next_id, (i * m.put_size) as u64, source.clone(), m.put_size)
                .unwrap();
        }
        nodes[0].kick = true;
        let mut completed = 0;
        let mut replied = false;
        let mut got_reply = false;
        // When A's latest send ended, and whether it still had data to send or resend.
        let mut last_send_end = t;
        let mut waiting = true;
        while !got_reply {
            // The next node to act, and when.
            let (who, at) = (0..2)
                .filter_map(|i| nodes[i].next_work().map(|w| (i, w)))
                .min_by_key(|&(_, w)| w)
                .expect("a timer or a datagram is pending: no deadlock");
            t = t.max(at);
            let mut out = Vec::new();
            let events = progress(&mut nodes[who], m, t, &mut out, &mut spurious);
            if who == 0 && !out.is_empty() {
                if waiting && t > last_send_end {
                    stalled += t - last_send_end;
                    if t - last_send_end > 500 * US {
                        long_stalls += 1;
                        if std::env::var_os("BULK_DEBUG").is_some() {
                            let c = &nodes[0].conn;
                            eprintln!(
                                "stall {:.0} us at {:.3} ms: in flight {} queued {} resend {} stats {:?}",
                                (t - last_send_end) as f64 / 1e3,
                                t as f64 / 1e6,
                                c.in_flight(),
                                c.queued_fragments(),
                                c.resend_backlog(),
                                (
                                    c.stats().num_timeout_retrans,
                                    c.stats().num_tail_probes,
                                    c.stats().num_rack_retrans,
                                    c.stats().num_fast_retrans
                                ),
                            );
                        }
                    }
                }
                last_send_end = nodes[0].busy_until;
                waiting = nodes[0].conn.queued_fragments() > 0;
            }
            let peer = 1 - who;
            for (dep, channel, bytes, cause) in out {
                if rng.chance(m.loss) {
                    continue;
                }
                nodes[peer].inbox[index(channel)].push_back(Datagram {
                    at: dep + m.wire,
                    channel,
                    bytes,
                    cause,
                });
            }
            for e in events {
                match (who, e) {
                    (0, Event::SendComplete { .. }) => completed += 1,
                    (0, Event::Deliver { tag: REPLY_TAG, .. }) => got_reply = true,
                    (1, Event::Put { .. } | Event::SendComplete { .. }) => {}
                    (_, Event::Error(e)) => panic!("connection failed: {e:?}"),
                    _ => {}
                }
            }
            let b = &nodes[1].conn;
            if !replied && completed == puts && b.in_flight() == 0 {
                // Every PUT acknowledged (A's view): B's application has the data since
                // the ACK left, so it replies (as mpibench's receiver does after Waitall).
                nodes[1].conn.send(u64::MAX, REPLY_TAG, &[0; 4]).unwrap();
                nodes[1].busy_until = nodes[1].busy_until.max(t);
                nodes[1].kick = true;
                replied = true;
            }
        }
    }
    Outcome {
        elapsed: t,
        bytes: (m.iteration_bytes * m.iterations) as u64,
        sender: nodes[0].conn.stats().clone(),
        receiver: nodes[1].conn.stats().clone(),
        stalled,
        long_stalls,
        srtt: nodes[0].conn.srtt().unwrap_or(0),
        rto: nodes[0].conn.rto(),
        spurious,
    }
}
