//! CRC-32C with the SSE4.2 `crc32` instruction, installed into the core as its
//! accelerator. Every datagram is checksummed twice (send and receive), so at bandwidth
//! this is one of the component's largest costs.
//!
//! The instruction has a latency of three cycles and a throughput of one per cycle, so
//! one dependent chain uses a third of it. Long inputs are therefore cut into three
//! blocks whose CRCs run interleaved, the first continuing from the incoming state and
//! the other two from zero; CRC's linearity then joins them:
//! `crc(s, A‖B‖C) = shift(crc(s, A), 2n) ⊕ shift(crc(0, B), n) ⊕ crc(0, C)` for blocks of
//! `n` bytes, where `shift(x, n)` (running `n` zero bytes through the register) is a
//! linear map of the 32-bit state, applied with four byte-indexed tables.

use std::sync::OnceLock;

use rusnic_core::crc::update_portable;

/// Block sizes of the interleaved passes: long ones for the bulk of a datagram, short
/// ones for what is left.
const LONG: usize = 4096;
const SHORT: usize = 256;

/// `shift(x, n)` as four tables indexed by the bytes of `x`.
struct Shift([[u32; 256]; 4]);

impl Shift {
    fn new(n: usize) -> Shift {
        let zeros = vec![0u8; n];
        let basis: Vec<u32> = (0..32).map(|i| update_portable(1 << i, &zeros)).collect();
        let mut t = [[0u32; 256]; 4];
        for (k, table) in t.iter_mut().enumerate() {
            for (b, entry) in table.iter_mut().enumerate() {
                *entry = (0..8)
                    .filter(|i| b & (1 << i) != 0)
                    .fold(0, |acc, i| acc ^ basis[8 * k + i]);
            }
        }
        Shift(t)
    }

    fn apply(&self, x: u32) -> u32 {
        let t = &self.0;
        t[0][(x & 0xff) as usize]
            ^ t[1][((x >> 8) & 0xff) as usize]
            ^ t[2][((x >> 16) & 0xff) as usize]
            ^ t[3][(x >> 24) as usize]
    }
}

/// For each block size: shift by one block and by two.
struct Tables {
    long: [Shift; 2],
    short: [Shift; 2],
}

static TABLES: OnceLock<Tables> = OnceLock::new();

fn tables() -> &'static Tables {
    TABLES.get_or_init(|| Tables {
        long: [Shift::new(LONG), Shift::new(2 * LONG)],
        short: [Shift::new(SHORT), Shift::new(2 * SHORT)],
    })
}

/// The SSE4.2 `crc32` instruction as a CRC-32C update step, if this CPU has it.
pub fn hardware_crc32c() -> Option<fn(u32, &[u8]) -> u32> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        tables();
        return Some(crc32c_sse42);
    }
    None
}

#[cfg(target_arch = "x86_64")]
fn crc32c_sse42(state: u32, data: &[u8]) -> u32 {
    let t = tables();
    let mut c = state;
    let mut rest = data;
    for (n, shift) in [(LONG, &t.long), (SHORT, &t.short)] {
        while rest.len() >= 3 * n {
            let (a, tail) = rest.split_at(n);
            let (b, tail) = tail.split_at(n);
            let (d, tail) = tail.split_at(n);
            // SAFETY: only handed out by `hardware_crc32c` after SSE4.2 was detected.
            let (ca, cb, cd) = unsafe { three_streams(c, a, b, d) };
            c = shift[1].apply(ca) ^ shift[0].apply(cb) ^ cd;
            rest = tail;
        }
    }
    // SAFETY: as above.
    unsafe { one_stream(c, rest) }
}

/// An 8-byte chunk as the instruction's operand (inlined: a call per word would cost
/// more than the instruction).
#[inline(always)]
fn word(w: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&w[..8]);
    u64::from_le_bytes(b)
}

/// CRCs of three equal blocks at once: `a` from `state`, `b` and `d` from zero.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn three_streams(state: u32, a: &[u8], b: &[u8], d: &[u8]) -> (u32, u32, u32) {
    use std::arch::x86_64::_mm_crc32_u64;
    let (mut ca, mut cb, mut cd) = (u64::from(state), 0u64, 0u64);
    for ((wa, wb), wd) in a
        .chunks_exact(8)
        .zip(b.chunks_exact(8))
        .zip(d.chunks_exact(8))
    {
        ca = _mm_crc32_u64(ca, word(wa));
        cb = _mm_crc32_u64(cb, word(wb));
        cd = _mm_crc32_u64(cd, word(wd));
    }
    (ca as u32, cb as u32, cd as u32)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn one_stream(state: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u64};
    let mut c = u64::from(state);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        c = _mm_crc32_u64(c, word(w));
    }
    let mut c = c as u32;
    for &b in words.remainder() {
        c = _mm_crc32_u8(c, b);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardware_crc_matches_the_portable_tables() {
        let Some(hw) = hardware_crc32c() else {
            return; // no SSE4.2: nothing to compare (the portable path is used)
        };
        let mut rng = rusnic_core::fault::Rng::new(7);
        let lens = [
            0usize,
            1,
            7,
            8,
            9,
            63,
            64,
            65,
            3 * SHORT - 1,
            3 * SHORT,
            3 * SHORT + 9,
            1472,
            3 * LONG,
            3 * LONG + 3 * SHORT + 5,
            9000,
            65507,
            200_000,
        ];
        for len in lens {
            let mut data = vec![0u8; len];
            rng.fill(&mut data);
            for state in [0u32, !0, 0x1234_5678] {
                assert_eq!(
                    hw(state, &data),
                    update_portable(state, &data),
                    "len {len} state {state:#x}"
                );
            }
        }
    }
}
