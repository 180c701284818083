//! A fast hasher for maps keyed by small integers the job itself makes (rofi's
//! communicator ids, process names, operation ids, handle addresses; rusnic's peer ids
//! and send ids).
//!
//! std's default (SipHash-1-3, seeded per map) costs about 100 instructions per lookup:
//! counted with callgrind, rofi's host matching's sequence number alone took a fifth of
//! an 8-byte `MPI_Isend` on shm, and rusnic's peer lookups a tenth of a received message.
//! SipHash guards maps against keys an adversary picks; these keys come from the job's
//! own processes (a rusnic datagram from outside the job is dropped by its tag before any
//! lookup, and only the job's own processes are ever inserted), so a multiply-and-add per
//! word is enough.
//! A product's low bits depend only on the key's low bits (handle addresses, aligned, have
//! theirs all zero), so `finish` folds the well-mixed high half into them: hashbrown
//! takes the bucket from the low bits and a control byte from the top seven.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// An odd constant with bits spread over the word (from the golden ratio).
const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

#[derive(Clone, Copy, Debug, Default)]
pub struct FastHasher(u64);

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(MULTIPLIER);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

/// A `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::hash::{BuildHasher, Hash};

    fn hash_of(v: impl Hash) -> u64 {
        BuildHasherDefault::<FastHasher>::default().hash_one(v)
    }

    #[test]
    fn keys_that_differ_in_one_field_hash_apart() {
        // Channels: (communicator id, process name = jobid << 32 | vpid).
        let mut seen = HashSet::new();
        for cid in 0..64u32 {
            for vpid in 0..64u64 {
                assert!(seen.insert(hash_of((cid, (7u64 << 32) | vpid))));
            }
        }
        // Buckets come from the low bits: consecutive ids and 64-byte aligned addresses
        // spread over them (256 random bytes would take about 162 values).
        let low: HashSet<u64> = (0..256u64).map(|id| hash_of(id) & 0xff).collect();
        assert!(low.len() > 128, "{} distinct low bytes", low.len());
        let aligned: HashSet<u64> = (0..256u64)
            .map(|i| hash_of(0x7f00_1234_0000usize + 64 * i as usize) & 0xff)
            .collect();
        assert!(aligned.len() > 128, "{} distinct low bytes", aligned.len());
    }

    #[test]
    fn a_map_works_as_a_map() {
        let mut m: FastMap<(u32, u64), u32> = FastMap::default();
        for i in 0..1000u32 {
            *m.entry((i % 7, u64::from(i))).or_insert(0) += i;
        }
        assert_eq!(m.len(), 1000);
        assert_eq!(m[&(3, 10)], 10);
        assert_eq!(hash_of(1u64), hash_of(1u64));
        assert_eq!(hash_of(b"abc".as_slice()), hash_of(b"abc".as_slice()));
    }
}
