//! CRC-32C in hardware, installed into the core as its accelerator. Every datagram is
//! checksummed twice (send and receive), so at bandwidth this is one of the component's
//! largest costs. Where AVX-512 VPCLMULQDQ exists, long inputs are folded with
//! carry-less multiplication ([`fold`], about 3x the `crc32` path below on this VM's
//! Xeon: 59 against 18 GB/s on 64 KiB datagrams); otherwise:
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

/// The Castagnoli polynomial, bit-reflected (as the `crc32` instruction uses it).
#[cfg(target_arch = "x86_64")]
const POLY_REFLECTED: u32 = 0x82F6_3B78;

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

/// The fastest CRC-32C update step this CPU offers: carry-less multiplication on 512-bit
/// vectors (AVX-512 VPCLMULQDQ) for long inputs, the SSE4.2 `crc32` instruction
/// otherwise; None without SSE4.2.
pub fn hardware_crc32c() -> Option<fn(u32, &[u8]) -> u32> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        tables();
        if fold::available() {
            return Some(fold::crc32c_vpclmul);
        }
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

/// Folding with carry-less multiplication (the method of Intel's "Fast CRC computation
/// for generic polynomials using PCLMULQDQ"), sixteen 128-bit lanes at a time.
///
/// A 128-bit lane `X` of the message, followed `D` bits later by the end of another lane,
/// may be replaced by `Y ≡ X·x^D (mod P)` XORed into that lane without changing the CRC.
/// With `X = X_hi·x^64 + X_lo` (`X_hi` = the lane's first 8 bytes: the reflected bit
/// order puts the first bytes at the highest degrees), `Y = X_hi·a + X_lo·b` with
/// `a = x^(D+64) mod P` and `b = x^D mod P`, two 64×32-bit carry-less products per lane.
/// On reflected operands a product comes out multiplied by `x`, so the constants are
/// taken one power lower. Once everything is folded into one lane, that lane is the last
/// 16 bytes of a message with the same CRC, which the `crc32` instruction finishes.
#[cfg(target_arch = "x86_64")]
mod fold {
    use std::arch::x86_64::*;
    use std::sync::OnceLock;

    use super::{POLY_REFLECTED, crc32c_sse42, one_stream};

    /// Inputs shorter than this go to the `crc32` instruction path.
    const MIN_LEN: usize = 512;

    pub fn available() -> bool {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("vpclmulqdq")
            && is_x86_feature_detected!("pclmulqdq")
    }

    /// `x^n mod P` in the 64-bit operand layout (coefficient of `x^j` at bit `63 - j`).
    fn xpow(n: usize) -> u64 {
        // The reflected register holds x^j at bit 31 - j; multiplying by x shifts right.
        let mut r: u32 = 1 << 31;
        for _ in 0..n {
            r = (r >> 1) ^ if r & 1 != 0 { POLY_REFLECTED } else { 0 };
        }
        u64::from(r) << 32
    }

    /// The two constants folding a lane forward by `bits`: (for its first 8 bytes, for
    /// its last 8 bytes).
    fn fold_constants(bits: usize) -> (u64, u64) {
        (xpow(bits + 63), xpow(bits - 1))
    }

    struct Constants {
        /// Folding distances in bytes: 256 (loop), 192, 128, 64 (four vectors into one),
        /// 48, 32, 16 (four lanes into one).
        by: [(u64, u64); 7],
    }

    const DISTANCES: [usize; 7] = [256, 192, 128, 64, 48, 32, 16];

    fn constants() -> &'static Constants {
        static C: OnceLock<Constants> = OnceLock::new();
        C.get_or_init(|| Constants {
            by: DISTANCES.map(|bytes| fold_constants(8 * bytes)),
        })
    }

    /// A (first-8-bytes, last-8-bytes) constant pair as one 128-bit lane.
    #[target_feature(enable = "sse2")]
    fn lane((k_first, k_last): (u64, u64)) -> __m128i {
        _mm_set_epi64x(k_last as i64, k_first as i64)
    }

    #[target_feature(enable = "avx512f,avx512vl,vpclmulqdq")]
    fn fold512(x: __m512i, k: __m512i, next: __m512i) -> __m512i {
        let a = _mm512_clmulepi64_epi128::<0x00>(x, k);
        let b = _mm512_clmulepi64_epi128::<0x11>(x, k);
        _mm512_ternarylogic_epi64::<0x96>(a, b, next)
    }

    #[target_feature(enable = "pclmulqdq,sse2")]
    fn fold128(x: __m128i, k: __m128i, next: __m128i) -> __m128i {
        let a = _mm_clmulepi64_si128::<0x00>(x, k);
        let b = _mm_clmulepi64_si128::<0x11>(x, k);
        _mm_xor_si128(_mm_xor_si128(a, b), next)
    }

    pub fn crc32c_vpclmul(state: u32, data: &[u8]) -> u32 {
        if data.len() < MIN_LEN {
            return crc32c_sse42(state, data);
        }
        // SAFETY: handed out by `hardware_crc32c` only when `available()` and SSE4.2 hold.
        unsafe { long(state, data) }
    }

    #[target_feature(enable = "avx512f,avx512vl,vpclmulqdq,pclmulqdq,sse4.2")]
    unsafe fn long(state: u32, data: &[u8]) -> u32 {
        let k = constants();
        let load = |at: usize| -> __m512i {
            debug_assert!(at + 64 <= data.len());
            // SAFETY: every caller stays within `data` (checked by the loop bounds).
            unsafe { _mm512_loadu_si512(data.as_ptr().add(at).cast()) }
        };
        let k256 = _mm512_broadcast_i32x4(lane(k.by[0]));
        let mut x = [load(0), load(64), load(128), load(192)];
        // The incoming state joins the first four bytes (the register update is linear).
        x[0] = _mm512_xor_si512(
            x[0],
            _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0, i64::from(state)),
        );
        let mut at = 256;
        while at + 256 <= data.len() {
            for (i, xi) in x.iter_mut().enumerate() {
                *xi = fold512(*xi, k256, load(at + 64 * i));
            }
            at += 256;
        }
        let mut acc = x[3];
        for (i, dist) in [(0, 1), (1, 2), (2, 3)] {
            acc = fold512(x[i], _mm512_broadcast_i32x4(lane(k.by[dist])), acc);
        }
        let k64 = _mm512_broadcast_i32x4(lane(k.by[3]));
        while at + 64 <= data.len() {
            acc = fold512(acc, k64, load(at));
            at += 64;
        }
        let lanes = [
            _mm512_extracti32x4_epi32::<0>(acc),
            _mm512_extracti32x4_epi32::<1>(acc),
            _mm512_extracti32x4_epi32::<2>(acc),
            _mm512_extracti32x4_epi32::<3>(acc),
        ];
        let mut one = lanes[3];
        for (i, dist) in [(0, 4), (1, 5), (2, 6)] {
            one = fold128(lanes[i], lane(k.by[dist]), one);
        }
        let k16 = lane(k.by[6]);
        while at + 16 <= data.len() {
            // SAFETY: within `data` by the loop bound.
            let next = unsafe { _mm_loadu_si128(data.as_ptr().add(at).cast()) };
            one = fold128(one, k16, next);
            at += 16;
        }
        let first = _mm_cvtsi128_si64(one) as u64;
        let last = _mm_extract_epi64::<1>(one) as u64;
        let c = _mm_crc32_u64(_mm_crc32_u64(0, first), last) as u32;
        one_stream(c, &data[at..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn folding_matches_the_portable_tables_at_every_length_and_offset() {
        if !(std::arch::is_x86_feature_detected!("sse4.2") && fold::available()) {
            eprintln!("SKIP: no AVX-512 VPCLMULQDQ here; the crc32 path is compared below");
            return;
        }
        let mut rng = rusnic_core::fault::Rng::new(11);
        let mut data = vec![0u8; 70_000];
        rng.fill(&mut data);
        let mut lens: Vec<usize> = (0..1400).collect();
        lens.extend([4095, 4096, 4097, 9000, 65507, 65535, 69_990]);
        for len in lens {
            let off = len % 7;
            let slice = &data[off..off + len];
            for state in [0u32, !0, 0x1234_5678] {
                assert_eq!(
                    fold::crc32c_vpclmul(state, slice),
                    update_portable(state, slice),
                    "len {len} offset {off} state {state:#x}"
                );
            }
        }
    }

    /// Not a test: throughput of each path on 64 KiB datagrams
    /// (`cargo test --release -p btl-rusnic crc_throughput -- --ignored --nocapture`).
    #[test]
    #[ignore]
    #[cfg(target_arch = "x86_64")]
    fn crc_throughput() {
        let data = vec![0x5au8; 65507];
        let rounds = 20_000;
        type Update = fn(u32, &[u8]) -> u32;
        let mut paths: Vec<(&str, Update)> = vec![("portable", update_portable)];
        if std::arch::is_x86_feature_detected!("sse4.2") {
            paths.push(("crc32 x3", crc32c_sse42));
            if fold::available() {
                paths.push(("vpclmul", fold::crc32c_vpclmul));
            }
        }
        for (name, f) in paths {
            let n = if name == "portable" {
                rounds / 20
            } else {
                rounds
            };
            let start = std::time::Instant::now();
            let mut c = 0;
            for _ in 0..n {
                c = f(c, std::hint::black_box(&data));
            }
            let gbs = (n * data.len()) as f64 / start.elapsed().as_secs_f64() / 1e9;
            println!("{name:>9}: {gbs:6.2} GB/s ({c:#x})");
        }
    }

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
