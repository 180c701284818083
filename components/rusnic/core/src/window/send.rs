//! Sender window: every segment from the oldest unacknowledged (`una`) to the next
//! unassigned (`nxt`) sequence number, kept until cumulatively acknowledged.

use crate::event::Shared;
use crate::rack::{Rack, Verdict};
use crate::ring::Ring;
use crate::rto::RttEstimator;
use crate::time::Instant;
use crate::wire::{Channel, ChunkInfo};
use std::collections::VecDeque;

/// One segment awaiting acknowledgement, with what is needed to send it again.
#[derive(Debug)]
pub(crate) struct SentSeg {
    /// The whole fragment the payload is a slice of (shared by its chunks).
    pub data: Shared,
    /// Payload range within `data`.
    pub start: usize,
    pub len: usize,
    pub tag: u8,
    pub chunk: Option<ChunkInfo>,
    pub put_addr: Option<u64>,
    /// Channel of the latest transmission (resends always use the data channel).
    pub channel: Channel,
    /// Last transmission time: the retransmission timer runs from here.
    pub sent_at: Instant,
    /// Transmissions so far (Karn's rule: only 1 gives an RTT sample).
    pub transmissions: u32,
    /// Order of the latest transmission among all of this window's (`crate::rack`).
    pub order: u64,
    /// Channel, order and time of the first transmission: what an ACK proves arrived
    /// (`crate::rack::Rack::on_delivered`).
    pub first: (Channel, u64, Instant),
    /// The receiver reported it in a SACK block; no resend needed.
    pub sacked: bool,
    /// Sits in the resend queue.
    pub resend_queued: bool,
    /// Already fast-retransmitted once; further loss is left to the timer.
    pub fast_retransmitted: bool,
    /// What queued its latest resend (introspection: `Connection::last_resend_cause`).
    pub cause: Option<ResendCause>,
    /// The glue's id of the fragment this segment ends, completed when it is acked.
    pub completes: Option<u64>,
}

/// Why a segment was sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResendCause {
    /// Duplicate ACKs or SACKed segments above it (`num_fast_retrans`).
    Fast,
    /// A later transmission was acknowledged (`num_rack_retrans`).
    Rack,
    /// Its retransmission timer expired (`num_timeout_retrans`).
    Timeout,
    /// A tail-loss probe (`num_tail_probes`).
    TailProbe,
}

/// Tells RACK that `seg` reached the peer, once: a SACKed segment already has.
///
/// Which copy arrived is unknown (`crate::rack::Rack::on_delivered`). A resend that loss
/// evidence queued (SACK, duplicate ACKs, RACK: a later transmission arrived and this one
/// did not) most likely replaced a lost copy, so its latest transmission counts, unless
/// acknowledged sooner than the smallest round trip after it (RFC 8985 6.2 step 2). A
/// resend without such evidence (the timer or a tail probe: often only the receiver was
/// slow) counts as its first transmission, which certainly is not too new.
fn rack_delivered(rack: &mut Rack, seg: &SentSeg, now: Instant, min_rtt: Option<u64>) {
    if seg.sacked {
        return;
    }
    let latest = (seg.channel, seg.order, seg.sent_at);
    let evidence = match seg.cause {
        None => latest,
        Some(ResendCause::Fast | ResendCause::Rack)
            if min_rtt.is_some_and(|m| now.since(seg.sent_at) >= m) =>
        {
            latest
        }
        Some(_) => seg.first,
    };
    let (channel, order, sent_at) = evidence;
    rack.on_delivered(channel as usize, order, sent_at, now);
}

/// Result of a cumulative ACK.
#[derive(Debug, Default)]
pub(crate) struct Acked {
    pub segments: u64,
    pub completed: Vec<u64>,
}

/// Slots of a send ring before it has needed more, and what an idle one returns to.
pub(crate) const SEND_RING_START: usize = 16;

/// The starting slots for `window` (at most `u16::MAX`): never more than it needs.
fn start_slots(window: u64) -> usize {
    SEND_RING_START.min(window as usize)
}

/// The ring starts at [`SEND_RING_START`] slots and doubles whenever the segments in
/// flight fill it, up to the window; the connection shrinks it back once the window
/// has stayed empty a while ([`SendWindow::shrink_if_empty`]). A peer that never
/// carried traffic costs 16 entries (about 2 KiB) instead of the window's 4096 (the
/// receiver's grant, 256 at the defaults, bounds what is in flight in practice).
#[derive(Debug)]
pub(crate) struct SendWindow {
    ring: Ring<Option<SentSeg>>,
    window: u64,
    /// Oldest unacknowledged sequence number.
    pub una: u64,
    /// Next sequence number to assign.
    pub nxt: u64,
    /// Per channel: one past the highest SACKed sequence number last sent on it.
    sacked_end: [u64; 2],
    /// Per channel: next sequence number to examine for SACK-based loss.
    loss_scan: [u64; 2],
    /// Consecutive duplicate ACKs at the current `una`.
    dupacks: u32,
    /// Sequence numbers to send again, oldest evidence first.
    resend: VecDeque<u64>,
    /// Order of the next transmission.
    next_order: u64,
    /// The newest transmission known to have arrived, per channel.
    rack: Rack,
    /// The latest ACK carried as many SACK blocks as fit, so the receiver may hold
    /// segments from here on that it did not report: RACK judges none of them.
    sack_horizon: Option<u64>,
}

impl SendWindow {
    pub fn new(window: u16, start: u64) -> Self {
        SendWindow {
            ring: Ring::new(start_slots(u64::from(window))),
            window: u64::from(window),
            una: start,
            nxt: start,
            sacked_end: [0; 2],
            loss_scan: [start; 2],
            dupacks: 0,
            resend: VecDeque::new(),
            next_order: 0,
            rack: Rack::default(),
            sack_horizon: None,
        }
    }

    pub fn in_flight(&self) -> u64 {
        self.nxt - self.una
    }

    /// Slots the ring holds now (introspection: memory per peer).
    pub fn ring_capacity(&self) -> usize {
        self.ring.capacity()
    }

    /// Whether the ring holds more than it starts with.
    pub fn ring_grown(&self) -> bool {
        self.ring.capacity() > start_slots(self.window)
    }

    /// Returns the ring to its starting size when nothing is in flight (an idle peer
    /// gives back what a burst made it take).
    pub fn shrink_if_empty(&mut self) {
        if self.in_flight() == 0 && self.ring_grown() {
            self.ring
                .resize(start_slots(self.window), self.una..self.nxt);
        }
    }

    pub fn is_open(&self) -> bool {
        self.in_flight() < self.window
    }

    /// Records a new segment and returns its sequence number. Caller checks `is_open`.
    pub fn push(&mut self, seg: SentSeg) -> u64 {
        debug_assert!(self.is_open());
        if self.in_flight() == self.ring.capacity() as u64 {
            self.ring
                .resize(self.ring.capacity() * 2, self.una..self.nxt);
        }
        let seq = self.nxt;
        *self.ring.get_mut(seq) = Some(seg);
        self.nxt += 1;
        seq
    }

    /// Segment `seq` is being transmitted (again) at `now`: stamps it.
    pub fn transmitted(&mut self, seq: u64, now: Instant) -> Option<&mut SentSeg> {
        let order = self.next_order;
        self.next_order += 1;
        let seg = self.get_mut(seq)?;
        seg.sent_at = now;
        seg.transmissions += 1;
        seg.order = order;
        if seg.transmissions == 1 {
            seg.first = (seg.channel, order, now);
        }
        Some(seg)
    }

    pub fn get_mut(&mut self, seq: u64) -> Option<&mut SentSeg> {
        if (self.una..self.nxt).contains(&seq) {
            self.ring.get_mut(seq).as_mut()
        } else {
            None
        }
    }

    /// Everything below `ack` arrived. Caller guarantees `una <= ack <= nxt`.
    pub fn ack(&mut self, ack: u64, now: Instant, rtt: &mut RttEstimator) -> Acked {
        let mut out = Acked::default();
        let mut sample = None;
        let min_rtt = rtt.min_rtt();
        while self.una < ack {
            if let Some(seg) = self.ring.get_mut(self.una).take() {
                if seg.transmissions == 1 {
                    sample = Some(now.since(seg.sent_at));
                }
                rack_delivered(&mut self.rack, &seg, now, min_rtt);
                if let Some(id) = seg.completes {
                    out.completed.push(id);
                }
            }
            self.una += 1;
            out.segments += 1;
        }
        if let Some(s) = sample {
            rtt.on_sample(s);
        }
        for p in &mut self.loss_scan {
            *p = (*p).max(self.una);
        }
        self.dupacks = 0;
        out
    }

    /// A standalone ACK repeated `una`; returns true when the oldest segment was queued
    /// for fast retransmit. The classic rule (`threshold` duplicates) is guarded: some
    /// later segment on the *same channel* must have been SACKed, because segments on the
    /// other channel overtake legitimately and prove nothing about loss.
    pub fn dup_ack(&mut self, threshold: u32) -> bool {
        if self.in_flight() == 0 {
            return false;
        }
        self.dupacks += 1;
        let una = self.una;
        let ch = match self.get_mut(una) {
            Some(s) => s.channel as usize,
            None => return false,
        };
        if self.dupacks >= threshold && self.sacked_end[ch] > una {
            return self.fast_retransmit(una);
        }
        false
    }

    fn fast_retransmit(&mut self, seq: u64) -> bool {
        let Some(seg) = self.get_mut(seq) else {
            return false;
        };
        if seg.sacked || seg.resend_queued || seg.fast_retransmitted {
            return false;
        }
        seg.fast_retransmitted = true;
        seg.resend_queued = true;
        seg.cause = Some(ResendCause::Fast);
        self.resend.push_back(seq);
        true
    }

    /// Marks `[start, end)` (clipped to the window) as received out of order, reported
    /// at `now`.
    pub fn sack(&mut self, start: u64, end: u64, now: Instant, min_rtt: Option<u64>) {
        let (s, e) = (start.max(self.una), end.min(self.nxt));
        for seq in s..e {
            if let Some(seg) = self.ring.get_mut(seq).as_mut() {
                rack_delivered(&mut self.rack, seg, now, min_rtt);
                seg.sacked = true;
                let ch = seg.channel as usize;
                self.sacked_end[ch] = self.sacked_end[ch].max(seq + 1);
            }
        }
    }

    /// The latest ACK's SACK list was full (`truncated`) and reported nothing at or above
    /// `end`: what the receiver holds up there is unknown. A full list reports the lowest
    /// ranges, so a segment above them may have arrived long ago, before a later
    /// transmission (a resend of a lower hole) that the list does report.
    pub fn set_sack_horizon(&mut self, truncated: bool, end: u64) {
        self.sack_horizon = truncated.then_some(end);
    }

    /// Queues every unSACKed segment at least `threshold` sequence numbers below the
    /// highest SACKed segment of its own channel (forward-acknowledgement loss inference,
    /// per channel: each channel is a FIFO queue, but the priority channel overtakes the
    /// data channel, which must not count as loss). Each channel's scan only moves
    /// forward, so the cost is amortised O(1) per segment. Returns how many were queued.
    pub fn detect_losses(&mut self, threshold: u64) -> u64 {
        let mut n = 0;
        for ch in 0..2 {
            while self.loss_scan[ch] < self.nxt {
                let seq = self.loss_scan[ch];
                let Some(seg) = self.ring.get(seq).as_ref() else {
                    self.loss_scan[ch] += 1;
                    continue;
                };
                if seg.channel as usize == ch && !seg.sacked {
                    if seq + threshold >= self.sacked_end[ch] {
                        break;
                    }
                    if self.fast_retransmit(seq) {
                        n += 1;
                    }
                }
                self.loss_scan[ch] += 1;
            }
        }
        n
    }

    /// Queues every outstanding segment that a later transmission on its channel proves
    /// lost (`crate::rack`), whether or not it was sent again before. Returns how many
    /// were queued and when the next one would be lost if it does not arrive meanwhile.
    /// Segments are scanned from `una` and the scan ends at the first one transmitted
    /// once and after the newest acknowledged transmission: every later sequence number
    /// was first transmitted after it.
    pub fn rack_detect(&mut self, now: Instant, reo_wnd: u64) -> (u64, Option<Instant>) {
        let Some(newest) = self.rack.newest_order() else {
            return (0, None);
        };
        let mut n = 0;
        let mut next: Option<Instant> = None;
        let end = self
            .sack_horizon
            .map_or(self.nxt, |h| h.clamp(self.una, self.nxt));
        for seq in self.una..end {
            let Some(seg) = self.ring.get(seq).as_ref() else {
                continue;
            };
            if seg.transmissions == 1 && seg.order > newest {
                break;
            }
            if seg.sacked || seg.resend_queued {
                continue;
            }
            let verdict =
                self.rack
                    .verdict(seg.channel as usize, seg.order, seg.sent_at, now, reo_wnd);
            match verdict {
                Verdict::Unknown => {}
                Verdict::LostAt(t) => next = Some(next.map_or(t, |d| d.min(t))),
                Verdict::Lost => {
                    if let Some(seg) = self.ring.get_mut(seq).as_mut() {
                        seg.resend_queued = true;
                        seg.cause = Some(ResendCause::Rack);
                        self.resend.push_back(seq);
                        n += 1;
                    }
                }
            }
        }
        (n, next)
    }

    /// The retransmission timer: queues the oldest segment whose timer expired (RFC 6298
    /// 5.4: the earliest unacknowledged segment); every other expired one waits another
    /// `rto`. Returns the count (0 or 1) and the next expiry.
    ///
    /// Resending every expired segment at once cost most on a loaded host: a receiver
    /// descheduled for a few ms holds a whole credit window when the timer fires, and that
    /// many 64 KiB duplicates (8 MiB at 128 credits) then queue behind the originals,
    /// delaying its ACKs past the next timeout and overflowing its socket (real loopback:
    /// 1000-2200 timeout resends in one lossless 4 MiB `bw` run, bandwidth down to a
    /// quarter). If the flight was really lost, the resend's ACK, a tail probe's SACK and
    /// RACK find the other holes within round trips.
    pub fn expire(&mut self, now: Instant, rto: u64) -> (u64, Option<Instant>) {
        let mut n = 0;
        let mut next: Option<Instant> = None;
        for seq in self.una..self.nxt {
            let Some(seg) = self.ring.get_mut(seq).as_mut() else {
                continue;
            };
            if seg.sacked || seg.resend_queued {
                continue;
            }
            let mut due = seg.sent_at.plus(rto);
            if due <= now && n > 0 {
                // Not resent now: looked at again one timeout later.
                due = now.plus(rto);
            }
            if due <= now {
                seg.resend_queued = true;
                seg.cause = Some(ResendCause::Timeout);
                self.resend.push_back(seq);
                n += 1;
            } else {
                next = Some(next.map_or(due, |d| d.min(due)));
            }
        }
        (n, next)
    }

    /// Queues the newest segment not yet acknowledged, SACKed or queued (a tail-loss
    /// probe, `crate::tail_probe`); returns whether there was one.
    pub fn tail_probe(&mut self) -> bool {
        for seq in (self.una..self.nxt).rev() {
            let Some(seg) = self.ring.get_mut(seq).as_mut() else {
                continue;
            };
            if seg.sacked {
                continue;
            }
            if seg.resend_queued {
                // Already on its way again: that resend probes as well.
                return false;
            }
            seg.resend_queued = true;
            seg.cause = Some(ResendCause::TailProbe);
            self.resend.push_back(seq);
            return true;
        }
        false
    }

    /// Next segment to send again, skipping ones acknowledged since they were queued.
    pub fn pop_resend(&mut self) -> Option<u64> {
        while let Some(seq) = self.resend.pop_front() {
            let una = self.una;
            if let Some(seg) = self.get_mut(seq) {
                seg.resend_queued = false;
                if !seg.sacked && seq >= una {
                    return Some(seq);
                }
            }
        }
        None
    }

    pub fn resend_len(&self) -> usize {
        self.resend.len()
    }

    /// Empties the window (connection failure), returning the ids it still owed.
    pub fn abandon(&mut self) -> Vec<u64> {
        let mut ids = Vec::new();
        for seq in self.una..self.nxt {
            if let Some(seg) = self.ring.get_mut(seq).take() {
                ids.extend(seg.completes);
            }
        }
        self.una = self.nxt;
        self.resend.clear();
        ids
    }
}
