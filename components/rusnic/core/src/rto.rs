//! Retransmission timeout estimation (RFC 6298) with exponential backoff.

/// SRTT/RTTVAR estimator. Samples must obey Karn's rule: the caller only feeds round
/// trips of segments that were transmitted once.
#[derive(Clone, Debug)]
pub struct RttEstimator {
    srtt: Option<u64>,
    rttvar: u64,
    /// Smallest sample so far (RACK's reordering window is a fraction of it).
    min_rtt: Option<u64>,
    min: u64,
    max: u64,
    initial: u64,
    /// Consecutive timeouts since the last sample; doubles the timeout each.
    backoff: u32,
}

/// Clock granularity G of RFC 6298: our clock is in nanoseconds, but a timer that fires
/// sooner than a microsecond after SRTT is noise, not information.
const GRANULARITY: u64 = 1_000;

impl RttEstimator {
    pub fn new(initial: u64, min: u64, max: u64) -> Self {
        RttEstimator {
            srtt: None,
            rttvar: 0,
            min_rtt: None,
            min,
            max,
            initial,
            backoff: 0,
        }
    }

    pub fn on_sample(&mut self, rtt: u64) {
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                let err = srtt.abs_diff(rtt);
                self.rttvar = (3 * self.rttvar + err) / 4;
                self.srtt = Some((7 * srtt + rtt) / 8);
            }
        }
        // A fresh sample proves the path works again: forget the backoff (RFC 6298 5.7).
        self.backoff = 0;
    }

    /// A retransmission timer expired: double the timeout (RFC 6298 5.5).
    pub fn on_timeout(&mut self) {
        self.backoff = self.backoff.saturating_add(1).min(40);
    }

    /// Timeout without backoff.
    pub fn base(&self) -> u64 {
        let raw = match self.srtt {
            None => self.initial,
            Some(srtt) => srtt.saturating_add(GRANULARITY.max(self.rttvar.saturating_mul(4))),
        };
        raw.clamp(self.min, self.max)
    }

    /// Current timeout, backoff included, clamped to the configured bounds.
    pub fn rto(&self) -> u64 {
        self.base()
            .saturating_mul(1u64 << self.backoff.min(40))
            .clamp(self.min, self.max)
    }

    pub fn srtt(&self) -> Option<u64> {
        self.srtt
    }

    /// Smallest round trip sampled so far.
    pub fn min_rtt(&self) -> Option<u64> {
        self.min_rtt
    }

    pub fn backoff(&self) -> u32 {
        self.backoff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn initial_then_first_sample() {
        let mut e = RttEstimator::new(5 * MS, MS, 1000 * MS);
        assert_eq!(e.rto(), 5 * MS);
        e.on_sample(10 * MS);
        // SRTT = 10, RTTVAR = 5 → RTO = 10 + 4*5 = 30 ms.
        assert_eq!(e.srtt(), Some(10 * MS));
        assert_eq!(e.rto(), 30 * MS);
    }

    #[test]
    fn smoothing_follows_rfc6298() {
        let mut e = RttEstimator::new(5 * MS, 1, u64::MAX);
        e.on_sample(8 * MS);
        e.on_sample(16 * MS);
        // RTTVAR = 3/4*4 + 1/4*|8-16| = 5; SRTT = 7/8*8 + 1/8*16 = 9.
        assert_eq!(e.srtt(), Some(9 * MS));
        assert_eq!(e.min_rtt(), Some(8 * MS));
        assert_eq!(e.rto(), 9 * MS + 20 * MS);
        for _ in 0..200 {
            e.on_sample(2 * MS);
        }
        let s = e.srtt().unwrap();
        assert!(
            s.abs_diff(2 * MS) < 10_000,
            "converges to the steady RTT, got {s}"
        );
        assert!(e.rto() >= 2 * MS + GRANULARITY);
    }

    #[test]
    fn bounded_and_backed_off() {
        let mut e = RttEstimator::new(5 * MS, MS, 64 * MS);
        e.on_sample(10_000); // 10 µs: far below rto_min
        assert_eq!(e.rto(), MS);
        e.on_timeout();
        assert_eq!(e.rto(), 2 * MS);
        e.on_timeout();
        e.on_timeout();
        assert_eq!(e.rto(), 8 * MS);
        for _ in 0..100 {
            e.on_timeout();
        }
        assert_eq!(e.rto(), 64 * MS, "capped at rto_max, no overflow");
        e.on_sample(10_000);
        assert_eq!(e.backoff(), 0);
        assert_eq!(e.rto(), MS);
    }
}
