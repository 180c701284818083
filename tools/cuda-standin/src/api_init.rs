//! cuInit, the driver version, the error strings, and the stand-in's own counter query
//! (`rmcaCudaStandinCount`).

use std::ffi::{c_char, c_int, c_uint, c_ulonglong};

use crate::abi::{code, entry, put};
use crate::codes::{self, *};
use crate::{report, state};

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
    let found = std::panic::catch_unwind(|| name.to_str().ok().and_then(report::get));
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
