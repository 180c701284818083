//! The protocol core wired to a datagram backend: datagrams in, timers, datagrams out,
//! events collected for the BTL to hand to ob1. Everything here runs under the
//! module's engine lock and never calls into ob1.

use std::collections::VecDeque;
use std::net::SocketAddrV4;

use fast_hash::FastMap;
use rusnic_core::fault::{FaultConfig, FaultInjector};
use rusnic_core::wire::MAX_DATA_HEADER_LEN;
use rusnic_core::{
    Channel, Config, ConfigError, Endpoint, Event, Instant, Key, SendError, Shared, Stats, Transmit,
};

use crate::backend::{Backend, index};
use crate::raw_put::RegionWriter;

/// Datagrams taken from the core per transmit pass before they go to the backend.
const TX_BATCH: usize = 128;

/// A send or put the core refused as busy, in submission order.
struct Waiting {
    peer: u64,
    id: u64,
    tag: u8,
    /// The peer's address for a put.
    put_addr: Option<u64>,
    data: Shared,
    len: usize,
}

impl Waiting {
    fn offer(&self, core: &mut Endpoint) -> Result<(), SendError> {
        let data = self.data.clone();
        match self.put_addr {
            Some(addr) => core.put_shared(self.peer, self.id, addr, data, self.len),
            None => core.send_shared(self.peer, self.id, self.tag, data, self.len),
        }
    }
}

pub struct Engine {
    local_id: u64,
    /// Our secret, published to the job in the modex: every datagram must carry its tag.
    key: Key,
    /// Created at the first add_procs, when ob1's effective fragment limits are known.
    core: Option<Endpoint>,
    backend: Box<dyn Backend>,
    /// Each peer's priority and data channel addresses.
    addrs: FastMap<u64, [SocketAddrV4; 2]>,
    /// Datagrams the backend could not take yet (full socket buffer), per channel.
    backlog: [VecDeque<(SocketAddrV4, Transmit)>; 2],
    /// Each channel's datagrams of one transmit pass (kept: a send allocates nothing).
    lanes: [Vec<(SocketAddrV4, Transmit)>; 2],
    /// Fragments the core refused as busy: kept here so a send never fails.
    overflow: VecDeque<Waiting>,
    /// Seeded in-process fault injection, when enabled.
    fault_cfg: Option<(u64, FaultConfig)>,
    /// One injector per (peer, channel) so a held-back datagram keeps its destination.
    faults: FastMap<(u64, usize), FaultInjector>,
    next_id: u64,
    /// Counters of connections already torn down (del_procs runs before finalize).
    retired: Stats,
    scratch: Vec<Vec<u8>>,
    /// Fragments from `overflow` the core refused for good: `SendFailed` for each.
    failed_ids: Vec<u64>,
    /// The last `pump_rx` skipped the data channel (the priority channel had data).
    data_deferred: bool,
    /// Receive the data channel one datagram at a time, PUT payloads straight into
    /// their registered destination (on while such PUTs arrive, see `pump_rx`).
    direct: bool,
}

impl Engine {
    pub fn new(
        (local_id, key): (u64, Key),
        backend: Box<dyn Backend>,
        faults: Option<(u64, FaultConfig)>,
    ) -> Self {
        Engine {
            local_id,
            key,
            core: None,
            backend,
            addrs: FastMap::default(),
            backlog: [VecDeque::new(), VecDeque::new()],
            lanes: [Vec::new(), Vec::new()],
            overflow: VecDeque::new(),
            fault_cfg: faults,
            faults: FastMap::default(),
            next_id: 1,
            retired: Stats::default(),
            scratch: Vec::new(),
            data_deferred: false,
            failed_ids: Vec::new(),
            direct: false,
        }
    }

    /// Creates the core on first use; later calls keep the first configuration.
    pub fn configure(&mut self, cfg: Config) -> Result<(), ConfigError> {
        if self.core.is_none() {
            self.core = Some(Endpoint::new_keyed(cfg, self.local_id, self.key)?);
        }
        Ok(())
    }

    pub fn config_mtu(&self) -> usize {
        self.backend.max_datagram()
    }

    pub fn has_peer(&self, peer: u64) -> bool {
        self.addrs.contains_key(&peer)
    }

    /// Adds a peer from its contact: ISNs, its key (what we send it is tagged with it)
    /// and its two channels' addresses.
    pub fn add_peer(
        &mut self,
        peer: u64,
        (local_isn, peer_isn): (u16, u16),
        key: Key,
        addrs: [SocketAddrV4; 2],
    ) {
        if let Some(core) = self.core.as_mut() {
            core.add_peer_keyed(peer, local_isn, peer_isn, key);
            self.addrs.insert(peer, addrs);
        }
    }

    /// Hands what `peer` sent before it was added to its connection (see
    /// `rusnic_core::Endpoint::replay_early`): call it once the peer is set up.
    pub fn replay_early(&mut self, now: Instant, peer: u64) {
        if let Some(core) = self.core.as_mut() {
            core.replay_early(now, peer);
        }
    }

    /// See `rusnic_core::Endpoint::take_new_early_senders`.
    pub fn take_new_early_senders(&mut self) -> Vec<u64> {
        self.core
            .as_mut()
            .map(|core| core.take_new_early_senders())
            .unwrap_or_default()
    }

    /// See `rusnic_core::Connection::set_payload_crc`.
    pub fn set_payload_crc(&mut self, peer: u64, send: bool, require: bool) {
        if let Some(core) = self.core.as_mut() {
            core.set_payload_crc(peer, send, require);
        }
    }

    pub fn remove_peer(&mut self, peer: u64) {
        if let Some(conn) = self.core.as_mut().and_then(|c| c.remove_peer(peer)) {
            self.retired.accumulate(conn.stats());
        }
        self.faults.retain(|(p, _), _| *p != peer);
        self.overflow.retain(|w| w.peer != peer);
        // Nothing may keep lent PUT buffers alive for a peer that is gone.
        if let Some(addrs) = self.addrs.get(&peer).copied() {
            for (lane, addr) in self.backlog.iter_mut().zip(addrs) {
                lane.retain(|(dst, _)| *dst != addr);
            }
        }
        self.addrs.remove(&peer);
    }

    /// Queues the fragment `data[..len]` (shared with the core, not copied); never fails
    /// for lack of resources. Returns the id its `SendComplete` event will carry.
    pub fn send(&mut self, peer: u64, tag: u8, data: Shared, len: usize) -> Result<u64, SendError> {
        self.submit(peer, tag, None, data, len)
    }

    /// Queues an emulated PUT of `data[..len]` to `addr` at the peer, as `send`.
    pub fn put(
        &mut self,
        peer: u64,
        addr: u64,
        data: Shared,
        len: usize,
    ) -> Result<u64, SendError> {
        self.submit(peer, 0, Some(addr), data, len)
    }

    fn submit(
        &mut self,
        peer: u64,
        tag: u8,
        put_addr: Option<u64>,
        data: Shared,
        len: usize,
    ) -> Result<u64, SendError> {
        let core = self.core.as_mut().ok_or(SendError::UnknownPeer)?;
        let waiting = Waiting {
            peer,
            id: self.next_id,
            tag,
            put_addr,
            data,
            len,
        };
        self.next_id += 1;
        let id = waiting.id;
        // Keep per-peer order behind fragments already waiting here.
        if self.overflow.iter().any(|w| w.peer == peer) {
            self.overflow.push_back(waiting);
            return Ok(id);
        }
        match waiting.offer(core) {
            Err(SendError::Busy) => {
                self.overflow.push_back(waiting);
                Ok(id)
            }
            other => other.map(|()| id),
        }
    }

    /// Fragments to `peer` accepted but not yet cut into segments (waiting for window
    /// or credit), in the core or queued here.
    pub fn queued(&self, peer: u64) -> usize {
        let core = self
            .core
            .as_ref()
            .and_then(|c| c.connection(peer))
            .map_or(0, |c| c.queued_fragments());
        core + self.overflow.iter().filter(|w| w.peer == peer).count()
    }

    /// Whether the core would refuse this fragment right now (sendi's fast check).
    pub fn would_queue_outside_core(&self, peer: u64) -> bool {
        self.overflow.iter().any(|w| w.peer == peer)
    }

    /// Reads what arrived, priority channel first (ACKs free window and credits), each
    /// channel until it is drained or `budget_rounds` full batches were read. When the
    /// priority channel had something, the data channel waits for the next call (once:
    /// the call after always reads it), so a small message goes up to ob1 without an
    /// empty receive call in between. PUT data goes to `target` as it arrives.
    pub fn pump_rx(
        &mut self,
        now: Instant,
        budget_rounds: usize,
        target: &mut RegionWriter<'_>,
    ) -> usize {
        let Some(core) = self.core.as_mut() else {
            // Nobody to talk to yet: drain so the kernel buffer cannot fill with stale data.
            let mut n = 0;
            for ch in Channel::ALL {
                n += self.backend.recv(ch, &mut |_| {});
            }
            return n;
        };
        let full = self.backend.recv_batch();
        let mut total = 0;
        for ch in Channel::ALL {
            if ch == Channel::Data {
                if total > 0 && !self.data_deferred {
                    self.data_deferred = true;
                    break;
                }
                self.data_deferred = false;
            }
            if ch == Channel::Data && self.direct {
                let most = full * budget_rounds.max(1);
                match receive_in_place(self.backend.as_mut(), core, now, most, target) {
                    InPlace::Drained(n) | InPlace::Budget(n) => {
                        total += n;
                        continue;
                    }
                    InPlace::Other(n) => {
                        total += n;
                        self.direct = false;
                    }
                }
            }
            let copied_before = target.copied();
            for _ in 0..budget_rounds.max(1) {
                let got = self.backend.recv(ch, &mut |bytes| {
                    core.handle_datagram_into(now, ch, None, bytes, target)
                });
                total += got;
                if got < full {
                    break;
                }
            }
            // PUT payloads were copied out of receive slots: if they may come with a
            // header-only CRC (a same-node peer), receive the next ones in place.
            if ch == Channel::Data
                && target.copied() > copied_before
                && self.backend.receives_in_place()
                && core.peers().any(|c| !c.requires_payload_crc())
            {
                self.direct = true;
            }
        }
        total
    }

    /// Sends delayed ACKs now (see `Connection::flush_delayed_ack`).
    pub fn flush_delayed_acks(&mut self) {
        if let Some(core) = self.core.as_mut() {
            core.flush_delayed_acks();
        }
    }

    pub fn pump_timers(&mut self, now: Instant) {
        if let Some(core) = self.core.as_mut()
            && core.next_timeout().is_some_and(|t| t <= now)
        {
            core.handle_timeout(now);
        }
    }

    fn flush_backlog(&mut self) -> bool {
        for ch in Channel::ALL {
            let q = &mut self.backlog[index(ch)];
            if q.is_empty() {
                continue;
            }
            let sent = self.backend.send(ch, q.make_contiguous());
            q.drain(..sent);
        }
        self.backlog.iter().all(VecDeque::is_empty)
    }

    /// Moves refused fragments into the core, then datagrams from the core to the
    /// backend until the core has nothing more or the backend is full.
    pub fn pump_tx(&mut self, now: Instant) -> usize {
        let Some(core) = self.core.as_mut() else {
            return 0;
        };
        while let Some(w) = self.overflow.front() {
            match w.offer(core) {
                Err(SendError::Busy) => break,
                Ok(()) => {}
                // The peer failed (already reported) while the fragment waited here.
                Err(_) => self.failed_ids.push(w.id),
            }
            self.overflow.pop_front();
        }
        if !self.flush_backlog() {
            return 0;
        }
        let mut total = 0;
        loop {
            let out = &mut self.lanes;
            let core = self.core.as_mut().expect("checked above");
            let mut n = 0;
            while n < TX_BATCH {
                let Some((peer, t)) = core.poll_transmit(now) else {
                    break;
                };
                n += 1;
                let Some(dst) = self.addrs.get(&peer).map(|a| a[index(t.channel)]) else {
                    continue;
                };
                let lane = &mut out[index(t.channel)];
                match &self.fault_cfg {
                    Some((seed, cfg)) => {
                        let ch = index(t.channel);
                        let f = self.faults.entry((peer, ch)).or_insert_with(|| {
                            FaultInjector::new(seed ^ peer.rotate_left(7) ^ ch as u64, cfg.clone())
                        });
                        self.scratch.clear();
                        f.process(t.to_vec(), &mut self.scratch);
                        let ch = t.channel;
                        lane.extend(
                            self.scratch
                                .drain(..)
                                .map(|b| (dst, Transmit::whole(ch, b.into()))),
                        );
                    }
                    None => lane.push((dst, t)),
                }
            }
            if n < TX_BATCH {
                // Idle: release held-back datagrams rather than delay them indefinitely.
                for (&(peer, ch), f) in self.faults.iter_mut() {
                    if let Some(dst) = self.addrs.get(&peer).map(|a| a[ch]) {
                        self.scratch.clear();
                        f.flush(&mut self.scratch);
                        let channel = Channel::ALL[ch];
                        out[ch].extend(
                            self.scratch
                                .drain(..)
                                .map(|b| (dst, Transmit::whole(channel, b.into()))),
                        );
                    }
                }
            }
            for ch in Channel::ALL {
                let lane = &mut self.lanes[index(ch)];
                if lane.is_empty() {
                    continue;
                }
                let sent = self.backend.send(ch, lane);
                total += sent;
                self.backlog[index(ch)].extend(lane.drain(..).skip(sent));
            }
            if n < TX_BATCH || !self.backlog.iter().all(VecDeque::is_empty) {
                break;
            }
        }
        total
    }

    pub fn drain_events(&mut self, out: &mut Vec<(u64, Event)>) {
        // The peer is unknown here; the glue keys its waiting sends by id alone.
        out.extend(
            self.failed_ids
                .drain(..)
                .map(|id| (0, Event::SendFailed { id })),
        );
        if let Some(core) = self.core.as_mut() {
            while let Some(e) = core.poll_event() {
                out.push(e);
            }
        }
    }

    /// Hands a delivered fragment's buffer back to the core for reuse.
    pub fn recycle(&mut self, peer: u64, buf: Vec<u8>) {
        if let Some(core) = self.core.as_mut() {
            core.recycle_buffer(peer, buf);
        }
    }

    pub fn repost(&mut self, peer: u64, n: u32) {
        if let Some(core) = self.core.as_mut() {
            core.repost_rx_buffers(peer, n);
        }
    }

    /// Nothing queued, unsent or unacknowledged to any peer (or only to failed ones).
    pub fn idle(&self) -> bool {
        self.overflow.is_empty()
            && self.backlog.iter().all(VecDeque::is_empty)
            && self
                .core
                .as_ref()
                .is_none_or(|c| c.peers().all(|p| p.is_failed() || p.is_idle()))
    }

    pub fn stats(&self) -> Stats {
        let mut s = self.core.as_ref().map(Endpoint::stats).unwrap_or_default();
        s.accumulate(&self.retired);
        s
    }
}

/// How a run of in-place receives ended.
enum InPlace {
    /// The channel is empty; this many datagrams were received.
    Drained(usize),
    /// The next datagram is not a PUT that can be received in place (it stays queued).
    Other(usize),
    /// This many were received, the most allowed at once.
    Budget(usize),
}

/// Receives up to `most` datagrams of the data channel one at a time, each PUT payload
/// straight into its registered destination: peek the header, check it (header-only
/// CRC, new in the window, inside an open region), then receive the header into a small
/// buffer and the payload in place. This spares the copy out of a receive slot.
fn receive_in_place(
    backend: &mut dyn Backend,
    core: &mut Endpoint,
    now: Instant,
    most: usize,
    target: &mut RegionWriter<'_>,
) -> InPlace {
    let ch = Channel::Data;
    let mut head = [0u8; MAX_DATA_HEADER_LEN];
    for n in 0..most {
        let Some(len) = backend.peek(ch, &mut head) else {
            return InPlace::Drained(n);
        };
        let plan = core
            .peek_put(&head[..len.min(head.len())], len)
            .filter(|(_, p)| core.accepts_placed_put(ch, len, p))
            .and_then(|(hlen, p)| {
                let at = p
                    .put_addr?
                    .checked_add(u64::from(p.chunk.map_or(0, |c| c.offset)))?;
                Some((hlen, target.placement(at, len - hlen)?))
            });
        let Some((hlen, dest)) = plan else {
            return InPlace::Other(n);
        };
        if !backend.recv_placed(ch, &mut head[..hlen], &dest) {
            return InPlace::Drained(n);
        }
        core.handle_datagram_parts_into(now, ch, None, (&head[..hlen], dest.bytes()), target);
    }
    InPlace::Budget(most)
}
