//! The CUDA driver API, loaded at run time.
//!
//! Nothing links against CUDA: [`Driver::load`] dlopens `libcuda.so.1` and looks up
//! the few entry points rsmcuda uses. On a host without the driver it returns a
//! [`LoadError`] naming what is missing, and the caller keeps its host path.
//! The types mirror `cuda.h` (CUresult is an `int`, CUdeviceptr a 64-bit integer,
//! CUipcMemHandle 64 bytes passed by value, streams/events/contexts are pointers).

mod error;
mod loader;

use std::ffi::{c_int, c_uint, c_void};

pub use error::{CuError, LoadError};
use loader::Fns;

/// `CUDA_SUCCESS`.
pub const SUCCESS: c_int = 0;
/// `CUDA_ERROR_NOT_READY` (cuEventQuery on a pending event).
pub const ERROR_NOT_READY: c_int = 600;
/// `CUDA_ERROR_ALREADY_MAPPED` (cuIpcOpenMemHandle on an overlapping mapping).
pub const ERROR_ALREADY_MAPPED: c_int = 208;
/// `CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS`.
const IPC_LAZY_ENABLE_PEER_ACCESS: c_uint = 1;
/// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE`, `CU_MEMORYTYPE_DEVICE`.
const POINTER_ATTRIBUTE_MEMORY_TYPE: c_int = 2;
/// `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS`.
const POINTER_ATTRIBUTE_SYNC_MEMOPS: c_int = 6;
/// `CU_POINTER_ATTRIBUTE_BUFFER_ID`: a process-wide unique id of the allocation.
const POINTER_ATTRIBUTE_BUFFER_ID: c_int = 7;
const MEMORYTYPE_DEVICE: c_uint = 2;
/// `CU_STREAM_DEFAULT`, `CU_EVENT_DISABLE_TIMING`.
const STREAM_BLOCKING: c_uint = 0;
const EVENT_DISABLE_TIMING: c_uint = 2;

/// `CUipcMemHandle`: names one device allocation for other processes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpcMemHandle(pub [u8; 64]);

/// A `CUstream` created by [`Driver::stream_create`] (destroyed by the driver at
/// process exit; rsmcuda keeps one for the life of the module).
#[derive(Debug)]
pub struct Stream(*mut c_void);
// SAFETY: CUDA streams may be used from any thread of the process.
unsafe impl Send for Stream {}

/// A `CUevent` created by [`Driver::event_create`].
#[derive(Debug)]
pub struct Event(*mut c_void);
// SAFETY: CUDA events may be recorded and queried from any thread.
unsafe impl Send for Event {}

/// The loaded driver library.
#[derive(Debug)]
pub struct Driver {
    fns: Fns,
}

fn check(call: &'static str, code: c_int) -> Result<(), CuError> {
    if code == SUCCESS {
        Ok(())
    } else {
        Err(CuError { call, code })
    }
}

impl Driver {
    /// Loads `libcuda.so.1` from the loader's search path and calls `cuInit(0)`.
    pub fn load() -> Result<Driver, LoadError> {
        Self::load_from("libcuda.so.1")
    }

    /// Loads the driver from `path` (a file name or path) and initialises it.
    pub fn load_from(path: &str) -> Result<Driver, LoadError> {
        let driver = Self::open_from(path)?;
        // SAFETY: cuInit takes a flags word (must be 0) and touches no memory of ours.
        let code = unsafe { (driver.fns.init)(0) };
        check("cuInit", code).map_err(LoadError::Init)?;
        Ok(driver)
    }

    /// Loads `libcuda.so.1` without initialising it: a library inside MPI leaves `cuInit`
    /// to the application. Until the application initialises CUDA, the calls that need
    /// it fail with CUDA_ERROR_NOT_INITIALIZED (3), which callers take as "no context".
    /// Initialising it behind the application's back is not free: Open MPI 5.0's
    /// accelerator framework then checks every host buffer with
    /// `cuMemRetainAllocationHandle` (8-byte latency 2-4 µs instead of 0.4 on an H200
    /// machine, for an application that never uses the GPU).
    pub fn open() -> Result<Driver, LoadError> {
        Self::open_from("libcuda.so.1")
    }

    /// [`open`](Self::open) from `path`.
    pub fn open_from(path: &str) -> Result<Driver, LoadError> {
        Ok(Driver {
            fns: Fns::open(path)?,
        })
    }

    /// `cuDriverGetVersion` (e.g. 12040 for 12.4).
    pub fn version(&self) -> Result<i32, CuError> {
        let mut v: c_int = 0;
        // SAFETY: writes one int to our local.
        check("cuDriverGetVersion", unsafe {
            (self.fns.driver_get_version)(&mut v)
        })?;
        Ok(v)
    }

    /// `cuDeviceGetCount`.
    pub fn device_count(&self) -> Result<i32, CuError> {
        let mut n: c_int = 0;
        // SAFETY: writes one int to our local.
        check("cuDeviceGetCount", unsafe {
            (self.fns.device_get_count)(&mut n)
        })?;
        Ok(n)
    }

    /// Makes device `ordinal`'s primary context current on this thread (tests and
    /// tools; under MPI the application owns the context).
    pub fn use_primary_context(&self, ordinal: i32) -> Result<(), CuError> {
        let mut dev: c_int = 0;
        let mut ctx: *mut c_void = std::ptr::null_mut();
        // SAFETY: each call writes one value into our locals; the context handle is
        // only passed back to the driver.
        unsafe {
            check("cuDeviceGet", (self.fns.device_get)(&mut dev, ordinal))?;
            check(
                "cuDevicePrimaryCtxRetain",
                (self.fns.primary_ctx_retain)(&mut ctx, dev),
            )?;
            check("cuCtxSetCurrent", (self.fns.ctx_set_current)(ctx))
        }
    }

    /// `cuCtxGetDevice`: the device of the current context.
    pub fn current_device(&self) -> Result<i32, CuError> {
        let mut dev: c_int = 0;
        // SAFETY: writes one int to our local.
        check("cuCtxGetDevice", unsafe {
            (self.fns.ctx_get_device)(&mut dev)
        })?;
        Ok(dev)
    }

    /// `cuDeviceCanAccessPeer`.
    pub fn can_access_peer(&self, dev: i32, peer: i32) -> Result<bool, CuError> {
        let mut yes: c_int = 0;
        // SAFETY: writes one int to our local.
        check("cuDeviceCanAccessPeer", unsafe {
            (self.fns.device_can_access_peer)(&mut yes, dev, peer)
        })?;
        Ok(yes != 0)
    }

    /// True if `ptr` is device memory (`cuPointerGetAttribute(MEMORY_TYPE)`); host
    /// and unknown pointers are false.
    pub fn is_device_pointer(&self, ptr: u64) -> bool {
        let mut kind: c_uint = 0;
        // SAFETY: the attribute MEMORY_TYPE writes one unsigned int to our local; the
        // pointer is only inspected by the driver.
        let code = unsafe {
            (self.fns.pointer_get_attribute)(
                (&raw mut kind).cast(),
                POINTER_ATTRIBUTE_MEMORY_TYPE,
                ptr,
            )
        };
        code == SUCCESS && kind == MEMORYTYPE_DEVICE
    }

    /// The buffer id (`CU_POINTER_ATTRIBUTE_BUFFER_ID`) of the device allocation
    /// containing `ptr`, asked together with its memory type in one
    /// `cuPointerGetAttributes` call: `Ok(None)` for host memory and for addresses the
    /// driver does not know (a freed allocation; that call answers them with default
    /// values, not an error); a new id once the address belongs to a new allocation.
    pub fn buffer_id(&self, ptr: u64) -> Result<Option<u64>, CuError> {
        let mut kind: c_uint = 0;
        let mut id: u64 = 0;
        let attrs = [POINTER_ATTRIBUTE_MEMORY_TYPE, POINTER_ATTRIBUTE_BUFFER_ID];
        let mut data: [*mut c_void; 2] = [(&raw mut kind).cast(), (&raw mut id).cast()];
        // SAFETY: two attributes, each written to the local of its C type (unsigned int
        // and unsigned long long) that `data` points at; the pointer is only inspected.
        check("cuPointerGetAttributes", unsafe {
            (self.fns.pointer_get_attributes)(2, attrs.as_ptr(), data.as_mut_ptr(), ptr)
        })?;
        Ok((kind == MEMORYTYPE_DEVICE).then_some(id))
    }

    /// Sets `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` on the allocation containing `ptr`:
    /// synchronous memory operations on it then complete before any later access, so
    /// a peer copying from it through IPC sees what the owner wrote (what a CUDA-aware
    /// Open MPI's registration does instead of sending an IPC event).
    pub fn set_sync_memops(&self, ptr: u64) -> Result<(), CuError> {
        let enable: c_uint = 1;
        // SAFETY: the attribute reads one unsigned int from our local; the driver
        // validates the pointer.
        check("cuPointerSetAttribute", unsafe {
            (self.fns.pointer_set_attribute)(
                (&raw const enable).cast(),
                POINTER_ATTRIBUTE_SYNC_MEMOPS,
                ptr,
            )
        })
    }

    /// `cuMemGetAddressRange`: base and size of the allocation containing `ptr`.
    pub fn address_range(&self, ptr: u64) -> Result<(u64, usize), CuError> {
        let (mut base, mut size) = (0u64, 0usize);
        // SAFETY: writes two values to our locals.
        check("cuMemGetAddressRange", unsafe {
            (self.fns.mem_get_address_range)(&mut base, &mut size, ptr)
        })?;
        Ok((base, size))
    }

    /// `cuIpcGetMemHandle` for the allocation containing `ptr`.
    pub fn ipc_get_mem_handle(&self, ptr: u64) -> Result<IpcMemHandle, CuError> {
        let mut h = IpcMemHandle([0; 64]);
        // SAFETY: writes the 64-byte handle to our local.
        check("cuIpcGetMemHandle", unsafe {
            (self.fns.ipc_get_mem_handle)(&mut h, ptr)
        })?;
        Ok(h)
    }

    /// `cuIpcOpenMemHandle` (lazy peer access): maps a peer's allocation, returning
    /// the local address of its base. ALREADY_MAPPED comes back as its code.
    pub fn ipc_open(&self, handle: &IpcMemHandle) -> Result<u64, CuError> {
        let mut mapped = 0u64;
        // SAFETY: the handle is passed by value; writes one address to our local.
        check("cuIpcOpenMemHandle", unsafe {
            (self.fns.ipc_open_mem_handle)(&mut mapped, *handle, IPC_LAZY_ENABLE_PEER_ACCESS)
        })?;
        Ok(mapped)
    }

    /// `cuIpcCloseMemHandle`.
    pub fn ipc_close(&self, mapped: u64) -> Result<(), CuError> {
        // SAFETY: the driver validates the address (an unknown one is an error code).
        check("cuIpcCloseMemHandle", unsafe {
            (self.fns.ipc_close_mem_handle)(mapped)
        })
    }

    /// A blocking stream for IPC copies, as Open MPI's own: its copies start only after
    /// the work the application queued before on the legacy default stream. A
    /// `cuMemsetD8` or pageable `cuMemcpyHtoD` on device memory returns before the
    /// device has done it; on a non-blocking stream a copy into that buffer could run
    /// first and be partly overwritten (seen on an H200: scattered bytes of the
    /// receiver's old contents in 16 MiB messages).
    pub fn stream_create(&self) -> Result<Stream, CuError> {
        let mut s: *mut c_void = std::ptr::null_mut();
        // SAFETY: writes one handle to our local.
        check("cuStreamCreate", unsafe {
            (self.fns.stream_create)(&mut s, STREAM_BLOCKING)
        })?;
        Ok(Stream(s))
    }

    /// An event without timing, for completion polling.
    pub fn event_create(&self) -> Result<Event, CuError> {
        let mut e: *mut c_void = std::ptr::null_mut();
        // SAFETY: writes one handle to our local.
        check("cuEventCreate", unsafe {
            (self.fns.event_create)(&mut e, EVENT_DISABLE_TIMING)
        })?;
        Ok(Event(e))
    }

    /// Destroys an event.
    pub fn event_destroy(&self, event: Event) -> Result<(), CuError> {
        // SAFETY: the event came from event_create and is consumed here.
        check("cuEventDestroy", unsafe {
            (self.fns.event_destroy)(event.0)
        })
    }

    /// Queues a device-to-device (or any unified-address) copy on `stream`.
    ///
    /// # Safety
    /// `dst` and `src` must be valid for `bytes` in the current context's address
    /// space and stay valid (and `dst` untouched by others) until the copy completes.
    pub unsafe fn memcpy_async(
        &self,
        dst: u64,
        src: u64,
        bytes: usize,
        stream: &Stream,
    ) -> Result<(), CuError> {
        // SAFETY: forwarded contract; the stream handle is ours.
        check("cuMemcpyAsync", unsafe {
            (self.fns.memcpy_async)(dst, src, bytes, stream.0)
        })
    }

    /// Records `event` behind the work queued so far on `stream`.
    pub fn event_record(&self, event: &Event, stream: &Stream) -> Result<(), CuError> {
        // SAFETY: both handles are ours and live.
        check("cuEventRecord", unsafe {
            (self.fns.event_record)(event.0, stream.0)
        })
    }

    /// `cuEventQuery`: Ok(true) complete, Ok(false) pending.
    pub fn event_query(&self, event: &Event) -> Result<bool, CuError> {
        // SAFETY: the handle is ours and live.
        match unsafe { (self.fns.event_query)(event.0) } {
            SUCCESS => Ok(true),
            ERROR_NOT_READY => Ok(false),
            code => Err(CuError {
                call: "cuEventQuery",
                code,
            }),
        }
    }

    /// Allocates device memory (tests and tools).
    pub fn mem_alloc(&self, bytes: usize) -> Result<u64, CuError> {
        let mut p = 0u64;
        // SAFETY: writes one address to our local.
        check("cuMemAlloc", unsafe { (self.fns.mem_alloc)(&mut p, bytes) })?;
        Ok(p)
    }

    /// Frees device memory from `mem_alloc`.
    pub fn mem_free(&self, ptr: u64) -> Result<(), CuError> {
        // SAFETY: the driver validates the address.
        check("cuMemFree", unsafe { (self.fns.mem_free)(ptr) })
    }

    /// Copies host bytes to device memory at `dst` (synchronous).
    pub fn copy_to_device(&self, dst: u64, src: &[u8]) -> Result<(), CuError> {
        // SAFETY: reads src.len() bytes of our slice; the driver checks `dst`.
        check("cuMemcpyHtoD", unsafe {
            (self.fns.memcpy_htod)(dst, src.as_ptr().cast(), src.len())
        })
    }

    /// Copies device memory at `src` into `dst` (synchronous).
    pub fn copy_to_host(&self, dst: &mut [u8], src: u64) -> Result<(), CuError> {
        // SAFETY: writes dst.len() bytes into our exclusively borrowed slice.
        check("cuMemcpyDtoH", unsafe {
            (self.fns.memcpy_dtoh)(dst.as_mut_ptr().cast(), src, dst.len())
        })
    }

    /// `cuGetErrorString`, for messages.
    pub fn error_string(&self, code: c_int) -> String {
        let mut s: *const std::ffi::c_char = std::ptr::null();
        // SAFETY: writes a pointer to a static string owned by the driver (or leaves
        // it NULL for an unknown code).
        let rc = unsafe { (self.fns.get_error_string)(code, &mut s) };
        if rc != SUCCESS || s.is_null() {
            return format!("CUresult {code}");
        }
        // SAFETY: non-NULL, NUL-terminated static string from the driver.
        unsafe { std::ffi::CStr::from_ptr(s) }
            .to_string_lossy()
            .into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_a_clear_error_not_a_crash() {
        let e = Driver::load_from("/nonexistent/libcuda.so.1").unwrap_err();
        assert!(matches!(e, LoadError::NotFound { .. }), "{e}");
        assert!(e.to_string().contains("/nonexistent/libcuda.so.1"), "{e}");
    }

    #[test]
    fn a_library_without_the_driver_api_names_the_missing_symbol() {
        let e = Driver::load_from("libc.so.6").unwrap_err();
        assert!(
            matches!(e, LoadError::MissingSymbol { name: "cuInit", .. }),
            "{e}"
        );
    }

    /// On this host: either no driver (the usual case here, a clear error) or a real
    /// one that reports a version.
    #[test]
    fn the_system_driver_loads_or_says_why_not() {
        match Driver::load() {
            Ok(d) => assert!(d.version().unwrap() >= 1000),
            Err(e) => assert!(e.to_string().contains("libcuda.so.1"), "{e}"),
        }
    }
}
