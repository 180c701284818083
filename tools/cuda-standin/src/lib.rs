//! A CPU-only stand-in for the CUDA driver library (`libcuda.so.1`), a test fixture:
//! the real entry points with real semantics (device memory is CPU-visible shared
//! memory, IPC works across processes, streams and events complete in order), so that
//! CUDA-aware Open MPI and rsmcuda can be tested on machines without a GPU. Never
//! installed; see README.md.
//!
//! Every exported function is `extern "C"`, counts its call, may fail by injection, and
//! never lets a panic cross into C.

#![allow(non_snake_case)]

// Layered one way, each module using only those listed before it: codes, config (and
// `log!`), counters, inject, memory, stream, state, queue, ipc, report, abi, then the
// entry points (api_ctx, api_mem, api_stream, api_init, unsupported) and getproc, which
// resolves names to all of them. Nothing uses this root but the re-exports' users.
mod abi;
pub mod codes;
pub mod config;
pub mod counters;
pub mod inject;
pub mod ipc;
pub mod memory;
pub mod queue;
pub mod report;
pub mod state;
pub mod stream;

mod api_ctx;
mod api_init;
mod api_mem;
mod api_stream;
mod getproc;
mod unsupported;

pub use abi::{CuPtr, Handle, IpcHandle};
pub use api_ctx::*;
pub use api_init::*;
pub use api_mem::*;
pub use api_stream::*;
pub use getproc::*;
pub use unsupported::*;
