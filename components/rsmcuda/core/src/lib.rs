//! rsmcuda core: CUDA IPC handshake state machine, remote memory-handle cache and the
//! in-order completion ring of IPC copies (sans-IO).
//!
//! The glue (`components/rsmcuda/btl`, `components/rsmcuda/cuda`) owns shared memory,
//! the CUDA driver (loaded at run time) and the BTL callbacks; this crate decides what
//! to do and keeps the invariants listed in README.md, and talks to CUDA only through
//! the traits it defines.
#![forbid(unsafe_code)]

pub mod cache;
pub mod copy;
pub mod ipc;

#[cfg(test)]
mod testutil;
