//! rsmcuda core: CUDA IPC handshake state machine (per peer and node-wide), remote
//! memory-handle cache, the owner's release notices of freed exported allocations
//! (`release`), the in-order completion ring of IPC copies, the registration
//! handle, the NUMA placement decision, and who shares which segment and how two
//! processes of different jobs meet (`rendezvous`) (sans-IO).
//!
//! The glue (`components/rsmcuda/btl`, `components/rsmcuda/cuda`) owns shared memory,
//! the CUDA driver (loaded at run time) and the BTL callbacks; this crate decides what
//! to do and keeps the invariants listed in README.md, and talks to CUDA only through
//! the traits it defines.
#![forbid(unsafe_code)]

pub mod cache;
pub mod copy;
pub mod ipc;
pub mod numa;
pub mod reg;
pub mod release;
pub mod rendezvous;
