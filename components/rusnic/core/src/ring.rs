//! Power-of-two ring indexed by sequence number, resized only as a whole.
//!
//! The reference indexed `rcvd_segs[]` with a separately maintained `rfstart` that once
//! held garbage (Cisco bug CSCui88781). Here the slot of a sequence number is always
//! `seq & mask` over a boxed slice whose length is `mask + 1`, fixed at construction, so
//! an out-of-range index cannot be formed: there is no start offset to corrupt. A resize
//! builds a new slice and moves the live entries over, so the invariant holds across it.

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

    /// Gives the ring room for at least `min_capacity` consecutive sequence numbers (more
    /// or fewer slots than now), keeping the entries of `live`, the only sequence numbers
    /// whose slots may be occupied. Caller guarantees `live` fits the new capacity.
    pub fn resize(&mut self, min_capacity: usize, live: std::ops::Range<u64>) {
        let mut next = Ring::new(min_capacity);
        debug_assert!(
            live.end - live.start <= next.mask + 1,
            "live entries must fit"
        );
        for seq in live {
            *next.get_mut(seq) = std::mem::take(self.get_mut(seq));
        }
        *self = next;
    }
}

impl<T> Ring<T> {
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
    fn resizing_keeps_the_live_entries_at_their_sequence_numbers() {
        let mut r: Ring<u64> = Ring::new(4);
        let base = u64::from(u16::MAX) - 1; // straddles a 16-bit wrap and the old mask
        for s in base..base + 4 {
            *r.get_mut(s) = s;
        }
        r.resize(16, base..base + 4);
        assert_eq!(r.capacity(), 16);
        for s in base..base + 16 {
            let expected = if s < base + 4 { s } else { 0 };
            assert_eq!(*r.get(s), expected);
        }
        r.resize(2, base + 2..base + 4);
        assert_eq!(r.capacity(), 2);
        assert_eq!((*r.get(base + 2), *r.get(base + 3)), (base + 2, base + 3));
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
