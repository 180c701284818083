//! Flow control: the peer's receive-buffer grant, receiver-not-ready backoff, and the
//! probe that reopens a closed grant whose update was lost.
//!
//! The grant follows the fix of the LAM/MPI flow-control bug: a receiver advertises
//! `credits` = buffers it has *actually* available beyond its cumulative ACK
//! (`rx_buffers − deliveries the upper layer has not returned`), so `ack + credits` only
//! grows when buffers are reposted, never merely because datagrams were received.

use crate::fault::Rng;
use crate::time::Instant;

/// Random exponential backoff per peer after the peer signalled receiver-not-ready (RNR),
/// as EFA does: stop sending data until progress is seen or a random timer expires.
#[derive(Debug)]
pub(crate) struct Backoff {
    until: Option<Instant>,
    exponent: u32,
    min: u64,
    max: u64,
}

impl Backoff {
    pub fn new(min: u64, max: u64) -> Self {
        Backoff {
            until: None,
            exponent: 0,
            min,
            max,
        }
    }

    /// Enters (or extends) backoff; the span doubles with each RNR until progress.
    pub fn on_rnr(&mut self, now: Instant, rng: &mut Rng) {
        let span = self
            .min
            .saturating_mul(1u64 << self.exponent.min(40))
            .min(self.max);
        // Uniform in [span/2, span]: randomised so that peers backing off from the same
        // receiver do not return in lockstep.
        let delay = span / 2 + rng.below(span / 2 + 1);
        self.until = Some(now.plus(delay.max(1)));
        self.exponent = self.exponent.saturating_add(1);
    }

    /// The peer acknowledged new data: it is keeping up again.
    pub fn on_progress(&mut self) {
        self.until = None;
        self.exponent = 0;
    }

    pub fn active(&self, now: Instant) -> bool {
        self.until.is_some_and(|u| now < u)
    }

    /// Ends an expired backoff; the exponent stays so that a repeated RNR waits longer.
    pub fn on_timeout(&mut self, now: Instant) {
        if self.until.is_some_and(|u| now >= u) {
            self.until = None;
        }
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.until
    }
}

/// Zero-window probing: with data queued, nothing in flight and no credit, a lost window
/// update would stall the sender forever; an ACK_REQ every (backed-off) RTO fetches a fresh one.
#[derive(Debug, Default)]
pub(crate) struct Persist {
    deadline: Option<Instant>,
    interval: u64,
}

impl Persist {
    /// Called whenever the sender finds itself blocked on credit alone.
    pub fn arm(&mut self, now: Instant, rto: u64) {
        if self.deadline.is_none() {
            self.interval = rto;
            self.deadline = Some(now.plus(rto));
        }
    }

    /// The grant grew or the sender is no longer blocked.
    pub fn disarm(&mut self) {
        self.deadline = None;
    }

    /// Returns true when a probe is due; re-arms with a doubled interval.
    pub fn on_timeout(&mut self, now: Instant, max: u64) -> bool {
        match self.deadline {
            Some(d) if d <= now => {
                self.interval = self.interval.saturating_mul(2).min(max).max(1);
                self.deadline = Some(now.plus(self.interval));
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

    #[test]
    fn backoff_grows_randomly_and_ends_on_progress_or_timer() {
        let mut rng = Rng::new(1);
        let mut b = Backoff::new(1000, 16_000);
        let now = Instant(0);
        b.on_rnr(now, &mut rng);
        let d1 = b.deadline().unwrap().0;
        assert!((500..=1000).contains(&d1), "{d1}");
        assert!(b.active(Instant(d1 - 1)) && !b.active(Instant(d1)));
        for _ in 0..10 {
            b.on_rnr(now, &mut rng);
        }
        let d = b.deadline().unwrap().0;
        assert!((8000..=16_000).contains(&d), "capped: {d}");
        b.on_timeout(Instant(d));
        assert!(b.deadline().is_none());
        b.on_rnr(now, &mut rng);
        assert!(
            b.deadline().unwrap().0 >= 8000,
            "exponent survives a timer expiry"
        );
        b.on_progress();
        assert!(!b.active(now));
        b.on_rnr(now, &mut rng);
        assert!(
            b.deadline().unwrap().0 <= 1000,
            "progress resets the exponent"
        );
    }

    #[test]
    fn persist_doubles() {
        let mut p = Persist::default();
        p.arm(Instant(0), 10);
        p.arm(Instant(5), 10);
        assert_eq!(p.deadline(), Some(Instant(10)));
        assert!(!p.on_timeout(Instant(9), 100));
        assert!(p.on_timeout(Instant(10), 100));
        assert_eq!(p.deadline(), Some(Instant(30)));
        p.disarm();
        assert!(p.deadline().is_none());
    }
}
