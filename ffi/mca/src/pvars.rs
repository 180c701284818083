//! MPI_T performance variables: counters and high-water marks read by tools
//! (`MPI_T_pvar_read`) from the component's atomics.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::params::Level;
use crate::strings::lossy_cstring;
use ompi_sys as sys;

/// The kind of value a performance variable exposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PvarClass {
    /// Monotonically increasing count of events.
    Counter,
    /// The largest value seen so far.
    HighWatermark,
}

unsafe extern "C" fn read_u64(
    pvar: *const sys::mca_base_pvar_t,
    value: *mut c_void,
    _obj: *mut c_void,
) -> c_int {
    crate::guard::guard("pvar get_value", sys::OPAL_ERROR, || {
        // SAFETY: ctx was set at registration to a &'static AtomicU64; `value` points to
        // the tool's buffer of `count` (1) unsigned long long as we declared.
        unsafe {
            let counter = &*((*pvar).ctx as *const AtomicU64);
            *(value as *mut u64) = counter.load(Ordering::Relaxed);
        }
        0
    })
}

unsafe extern "C" fn notify_single(
    _pvar: *mut sys::mca_base_pvar_t,
    event: sys::mca_base_pvar_event_t,
    _obj: *mut c_void,
    count: *mut c_int,
) -> c_int {
    if event == sys::MCA_BASE_PVAR_HANDLE_BIND && !count.is_null() {
        // SAFETY: on HANDLE_BIND the tool asks how many values the handle holds.
        unsafe { *count = 1 };
    }
    0
}

/// Registers a read-only, continuous, unbound 64-bit pvar backed by `value`.
///
/// # Safety
/// `component` must be the component's static structure (see `Registrar::new`).
pub unsafe fn register(
    component: *const sys::mca_base_component_t,
    name: &str,
    description: &str,
    class: PvarClass,
    value: &'static AtomicU64,
) -> Result<c_int> {
    let name_c = lossy_cstring(name);
    let desc_c = lossy_cstring(description);
    let var_class = match class {
        PvarClass::Counter => sys::MCA_BASE_PVAR_CLASS_COUNTER,
        PvarClass::HighWatermark => sys::MCA_BASE_PVAR_CLASS_HIGHWATERMARK,
    };
    let level = Level::TUNER_DETAIL;
    // SAFETY: valid component and strings (copied by the callee); ctx is 'static and
    // matches what read_u64 expects; the callbacks never unwind.
    let index = unsafe {
        sys::mca_base_component_pvar_register(
            component,
            name_c.as_ptr(),
            desc_c.as_ptr(),
            level_raw(level),
            var_class as c_int,
            sys::MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG,
            std::ptr::null_mut(),
            sys::MCA_BASE_VAR_BIND_NO_OBJECT as c_int,
            sys::MCA_BASE_PVAR_FLAG_READONLY | sys::MCA_BASE_PVAR_FLAG_CONTINUOUS,
            Some(read_u64),
            None,
            Some(notify_single),
            value as *const AtomicU64 as *mut c_void,
        )
    };
    if index < 0 {
        Err(Error::from_code(index).unwrap_or(Error::ERROR))
    } else {
        Ok(index)
    }
}

fn level_raw(level: Level) -> sys::mca_base_var_info_lvl_t {
    // Level 5 ("tuner detail") is where the reference components put their pvars.
    let _ = level;
    sys::OPAL_INFO_LVL_5
}

/// Raises a high-water mark to `candidate` if it is larger.
pub fn raise_highwater(mark: &AtomicU64, candidate: u64) {
    mark.fetch_max(candidate, Ordering::Relaxed);
}
