//! The C ABI's shapes and the wrapper every entry point runs in: the handle and pointer
//! types, out-pointer writes, and `entry` (count, inject, catch panics).

use std::ffi::{c_ulonglong, c_void};
use std::panic::AssertUnwindSafe;

use crate::codes::*;
use crate::{counters, inject, ipc};

/// `CUipcMemHandle` / `CUipcEventHandle`: 64 opaque bytes, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IpcHandle {
    pub reserved: [u8; ipc::HANDLE_SIZE],
}

pub type CuPtr = c_ulonglong;
pub type Handle = *mut c_void;

/// Counts the call of `name` (plain name), applies failure injection, runs `f` and
/// turns a panic into CUDA_ERROR_UNKNOWN.
pub(crate) fn entry(name: &'static str, f: impl FnOnce() -> CuResult) -> CuResult {
    counters::call(name);
    if let Some(code) = inject::check(name) {
        return code;
    }
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            crate::log!("{name}: internal panic, returning CUDA_ERROR_UNKNOWN");
            UNKNOWN
        }
    }
}

/// Turns a `Result` into a result code.
pub(crate) fn code(r: Result<(), CuResult>) -> CuResult {
    match r {
        Ok(()) => SUCCESS,
        Err(e) => e,
    }
}

/// Writes `v` through a caller's out-pointer; NULL is CUDA_ERROR_INVALID_VALUE.
///
/// # Safety
/// `p` must be NULL or valid for a write of `T`.
pub(crate) unsafe fn put<T>(p: *mut T, v: T) -> Result<(), CuResult> {
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: non-NULL; the caller guarantees it is writable for a `T`.
    unsafe { p.write_unaligned(v) };
    Ok(())
}
