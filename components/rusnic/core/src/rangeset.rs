//! Sorted set of disjoint half-open `u64` ranges: the receiver's out-of-order map, from
//! which SACK blocks are read without scanning the window.

use std::ops::Range;

#[derive(Debug, Default, Clone)]
pub struct RangeSet {
    // INVARIANT: sorted, disjoint, non-adjacent, non-empty ranges.
    ranges: Vec<Range<u64>>,
}

impl RangeSet {
    pub fn insert(&mut self, v: u64) {
        // First range whose end is >= v: the only ones that can absorb or follow v.
        let i = self.ranges.partition_point(|r| r.end < v);
        if i < self.ranges.len() && self.ranges[i].start <= v {
            if v < self.ranges[i].end {
                return;
            }
            // v == end: extend, then maybe merge with the next range.
            self.ranges[i].end = v + 1;
            if i + 1 < self.ranges.len() && self.ranges[i + 1].start == v + 1 {
                let next = self.ranges.remove(i + 1);
                self.ranges[i].end = next.end;
            }
            return;
        }
        if i < self.ranges.len() && self.ranges[i].start == v + 1 {
            self.ranges[i].start = v;
            return;
        }
        self.ranges.insert(i, v..v + 1);
    }

    /// Forget everything below `floor`.
    pub fn remove_below(&mut self, floor: u64) {
        let drop = self.ranges.partition_point(|r| r.end <= floor);
        self.ranges.drain(..drop);
        if let Some(first) = self.ranges.first_mut() {
            first.start = first.start.max(floor);
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Range<u64>> {
        self.ranges.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn max(&self) -> Option<u64> {
        self.ranges.last().map(|r| r.end - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(s: &RangeSet) -> Vec<(u64, u64)> {
        s.iter().map(|r| (r.start, r.end)).collect()
    }

    #[test]
    fn merges_and_trims() {
        let mut s = RangeSet::default();
        for v in [5, 7, 6, 10, 9, 1, 2, 7] {
            s.insert(v);
        }
        assert_eq!(collect(&s), vec![(1, 3), (5, 8), (9, 11)]);
        s.remove_below(6);
        assert_eq!(collect(&s), vec![(6, 8), (9, 11)]);
        s.remove_below(11);
        assert!(s.is_empty());
    }

    #[test]
    fn matches_a_bitmap() {
        let mut x = 0x9e3779b97f4a7c15u64;
        for _ in 0..50 {
            let mut s = RangeSet::default();
            let mut bits = [false; 200];
            for _ in 0..120 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let v = x % 200;
                bits[v as usize] = true;
                s.insert(v);
            }
            let mut expect = Vec::new();
            let mut i = 0;
            while i < 200 {
                if bits[i] {
                    let st = i;
                    while i < 200 && bits[i] {
                        i += 1;
                    }
                    expect.push((st as u64, i as u64));
                } else {
                    i += 1;
                }
            }
            assert_eq!(collect(&s), expect);
        }
    }
}
