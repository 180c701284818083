//! A small multi-peer front end: demultiplexes datagrams by sender id and round-robins
//! output over connections. It follows the same driving contract as
//! [`crate::Connection`] (inputs, then `poll_transmit`, `poll_event`, `next_timeout`),
//! with the peer id attached to every output. A glue with its own per-peer tables can
//! skip it and drive `Connection`s directly.
//!
//! The driving calls walk only the connections with work: the Endpoint lists a
//! connection when an input reaches it (a send, a datagram, a repost, `connection_mut`)
//! and takes it off when a `poll_transmit` pass found nothing to send there and it has
//! no event and no timer left, since then only another input can give it work. An idle
//! pass therefore costs the same with 16 peers or 1024 (`examples/idle_pass.rs`); timers
//! are still scanned over the listed connections (a timer heap would beat that for
//! thousands of busy peers).

use std::collections::BTreeMap;

use crate::auth::Key;
use crate::config::{Config, ConfigError};
use crate::connection::{Connection, ConnectionParams};
use crate::early::EarlyArrivals;
use crate::event::{Event, PutTarget, SendError, Shared, Transmit};
use crate::stats::Stats;
use crate::time::{Instant, min_deadline};
use crate::wire::{self, Channel, Packet};

#[derive(Debug)]
pub struct Endpoint {
    cfg: Config,
    local_id: u64,
    /// Our secret: every datagram must be tagged with it ([`crate::auth`]).
    key: Key,
    peers: BTreeMap<u64, Connection>,
    /// The peers whose connections may have work (each once; `Connection::listed`),
    /// polled round-robin so one busy peer cannot starve the rest.
    active: Vec<u64>,
    next_tx: usize,
    next_ev: usize,
    /// Counters for datagrams no connection could own (bad bytes, unknown senders).
    stats: Stats,
    /// Genuine datagrams of senders that are not peers yet ([`crate::early`]).
    early: EarlyArrivals,
}

impl Endpoint {
    pub fn new(cfg: Config, local_id: u64) -> Result<Endpoint, ConfigError> {
        cfg.validate()?;
        Ok(Endpoint {
            cfg,
            local_id,
            key: Key::ZERO,
            peers: BTreeMap::new(),
            active: Vec::new(),
            next_tx: 0,
            next_ev: 0,
            stats: Stats::default(),
            early: EarlyArrivals::default(),
        })
    }

    /// An endpoint whose datagrams must carry `key`'s tag: every datagram is checked
    /// against it before anything else is read ([`DecodeError::Foreign`] otherwise,
    /// counted in `num_foreign_recvs`). [`Endpoint::new`] uses [`Key::ZERO`].
    ///
    /// [`DecodeError::Foreign`]: crate::wire::DecodeError::Foreign
    pub fn new_keyed(cfg: Config, local_id: u64, key: Key) -> Result<Endpoint, ConfigError> {
        let mut e = Endpoint::new(cfg, local_id)?;
        e.key = key;
        Ok(e)
    }

    /// Adds (or replaces) the connection to `peer_id` with the ISNs from the modex;
    /// datagrams to it are tagged with [`Key::ZERO`] (see [`Endpoint::add_peer_keyed`]).
    pub fn add_peer(&mut self, peer_id: u64, local_isn: u16, peer_isn: u16) {
        self.add_peer_keyed(peer_id, local_isn, peer_isn, Key::ZERO);
    }

    /// Hands the datagrams that `peer_id` sent before it was added (kept by
    /// [`Endpoint::handle_datagram`]) to its connection, in arrival order. Call it right
    /// after adding the peer: the datagrams are then handled as if they arrived `now`.
    pub fn replay_early(&mut self, now: Instant, peer_id: u64) {
        if !self.peers.contains_key(&peer_id) {
            return;
        }
        for (channel, bytes) in self.early.take(peer_id) {
            self.stats.num_early_replayed += 1;
            self.decode_and_route(now, channel, Some(peer_id), &bytes, None);
        }
    }

    /// Senders not yet peers whose genuine datagrams were first kept since the last call
    /// (each once): a glue that can find such a sender's contact by its id may add it
    /// (then [`Endpoint::replay_early`]) instead of waiting for its upper layer to.
    pub fn take_new_early_senders(&mut self) -> Vec<u64> {
        self.early.take_new_senders()
    }

    /// Adds (or replaces) the connection to `peer_id` with the ISNs and the key from
    /// its modex contact: what we send it is tagged with `peer_key`.
    pub fn add_peer_keyed(&mut self, peer_id: u64, local_isn: u16, peer_isn: u16, peer_key: Key) {
        let params = ConnectionParams {
            local_id: self.local_id,
            peer_id,
            local_isn,
            peer_isn,
            seed: self.local_id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ peer_id,
        };
        let Ok(mut conn) = Connection::new(self.cfg.clone(), params) else {
            // The configuration was validated in `new` and is immutable since.
            return;
        };
        conn.set_keys(self.key, peer_key);
        // A new connection has its connectivity check to run.
        conn.listed = true;
        let replaced = self.peers.insert(peer_id, conn);
        if !replaced.is_some_and(|old| old.listed) {
            self.active.push(peer_id);
        }
    }

    /// `peer_id`'s connection, listed as one that may have work.
    fn touch(&mut self, peer_id: u64) -> Option<&mut Connection> {
        let c = self.peers.get_mut(&peer_id)?;
        if !c.listed {
            c.listed = true;
            self.active.push(peer_id);
        }
        Some(c)
    }

    /// [`Connection::set_payload_crc`] on `peer_id`'s connection.
    pub fn set_payload_crc(&mut self, peer_id: u64, send: bool, require: bool) {
        if let Some(c) = self.touch(peer_id) {
            c.set_payload_crc(send, require);
        }
    }

    pub fn remove_peer(&mut self, peer_id: u64) -> Option<Connection> {
        self.active.retain(|&p| p != peer_id);
        self.peers.remove(&peer_id)
    }

    pub fn connection(&self, peer_id: u64) -> Option<&Connection> {
        self.peers.get(&peer_id)
    }

    /// The connection to `peer_id`, listed as one that may have work (whatever the
    /// caller does with it).
    pub fn connection_mut(&mut self, peer_id: u64) -> Option<&mut Connection> {
        self.touch(peer_id)
    }

    pub fn peers(&self) -> impl Iterator<Item = &Connection> {
        self.peers.values()
    }

    /// How many connections the driving calls walk now (those that may have work).
    #[must_use]
    pub fn listed_peers(&self) -> usize {
        self.active.len()
    }

    pub fn send(&mut self, peer_id: u64, id: u64, tag: u8, data: &[u8]) -> Result<(), SendError> {
        self.touch(peer_id)
            .ok_or(SendError::UnknownPeer)?
            .send(id, tag, data)
    }

    /// [`Connection::send_shared`] to `peer_id`.
    pub fn send_shared(
        &mut self,
        peer_id: u64,
        id: u64,
        tag: u8,
        data: Shared,
        len: usize,
    ) -> Result<(), SendError> {
        self.touch(peer_id)
            .ok_or(SendError::UnknownPeer)?
            .send_shared(id, tag, data, len)
    }

    pub fn put(
        &mut self,
        peer_id: u64,
        id: u64,
        remote_addr: u64,
        data: &[u8],
    ) -> Result<(), SendError> {
        self.touch(peer_id)
            .ok_or(SendError::UnknownPeer)?
            .put(id, remote_addr, data)
    }

    /// [`Connection::put_shared`] to `peer_id`.
    pub fn put_shared(
        &mut self,
        peer_id: u64,
        id: u64,
        remote_addr: u64,
        data: Shared,
        len: usize,
    ) -> Result<(), SendError> {
        self.touch(peer_id)
            .ok_or(SendError::UnknownPeer)?
            .put_shared(id, remote_addr, data, len)
    }

    pub fn repost_rx_buffers(&mut self, peer_id: u64, n: u32) {
        if let Some(c) = self.touch(peer_id) {
            c.repost_rx_buffers(n);
        }
    }

    /// [`Connection::recycle_buffer`] on `peer_id`'s connection.
    pub fn recycle_buffer(&mut self, peer_id: u64, buf: Vec<u8>) {
        if let Some(c) = self.touch(peer_id) {
            c.recycle_buffer(buf);
        }
    }

    /// One datagram from the fabric. `from` is the sender as the fabric knows it (address
    /// vector lookup), if it does; a header claiming another identity is dropped.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        channel: Channel,
        from: Option<u64>,
        bytes: &[u8],
    ) {
        self.receive(now, channel, from, bytes, None);
    }

    /// [`Endpoint::handle_datagram`] with PUT data placed into `target` on arrival
    /// ([`Connection::handle_datagram_into`]).
    pub fn handle_datagram_into(
        &mut self,
        now: Instant,
        channel: Channel,
        from: Option<u64>,
        bytes: &[u8],
        target: &mut dyn PutTarget,
    ) {
        self.receive(now, channel, from, bytes, Some(target));
    }

    /// [`Endpoint::handle_datagram_into`] of a datagram received in two parts (header,
    /// payload), e.g. its payload straight into its destination after
    /// [`Endpoint::accepts_placed_put`].
    pub fn handle_datagram_parts_into(
        &mut self,
        now: Instant,
        channel: Channel,
        from: Option<u64>,
        (head, payload): (&[u8], &[u8]),
        target: &mut dyn PutTarget,
    ) {
        self.stats.num_total_recvs += 1;
        let len = head.len() + payload.len();
        match wire::decode_parts(head, payload, &self.key) {
            Ok(p) => self.route(now, channel, from, len, &p, Some(target)),
            Err(e) => self.stats.count_decode_error(e),
        }
    }

    /// [`wire::peek_put`] with this endpoint's key: the validated header of a PUT
    /// segment with a header-only CRC, from the first bytes of a datagram of `len`.
    #[must_use]
    pub fn peek_put<'a>(&self, prefix: &'a [u8], len: usize) -> Option<(usize, Packet<'a>)> {
        wire::peek_put(prefix, len, &self.key)
    }

    /// [`Connection::accepts_placed_put`] on the connection the header names.
    #[must_use]
    pub fn accepts_placed_put(&self, channel: Channel, len: usize, p: &Packet<'_>) -> bool {
        self.peers
            .get(&p.sender)
            .is_some_and(|c| c.accepts_placed_put(channel, len, p))
    }

    fn receive(
        &mut self,
        now: Instant,
        channel: Channel,
        from: Option<u64>,
        bytes: &[u8],
        target: Option<&mut dyn PutTarget>,
    ) {
        self.stats.num_total_recvs += 1;
        self.decode_and_route(now, channel, from, bytes, target);
    }

    fn decode_and_route(
        &mut self,
        now: Instant,
        channel: Channel,
        from: Option<u64>,
        bytes: &[u8],
        target: Option<&mut dyn PutTarget>,
    ) {
        match wire::decode_keyed(bytes, &self.key) {
            Ok(p) if self.is_early(from, &p) => {
                self.stats.num_unk_recvs += 1;
                if self.early.keep(p.sender, channel, bytes) {
                    self.stats.num_early_kept += 1;
                }
            }
            Ok(p) => self.route(now, channel, from, bytes.len(), &p, target),
            Err(e) => self.stats.count_decode_error(e),
        }
    }

    /// A genuine datagram (it carries our key's tag) of a sender that is not a peer yet,
    /// and not PUT data (which only follows a handshake with an added peer).
    fn is_early(&self, from: Option<u64>, p: &Packet<'_>) -> bool {
        from.is_none_or(|f| f == p.sender)
            && p.put_addr.is_none()
            && !self.peers.contains_key(&p.sender)
    }

    fn route(
        &mut self,
        now: Instant,
        channel: Channel,
        from: Option<u64>,
        len: usize,
        p: &Packet<'_>,
        target: Option<&mut dyn PutTarget>,
    ) {
        if from.is_some_and(|f| f != p.sender) {
            self.stats.num_unk_recvs += 1;
            return;
        }
        match self.touch(p.sender) {
            Some(c) => c.handle_packet(now, channel, len, p, target),
            None => self.stats.num_unk_recvs += 1,
        }
    }

    /// [`Connection::flush_delayed_ack`] on every listed connection (one with nothing
    /// listed has no ACK waiting: its delay would be a timer).
    pub fn flush_delayed_acks(&mut self) {
        for peer in &self.active {
            if let Some(c) = self.peers.get_mut(peer) {
                c.flush_delayed_ack();
            }
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        for peer in &self.active {
            if let Some(c) = self.peers.get_mut(peer)
                && c.next_timeout().is_some_and(|t| t <= now)
            {
                c.handle_timeout(now);
            }
        }
    }

    /// Next datagram for any peer, round-robin so one busy peer cannot starve the rest.
    /// A pass that finds none takes the connections left without work off the list.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<(u64, Transmit)> {
        let n = self.active.len();
        for i in 0..n {
            let idx = (self.next_tx + i) % n;
            let peer = self.active[idx];
            if let Some(t) = self.peers.get_mut(&peer).and_then(|c| c.poll_transmit(now)) {
                self.next_tx = (idx + 1) % n;
                return Some((peer, t));
            }
        }
        // Every listed connection was just asked and had nothing to send.
        let peers = &mut self.peers;
        self.active.retain(|peer| match peers.get_mut(peer) {
            Some(c) if c.quiescent() => {
                c.listed = false;
                false
            }
            Some(_) => true,
            None => false,
        });
        None
    }

    pub fn poll_event(&mut self) -> Option<(u64, Event)> {
        let n = self.active.len();
        for i in 0..n {
            let idx = (self.next_ev + i) % n;
            let peer = self.active[idx];
            if let Some(e) = self.peers.get_mut(&peer).and_then(Connection::poll_event) {
                self.next_ev = (idx + 1) % n;
                return Some((peer, e));
            }
        }
        None
    }

    /// The earliest timer of the listed connections (one off the list has none).
    pub fn next_timeout(&self) -> Option<Instant> {
        self.active
            .iter()
            .filter_map(|peer| self.peers.get(peer))
            .map(Connection::next_timeout)
            .fold(None, min_deadline)
    }

    /// Endpoint-level counters plus every connection's.
    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        for c in self.peers.values() {
            s.accumulate(c.stats());
        }
        s
    }
}
