//! Time-based loss detection (after RFC 8985's RACK): a segment is deemed lost once a
//! segment transmitted *after* it on the same channel was acknowledged (cumulatively or
//! in a SACK block) and more than that segment's round trip plus a reordering window has
//! passed since it was transmitted.
//!
//! Counting duplicate ACKs or SACKed segments above a hole (`SendWindow::detect_losses`)
//! sees each hole once: a retransmission that is lost again leaves the same hole, the
//! count cannot grow, and only the retransmission timeout (at least `rto_min`, 1 ms,
//! against round trips of tens of µs) recovered it. Ordering by transmission instead of by
//! sequence number catches it like any other loss, as soon as a later transmission is
//! acknowledged. It also needs one acknowledged later segment instead of three, so a hole
//! near the end of a flight is repaired without waiting for a probe.
//!
//! Per channel: the priority channel overtakes the data channel legitimately, so only a
//! later transmission on a segment's own channel is evidence against it (resends always
//! use the data channel).

use crate::time::Instant;

/// The most recently transmitted segment known to have arrived, per channel.
#[derive(Clone, Copy, Debug)]
struct Delivered {
    /// Transmission order (`SentSeg::order`) of that transmission.
    order: u64,
    /// Its round trip: from that transmission to the ACK that reported it.
    rtt: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Rack {
    latest: [Option<Delivered>; 2],
}

/// Reordering window: a quarter of the smallest round trip seen (RFC 8985's default),
/// at most the smoothed round trip; none before a round trip was measured.
#[must_use]
pub(crate) fn reorder_window(min_rtt: Option<u64>, srtt: Option<u64>) -> u64 {
    match (min_rtt, srtt) {
        (Some(m), Some(s)) => (m / 4).min(s),
        (Some(m), None) => m / 4,
        _ => 0,
    }
}

/// What `Rack::verdict` says about an outstanding segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// No later transmission on its channel arrived yet: no evidence.
    Unknown,
    /// Lost.
    Lost,
    /// Lost unless it arrives by then (a later one did, but reordering may explain it).
    LostAt(Instant),
}

impl Rack {
    /// A transmission on `channel` (index) of order `order`, sent at `sent_at`, is known
    /// to have arrived by `now`.
    ///
    /// The caller passes the transmission that most likely arrived (`SendWindow`'s
    /// `rack_delivered`). Without timestamps an ACK does not say which copy of a resent
    /// segment arrived, and RFC 8985's test (a retransmission acknowledged sooner than the
    /// smallest round trip was acknowledged for an earlier copy) fails when the receiver
    /// is slow: a retransmission timeout fired because the receiver was descheduled for a
    /// few ms, the originals it then acknowledged were read as the copies just resent, and
    /// that evidence, newer than everything sent before the timeout and with a round trip
    /// of only the time since the resend, condemned segments still queued at the receiver
    /// (in the simulated loaded host every such RACK resend was a duplicate). For a resend
    /// no loss evidence queued, the first copy is passed: whichever copy arrived, the first
    /// was sent no later, so that evidence can come late, never wrong.
    pub fn on_delivered(&mut self, channel: usize, order: u64, sent_at: Instant, now: Instant) {
        let rtt = now.since(sent_at);
        let slot = &mut self.latest[channel];
        if slot.is_none_or(|d| order > d.order) {
            *slot = Some(Delivered { order, rtt });
        }
    }

    /// The newest transmission order acknowledged on either channel: every outstanding
    /// segment transmitted later (of higher order) is beyond any evidence.
    pub fn newest_order(&self) -> Option<u64> {
        self.latest.iter().flatten().map(|d| d.order).max()
    }

    /// Whether the outstanding (neither acknowledged nor SACKed) transmission of order
    /// `order`, sent on `channel` at `sent_at`, is lost at `now`.
    pub fn verdict(
        &self,
        channel: usize,
        order: u64,
        sent_at: Instant,
        now: Instant,
        reo_wnd: u64,
    ) -> Verdict {
        match self.latest[channel] {
            Some(d) if d.order > order => {
                let due = sent_at.plus(d.rtt.saturating_add(reo_wnd));
                if due <= now {
                    Verdict::Lost
                } else {
                    Verdict::LostAt(due)
                }
            }
            _ => Verdict::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    #[test]
    fn the_window_is_a_quarter_of_the_minimum_round_trip() {
        assert_eq!(reorder_window(None, None), 0);
        assert_eq!(reorder_window(Some(40 * US), Some(600 * US)), 10 * US);
        assert_eq!(reorder_window(Some(40 * US), Some(5 * US)), 5 * US);
    }

    #[test]
    fn only_a_later_transmission_on_the_same_channel_is_evidence() {
        let mut r = Rack::default();
        let t0 = Instant(0);
        assert_eq!(r.verdict(1, 5, t0, t0.plus(US), 0), Verdict::Unknown);
        // Order 7 on the data channel (1) arrived 30 µs after it was sent at 2 µs.
        r.on_delivered(1, 7, t0.plus(2 * US), t0.plus(32 * US));
        assert_eq!(r.newest_order(), Some(7));
        // Order 5, sent at 0, 2 µs before it: expected by 30 µs, late by 2 µs of
        // reordering window at 32 µs.
        assert_eq!(r.verdict(1, 5, t0, t0.plus(32 * US), 2 * US), Verdict::Lost);
        // Sent 1 µs before it: lost only if still missing at 1 + 30 + 2 µs.
        assert_eq!(
            r.verdict(1, 5, t0.plus(US), t0.plus(32 * US), 2 * US),
            Verdict::LostAt(t0.plus(33 * US))
        );
        // Transmitted later than the evidence, or on the other channel: unknown.
        assert_eq!(r.verdict(1, 8, t0, t0.plus(99 * US), 0), Verdict::Unknown);
        assert_eq!(r.verdict(0, 5, t0, t0.plus(99 * US), 0), Verdict::Unknown);
        // An older delivery does not move the evidence back.
        r.on_delivered(1, 6, t0, t0.plus(40 * US));
        assert_eq!(r.newest_order(), Some(7));
    }
}
