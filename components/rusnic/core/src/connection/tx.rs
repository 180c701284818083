//! Transmit path: what goes on the wire next, in priority order.

use super::{AckDue, Connection};
use crate::connectivity::ProbeOut;
use crate::event::{Body, Transmit};
use crate::seq::wire;
use crate::time::Instant;
use crate::window::send::SentSeg;
use crate::wire::{AckInfo, Channel, ChunkInfo, Kind, Packet, Probe, SMALL_PROBE_LEN};

impl Connection {
    /// Next datagram to send, or `None` when nothing is due. Priority: connectivity
    /// probes and answers, an ACK carrying SACK news, retransmissions, new segments
    /// (each piggy-backing the current ACK), a due standalone ACK, a window probe.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if self.failed {
            return None;
        }
        if let Some(t) = self.transmit_probe(now) {
            return Some(t);
        }
        // Data segments cannot carry SACK blocks (their header size must not depend on
        // receive state), so loss news goes ahead of data.
        if self.ack_due == AckDue::Now && self.rcv.has_gaps() {
            return Some(self.transmit_ack(false));
        }
        let backing_off = self.backoff.active(now);
        if !backing_off {
            if let Some(seq) = self.snd.pop_resend()
                && let Some(t) = self.transmit_segment(seq, now, true)
            {
                return Some(t);
            }
            if let Some(t) = self.transmit_new(now) {
                return Some(t);
            }
        }
        let ack_late = matches!(self.ack_due, AckDue::At(t) if t <= now);
        if self.ack_due == AckDue::Now || ack_late || self.rnr_due {
            return Some(self.transmit_ack(false));
        }
        if self.probe_due {
            self.probe_due = false;
            self.stats.num_window_probes += 1;
            return Some(self.transmit_ack(true));
        }
        // Blocked on credit alone with nothing in flight: only a window probe can help if
        // the peer's window update was lost.
        if !self.queue.is_empty() && self.snd.in_flight() == 0 && self.snd.nxt >= self.credit_limit
        {
            self.persist.arm(now, self.rtt.rto());
        } else {
            self.persist.disarm();
        }
        None
    }

    fn ack_info(&self) -> AckInfo {
        AckInfo {
            ack: wire(self.rcv.nxt),
            credits: (self.rx_limit() - self.rcv.nxt) as u16,
        }
    }

    /// Bookkeeping after any datagram that carried our ACK.
    fn ack_sent(&mut self, standalone: bool) {
        self.last_adv_limit = self.rx_limit();
        self.rnr_due = false;
        if standalone || !self.rcv.has_gaps() {
            self.ack_due = AckDue::None;
            self.unacked = 0;
        }
        self.stats.num_total_sends += 1;
    }

    fn transmit_ack(&mut self, ack_req: bool) -> Transmit {
        let mut p = Packet::new(Kind::Ack, Channel::Priority, self.local_id);
        p.ack = Some(self.ack_info());
        p.sacks = self.rcv.sacks();
        p.rnr = self.rnr_due;
        p.ack_req = ack_req;
        let head = p.head_keyed(&self.tx_key);
        self.ack_sent(true);
        self.stats.num_ack_sends += 1;
        Transmit::whole(Channel::Priority, head)
    }

    fn transmit_probe(&mut self, now: Instant) -> Option<Transmit> {
        let (channel, kind, size, nonce) = match self.check.poll(now)? {
            ProbeOut::Ping {
                channel,
                size,
                nonce,
            } => {
                self.stats.num_pings += 1;
                (channel, Kind::Ping, size, nonce)
            }
            ProbeOut::Pong { size, nonce } => (Channel::Priority, Kind::Pong, size, nonce),
        };
        let pad = if kind == Kind::Ping {
            vec![0u8; (size as usize).saturating_sub(SMALL_PROBE_LEN)]
        } else {
            Vec::new()
        };
        let mut p = Packet::new(kind, channel, self.local_id);
        p.probe = Some(Probe { nonce, size });
        p.payload = &pad;
        self.stats.num_total_sends += 1;
        Some(Transmit::whole(
            channel,
            p.to_vec_keyed(&self.tx_key).into(),
        ))
    }

    /// Cuts the next segment from the queue if window and grant allow.
    fn transmit_new(&mut self, now: Instant) -> Option<Transmit> {
        if !self.snd.is_open() || self.snd.nxt >= self.credit_limit {
            return None;
        }
        let put = self.queue.front()?.put_addr.is_some();
        let cap = self.chunk_payload(put);
        let f = self.queue.front_mut()?;
        let total = f.len;
        let (start, len, chunk, channel) = if f.frag_id == 0 {
            (0, total, None, f.channel)
        } else {
            let len = cap.min(total - f.offset);
            let c = ChunkInfo {
                frag_id: f.frag_id,
                frag_size: total as u32,
                offset: f.offset as u32,
            };
            (f.offset, len, Some(c), Channel::Data)
        };
        f.offset = start + len;
        let done = f.offset >= total;
        let seg = SentSeg {
            data: f.data.clone(),
            start,
            len,
            tag: f.tag,
            chunk,
            put_addr: f.put_addr,
            channel,
            sent_at: now,
            transmissions: 0,
            order: 0,
            first: (channel, 0, now),
            sacked: false,
            resend_queued: false,
            fast_retransmitted: false,
            cause: None,
            completes: done.then_some(f.id),
        };
        if done {
            self.queue.pop_front();
        }
        if chunk.is_some() {
            self.stats.num_chunk_sends += 1;
        } else {
            self.stats.num_frag_sends += 1;
        }
        if seg.put_addr.is_some() {
            self.stats.num_put_sends += 1;
        }
        let seq = self.snd.push(seg);
        self.stats.max_sent_window_size = self.stats.max_sent_window_size.max(self.snd.in_flight());
        self.transmit_segment(seq, now, false)
    }

    /// Encodes segment `seq` with the current ACK and starts its timer.
    fn transmit_segment(&mut self, seq: u64, now: Instant, resend: bool) -> Option<Transmit> {
        let ack = self.ack_info();
        let (rnr, local, key) = (self.rnr_due, self.local_id, self.tx_key);
        let send_payload_crc = self.send_payload_crc;
        let seg = self.snd.transmitted(seq, now)?;
        // Resends use the data channel: under congestion the priority channel must stay
        // free for ACKs (the reference's rule).
        if resend {
            seg.channel = Channel::Data;
        }
        let cause = seg.cause;
        let channel = seg.channel;
        let kind = if seg.chunk.is_some() {
            Kind::Chunk
        } else {
            Kind::Frag
        };
        let mut p = Packet::new(kind, channel, local);
        p.seq = wire(seq);
        p.tag = if seg.put_addr.is_some() { 0 } else { seg.tag };
        p.ack = Some(ack);
        p.rnr = rnr;
        p.chunk = seg.chunk;
        p.put_addr = seg.put_addr;
        p.payload_crc = send_payload_crc;
        let (start, end) = (seg.start, seg.start + seg.len);
        p.payload = &seg.data.bytes()[start..end];
        let head = p.head_keyed(&key);
        let body = Body::new(seg.data.clone(), start, end);
        self.ack_sent(false);
        if resend {
            self.stats.num_resends += 1;
            self.last_resend_cause = cause;
        }
        let due = now.plus(self.rtt.rto());
        self.rto_deadline = Some(self.rto_deadline.map_or(due, |d| d.min(due)));
        let pto = self.pto();
        self.tail.arm(now, pto);
        Some(Transmit {
            channel,
            head,
            body,
        })
    }
}
