//! CRC-32C (Castagnoli), slicing-by-8, tables built at compile time.
//!
//! Why a checksum at all when UDP has one: the UDP checksum may be zero (disabled) or
//! offloaded to a NIC we do not trust, and in-process fault injection corrupts bytes
//! after the kernel checked them. Why CRC-32C rather than FNV or xxhash: it detects every
//! burst error up to 32 bits and every odd number of bit flips, and SSE4.2/ARMv8 compute
//! it in hardware should the glue ever want a faster path with identical results.

const POLY: u32 = 0x82F6_3B78; // reflected Castagnoli polynomial

const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut s = 1;
        while s < 8 {
            let prev = t[s - 1][i];
            t[s][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            s += 1;
        }
        i += 1;
    }
    t
}

static TABLES: [[u32; 256]; 8] = make_tables();

/// A faster update step with the same contract as [`Crc32c::update`] on the raw
/// (not inverted) state, e.g. the SSE4.2 `crc32` instruction. The core cannot use it
/// itself (no `unsafe` here); a glue that detected the instruction installs it once.
pub type Accelerator = fn(u32, &[u8]) -> u32;

static ACCELERATOR: std::sync::OnceLock<Accelerator> = std::sync::OnceLock::new();

/// Installs `f` for every later CRC in the process; false if one was installed already.
/// `f` must compute exactly the table-driven result (the glue tests that it does).
pub fn install_accelerator(f: Accelerator) -> bool {
    ACCELERATOR.set(f).is_ok()
}

/// The portable update step, for comparing an accelerator against.
#[must_use]
pub fn update_portable(state: u32, data: &[u8]) -> u32 {
    let mut c = Crc32c(state);
    c.update_tables(data);
    c.0
}

/// Running CRC-32C state; start with [`Crc32c::new`], feed, then [`Crc32c::finish`].
#[derive(Clone, Copy, Debug)]
pub struct Crc32c(u32);

impl Default for Crc32c {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32c {
    #[must_use]
    pub fn new() -> Self {
        Crc32c(!0)
    }

    pub fn update(&mut self, data: &[u8]) {
        match ACCELERATOR.get() {
            Some(f) => self.0 = f(self.0, data),
            None => self.update_tables(data),
        }
    }

    fn update_tables(&mut self, data: &[u8]) {
        let t = &TABLES;
        let mut c = self.0;
        let mut chunks = data.chunks_exact(8);
        for b in &mut chunks {
            let lo = c ^ u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let hi = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
            c = t[7][(lo & 0xff) as usize]
                ^ t[6][((lo >> 8) & 0xff) as usize]
                ^ t[5][((lo >> 16) & 0xff) as usize]
                ^ t[4][(lo >> 24) as usize]
                ^ t[3][(hi & 0xff) as usize]
                ^ t[2][((hi >> 8) & 0xff) as usize]
                ^ t[1][((hi >> 16) & 0xff) as usize]
                ^ t[0][(hi >> 24) as usize];
        }
        for &b in chunks.remainder() {
            c = (c >> 8) ^ t[0][((c ^ u32::from(b)) & 0xff) as usize];
        }
        self.0 = c;
    }

    #[must_use]
    pub fn finish(self) -> u32 {
        !self.0
    }
}

/// CRC-32C of one buffer.
#[must_use]
pub fn crc32c(data: &[u8]) -> u32 {
    let mut c = Crc32c::new();
    c.update(data);
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bitwise(data: &[u8]) -> u32 {
        let mut c = !0u32;
        for &b in data {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            }
        }
        !c
    }

    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    fn counting(state: u32, data: &[u8]) -> u32 {
        CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        update_portable(state, data)
    }

    #[test]
    fn an_installed_accelerator_is_used() {
        assert!(install_accelerator(counting));
        assert!(!install_accelerator(counting), "installed once only");
        let before = CALLS.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert!(CALLS.load(std::sync::atomic::Ordering::Relaxed) > before);
    }

    #[test]
    fn known_vectors() {
        // RFC 3720 appendix B.4 and the classic check value.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62A8_AB43);
        let inc: Vec<u8> = (0..32).collect();
        assert_eq!(crc32c(&inc), 0x46DD_794E);
        assert_eq!(crc32c(&[]), 0);
    }

    #[test]
    fn slicing_matches_bitwise_and_split_feeding() {
        let data: Vec<u8> = (0..1000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in [0, 1, 7, 8, 9, 63, 64, 65, 999, 1000] {
            assert_eq!(crc32c(&data[..len]), bitwise(&data[..len]), "len {len}");
            for split in [0, 1, 5, len / 2, len].into_iter().filter(|&s| s <= len) {
                let mut c = Crc32c::new();
                c.update(&data[..split]);
                c.update(&data[split..len]);
                assert_eq!(c.finish(), bitwise(&data[..len]));
            }
        }
    }
}
