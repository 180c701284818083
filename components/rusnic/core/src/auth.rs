//! The keyed check that tells a job member's datagram from anyone else's.
//!
//! A rusnic port accepts datagrams from any process that can reach it. Every datagram
//! therefore carries, besides its CRC-32C, a 32-bit tag: SipHash-2-4 under the
//! *receiver's* 128-bit key over the header and extensions (the CRC field included,
//! the tag field left out), cut to its low 32 bits. Each process draws its key at
//! random and publishes it in its modex contact, which only the job's processes see;
//! a sender tags what it sends to a peer with that peer's key, and a receiver checks
//! every datagram against its one own key, so the check needs no peer lookup and runs
//! before anything in the datagram is trusted.
//!
//! What it buys: a process outside the job that cannot see the job's traffic or modex
//! (another user's job, a scanner, a stale process from an earlier job) cannot make a
//! datagram the job accepts except by guessing the tag, one chance in 2^32 per
//! datagram, each failure counted. It is not encryption and not protection against an
//! on-path attacker who reads the traffic: the payload is bound only through the CRC
//! field (a linear checksum), and a captured datagram can be replayed verbatim (the
//! receive window then discards it as already delivered, see the README).
//!
//! SipHash-2-4 is Aumasson and Bernstein's keyed hash (2012), written here from the
//! paper; the test vectors are the paper's.

/// A process's secret: the SipHash key its peers tag datagrams to it with.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Key {
    k0: u64,
    k1: u64,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never in a log line.
        f.write_str("Key(..)")
    }
}

impl Key {
    /// The all-zero key: for tests and tools only (anyone can compute its tags).
    pub const ZERO: Key = Key { k0: 0, k1: 0 };

    /// Bytes of the key's encoding (in the modex).
    pub const LEN: usize = 16;

    #[must_use]
    pub fn from_bytes(b: [u8; Key::LEN]) -> Key {
        let mut lo = [0u8; 8];
        let mut hi = [0u8; 8];
        lo.copy_from_slice(&b[..8]);
        hi.copy_from_slice(&b[8..]);
        Key {
            k0: u64::from_le_bytes(lo),
            k1: u64::from_le_bytes(hi),
        }
    }

    #[must_use]
    pub fn to_bytes(self) -> [u8; Key::LEN] {
        let mut b = [0u8; Key::LEN];
        b[..8].copy_from_slice(&self.k0.to_le_bytes());
        b[8..].copy_from_slice(&self.k1.to_le_bytes());
        b
    }

    /// The datagram tag of `msg`: SipHash-2-4's low 32 bits.
    #[must_use]
    pub fn tag(&self, msg: &[u8]) -> u32 {
        siphash24(self, msg) as u32
    }
}

#[inline(always)]
fn round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13);
    v[1] ^= v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16);
    v[3] ^= v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21);
    v[3] ^= v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17);
    v[1] ^= v[2];
    v[2] = v[2].rotate_left(32);
}

/// SipHash-2-4 of `msg` under `key` (64-bit output).
#[must_use]
pub fn siphash24(key: &Key, msg: &[u8]) -> u64 {
    siphash::<2, 4>(key, msg)
}

/// SipHash-1-3, half the rounds: only for the timing that compares the two (it is the
/// hash-table variant; the Linux kernel, for one, calls it no secure PRF).
#[cfg(test)]
fn siphash13(key: &Key, msg: &[u8]) -> u64 {
    siphash::<1, 3>(key, msg)
}

/// SipHash-c-d: `C` rounds per message word, `D` to finish.
#[inline(always)]
fn siphash<const C: usize, const D: usize>(key: &Key, msg: &[u8]) -> u64 {
    let mut v = [
        key.k0 ^ 0x736f_6d65_7073_6575,
        key.k1 ^ 0x646f_7261_6e64_6f6d,
        key.k0 ^ 0x6c79_6765_6e65_7261,
        key.k1 ^ 0x7465_6462_7974_6573,
    ];
    let mut words = msg.chunks_exact(8);
    for w in &mut words {
        let m = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        v[3] ^= m;
        for _ in 0..C {
            round(&mut v);
        }
        v[0] ^= m;
    }
    let mut last = (msg.len() as u64) << 56;
    for (i, &b) in words.remainder().iter().enumerate() {
        last |= u64::from(b) << (8 * i);
    }
    v[3] ^= last;
    for _ in 0..C {
        round(&mut v);
    }
    v[0] ^= last;
    v[2] ^= 0xff;
    for _ in 0..D {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paper_key() -> Key {
        let mut b = [0u8; 16];
        for (i, x) in b.iter_mut().enumerate() {
            *x = i as u8;
        }
        Key::from_bytes(b)
    }

    #[test]
    fn paper_vectors() {
        let k = paper_key();
        let msg: Vec<u8> = (0..64u8).collect();
        // Appendix A of the paper: the 15-byte message 00..0e.
        assert_eq!(siphash24(&k, &msg[..15]), 0xa129_ca61_49be_45e5);
        // The reference implementation's vectors.h, lengths 0, 8 and 63.
        assert_eq!(siphash24(&k, &[]), 0x726f_db47_dd0e_0e31);
        assert_eq!(siphash24(&k, &msg[..8]), 0x93f5_f579_9a93_2462);
        assert_eq!(siphash24(&k, &msg[..63]), 0x958a_324c_eb06_4572);
    }

    #[test]
    fn key_bytes_round_trip_and_debug_hides_it() {
        let k = paper_key();
        assert_eq!(Key::from_bytes(k.to_bytes()), k);
        assert_eq!(format!("{k:?}"), "Key(..)");
        assert_ne!(k.tag(b"abc"), Key::ZERO.tag(b"abc"));
    }

    /// What one tag costs (`cargo test --release -p rusnic-core tag_cost -- --ignored
    /// --nocapture`): the header-sized inputs of the datagrams the core sends.
    #[test]
    #[ignore = "a timing, not a check"]
    fn tag_cost() {
        let k = paper_key();
        for len in [28usize, 36, 48, 60] {
            let msg = vec![0x5Au8; len];
            let n = 2_000_000u32;
            let start = std::time::Instant::now();
            let mut acc = 0u64;
            for _ in 0..n {
                acc = acc.wrapping_add(siphash24(&k, std::hint::black_box(&msg)));
            }
            let ns24 = start.elapsed().as_nanos() as f64 / f64::from(n);
            let start = std::time::Instant::now();
            for _ in 0..n {
                acc = acc.wrapping_add(siphash13(&k, std::hint::black_box(&msg)));
            }
            let ns13 = start.elapsed().as_nanos() as f64 / f64::from(n);
            println!("{len:3} bytes: SipHash-2-4 {ns24:.1} ns, SipHash-1-3 {ns13:.1} ns ({acc:x})");
        }
    }
}
