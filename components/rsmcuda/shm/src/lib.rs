//! rsmcuda shared memory: the segment and the lock-free multi-writer FIFOs inside it (raw)
//!
//! A segment is created by one process and attached by the others ([`Segment`]), named
//! in /dev/shm or anonymous (a memfd found among the creator's open files, [`Backing`],
//! [`Locator`]); inside it, per rank: a multi-writer single-reader FIFO of 64-bit values
//! ([`FifoWriter`], [`FifoReader`], [`FifoValue`]) and two pools of fixed-size fragments
//! allocated only by their owner ([`FragPool`], [`Frag`], [`Incoming`]). A fragment travels
//! to its receiver as a SEND value and comes back to its owner as an ACK value. [`cma`]
//! offers single-copy transfers between processes (`process_vm_readv/writev`).
//!
//! Everything inside the segment is addressed by relative offsets computed by a pure
//! function ([`Layout::compute`]); nothing in shared memory is a pointer. See README.md for
//! the layout diagram, the FIFO algorithm and the lifecycle guarantees.
//!
//! This is one of the crate's few places with `unsafe`: it lives in `sys.rs` (libc calls),
//! `mapping.rs` (offset → reference), `freelist.rs` and `fbox.rs` (payload byte ranges), `trylock.rs` (exclusive access) and `cma.rs`; `numa.rs` is safe and
//! calls `sys.rs` for `mbind`, `get_mempolicy` and `sched_getaffinity`. Open MPI's hwloc
//! topology is read by the BTL through `mca::hwloc`; this crate stays OS-level.

pub mod cma;
mod error;
mod fbox;
mod fifo;
mod freelist;
mod layout;
mod mapping;
mod name;
pub mod numa;
mod repr;
mod segment;
mod shared;
mod sys;
mod trylock;
mod value;

pub use error::{FragError, ShmError};
pub use fbox::{
    FBOX_TAIL, FboxCorrupt, FboxProbe, FboxReader, FboxReservation, FboxWriter, SharedFboxWriter,
};
pub use fifo::{
    FifoKind, FifoProbe, FifoReader, FifoValue, FifoWriter, Full, Received, STATUS_BIT, TAG_MASK,
    TYPE_MASK,
};
pub use freelist::{AckInfo, Frag, FragPool, Incoming};
pub use layout::{
    CACHE_LINE, FRAG_HEADER_BYTES, FragLoc, Layout, LayoutError, LayoutParams, MAX_FBOX_BYTES,
    MAX_FIFO_SIZE, MAX_FRAG_COUNT, MAX_FRAG_PAYLOAD, MAX_RANKS, MAX_SEGMENT_BYTES, MIN_FBOX_BYTES,
    PoolKind,
};
pub use name::{SegmentName, node_key};
pub use repr::{LAYOUT_VERSION, MAGIC};
pub use segment::{AbandonOutcome, Locator, Retry, Segment};
pub use shared::Backing;
pub use trylock::{TryLock, TryLockGuard};
