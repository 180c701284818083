//! dlopen/dlsym of the driver's entry points. The library is never closed: the
//! driver does not support being unloaded while contexts exist.

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};

use crate::IpcMemHandle;
use crate::error::LoadError;

type Ptr = *mut c_void;

/// The entry points, typed as in cuda.h.
#[derive(Debug)]
pub(crate) struct Fns {
    pub init: unsafe extern "C" fn(c_uint) -> c_int,
    pub driver_get_version: unsafe extern "C" fn(*mut c_int) -> c_int,
    pub device_get_count: unsafe extern "C" fn(*mut c_int) -> c_int,
    pub device_get: unsafe extern "C" fn(*mut c_int, c_int) -> c_int,
    pub primary_ctx_retain: unsafe extern "C" fn(*mut Ptr, c_int) -> c_int,
    pub ctx_set_current: unsafe extern "C" fn(Ptr) -> c_int,
    pub ctx_get_device: unsafe extern "C" fn(*mut c_int) -> c_int,
    pub device_can_access_peer: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int,
    pub pointer_get_attribute: unsafe extern "C" fn(Ptr, c_int, u64) -> c_int,
    pub pointer_set_attribute: unsafe extern "C" fn(*const c_void, c_int, u64) -> c_int,
    pub pointer_get_attributes: unsafe extern "C" fn(c_uint, *const c_int, *mut Ptr, u64) -> c_int,
    pub mem_get_address_range: unsafe extern "C" fn(*mut u64, *mut usize, u64) -> c_int,
    pub ipc_get_mem_handle: unsafe extern "C" fn(*mut IpcMemHandle, u64) -> c_int,
    pub ipc_open_mem_handle: unsafe extern "C" fn(*mut u64, IpcMemHandle, c_uint) -> c_int,
    pub ipc_close_mem_handle: unsafe extern "C" fn(u64) -> c_int,
    pub stream_create: unsafe extern "C" fn(*mut Ptr, c_uint) -> c_int,
    pub event_create: unsafe extern "C" fn(*mut Ptr, c_uint) -> c_int,
    pub event_destroy: unsafe extern "C" fn(Ptr) -> c_int,
    pub event_record: unsafe extern "C" fn(Ptr, Ptr) -> c_int,
    pub event_query: unsafe extern "C" fn(Ptr) -> c_int,
    pub memcpy_async: unsafe extern "C" fn(u64, u64, usize, Ptr) -> c_int,
    pub mem_alloc: unsafe extern "C" fn(*mut u64, usize) -> c_int,
    pub mem_free: unsafe extern "C" fn(u64) -> c_int,
    pub memcpy_htod: unsafe extern "C" fn(u64, *const c_void, usize) -> c_int,
    pub memcpy_dtoh: unsafe extern "C" fn(*mut c_void, u64, usize) -> c_int,
    pub get_error_string: unsafe extern "C" fn(c_int, *mut *const c_char) -> c_int,
}

// SAFETY: plain function pointers into a library that stays loaded.
unsafe impl Send for Fns {}
// SAFETY: as above; the driver API is thread-safe.
unsafe impl Sync for Fns {}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a thread-local NUL-terminated message.
    let msg = unsafe { libc::dlerror() };
    if msg.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-NULL, NUL-terminated (see above), copied at once.
        unsafe { CStr::from_ptr(msg) }
            .to_string_lossy()
            .into_owned()
    }
}

/// Reinterprets a symbol address as the function-pointer type `F`.
///
/// # Safety
/// `F` must be an `extern "C"` function-pointer type matching the symbol's real
/// signature.
unsafe fn as_fn<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(
        size_of::<F>(),
        size_of::<*mut c_void>(),
        "F must be a fn pointer"
    );
    // SAFETY: sizes checked above; the caller guarantees the signature.
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
}

impl Fns {
    pub fn open(path: &str) -> Result<Fns, LoadError> {
        let c_path = CString::new(path).map_err(|_| LoadError::NotFound {
            path: path.to_owned(),
            reason: "path contains NUL".into(),
        })?;
        // SAFETY: a NUL-terminated path; RTLD_LOCAL keeps the driver's symbols to us.
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(LoadError::NotFound {
                path: path.to_owned(),
                reason: dlerror(),
            });
        }
        let find = |names: &[&'static str]| -> Result<*mut c_void, LoadError> {
            for name in names {
                let c = CString::new(*name).expect("symbol names have no NUL");
                // SAFETY: live handle from dlopen, NUL-terminated name.
                let sym = unsafe { libc::dlsym(handle, c.as_ptr()) };
                if !sym.is_null() {
                    return Ok(sym);
                }
            }
            Err(LoadError::MissingSymbol {
                path: path.to_owned(),
                name: names[0],
            })
        };
        macro_rules! sym {
            ($($name:literal),+) => {{
                let p = find(&[$($name),+])?;
                // SAFETY: the symbol is the driver function of that name, whose C
                // signature (cuda.h) is the field's type; the library is never closed.
                unsafe { as_fn(p) }
            }};
        }
        Ok(Fns {
            init: sym!("cuInit"),
            driver_get_version: sym!("cuDriverGetVersion"),
            device_get_count: sym!("cuDeviceGetCount"),
            device_get: sym!("cuDeviceGet"),
            primary_ctx_retain: sym!("cuDevicePrimaryCtxRetain"),
            ctx_set_current: sym!("cuCtxSetCurrent"),
            ctx_get_device: sym!("cuCtxGetDevice"),
            device_can_access_peer: sym!("cuDeviceCanAccessPeer"),
            pointer_get_attribute: sym!("cuPointerGetAttribute"),
            pointer_set_attribute: sym!("cuPointerSetAttribute"),
            pointer_get_attributes: sym!("cuPointerGetAttributes"),
            mem_get_address_range: sym!("cuMemGetAddressRange_v2", "cuMemGetAddressRange"),
            ipc_get_mem_handle: sym!("cuIpcGetMemHandle"),
            ipc_open_mem_handle: sym!("cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle"),
            ipc_close_mem_handle: sym!("cuIpcCloseMemHandle"),
            stream_create: sym!("cuStreamCreate"),
            event_create: sym!("cuEventCreate"),
            event_destroy: sym!("cuEventDestroy_v2", "cuEventDestroy"),
            event_record: sym!("cuEventRecord"),
            event_query: sym!("cuEventQuery"),
            memcpy_async: sym!("cuMemcpyAsync"),
            mem_alloc: sym!("cuMemAlloc_v2", "cuMemAlloc"),
            mem_free: sym!("cuMemFree_v2", "cuMemFree"),
            memcpy_htod: sym!("cuMemcpyHtoD_v2", "cuMemcpyHtoD"),
            memcpy_dtoh: sym!("cuMemcpyDtoH_v2", "cuMemcpyDtoH"),
            get_error_string: sym!("cuGetErrorString"),
        })
    }
}
