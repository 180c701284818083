//! Registration with `opal_progress`.
//!
//! Progress callbacks carry no context pointer, so each component exports one
//! `extern "C" fn() -> c_int` (made with [`progress_fn!`], which guards it) and
//! registers it here.

use crate::error::{Result, to_result};
use ompi_sys as sys;

/// The C signature `opal_progress` calls.
pub type ProgressFn = unsafe extern "C" fn() -> std::ffi::c_int;

/// Adds `callback` to opal_progress (called from every MPI progress loop).
pub fn register(callback: ProgressFn) -> Result<()> {
    // SAFETY: the callback is a plain function valid for the process lifetime.
    to_result(unsafe { sys::opal_progress_register(Some(callback)) }).map(drop)
}

/// Removes `callback` from opal_progress.
pub fn unregister(callback: ProgressFn) -> Result<()> {
    // SAFETY: as for register; unregistering an absent callback returns an error code.
    to_result(unsafe { sys::opal_progress_unregister(Some(callback)) }).map(drop)
}

/// Whether Open MPI asks waiting loops to give the core away when a pass found nothing
/// (`mpi_yield_when_idle`, on by default when a node runs more ranks than cores), as
/// `opal_progress` itself does. A component's own blocking loop should do the same:
/// the peer it waits for may be the process that needs the core.
pub fn yield_when_idle() -> bool {
    // SAFETY: a bool Open MPI sets during initialisation; opal_progress reads it
    // unsynchronised too, and a stale value only changes whether a pass yields.
    unsafe { std::ptr::read_volatile(&raw const sys::opal_progress_yield_when_idle) }
}

/// Defines a guarded `extern "C"` progress function calling `$body` (returning the
/// number of events handled).
#[macro_export]
macro_rules! progress_fn {
    ($vis:vis fn $name:ident() $body:block) => {
        $vis unsafe extern "C" fn $name() -> ::std::ffi::c_int {
            $crate::guard::guard(stringify!($name), 0, || {
                let handled: usize = $body;
                handled.min(::std::ffi::c_int::MAX as usize) as ::std::ffi::c_int
            })
        }
    };
}
