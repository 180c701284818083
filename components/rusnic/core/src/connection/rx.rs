//! Receive path: validation, ACK processing (sender side), data acceptance and in-order
//! delivery (receiver side).

use super::{AckDue, Connection, RING_IDLE_NS};
use crate::event::{Event, PutTarget};
use crate::reassembly::Placed;
use crate::seq::expand;
use crate::time::Instant;
use crate::window::recv::{Held, RxEntry, Slot};
use crate::wire::{self, AckInfo, Channel, Kind, Packet, Sacks};

impl Connection {
    /// Processes one datagram from this peer that arrived on `channel`. Anything invalid
    /// is counted in [`Connection::stats`] and dropped; nothing here panics on bad input.
    /// PUT data becomes `Event::Put`s, delivered in order.
    pub fn handle_datagram(&mut self, now: Instant, channel: Channel, bytes: &[u8]) {
        self.receive(now, channel, bytes, None);
    }

    /// [`Connection::handle_datagram`], placing PUT data into `target` as it arrives (in
    /// any order, each byte exactly once) instead of queueing a copy as `Event::Put`.
    pub fn handle_datagram_into(
        &mut self,
        now: Instant,
        channel: Channel,
        bytes: &[u8],
        target: &mut dyn PutTarget,
    ) {
        self.receive(now, channel, bytes, Some(target));
    }

    /// Whether a PUT segment with this (peeked) header, `len` bytes long in all, would be
    /// accepted and placed now: new in the window, within the grant, header-only CRC
    /// agreed. A glue that receives such a segment's payload straight into its
    /// destination asks first, so a stale duplicate never writes into memory that may
    /// have been registered again since.
    #[must_use]
    pub fn accepts_placed_put(&self, channel: Channel, len: usize, p: &Packet<'_>) -> bool {
        let mtu = match channel {
            Channel::Priority => self.cfg.mtu_priority,
            Channel::Data => self.cfg.mtu_data,
        };
        !self.failed
            && p.sender == self.peer_id
            && p.put_addr.is_some()
            && !p.payload_crc
            && !self.require_payload_crc
            && p.channel == channel
            && len <= usize::from(mtu)
            && p.chunk
                .is_none_or(|c| c.frag_size <= self.cfg.max_fragment_size)
            && matches!(self.rcv.classify(p.seq), Slot::New(s) if s < self.rx_limit())
    }

    fn receive(
        &mut self,
        now: Instant,
        channel: Channel,
        bytes: &[u8],
        target: Option<&mut dyn PutTarget>,
    ) {
        self.stats.num_total_recvs += 1;
        let p = match wire::decode_keyed(bytes, &self.rx_key) {
            Ok(p) => p,
            Err(e) => {
                self.stats.count_decode_error(e);
                return;
            }
        };
        if p.sender != self.peer_id {
            self.stats.num_unk_recvs += 1;
            return;
        }
        self.handle_packet(now, channel, bytes.len(), &p, target);
    }

    /// Processes a packet already decoded (by [`crate::Endpoint`]) and attributed to us.
    pub(crate) fn handle_packet(
        &mut self,
        now: Instant,
        channel: Channel,
        len: usize,
        p: &Packet<'_>,
        target: Option<&mut dyn PutTarget>,
    ) {
        if self.failed {
            return;
        }
        let mtu = match channel {
            Channel::Priority => self.cfg.mtu_priority,
            Channel::Data => self.cfg.mtu_data,
        };
        if p.channel != channel || len > usize::from(mtu) {
            self.stats.num_malformed_recvs += 1;
            return;
        }
        if !p.payload_crc && self.require_payload_crc {
            // The peer left payload integrity to a path we did not agree to trust.
            self.stats.num_malformed_recvs += 1;
            return;
        }
        if p.chunk
            .is_some_and(|c| c.frag_size > self.cfg.max_fragment_size)
        {
            self.stats.num_malformed_recvs += 1;
            return;
        }
        self.check.first_contact();
        match p.kind {
            Kind::Ping => self
                .check
                .on_ping(p.probe.unwrap_or(wire::Probe { nonce: 0, size: 0 })),
            Kind::Pong => {
                if let Some(pr) = p.probe
                    && self.check.on_pong(pr)
                {
                    self.events.push_back(Event::PathVerified);
                }
            }
            Kind::Ack => {
                if let Some(a) = p.ack {
                    self.on_ack(now, a, &p.sacks, true, p.rnr);
                }
                if p.ack_req {
                    self.ack_due = AckDue::Now;
                }
            }
            Kind::Frag | Kind::Chunk => {
                if let Some(a) = p.ack {
                    self.on_ack(now, a, &p.sacks, false, p.rnr);
                }
                self.on_data(now, p, target);
            }
        }
    }

    /// Sender side: the peer's cumulative ACK, grant, SACK blocks and RNR signal.
    fn on_ack(&mut self, now: Instant, a: AckInfo, sacks: &Sacks, standalone: bool, rnr: bool) {
        self.stats.num_ack_recvs += 1;
        // Valid ACKs lie in [una, una + window], up to 32768 ahead: expanding around the
        // window's middle keeps that whole range within ±16384 of the reference.
        let ack = expand(a.ack, self.snd.una + u64::from(self.cfg.window) / 2);
        if ack < self.snd.una {
            // Reordered or duplicated old ACK: everything in it is already known.
            self.stats.num_old_dup_acks += 1;
            return;
        }
        if ack > self.snd.nxt {
            self.stats.num_bad_acks += 1;
            return;
        }
        let limit = ack + u64::from(a.credits);
        let window_update = limit > self.credit_limit;
        if window_update {
            self.credit_limit = limit;
            self.persist.disarm();
        }
        if ack > self.snd.una {
            let acked = self.snd.ack(ack, now, &mut self.rtt);
            self.events.extend(
                acked
                    .completed
                    .into_iter()
                    .map(|id| Event::SendComplete { id }),
            );
            self.backoff.on_progress();
            self.consecutive_timeouts = 0;
            if self.snd.in_flight() == 0 {
                self.rto_deadline = None;
                if self.snd.ring_grown() {
                    self.ring_idle_deadline = Some(now.plus(RING_IDLE_NS));
                }
            }
            let pto = self.pto();
            self.tail.on_progress(now, self.snd.in_flight() > 0, pto);
        } else if standalone && !window_update && self.snd.in_flight() > 0 {
            self.stats.num_dup_acks += 1;
            if self.snd.dup_ack(u32::from(self.cfg.dup_ack_threshold)) {
                self.stats.num_fast_retrans += 1;
            }
        }
        let min_rtt = self.rtt.min_rtt();
        let mut sack_end = self.snd.una;
        for b in sacks.as_slice() {
            let start = expand(b.start, self.snd.una);
            sack_end = sack_end.max(start + u64::from(b.len));
            self.snd.sack(start, start + u64::from(b.len), now, min_rtt);
        }
        self.snd
            .set_sack_horizon(sacks.len() == wire::MAX_SACK_BLOCKS, sack_end);
        self.stats.num_fast_retrans += self
            .snd
            .detect_losses(u64::from(self.cfg.dup_ack_threshold));
        self.rack_detect(now);
        if rnr {
            self.on_peer_rnr(now);
        }
    }

    /// Receiver side: accept a FRAG or CHUNK into the window and deliver what is in order.
    fn on_data(&mut self, now: Instant, p: &Packet<'_>, target: Option<&mut dyn PutTarget>) {
        let seq = match self.rcv.classify(p.seq) {
            Slot::New(s) => s,
            Slot::Low => {
                // Already delivered: our ACK was lost. Repeat it now.
                self.stats.num_oow_low_recvs += 1;
                self.ack_due = AckDue::Now;
                return;
            }
            Slot::High => {
                self.stats.num_oow_high_recvs += 1;
                self.ack_due = AckDue::Now;
                return;
            }
            Slot::Dup => {
                self.stats.num_dup_recvs += 1;
                self.ack_due = AckDue::Now;
                return;
            }
        };
        if seq >= self.rx_limit() {
            // The sender exceeded our grant (misbehaving, or restarted): we have no buffer.
            self.stats.num_rx_overruns += 1;
            self.rnr_due = true;
            self.ack_due = AckDue::Now;
            return;
        }
        let entry = match (p.kind, p.chunk, p.put_addr) {
            (Kind::Chunk, Some(c), None) => {
                match self.reasm.place(c, p.tag, p.payload, seq == self.rcv.nxt) {
                    Placed::Ok { last: true } => {
                        RxEntry::Held(Held::FinalChunk { frag_id: c.frag_id })
                    }
                    Placed::Ok { last: false } => RxEntry::Placed,
                    Placed::NoSlot | Placed::Mismatch => {
                        // Not accepted, so not acknowledged: the sender will resend it.
                        self.stats.num_badfrag_recvs += 1;
                        return;
                    }
                }
            }
            (_, chunk, Some(addr)) => {
                let offset = chunk.map_or(0, |c| c.offset);
                let ends_put = chunk.is_none_or(|c| {
                    u64::from(c.offset) + p.payload.len() as u64 == u64::from(c.frag_size)
                });
                match target {
                    Some(t) => {
                        let placed = addr
                            .checked_add(u64::from(offset))
                            .is_some_and(|at| t.place(at, p.payload));
                        if !placed {
                            // Not accepted, so not acknowledged (see `PutTarget::place`).
                            self.stats.num_badfrag_recvs += 1;
                            return;
                        }
                        if ends_put {
                            RxEntry::PutEnd
                        } else {
                            RxEntry::Placed
                        }
                    }
                    None => RxEntry::Held(Held::Put {
                        addr,
                        offset,
                        data: p.payload.to_vec(),
                    }),
                }
            }
            _ => RxEntry::Held(Held::Frag {
                tag: p.tag,
                data: p.payload.to_vec(),
            }),
        };
        if p.kind == Kind::Chunk {
            self.stats.num_chunk_recvs += 1;
        } else {
            self.stats.num_frag_recvs += 1;
        }
        if p.put_addr.is_some() {
            self.stats.num_put_recvs += 1;
        }
        self.rcv.store(seq, entry);
        self.stats.max_rcvd_window_size = self.stats.max_rcvd_window_size.max(self.rcv.span());
        if seq != self.rcv.nxt {
            // Out of order: tell the sender at once (with SACK) so it can repair the hole.
            self.ack_due = AckDue::Now;
            return;
        }
        let large_done = self.deliver_in_order();
        self.schedule_ack(now, large_done);
    }

    /// Hands every in-order entry to the glue; true when a reassembled fragment went up or
    /// a placed PUT ended (both are worth an immediate ACK).
    fn deliver_in_order(&mut self) -> bool {
        let mut large_done = false;
        while let Some(e) = self.rcv.pop_in_order() {
            self.unacked += 1;
            let ev = match e {
                RxEntry::Empty | RxEntry::Placed => continue,
                RxEntry::PutEnd => {
                    large_done = true;
                    continue;
                }
                RxEntry::Held(Held::Frag { tag, data }) => Event::Deliver { tag, data },
                RxEntry::Held(Held::Put { addr, offset, data }) => Event::Put {
                    remote_addr: addr,
                    offset,
                    data,
                },
                RxEntry::Held(Held::FinalChunk { frag_id }) => {
                    large_done = true;
                    match self.reasm.take(frag_id) {
                        Some((tag, data)) => Event::Deliver { tag, data },
                        None => {
                            // Only a peer that sends overlapping chunks gets here: every
                            // chunk below this sequence number was accepted and placed.
                            self.stats.num_badfrag_recvs += 1;
                            continue;
                        }
                    }
                }
            };
            self.in_glue += 1;
            self.events.push_back(ev);
        }
        large_done
    }

    fn schedule_ack(&mut self, now: Instant, large_done: bool) {
        let grant_left = self.last_adv_limit.saturating_sub(self.rcv.nxt);
        let urgent = large_done
            || self.rcv.has_gaps()
            || self.unacked >= u32::from(self.cfg.ack_every)
            // The sender is running out of the grant we last told it about.
            || grant_left <= u64::from(self.cfg.rx_buffers / 2);
        if urgent {
            self.ack_due = AckDue::Now;
        } else if self.ack_due == AckDue::None {
            // The first unacknowledged segment starts the clock, bounding the delay.
            self.ack_due = AckDue::At(now.plus(self.cfg.ack_delay));
        }
    }
}
