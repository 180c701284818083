//! Tail-loss probing (after RFC 8985's TLP): when the last segments of a flight are
//! lost, no later segment arrives to reveal the hole, so without a probe only the
//! retransmission timeout (at least `rto_min`, 1 ms, against a round trip of ~10 µs
//! here) recovers them, and a lost ping-pong message costs a hundred round trips. A
//! probe timeout of two smoothed round trips plus the receiver's ACK delay after the
//! latest transmission resends the newest unacknowledged segment: if it was the lost
//! one it arrives now, and if an earlier one was lost the receiver's SACK for the
//! probe starts fast recovery. One probe per flight: more loss is left to the timer.

use crate::time::Instant;

#[derive(Debug, Default)]
pub(crate) struct TailProbe {
    deadline: Option<Instant>,
    /// A probe went out since the cumulative ACK last advanced.
    sent: bool,
}

/// The probe timeout: `None` (no probing) until a round trip was measured, or when the
/// retransmission timeout `rto` comes as soon.
#[must_use]
pub(crate) fn probe_timeout(srtt: Option<u64>, ack_delay: u64, rto: u64) -> Option<u64> {
    let pto = srtt?.saturating_mul(2).saturating_add(ack_delay);
    (pto < rto).then_some(pto)
}

impl TailProbe {
    /// A segment was transmitted (or the ACK advanced) with data in flight: the probe
    /// waits `pto` from now, unless this flight's probe was sent already.
    pub fn arm(&mut self, now: Instant, pto: Option<u64>) {
        if self.sent {
            return;
        }
        self.deadline = pto.map(|p| now.plus(p));
    }

    /// The cumulative ACK advanced: a new flight may be probed again.
    pub fn on_progress(&mut self, now: Instant, in_flight: bool, pto: Option<u64>) {
        self.sent = false;
        self.deadline = None;
        if in_flight {
            self.arm(now, pto);
        }
    }

    /// Returns true when the probe is due now (once per flight).
    pub fn on_timeout(&mut self, now: Instant) -> bool {
        match self.deadline {
            Some(d) if d <= now => {
                self.deadline = None;
                self.sent = true;
                true
            }
            _ => false,
        }
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    #[test]
    fn no_probe_without_a_round_trip_or_when_the_timer_is_as_quick() {
        assert_eq!(probe_timeout(None, 50 * US, 1_000 * US), None);
        assert_eq!(
            probe_timeout(Some(10 * US), 50 * US, 1_000 * US),
            Some(70 * US)
        );
        assert_eq!(probe_timeout(Some(500 * US), 50 * US, 1_000 * US), None);
    }

    #[test]
    fn one_probe_per_flight_rearmed_by_progress() {
        let t0 = Instant(0);
        let mut p = TailProbe::default();
        p.arm(t0, Some(70 * US));
        assert!(!p.on_timeout(t0.plus(69 * US)));
        assert!(p.on_timeout(t0.plus(70 * US)));
        // Further transmissions of the same flight do not re-arm it.
        p.arm(t0.plus(80 * US), Some(70 * US));
        assert_eq!(p.deadline(), None);
        assert!(!p.on_timeout(t0.plus(500 * US)));
        // The ACK advanced with data still in flight: a new probe is armed.
        p.on_progress(t0.plus(600 * US), true, Some(70 * US));
        assert_eq!(p.deadline(), Some(t0.plus(670 * US)));
        // Everything acknowledged: nothing to probe.
        p.on_progress(t0.plus(610 * US), false, Some(70 * US));
        assert_eq!(p.deadline(), None);
    }
}
