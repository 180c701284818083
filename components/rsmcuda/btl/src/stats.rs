//! MPI_T performance variables (`btl_rsmcuda_<name>`), read by tools from these atomics.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use mca::Result;
use mca::pvars::{self, PvarClass};
use mca::sys;

pub static SENDS: AtomicU64 = AtomicU64::new(0);
pub static SENDIS: AtomicU64 = AtomicU64::new(0);
pub static RECEIVES: AtomicU64 = AtomicU64::new(0);
pub static FIFO_FULL: AtomicU64 = AtomicU64::new(0);
pub static PENDING_HWM: AtomicU64 = AtomicU64::new(0);
pub static SINGLE_COPY_BYTES: AtomicU64 = AtomicU64::new(0);
pub static SINGLE_COPY_OPS: AtomicU64 = AtomicU64::new(0);
pub static CACHE_HITS: AtomicU64 = AtomicU64::new(0);
pub static CACHE_MISSES: AtomicU64 = AtomicU64::new(0);
pub static CACHE_EVICTIONS: AtomicU64 = AtomicU64::new(0);
pub static CACHE_RELEASED: AtomicU64 = AtomicU64::new(0);
pub static RELEASE_NOTICES: AtomicU64 = AtomicU64::new(0);
pub static IPC_PEERS: AtomicU64 = AtomicU64::new(0);
pub static IPC_UNAVAILABLE: AtomicU64 = AtomicU64::new(0);
pub static CUDA_FAILURES: AtomicU64 = AtomicU64::new(0);
pub static UNSHAREABLE: AtomicU64 = AtomicU64::new(0);

pub fn bump(counter: &AtomicU64) {
    add(counter, 1);
}

/// Counts `n` (wrapping). Below MPI_THREAD_MULTIPLE counting threads never overlap, and a
/// plain load and store is exact; a locked add on the message path would wait for the
/// ring stores before it (see `mca::threads`).
pub fn add(counter: &AtomicU64, n: u64) {
    add_as(counter, n, mca::threads::concurrent());
}

/// [`add`] for a caller that already asked `mca::threads::concurrent()`.
#[inline]
pub fn add_as(counter: &AtomicU64, n: u64, concurrent: bool) {
    if concurrent {
        counter.fetch_add(n, Relaxed);
    } else {
        counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
    }
}

const TABLE: &[(&str, &str, PvarClass, &AtomicU64)] = &[
    (
        "sends",
        "Fragments sent with btl_send",
        PvarClass::Counter,
        &SENDS,
    ),
    (
        "sendis",
        "Fragments sent with the immediate-send fast path",
        PvarClass::Counter,
        &SENDIS,
    ),
    (
        "receives",
        "Fragments delivered to the upper layer",
        PvarClass::Counter,
        &RECEIVES,
    ),
    (
        "fifo_full",
        "Pushes refused by a full FIFO (the value waited on a pending list)",
        PvarClass::Counter,
        &FIFO_FULL,
    ),
    (
        "pending_high_water",
        "Most values waiting on one peer's pending list",
        PvarClass::HighWatermark,
        &PENDING_HWM,
    ),
    (
        "single_copy_bytes",
        "Bytes moved by single copy (CMA get)",
        PvarClass::Counter,
        &SINGLE_COPY_BYTES,
    ),
    (
        "single_copy_ops",
        "Single-copy (CMA get) operations",
        PvarClass::Counter,
        &SINGLE_COPY_OPS,
    ),
    (
        "cuda_ipc_cache_hits",
        "Remote device buffers found mapped in the IPC handle cache",
        PvarClass::Counter,
        &CACHE_HITS,
    ),
    (
        "cuda_ipc_cache_misses",
        "Remote device buffers that had to be opened (cuIpcOpenMemHandle)",
        PvarClass::Counter,
        &CACHE_MISSES,
    ),
    (
        "cuda_ipc_cache_evictions",
        "IPC mappings closed to make room, or stale: the peer allocated anew at or over \
         their address",
        PvarClass::Counter,
        &CACHE_EVICTIONS,
    ),
    (
        "cuda_ipc_released",
        "IPC mappings closed because their owner said it freed the allocation",
        PvarClass::Counter,
        &CACHE_RELEASED,
    ),
    (
        "cuda_ipc_release_notices",
        "Notices sent to peers that a device allocation they received was freed",
        PvarClass::Counter,
        &RELEASE_NOTICES,
    ),
    (
        "cuda_ipc_peers",
        "Local peers with which CUDA IPC was agreed (device messages read in place)",
        PvarClass::Counter,
        &IPC_PEERS,
    ),
    (
        "cuda_ipc_unavailable_peers",
        "Local peers with which CUDA IPC cannot be used although this process has it: \
         their device messages go through host memory",
        PvarClass::Counter,
        &IPC_UNAVAILABLE,
    ),
    (
        "cuda_failures",
        "CUDA calls of device gets that failed mid-transfer (the PML resent those parts \
         through host memory)",
        PvarClass::Counter,
        &CUDA_FAILURES,
    ),
    (
        "cuda_unshareable_buffers",
        "Device buffers offered for remote read that CUDA IPC cannot share (managed \
         memory, other allocators): the PML moved them through host memory",
        PvarClass::Counter,
        &UNSHAREABLE,
    ),
];

/// Registers every counter with the MPI_T interface.
pub fn register(component: *const sys::mca_base_component_t) -> Result<()> {
    for (name, help, class, counter) in TABLE {
        // SAFETY: `component` is our exported structure (the caller passes
        // Exported::raw()); the counters are statics.
        unsafe { pvars::register(component, name, help, *class, counter)? };
    }
    Ok(())
}
