//! A CPU-only stand-in for the CUDA driver library (`libcuda.so.1`), a test fixture:
//! the real entry points with real semantics (device memory is CPU-visible shared
//! memory, IPC works across processes, streams and events complete in order), so that
//! CUDA-aware Open MPI and rsmcuda can be tested on machines without a GPU. Never
//! installed; see README.md.
//!
//! Every exported function is `extern "C"`, counts its call, may fail by injection, and
//! never lets a panic cross into C.

#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};
use std::panic::AssertUnwindSafe;

pub mod codes;
pub mod config;
pub mod counters;
pub mod inject;
pub mod ipc;
pub mod memory;
pub mod state;
pub mod stream;

mod api_ctx;
mod api_mem;
mod api_stream;
mod getproc;
mod unsupported;

pub use api_ctx::*;
pub use api_mem::*;
pub use api_stream::*;
pub use getproc::*;
pub use unsupported::*;

use codes::*;

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
            log!("{name}: internal panic, returning CUDA_ERROR_UNKNOWN");
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

/// `int rmcaCudaStandinCount(const char *name, unsigned long long *value)`: 0 and the
/// value when the counter exists, -1 otherwise.
///
/// # Safety
/// `name` is a NUL-terminated string, `value` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmcaCudaStandinCount(
    name: *const c_char,
    value: *mut c_ulonglong,
) -> c_int {
    if name.is_null() {
        return -1;
    }
    // SAFETY: the caller passes a NUL-terminated string.
    let name = unsafe { std::ffi::CStr::from_ptr(name) };
    let found = std::panic::catch_unwind(|| name.to_str().ok().and_then(counters::get));
    match found {
        Ok(Some(v)) => {
            if !value.is_null() {
                // SAFETY: non-NULL and writable per the contract.
                unsafe { value.write_unaligned(v) };
            }
            0
        }
        _ => -1,
    }
}

/// Static NUL-terminated strings for the error calls.
fn error_text(
    which: fn(CuResult) -> Option<&'static [u8]>,
    err: CuResult,
    out: *mut *const c_char,
) -> CuResult {
    match which(err) {
        // SAFETY: `out` is NULL (rejected by `put`) or writable per the API.
        Some(s) => code(unsafe { put(out, s.as_ptr().cast()) }),
        None => {
            // SAFETY: as above.
            let _ = unsafe { put(out, std::ptr::null()) };
            INVALID_VALUE
        }
    }
}

/// # Safety
/// `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetErrorString(err: c_int, out: *mut *const c_char) -> c_int {
    entry("cuGetErrorString", || {
        error_text(codes::description, err, out)
    })
}

/// # Safety
/// `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetErrorName(err: c_int, out: *mut *const c_char) -> c_int {
    entry("cuGetErrorName", || error_text(codes::name, err, out))
}

/// # Safety
/// `version` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> c_int {
    entry("cuDriverGetVersion", || {
        // SAFETY: out-pointer per the API.
        code(unsafe { put(version, 12090) })
    })
}

/// # Safety
/// None beyond the C API's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuInit(flags: c_uint) -> c_int {
    entry("cuInit", || state::init(flags))
}
