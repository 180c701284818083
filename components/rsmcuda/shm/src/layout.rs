//! The segment layout: a pure function from the configuration to every offset.
//!
//! Every process computes the same [`Layout`] from the same [`LayoutParams`] (the creator
//! from its configuration, attachers from the parameters the creator stored in the header),
//! so no offset ever has to be trusted from shared memory. All offsets are relative to the
//! start of the segment; nothing in the segment is a pointer.
//!
//! ```text
//! offset 0          +--------------------------------------------+
//!                   | SegmentHeader (2 cache lines)               |  identity line: magic,
//!                   |                                             |  version, params, size;
//!                   |                                             |  state line: attached count
//! HEADER_BYTES      +--------------------------------------------+
//!                   | RankEntry[nranks] (1 cache line each)       |  attached flag, pid, offsets,
//!                   |                                             |  CMA probe address
//! regions_off       +--------------------------------------------+  (page aligned)
//!  (rank 0 region)  | FifoCtrl: tail line | reader line           |  FIFO_CTRL_BYTES
//!                   | Slot[fifo_size] {seq, value}                |  16 B each
//!                   | eager frag[eager_count]: FragHeader+payload |  eager_stride each
//!                   | max frag[max_count]:     FragHeader+payload |  max_stride each
//!                   +--------------------------------------------+  (page aligned)
//!  (rank 1 region)  | ...                                         |
//!                   +--------------------------------------------+  total_size
//! ```
//!
//! Rank regions are page aligned so the glue can `mbind` a region to its owner's NUMA node;
//! every fragment starts on a cache line, which frees the low 6 bits of a fragment offset
//! for the FIFO value tags (see `fifo.rs`).

use std::fmt;

/// Smallest fast box ring (bytes).
pub const MIN_FBOX_BYTES: u32 = 256;
/// Largest fast box ring (bytes).
pub const MAX_FBOX_BYTES: u32 = 1 << 20;

/// Cache line size assumed for padding (x86_64 and most aarch64 parts).
pub const CACHE_LINE: u64 = 64;
/// Page size used to align rank regions (so regions can be bound to NUMA nodes).
pub const PAGE: u64 = 4096;
/// Bytes of the segment header.
pub const HEADER_BYTES: u64 = 2 * CACHE_LINE;
/// Bytes of one rank-table entry.
pub const RANK_ENTRY_BYTES: u64 = CACHE_LINE;
/// Bytes of a FIFO's control block (writers' tail line + reader's line).
pub const FIFO_CTRL_BYTES: u64 = 2 * CACHE_LINE;
/// Bytes of one FIFO slot (sequence stamp + value).
pub const SLOT_BYTES: u64 = 16;
/// Bytes of a fragment header; the payload follows it.
pub const FRAG_HEADER_BYTES: u64 = 32;

/// Largest number of local ranks a segment supports.
pub const MAX_RANKS: u32 = 1 << 16;
/// Largest FIFO capacity (entries).
pub const MAX_FIFO_SIZE: u32 = 1 << 24;
/// Largest fragment payload (bytes).
pub const MAX_FRAG_PAYLOAD: u32 = 1 << 30;
/// Largest number of fragments of one kind per rank.
pub const MAX_FRAG_COUNT: u32 = 1 << 24;
/// Largest total segment size accepted (1 TiB): far above any sane configuration, far
/// below where `u64`/`usize`/`isize` arithmetic could overflow.
pub const MAX_SEGMENT_BYTES: u64 = 1 << 40;

/// The two fragment pools every rank owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolKind {
    /// Fragments of `eager_size` payload bytes.
    Eager,
    /// Fragments of `max_size` payload bytes.
    Max,
}

/// The configuration a layout is computed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayoutParams {
    /// Number of local ranks sharing the segment (1..=[`MAX_RANKS`]).
    pub nranks: u32,
    /// Entries per receiver FIFO: a power of two, 2..=[`MAX_FIFO_SIZE`].
    pub fifo_size: u32,
    /// Payload bytes of an eager fragment (1..=`max_size`).
    pub eager_size: u32,
    /// Eager fragments per rank (at least 1).
    pub eager_count: u32,
    /// Payload bytes of a max fragment (`eager_size`..=[`MAX_FRAG_PAYLOAD`]).
    pub max_size: u32,
    /// Max fragments per rank (may be 0: then only eager fragments exist).
    pub max_count: u32,
    /// Bytes of each fast box ring (one per ordered pair of ranks, see `fbox.rs`): 0 (no
    /// fast boxes) or a power of two in [`MIN_FBOX_BYTES`]..=[`MAX_FBOX_BYTES`].
    pub fbox_bytes: u32,
}

impl LayoutParams {
    /// Defaults modelled on smcuda (fifo 4096, eager 4 KiB, max 32 KiB) for `nranks` ranks.
    pub fn new(nranks: u32) -> Self {
        Self {
            nranks,
            fifo_size: 4096,
            eager_size: 4096,
            eager_count: 128,
            max_size: 32768,
            max_count: 32,
            fbox_bytes: 0,
        }
    }
}

/// Why a configuration has no layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// `nranks` is 0 or above [`MAX_RANKS`].
    BadRankCount(u32),
    /// `fifo_size` is not a power of two in 2..=[`MAX_FIFO_SIZE`].
    BadFifoSize(u32),
    /// `eager_size` is 0, or `max_size` is below `eager_size` or above [`MAX_FRAG_PAYLOAD`].
    BadFragSize {
        /// The eager payload size asked for.
        eager: u32,
        /// The max payload size asked for.
        max: u32,
    },
    /// `eager_count` is 0, or a count is above [`MAX_FRAG_COUNT`].
    BadFragCount {
        /// The eager count asked for.
        eager: u32,
        /// The max count asked for.
        max: u32,
    },
    /// `fbox_bytes` is neither 0 nor a power of two in the allowed range.
    BadFboxSize(u32),
    /// The total size overflows or exceeds [`MAX_SEGMENT_BYTES`].
    TooLarge {
        /// Which part of the computation overflowed.
        what: &'static str,
    },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadRankCount(n) => {
                write!(f, "number of local ranks {n} is not in 1..={MAX_RANKS}")
            }
            Self::BadFifoSize(n) => write!(
                f,
                "fifo size {n} is not a power of two in 2..={MAX_FIFO_SIZE}"
            ),
            Self::BadFragSize { eager, max } => write!(
                f,
                "fragment sizes eager={eager} max={max}: need 1 <= eager <= max <= {MAX_FRAG_PAYLOAD}"
            ),
            Self::BadFragCount { eager, max } => write!(
                f,
                "fragment counts eager={eager} max={max}: need 1 <= eager, both <= {MAX_FRAG_COUNT}"
            ),
            Self::BadFboxSize(n) => write!(
                f,
                "fast box size {n} is neither 0 nor a power of two in {MIN_FBOX_BYTES}..={MAX_FBOX_BYTES}"
            ),
            Self::TooLarge { what } => write!(
                f,
                "shared segment too large (overflow computing {what}; limit {MAX_SEGMENT_BYTES} bytes): \
                 lower the fragment counts/sizes or the fifo size"
            ),
        }
    }
}

impl std::error::Error for LayoutError {}

/// Where a fragment offset points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragLoc {
    /// The rank owning the fragment's pool.
    pub owner: u32,
    /// Which pool.
    pub kind: PoolKind,
    /// Index inside the pool.
    pub index: u32,
}

/// Every offset of a segment, derived from [`LayoutParams`] by [`Layout::compute`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    params: LayoutParams,
    rank_table_off: u64,
    regions_off: u64,
    region_bytes: u64,
    /// Offsets inside a region.
    slots_in_region: u64,
    eager_in_region: u64,
    max_in_region: u64,
    eager_stride: u64,
    max_stride: u64,
    fbox_off: u64,
    total: u64,
}

const fn align_up(x: u64, a: u64) -> Option<u64> {
    match x.checked_add(a - 1) {
        Some(v) => Some(v & !(a - 1)),
        None => None,
    }
}

fn checked(v: Option<u64>, what: &'static str) -> Result<u64, LayoutError> {
    match v {
        Some(v) if v <= MAX_SEGMENT_BYTES => Ok(v),
        _ => Err(LayoutError::TooLarge { what }),
    }
}

impl Layout {
    /// Validates `p` and computes every offset, with overflow checks.
    pub fn compute(p: &LayoutParams) -> Result<Self, LayoutError> {
        if p.nranks == 0 || p.nranks > MAX_RANKS {
            return Err(LayoutError::BadRankCount(p.nranks));
        }
        if p.fifo_size < 2 || p.fifo_size > MAX_FIFO_SIZE || !p.fifo_size.is_power_of_two() {
            return Err(LayoutError::BadFifoSize(p.fifo_size));
        }
        if p.eager_size == 0 || p.max_size < p.eager_size || p.max_size > MAX_FRAG_PAYLOAD {
            return Err(LayoutError::BadFragSize {
                eager: p.eager_size,
                max: p.max_size,
            });
        }
        if p.eager_count == 0 || p.eager_count > MAX_FRAG_COUNT || p.max_count > MAX_FRAG_COUNT {
            return Err(LayoutError::BadFragCount {
                eager: p.eager_count,
                max: p.max_count,
            });
        }
        if p.fbox_bytes != 0
            && (!(MIN_FBOX_BYTES..=MAX_FBOX_BYTES).contains(&p.fbox_bytes)
                || !p.fbox_bytes.is_power_of_two())
        {
            return Err(LayoutError::BadFboxSize(p.fbox_bytes));
        }
        let n = u64::from(p.nranks);
        let rank_table_off = HEADER_BYTES;
        let regions_off = checked(
            n.checked_mul(RANK_ENTRY_BYTES)
                .and_then(|t| t.checked_add(rank_table_off))
                .and_then(|e| align_up(e, PAGE)),
            "rank table",
        )?;
        let slots_in_region = FIFO_CTRL_BYTES;
        let fifo_end = checked(
            u64::from(p.fifo_size)
                .checked_mul(SLOT_BYTES)
                .and_then(|s| s.checked_add(slots_in_region))
                .and_then(|e| align_up(e, CACHE_LINE)),
            "fifo",
        )?;
        let eager_stride = checked(
            align_up(FRAG_HEADER_BYTES + u64::from(p.eager_size), CACHE_LINE),
            "eager stride",
        )?;
        let max_stride = checked(
            align_up(FRAG_HEADER_BYTES + u64::from(p.max_size), CACHE_LINE),
            "max stride",
        )?;
        let eager_in_region = fifo_end;
        let max_in_region = checked(
            eager_stride
                .checked_mul(u64::from(p.eager_count))
                .and_then(|b| b.checked_add(eager_in_region)),
            "eager pool",
        )?;
        let region_bytes = checked(
            max_stride
                .checked_mul(u64::from(p.max_count))
                .and_then(|b| b.checked_add(max_in_region))
                .and_then(|e| align_up(e, PAGE)),
            "max pool",
        )?;
        let fbox_off = checked(
            region_bytes
                .checked_mul(n)
                .and_then(|b| b.checked_add(regions_off)),
            "total size",
        )?;
        let fbox_stride = if p.fbox_bytes == 0 {
            0
        } else {
            CACHE_LINE + u64::from(p.fbox_bytes)
        };
        let total = checked(
            n.checked_mul(n)
                .and_then(|pairs| pairs.checked_mul(fbox_stride))
                .and_then(|b| b.checked_add(fbox_off))
                .and_then(|e| align_up(e, PAGE)),
            "fast boxes",
        )?;
        if usize::try_from(total).is_err() {
            return Err(LayoutError::TooLarge {
                what: "total size (address space)",
            });
        }
        Ok(Self {
            params: *p,
            rank_table_off,
            regions_off,
            region_bytes,
            slots_in_region,
            eager_in_region,
            max_in_region,
            eager_stride,
            max_stride,
            fbox_off,
            total,
        })
    }

    /// The parameters this layout was computed from.
    pub fn params(&self) -> &LayoutParams {
        &self.params
    }
    /// Number of local ranks.
    pub fn nranks(&self) -> u32 {
        self.params.nranks
    }
    /// FIFO capacity (entries).
    pub fn fifo_size(&self) -> u32 {
        self.params.fifo_size
    }
    /// Total segment bytes.
    pub fn total_size(&self) -> u64 {
        self.total
    }
    /// Bytes of each fast box ring (0: no fast boxes).
    pub fn fbox_bytes(&self) -> u32 {
        self.params.fbox_bytes
    }
    /// Offset of the fast box carrying messages from `sender` to `receiver`: one cache
    /// line of control (the reader's position) followed by the ring.
    pub fn fbox_off(&self, sender: u32, receiver: u32) -> u64 {
        debug_assert!(sender < self.params.nranks && receiver < self.params.nranks);
        let pair = u64::from(receiver) * u64::from(self.params.nranks) + u64::from(sender);
        self.fbox_off + pair * (CACHE_LINE + u64::from(self.params.fbox_bytes))
    }
    /// Offset of rank `r`'s entry in the rank table.
    pub fn rank_entry_off(&self, r: u32) -> u64 {
        debug_assert!(r < self.params.nranks);
        self.rank_table_off + u64::from(r) * RANK_ENTRY_BYTES
    }
    /// Offset of rank `r`'s region (page aligned).
    pub fn region_off(&self, r: u32) -> u64 {
        debug_assert!(r < self.params.nranks);
        self.regions_off + u64::from(r) * self.region_bytes
    }
    /// Bytes of one rank region.
    pub fn region_bytes(&self) -> u64 {
        self.region_bytes
    }
    /// Offset of the control block of receiver `r`'s FIFO.
    pub fn fifo_ctrl_off(&self, r: u32) -> u64 {
        self.region_off(r)
    }
    /// Offset of the first slot of receiver `r`'s FIFO.
    pub fn fifo_slots_off(&self, r: u32) -> u64 {
        self.region_off(r) + self.slots_in_region
    }
    /// Offset of the first fragment of `r`'s pool `kind`.
    pub fn pool_off(&self, r: u32, kind: PoolKind) -> u64 {
        self.region_off(r)
            + match kind {
                PoolKind::Eager => self.eager_in_region,
                PoolKind::Max => self.max_in_region,
            }
    }
    /// Number of fragments in each pool of `kind` (per rank).
    pub fn frag_count(&self, kind: PoolKind) -> u32 {
        match kind {
            PoolKind::Eager => self.params.eager_count,
            PoolKind::Max => self.params.max_count,
        }
    }
    /// Payload capacity of a fragment of `kind`.
    pub fn frag_capacity(&self, kind: PoolKind) -> u32 {
        match kind {
            PoolKind::Eager => self.params.eager_size,
            PoolKind::Max => self.params.max_size,
        }
    }
    /// Distance between consecutive fragments of `kind` (a multiple of [`CACHE_LINE`]).
    pub fn frag_stride(&self, kind: PoolKind) -> u64 {
        match kind {
            PoolKind::Eager => self.eager_stride,
            PoolKind::Max => self.max_stride,
        }
    }
    /// Offset of fragment `index` in `owner`'s pool `kind` (its header; payload follows).
    pub fn frag_off(&self, owner: u32, kind: PoolKind, index: u32) -> u64 {
        debug_assert!(index < self.frag_count(kind));
        self.pool_off(owner, kind) + u64::from(index) * self.frag_stride(kind)
    }
    /// The smallest pool whose fragments hold `len` payload bytes.
    pub fn pool_for(&self, len: usize) -> Option<PoolKind> {
        let len = u64::try_from(len).ok()?;
        if len <= u64::from(self.params.eager_size) {
            Some(PoolKind::Eager)
        } else if len <= u64::from(self.params.max_size) && self.params.max_count > 0 {
            Some(PoolKind::Max)
        } else {
            None
        }
    }
    /// Maps an offset back to the fragment whose header starts there; `None` for any other
    /// offset. This is how a value read from a FIFO (untrusted) is validated.
    pub fn locate(&self, off: u64) -> Option<FragLoc> {
        let rel = off.checked_sub(self.regions_off)?;
        let owner = rel / self.region_bytes;
        if owner >= u64::from(self.params.nranks) {
            return None;
        }
        let within = rel % self.region_bytes;
        for kind in [PoolKind::Eager, PoolKind::Max] {
            let start = match kind {
                PoolKind::Eager => self.eager_in_region,
                PoolKind::Max => self.max_in_region,
            };
            let stride = self.frag_stride(kind);
            if let Some(d) = within.checked_sub(start) {
                let index = d / stride;
                if d % stride == 0 && index < u64::from(self.frag_count(kind)) {
                    return Some(FragLoc {
                        owner: owner as u32,
                        kind,
                        index: index as u32,
                    });
                }
            }
        }
        None
    }
    /// Fragments every rank owns (both pools).
    pub fn frags_per_rank(&self) -> u64 {
        u64::from(self.params.eager_count) + u64::from(self.params.max_count)
    }
    /// True when no FIFO can ever be full: every fragment is in at most one FIFO at a time
    /// (as a SEND in its receiver's FIFO or as an ACK in its owner's), so a FIFO at least as
    /// large as all fragments of the node never refuses a push.
    pub fn fifo_never_full(&self) -> bool {
        self.frags_per_rank() * u64::from(self.params.nranks) <= u64::from(self.params.fifo_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> LayoutParams {
        LayoutParams {
            nranks: 3,
            fifo_size: 8,
            eager_size: 100,
            eager_count: 5,
            max_size: 1000,
            max_count: 2,
            fbox_bytes: 0,
        }
    }

    #[test]
    fn small_layout_offsets() {
        let l = Layout::compute(&small()).unwrap();
        assert_eq!(l.rank_entry_off(0), 128);
        assert_eq!(l.rank_entry_off(2), 128 + 128);
        assert_eq!(l.region_off(0), 4096);
        assert_eq!(l.fifo_slots_off(0), 4096 + 128);
        // fifo: 128 + 8*16 = 256; eager stride align64(32+100)=192; max stride align64(1032)=1088
        assert_eq!(l.pool_off(0, PoolKind::Eager), 4096 + 256);
        assert_eq!(l.frag_stride(PoolKind::Eager), 192);
        assert_eq!(l.frag_stride(PoolKind::Max), 1088);
        assert_eq!(l.pool_off(0, PoolKind::Max), 4096 + 256 + 5 * 192);
        // region = align4096(256 + 960 + 2176) = 4096
        assert_eq!(l.region_bytes(), 4096);
        assert_eq!(l.region_off(2), 4096 + 2 * 4096);
        assert_eq!(l.total_size(), 4096 * 4);
    }

    #[test]
    fn everything_aligned_and_disjoint() {
        for nranks in [1, 2, 7, 64] {
            for fifo_size in [2, 64, 4096] {
                for (eager_size, max_size) in [(1, 1), (64, 4096), (4096, 32768), (4000, 65537)] {
                    let p = LayoutParams {
                        nranks,
                        fifo_size,
                        eager_size,
                        eager_count: 3,
                        max_size,
                        max_count: 2,
                        fbox_bytes: 0,
                    };
                    let l = Layout::compute(&p).unwrap();
                    let mut spans = vec![(0, HEADER_BYTES)];
                    for r in 0..nranks {
                        spans.push((l.rank_entry_off(r), RANK_ENTRY_BYTES));
                        assert_eq!(l.region_off(r) % PAGE, 0);
                        spans.push((l.fifo_ctrl_off(r), FIFO_CTRL_BYTES));
                        spans.push((l.fifo_slots_off(r), u64::from(fifo_size) * SLOT_BYTES));
                        for kind in [PoolKind::Eager, PoolKind::Max] {
                            for i in 0..l.frag_count(kind) {
                                let off = l.frag_off(r, kind, i);
                                assert_eq!(off % CACHE_LINE, 0);
                                let len = FRAG_HEADER_BYTES + u64::from(l.frag_capacity(kind));
                                assert!(len <= l.frag_stride(kind));
                                spans.push((off, len));
                                assert_eq!(
                                    l.locate(off),
                                    Some(FragLoc {
                                        owner: r,
                                        kind,
                                        index: i
                                    })
                                );
                                assert_eq!(l.locate(off + 8), None);
                            }
                        }
                    }
                    spans.sort();
                    for w in spans.windows(2) {
                        assert!(w[0].0 + w[0].1 <= w[1].0, "{p:?} overlap {w:?}");
                    }
                    let last = spans.last().unwrap();
                    assert!(last.0 + last.1 <= l.total_size());
                }
            }
        }
    }

    #[test]
    fn locate_rejects_foreign_offsets() {
        let l = Layout::compute(&small()).unwrap();
        assert_eq!(l.locate(0), None);
        assert_eq!(l.locate(l.fifo_slots_off(1)), None);
        assert_eq!(l.locate(l.total_size()), None);
        assert_eq!(l.locate(!63), None);
        // One past the last eager fragment is the first max fragment, not eager #5.
        let past = l.pool_off(1, PoolKind::Eager) + 5 * l.frag_stride(PoolKind::Eager);
        assert_eq!(
            l.locate(past).map(|f| f.kind),
            Some(PoolKind::Max),
            "max pool follows eager pool directly"
        );
        let past_max = l.pool_off(1, PoolKind::Max) + 2 * l.frag_stride(PoolKind::Max);
        assert_eq!(l.locate(past_max), None);
    }

    #[test]
    fn rejects_bad_params() {
        let base = small();
        let cases = [
            (
                LayoutParams { nranks: 0, ..base },
                LayoutError::BadRankCount(0),
            ),
            (
                LayoutParams {
                    nranks: MAX_RANKS + 1,
                    ..base
                },
                LayoutError::BadRankCount(MAX_RANKS + 1),
            ),
            (
                LayoutParams {
                    fifo_size: 6,
                    ..base
                },
                LayoutError::BadFifoSize(6),
            ),
            (
                LayoutParams {
                    fifo_size: 1,
                    ..base
                },
                LayoutError::BadFifoSize(1),
            ),
            (
                LayoutParams {
                    eager_size: 0,
                    ..base
                },
                LayoutError::BadFragSize {
                    eager: 0,
                    max: 1000,
                },
            ),
            (
                LayoutParams {
                    max_size: 99,
                    ..base
                },
                LayoutError::BadFragSize {
                    eager: 100,
                    max: 99,
                },
            ),
            (
                LayoutParams {
                    eager_count: 0,
                    ..base
                },
                LayoutError::BadFragCount { eager: 0, max: 2 },
            ),
        ];
        for (p, e) in cases {
            assert_eq!(Layout::compute(&p), Err(e));
        }
    }

    #[test]
    fn fast_boxes_follow_the_regions() {
        let without = Layout::compute(&small()).unwrap();
        let p = LayoutParams {
            fbox_bytes: 256,
            ..small()
        };
        let l = Layout::compute(&p).unwrap();
        let n = u64::from(p.nranks);
        let first = without.total_size();
        assert_eq!(l.fbox_off(0, 0), first);
        assert_eq!(l.fbox_off(1, 0), first + CACHE_LINE + 256);
        assert_eq!(l.fbox_off(0, 1), first + n * (CACHE_LINE + 256));
        let last = l.fbox_off(p.nranks - 1, p.nranks - 1) + CACHE_LINE + 256;
        assert_eq!(l.total_size(), last.next_multiple_of(PAGE));
        // Regions and fragments do not move.
        assert_eq!(l.region_off(1), without.region_off(1));
        assert_eq!(l.locate(l.fbox_off(1, 0)), None);
        for bad in [
            1,
            64,
            255,
            300,
            768,
            MAX_FBOX_BYTES + 64,
            MAX_FBOX_BYTES * 2,
        ] {
            let e = Layout::compute(&LayoutParams {
                fbox_bytes: bad,
                ..small()
            })
            .unwrap_err();
            assert_eq!(e, LayoutError::BadFboxSize(bad));
            assert!(e.to_string().contains("fast box"), "{e}");
        }
    }

    #[test]
    fn overflow_is_a_clear_error() {
        let p = LayoutParams {
            nranks: MAX_RANKS,
            fifo_size: MAX_FIFO_SIZE,
            eager_size: MAX_FRAG_PAYLOAD,
            eager_count: MAX_FRAG_COUNT,
            max_size: MAX_FRAG_PAYLOAD,
            max_count: MAX_FRAG_COUNT,
            fbox_bytes: MAX_FBOX_BYTES,
        };
        let e = Layout::compute(&p).unwrap_err();
        assert!(matches!(e, LayoutError::TooLarge { .. }));
        assert!(e.to_string().contains("too large"), "{e}");
    }

    #[test]
    fn pool_choice_and_never_full() {
        let l = Layout::compute(&small()).unwrap();
        assert_eq!(l.pool_for(0), Some(PoolKind::Eager));
        assert_eq!(l.pool_for(100), Some(PoolKind::Eager));
        assert_eq!(l.pool_for(101), Some(PoolKind::Max));
        assert_eq!(l.pool_for(1000), Some(PoolKind::Max));
        assert_eq!(l.pool_for(1001), None);
        assert!(!l.fifo_never_full());
        let big = Layout::compute(&LayoutParams {
            fifo_size: 32,
            ..small()
        })
        .unwrap();
        assert!(big.fifo_never_full()); // 3 ranks * 7 frags = 21 <= 32
        let no_max = Layout::compute(&LayoutParams {
            max_count: 0,
            fbox_bytes: 0,
            ..small()
        })
        .unwrap();
        assert_eq!(no_max.pool_for(101), None);
    }
}
