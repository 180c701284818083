//! The `#[repr(C)]` structures that live inside the segment.
//!
//! Every field is an atomic: several processes read and write these structures, and a peer
//! that misbehaves must at worst produce wrong values, never a data race in the Rust sense.
//! Relaxed atomics compile to plain loads and stores on x86_64 and aarch64, so this costs
//! nothing; the orderings that matter are spelled out where they are used. Zeroed memory
//! (what `ftruncate` gives) is a valid value of every structure here.
//!
//! Lock-free 32/64-bit atomics are address-free on the platforms we build for, which is
//! what makes them usable across processes that map the segment at different addresses.

use std::sync::atomic::{AtomicU32, AtomicU64};

use crate::layout::{
    FIFO_CTRL_BYTES, FRAG_HEADER_BYTES, HEADER_BYTES, RANK_ENTRY_BYTES, SLOT_BYTES,
};

/// Magic number in the first 8 bytes of a ready segment: "RSMCUDA1" read as big-endian.
/// The creator stores it last (Release); an attacher that reads 0 knows the creator is not
/// done yet.
pub const MAGIC: u64 = u64::from_be_bytes(*b"RSMCUDA1");
/// Version of the layout in this file and `layout.rs`, and of what travels through it
/// (fast box records; the CUDA control messages: 6 added the release notice); bump on
/// any change.
pub const LAYOUT_VERSION: u32 = 6;
/// Bit of [`StateLine::attached`] set by `abandon_waiting`: no attach succeeds after it.
pub const ABANDONED_BIT: u32 = 1 << 31;

/// Marker for types that may be viewed in the segment.
///
/// # Safety
/// Implementors are `#[repr(C)]`, consist only of atomics (so every bit pattern, including
/// all-zero, is valid and shared mutation through `&Self` is sound) and are `Sync`.
pub unsafe trait Shared: Sync {}

/// One cache line holding `T` alone.
#[repr(C, align(64))]
pub struct CacheLine<T>(pub T);

/// The creator-written identity of the segment (read-only after publication).
#[repr(C)]
pub struct IdentityLine {
    /// [`MAGIC`] once the segment is ready; 0 before.
    pub magic: AtomicU64,
    /// [`LAYOUT_VERSION`] of the creator.
    pub version: AtomicU32,
    /// `LayoutParams::nranks`.
    pub nranks: AtomicU32,
    /// Total bytes, as computed by the creator's layout.
    pub total_size: AtomicU64,
    /// `LayoutParams::fifo_size`.
    pub fifo_size: AtomicU32,
    /// `LayoutParams::eager_size`.
    pub eager_size: AtomicU32,
    /// `LayoutParams::eager_count`.
    pub eager_count: AtomicU32,
    /// `LayoutParams::max_size`.
    pub max_size: AtomicU32,
    /// `LayoutParams::max_count`.
    pub max_count: AtomicU32,
    /// Local rank of the creator.
    pub leader_rank: AtomicU32,
    /// Process id of the creator.
    pub leader_pid: AtomicU32,
    /// `LayoutParams::fbox_bytes`.
    pub fbox_bytes: AtomicU32,
}

/// The mutable lifecycle state (its own cache line).
#[repr(C)]
pub struct StateLine {
    /// Number of attached ranks (creator included) | [`ABANDONED_BIT`].
    pub attached: AtomicU32,
    /// 1 once some process has called `shm_unlink` (so exactly one does).
    pub unlinked: AtomicU32,
}

/// The segment header at offset 0.
#[repr(C)]
pub struct SegmentHeader {
    /// Identity, written before `magic` is published.
    pub id: CacheLine<IdentityLine>,
    /// Lifecycle counters.
    pub state: CacheLine<StateLine>,
}

/// One entry of the rank table.
#[repr(C, align(64))]
pub struct RankEntry {
    /// 1 once this rank has attached (or created); guards against two processes
    /// claiming the same rank.
    pub attached: AtomicU32,
    /// Process id of the rank.
    pub pid: AtomicU32,
    /// 1 once the rank's fragment pool has been claimed (owner-only allocation).
    pub pool_claimed: AtomicU32,
    /// Reserved.
    pub _reserved: AtomicU32,
    /// Offset of the rank's FIFO control block (mirrors the layout; checked on attach).
    pub fifo_off: AtomicU64,
    /// Offset of the rank's eager pool (mirrors the layout).
    pub eager_off: AtomicU64,
    /// Offset of the rank's max pool (mirrors the layout).
    pub max_off: AtomicU64,
    /// Virtual address (in the rank's own process) of its CMA probe word.
    pub cma_probe_addr: AtomicU64,
}

/// The FIFO reader's cache line.
#[repr(C)]
pub struct ReaderLine {
    /// Next position to read (saved when a reader handle is dropped).
    pub head: AtomicU64,
    /// 1 while a reader handle exists (single-consumer guard).
    pub claimed: AtomicU32,
}

/// A FIFO's control block: writers' tail and the reader's line on separate lines.
#[repr(C)]
pub struct FifoCtrl {
    /// Next position a writer will reserve (CAS by writers).
    pub tail: CacheLine<AtomicU64>,
    /// Reader state.
    pub reader: CacheLine<ReaderLine>,
}

/// A FIFO slot: the sequence stamp and the value it publishes.
#[repr(C)]
pub struct Slot {
    /// Vyukov stamp, see `fifo.rs`.
    pub seq: AtomicU64,
    /// The value (a `FifoValue`).
    pub value: AtomicU64,
}

/// The header at the start of every fragment; the payload follows it.
#[repr(C)]
pub struct FragHeader {
    /// The fragment's own offset, written by the owner whenever it posts the fragment (0
    /// before the first post); a receiver checks it against the offset it was handed, and
    /// echoes it back as the ACK.
    pub self_offset: AtomicU64,
    /// Owning (sending) rank, written with `self_offset`.
    pub owner: AtomicU32,
    /// Payload bytes in use (written by the owner before posting).
    pub len: AtomicU32,
    /// Active-message tag (u8 value) of the payload.
    pub tag: AtomicU32,
    /// Reserved.
    pub _reserved: AtomicU32,
    /// Free for the glue (e.g. a sequence number for debugging), carried with the payload.
    pub user: AtomicU64,
}

/// The control line of a fast box: the reader's position (bytes consumed, never wraps).
#[repr(C, align(64))]
pub struct FboxCtrl {
    /// Written by the reader (Release) after it is done with the bytes before it.
    pub read: AtomicU64,
}

/// One 8-byte word of a fast box ring (a record header, or the zero that ends the data).
#[repr(C)]
pub struct FboxWord(pub AtomicU64);

// SAFETY: every type below is #[repr(C)] and made only of atomics (or of such types),
// hence valid for all bit patterns, interior-mutable and Sync.
unsafe impl Shared for SegmentHeader {}
// SAFETY: as above.
unsafe impl Shared for RankEntry {}
// SAFETY: as above.
unsafe impl Shared for FifoCtrl {}
// SAFETY: as above.
unsafe impl Shared for Slot {}
// SAFETY: as above.
unsafe impl Shared for FragHeader {}
// SAFETY: as above.
unsafe impl Shared for FboxCtrl {}
// SAFETY: as above.
unsafe impl Shared for FboxWord {}

const _: () = {
    assert!(size_of::<SegmentHeader>() as u64 == HEADER_BYTES);
    assert!(size_of::<RankEntry>() as u64 == RANK_ENTRY_BYTES);
    assert!(size_of::<FifoCtrl>() as u64 == FIFO_CTRL_BYTES);
    assert!(size_of::<Slot>() as u64 == SLOT_BYTES);
    assert!(size_of::<FragHeader>() as u64 == FRAG_HEADER_BYTES);
    assert!(size_of::<FboxCtrl>() == 64);
    assert!(align_of::<SegmentHeader>() == 64);
    assert!(align_of::<FifoCtrl>() == 64);
    assert!(align_of::<Slot>() <= SLOT_BYTES as usize);
    assert!(align_of::<FragHeader>() <= 64);
    // Atomics must be lock-free to be shared between processes.
    assert!(cfg!(target_has_atomic = "64"));
};
