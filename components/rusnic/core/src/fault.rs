//! Seeded randomness and fault injection, public so the glue can inject the same faults
//! into real traffic (e.g. behind an MCA variable) that the simulator uses.

pub use seeded_rng::Rng;

/// Probabilities (0.0..=1.0) of each fault, applied independently per datagram.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultConfig {
    pub drop: f64,
    pub duplicate: f64,
    /// Hold the datagram back and release it after the next one.
    pub reorder: f64,
    /// Flip one to three random bits.
    pub corrupt: f64,
    /// Cut the datagram at a random length.
    pub truncate: f64,
}

/// What the injector did so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    pub passed: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
    pub truncated: u64,
}

/// Applies [`FaultConfig`] to a stream of datagrams, deterministically from its seed.
#[derive(Debug)]
pub struct FaultInjector {
    rng: Rng,
    cfg: FaultConfig,
    held: Option<Vec<u8>>,
    pub stats: FaultStats,
}

impl FaultInjector {
    #[must_use]
    pub fn new(seed: u64, cfg: FaultConfig) -> Self {
        FaultInjector {
            rng: Rng::new(seed),
            cfg,
            held: None,
            stats: FaultStats::default(),
        }
    }

    /// Feeds one datagram; appends what should really be sent (zero or more) to `out`.
    pub fn process(&mut self, mut d: Vec<u8>, out: &mut Vec<Vec<u8>>) {
        if self.rng.chance(self.cfg.drop) {
            self.stats.dropped += 1;
            return;
        }
        if !d.is_empty() && self.rng.chance(self.cfg.corrupt) {
            let flips = self.rng.range(1, 3);
            for _ in 0..flips {
                let i = self.rng.below(d.len() as u64) as usize;
                d[i] ^= 1 << self.rng.below(8);
            }
            self.stats.corrupted += 1;
        }
        if !d.is_empty() && self.rng.chance(self.cfg.truncate) {
            let n = self.rng.below(d.len() as u64) as usize;
            d.truncate(n);
            self.stats.truncated += 1;
        }
        let dup = self.rng.chance(self.cfg.duplicate).then(|| d.clone());
        if self.held.is_none() && self.rng.chance(self.cfg.reorder) {
            self.stats.reordered += 1;
            self.held = Some(d);
        } else {
            out.push(d);
            self.stats.passed += 1;
            if let Some(h) = self.held.take() {
                out.push(h);
                self.stats.passed += 1;
            }
        }
        if let Some(c) = dup {
            self.stats.duplicated += 1;
            out.push(c);
        }
    }

    /// Releases a held-back datagram (call when the stream goes idle).
    pub fn flush(&mut self, out: &mut Vec<Vec<u8>>) {
        if let Some(h) = self.held.take() {
            out.push(h);
            self.stats.passed += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
            let v = a.range(3, 9);
            b.range(3, 9);
            assert!((3..=9).contains(&v));
        }
        assert_eq!(a.below(0), 0);
    }

    #[test]
    fn injector_rates_roughly_hold_and_replay() {
        let cfg = FaultConfig {
            drop: 0.1,
            duplicate: 0.1,
            reorder: 0.1,
            corrupt: 0.1,
            truncate: 0.0,
        };
        let run = || {
            let mut f = FaultInjector::new(7, cfg.clone());
            let mut out = Vec::new();
            for i in 0..10_000u32 {
                f.process(i.to_le_bytes().to_vec(), &mut out);
            }
            f.flush(&mut out);
            (out, f.stats)
        };
        let (o1, s1) = run();
        let (o2, s2) = run();
        assert_eq!(o1, o2);
        assert_eq!(s1, s2);
        for n in [s1.dropped, s1.duplicated, s1.corrupted] {
            assert!((800..1200).contains(&n), "{s1:?}");
        }
        // Reordering only starts while nothing is held back, so it fires a bit less often.
        assert!((600..1100).contains(&s1.reordered), "{s1:?}");
        assert_eq!(o1.len() as u64, 10_000 - s1.dropped + s1.duplicated);
    }
}
