//! A seeded SplitMix64 generator, shared so that every randomized schedule (the
//! protocol simulations, the property tests of the cores) and rusnic's fault injection
//! draw from the same reviewed code; a failure reproduces from its printed seed.
//! Deliberately not a dependency on `rand`: the cores stay dependency-free.

/// SplitMix64: tiny, fast, statistically fine for tests and jitter; not cryptographic.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    #[must_use]
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Multiply-shift: unbiased enough for simulation, no division.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo).saturating_add(1))
    }

    /// True with probability `p` (clamped to 0..=1).
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// True in `percent` out of 100 draws (integer odds for test schedules).
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn the_same_seed_gives_the_same_stream() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn draws_stay_in_their_ranges() {
        let mut rng = Rng::new(7);
        assert_eq!(rng.below(0), 0);
        for _ in 0..10_000 {
            assert!(rng.below(10) < 10);
            assert!((5..=9).contains(&rng.range(5, 9)));
        }
        assert!(!rng.chance(0.0));
        assert!(rng.chance(1.0));
        assert!(!rng.percent(0));
        assert!(rng.percent(100));
    }

    #[test]
    fn every_value_below_a_bound_comes_up() {
        let mut rng = Rng::new(3);
        let mut seen = [false; 16];
        for _ in 0..1000 {
            seen[rng.below(16) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn fill_covers_odd_lengths() {
        let mut rng = Rng::new(9);
        let mut buf = [0u8; 13];
        rng.fill(&mut buf);
        assert!(buf.iter().any(|&b| b != 0));
    }
}
