//! Fixed-capacity ring indexed by sequence number.
//!
//! The reference indexed `rcvd_segs[]` with a separately maintained `rfstart` that once
//! held garbage (Cisco bug CSCui88781). Here the slot of a sequence number is always
//! `seq & mask` over a boxed slice whose length is `mask + 1`, fixed at construction, so
//! an out-of-range index cannot be formed: there is no start offset to corrupt.

/// A power-of-two ring of `T`, addressed by `u64` sequence numbers.
#[derive(Debug)]
pub struct Ring<T> {
    slots: Box<[T]>,
    // INVARIANT: slots.len() == mask + 1 and is a power of two.
    mask: u64,
}

impl<T: Default> Ring<T> {
    /// A ring with room for at least `min_capacity` consecutive sequence numbers.
    pub fn new(min_capacity: usize) -> Self {
        let cap = min_capacity.max(1).next_power_of_two();
        let slots: Box<[T]> = (0..cap).map(|_| T::default()).collect();
        Ring {
            mask: cap as u64 - 1,
            slots,
        }
    }
}

impl<T> Ring<T> {
    #[cfg(test)]
    /// Number of slots; consecutive sequence numbers up to this many never collide.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    fn index(&self, seq: u64) -> usize {
        // Masked by a value < slots.len(): in range by construction.
        (seq & self.mask) as usize
    }

    pub fn get(&self, seq: u64) -> &T {
        &self.slots[self.index(seq)]
    }

    pub fn get_mut(&mut self, seq: u64) -> &mut T {
        let i = self.index(seq);
        &mut self.slots[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_sequence_number_maps_in_range() {
        let mut r: Ring<u32> = Ring::new(100);
        assert_eq!(r.capacity(), 128);
        for s in [0u64, 127, 128, u64::MAX, u64::MAX - 1, 1 << 63] {
            *r.get_mut(s) += 1;
        }
        assert_eq!(*r.get(u64::MAX), 2); // u64::MAX and 127 share a slot
    }

    #[test]
    fn consecutive_numbers_do_not_collide() {
        let mut r: Ring<u64> = Ring::new(4096);
        let base = (1u64 << 16) + 65530;
        for s in base..base + 4096 {
            *r.get_mut(s) = s;
        }
        for s in base..base + 4096 {
            assert_eq!(*r.get(s), s);
        }
    }
}
