//! Virtual time. The core never reads a clock: the glue passes `Instant`s in.

/// A point in time, in nanoseconds since an arbitrary origin chosen by the glue.
///
/// Only differences matter, so the glue may use `CLOCK_MONOTONIC` and the simulator a
/// counter starting at zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub u64);

impl Instant {
    /// `self + ns`, saturating so a huge timeout never wraps into the past.
    #[must_use]
    pub fn plus(self, ns: u64) -> Instant {
        Instant(self.0.saturating_add(ns))
    }

    /// Nanoseconds from `earlier` to `self`, zero if `earlier` is later.
    #[must_use]
    pub fn since(self, earlier: Instant) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

/// Earliest of two optional deadlines.
pub(crate) fn min_deadline(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}
