//! cuGetProcAddress: resolves driver names to this library's own functions (implemented
//! or not-supported stubs); unknown names are CUDA_ERROR_NOT_FOUND with a log line.

use std::ffi::{c_char, c_int, c_ulonglong, c_void};

use crate::abi::{entry, put};
use crate::api_ctx::*;
use crate::api_init::*;
use crate::api_mem::*;
use crate::api_stream::*;
use crate::codes::*;

macro_rules! procs {
    ($($name:ident),* $(,)?) => {
        /// The implemented entry points by name (addresses).
        fn implemented() -> &'static [(&'static str, usize)] {
            static TABLE: std::sync::LazyLock<Vec<(&'static str, usize)>> =
                std::sync::LazyLock::new(|| {
                    vec![$((stringify!($name), $name as *const () as usize)),*]
                });
            TABLE.as_slice()
        }
    };
}

procs! {
    cuCtxCreate, cuCtxCreate_v2, cuCtxDestroy, cuCtxDestroy_v2, cuCtxGetCurrent,
    cuCtxGetDevice, cuCtxPopCurrent, cuCtxPopCurrent_v2, cuCtxPushCurrent,
    cuCtxPushCurrent_v2, cuCtxSetCurrent, cuCtxSynchronize, cuDeviceCanAccessPeer,
    cuDeviceGet, cuDeviceGetAttribute, cuDeviceGetCount, cuDeviceGetName,
    cuDeviceGetPCIBusId, cuDeviceGetUuid, cuDeviceGetUuid_v2, cuDevicePrimaryCtxGetState,
    cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRetain,
    cuDevicePrimaryCtxSetFlags, cuDevicePrimaryCtxSetFlags_v2,
    cuDeviceTotalMem, cuDeviceTotalMem_v2, cuDriverGetVersion, cuEventCreate,
    cuEventDestroy, cuEventDestroy_v2, cuEventElapsedTime, cuEventQuery, cuEventRecord,
    cuEventRecordWithFlags, cuEventSynchronize, cuGetErrorName, cuGetErrorString,
    cuGetProcAddress, cuGetProcAddress_v2, cuInit, cuIpcCloseMemHandle, cuIpcGetEventHandle,
    cuIpcGetMemHandle, cuIpcOpenEventHandle, cuIpcOpenMemHandle, cuIpcOpenMemHandle_v2,
    cuMemAlloc, cuMemAllocHost, cuMemAllocHost_v2, cuMemAllocManaged, cuMemAlloc_v2,
    cuMemFree, cuMemFreeHost, cuMemFree_v2, cuMemGetAddressRange, cuMemGetAddressRange_v2,
    cuMemGetInfo, cuMemGetInfo_v2, cuMemHostAlloc, cuMemHostGetDevicePointer,
    cuMemHostGetDevicePointer_v2, cuMemHostRegister, cuMemHostRegister_v2,
    cuMemHostUnregister, cuMemRetainAllocationHandle, cuMemcpy, cuMemcpyAsync, cuMemcpyDtoD,
    cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2, cuMemcpyDtoD_v2, cuMemcpyDtoH,
    cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, cuMemcpyDtoH_v2, cuMemcpyHtoD,
    cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, cuMemcpyHtoD_v2, cuMemcpyPeer,
    cuMemcpyPeerAsync, cuMemsetD8, cuMemsetD8Async, cuMemsetD8_v2, cuPointerGetAttribute,
    cuPointerGetAttributes, cuPointerSetAttribute, cuStreamCreate,
    cuStreamCreateWithPriority, cuStreamDestroy, cuStreamDestroy_v2, cuStreamQuery,
    cuStreamSynchronize, cuStreamWaitEvent, rmcaCudaStandinCount,
}

/// The address of `name`, if this library exports it.
pub fn lookup(name: &str) -> Option<*const c_void> {
    if let Some((_, p)) = implemented().iter().find(|(n, _)| *n == name) {
        return Some(*p as *const c_void);
    }
    crate::unsupported::UNSUPPORTED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f as *const ())
        .map(|p| p.cast::<c_void>())
}

unsafe fn get_proc(symbol: *const c_char, pfn: *mut *mut c_void, status: *mut c_int) -> CuResult {
    if symbol.is_null() || pfn.is_null() {
        return INVALID_VALUE;
    }
    // SAFETY: a NUL-terminated name per the API.
    let name = unsafe { std::ffi::CStr::from_ptr(symbol) }.to_string_lossy();
    let found = lookup(&name);
    // SAFETY: out-pointers per the API (status may be NULL).
    unsafe {
        let _ = put(pfn, found.unwrap_or(std::ptr::null()) as *mut c_void);
        if !status.is_null() {
            let _ = put(status, if found.is_some() { 0 } else { 1 });
        }
    }
    match found {
        Some(_) => SUCCESS,
        None => {
            crate::log!(
                "cuGetProcAddress: {name} is not exported by the stand-in (CUDA_ERROR_NOT_FOUND)"
            );
            NOT_FOUND
        }
    }
}

/// # Safety
/// `symbol` NUL-terminated, `pfn` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    _version: c_int,
    _flags: c_ulonglong,
) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuGetProcAddress", || unsafe {
        get_proc(symbol, pfn, std::ptr::null_mut())
    })
}

/// # Safety
/// `symbol` NUL-terminated, `pfn` writable, `status` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    _version: c_int,
    _flags: c_ulonglong,
    status: *mut c_int,
) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuGetProcAddress", || unsafe {
        get_proc(symbol, pfn, status)
    })
}
