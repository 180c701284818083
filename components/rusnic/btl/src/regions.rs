//! Memory regions open for emulated PUTs. ob1 registers a buffer before it asks a peer to
//! put into it and deregisters it once the request completed; a PUT datagram lands only
//! inside a region open at that moment, so no datagram can write anywhere else in the
//! process, whatever its header says.

/// The open regions: few at a time (one or two per RDMA request in flight), so a scan
/// per datagram costs less than any ordered structure would save.
#[derive(Debug, Default)]
pub struct Regions {
    /// (key, start, end) with `end` exclusive.
    open: Vec<(u64, u64, u64)>,
    next_key: u64,
}

impl Regions {
    /// Opens `len` bytes at `start`; the key closes them again. `None` when the range
    /// wraps the address space.
    pub fn open(&mut self, start: u64, len: u64) -> Option<u64> {
        let end = start.checked_add(len)?;
        self.next_key += 1;
        self.open.push((self.next_key, start, end));
        Some(self.next_key)
    }

    /// Closes the region of `key`; false when no region has it.
    pub fn close(&mut self, key: u64) -> bool {
        match self.open.iter().position(|&(k, ..)| k == key) {
            Some(i) => {
                self.open.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Whether one open region holds all of `addr..addr + len`.
    pub fn covers(&self, addr: u64, len: u64) -> bool {
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        self.open.iter().any(|&(_, s, e)| s <= addr && end <= e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ranges_inside_one_open_region_are_covered() {
        let mut r = Regions::default();
        let a = r.open(0x1000, 0x100).unwrap();
        let b = r.open(0x1100, 0x100).unwrap();
        assert!(r.covers(0x1000, 0x100));
        assert!(r.covers(0x10ff, 1));
        assert!(r.covers(0x1100, 0));
        assert!(!r.covers(0x10ff, 2), "straddling two regions is refused");
        assert!(!r.covers(0xfff, 1));
        assert!(!r.covers(0x1200, 1));
        assert!(!r.covers(u64::MAX, 2), "wrapping ranges are refused");
        assert!(r.close(a));
        assert!(!r.close(a), "a key closes once");
        assert!(!r.covers(0x1000, 1));
        assert!(r.covers(0x1100, 0x100));
        assert!(r.close(b));
        assert!(r.open.is_empty());
        assert_eq!(r.open(u64::MAX, 2), None);
    }

    #[test]
    fn overlapping_registrations_close_independently() {
        let mut r = Regions::default();
        let a = r.open(0x1000, 0x1000).unwrap();
        let b = r.open(0x1800, 0x100).unwrap();
        assert!(r.close(a));
        assert!(r.covers(0x1800, 0x100));
        assert!(!r.covers(0x1000, 1));
        assert!(r.close(b));
    }
}
