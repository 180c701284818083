//! Memory: allocation, host memory, pointer attributes, copies and memset.

use std::ffi::{c_int, c_uint, c_void};

use crate::abi::{CuPtr, Handle, entry, put};
use crate::codes::*;
use crate::memory::{self, Kind, Origin};
use crate::state::{self, State};
use crate::stream::Op;

fn alloc(s: &mut State, size: usize, managed: bool) -> Result<usize, CuResult> {
    let ctx = s.current_ctx()?;
    let ordinal = s.ctx_ordinal(ctx)?;
    let physical = s.physical(ordinal)?;
    let p = s.mem.alloc(size, ctx, ordinal, physical, managed)?;
    crate::counters::add("alloc.count", 1);
    crate::counters::add("alloc.bytes", size as u64);
    if managed {
        crate::counters::add("alloc.managed", 1);
    }
    Ok(p)
}

unsafe fn mem_alloc(dptr: *mut CuPtr, size: usize, managed: bool) -> CuResult {
    state::run(|s| {
        if dptr.is_null() {
            return Err(INVALID_VALUE);
        }
        let p = alloc(s, size, managed)?;
        // SAFETY: out-pointer per the API.
        unsafe { put(dptr, p as CuPtr) }
    })
}

/// # Safety
/// Pointer arguments as in the C API (same for every function here).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut CuPtr, size: usize) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuMemAlloc", || unsafe { mem_alloc(dptr, size, false) })
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAlloc(dptr: *mut CuPtr, size: usize) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuMemAlloc", || unsafe { mem_alloc(dptr, size, false) })
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocManaged(dptr: *mut CuPtr, size: usize, _flags: c_uint) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuMemAllocManaged", || unsafe {
        mem_alloc(dptr, size, true)
    })
}

fn mem_free(p: CuPtr) -> CuResult {
    state::run(|s| {
        let p = p as usize;
        match s.mem.allocs.get(&p) {
            Some(a) if matches!(a.origin, Origin::Own { .. }) => {}
            _ => return Err(INVALID_VALUE),
        }
        // cuMemFree synchronizes: nothing queued may touch freed memory.
        s.drain_all(false)?;
        s.mem.release(p);
        crate::counters::add("free.count", 1);
        Ok(())
    })
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemFree_v2(p: CuPtr) -> c_int {
    entry("cuMemFree", || mem_free(p))
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemFree(p: CuPtr) -> c_int {
    entry("cuMemFree", || mem_free(p))
}

unsafe fn address_range(base: *mut CuPtr, size: *mut usize, p: CuPtr) -> CuResult {
    state::run(|s| {
        let Kind::Device(b) = s.mem.classify(p as usize) else {
            return Err(NOT_FOUND);
        };
        let n = s.mem.allocs[&b].size;
        // SAFETY: either out-pointer may be NULL; others are writable per the API.
        unsafe {
            if !base.is_null() {
                put(base, b as CuPtr)?;
            }
            if !size.is_null() {
                put(size, n)?;
            }
        }
        Ok(())
    })
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetAddressRange_v2(
    base: *mut CuPtr,
    size: *mut usize,
    p: CuPtr,
) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuMemGetAddressRange", || unsafe {
        address_range(base, size, p)
    })
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetAddressRange(
    base: *mut CuPtr,
    size: *mut usize,
    p: CuPtr,
) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuMemGetAddressRange", || unsafe {
        address_range(base, size, p)
    })
}

unsafe fn mem_info(free: *mut usize, total: *mut usize) -> CuResult {
    state::run(|s| {
        let ctx = s.current_ctx()?;
        let o = s.ctx_ordinal(ctx)?;
        let used: usize = s
            .mem
            .allocs
            .values()
            .filter(|a| a.ordinal == o && matches!(a.origin, Origin::Own { .. }))
            .map(|a| a.size)
            .sum();
        let total_bytes = crate::api_ctx::DEVICE_MEMORY;
        // SAFETY: out-pointers per the API.
        unsafe {
            put(free, total_bytes.saturating_sub(used))?;
            put(total, total_bytes)
        }
    })
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuMemGetInfo", || unsafe { mem_info(free, total) })
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetInfo(free: *mut usize, total: *mut usize) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuMemGetInfo", || unsafe { mem_info(free, total) })
}

unsafe fn host_alloc(pp: *mut *mut c_void, size: usize) -> CuResult {
    state::run(|s| {
        if pp.is_null() || size == 0 {
            return Err(INVALID_VALUE);
        }
        let ctx = s.current_ctx()?;
        let o = s.ctx_ordinal(ctx)?;
        let p = memory::host_pages(size)?;
        if let Err(e) = s.mem.add_host(p, size, ctx, o, true) {
            memory::free_host_pages(p, size);
            return Err(e);
        }
        // SAFETY: out-pointer per the API.
        unsafe { put(pp, p as *mut c_void) }
    })
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocHost_v2(pp: *mut *mut c_void, size: usize) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuMemAllocHost", || unsafe { host_alloc(pp, size) })
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocHost(pp: *mut *mut c_void, size: usize) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuMemAllocHost", || unsafe { host_alloc(pp, size) })
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostAlloc(
    pp: *mut *mut c_void,
    size: usize,
    _flags: c_uint,
) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuMemHostAlloc", || unsafe { host_alloc(pp, size) })
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> c_int {
    entry("cuMemFreeHost", || {
        state::run(|s| {
            let p = p as usize;
            match s.mem.host.get(&p) {
                Some(h) if h.pinned_alloc => {}
                _ => return Err(INVALID_VALUE),
            }
            s.drain_all(false)?;
            let h = s.mem.host.remove(&p).expect("checked above");
            memory::free_host_pages(p, h.size);
            Ok(())
        })
    })
}

fn host_register(p: *mut c_void, size: usize) -> CuResult {
    state::run(|s| {
        let ctx = s.current_ctx()?;
        let o = s.ctx_ordinal(ctx)?;
        s.mem.add_host(p as usize, size, ctx, o, false)
    })
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostRegister_v2(
    p: *mut c_void,
    size: usize,
    _flags: c_uint,
) -> c_int {
    entry("cuMemHostRegister", || host_register(p, size))
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostRegister(p: *mut c_void, size: usize, _flags: c_uint) -> c_int {
    entry("cuMemHostRegister", || host_register(p, size))
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostUnregister(p: *mut c_void) -> c_int {
    entry("cuMemHostUnregister", || {
        state::run(|s| {
            let p = p as usize;
            match s.mem.host.get(&p) {
                Some(h) if !h.pinned_alloc => {}
                _ => return Err(HOST_MEMORY_NOT_REGISTERED),
            }
            s.mem.host.remove(&p);
            Ok(())
        })
    })
}

unsafe fn host_device_pointer(dptr: *mut CuPtr, p: *mut c_void) -> CuResult {
    state::run(|s| match s.mem.classify(p as usize) {
        // SAFETY: out-pointer per the API.
        Kind::Host(_) => unsafe { put(dptr, p as CuPtr) },
        _ => Err(INVALID_VALUE),
    })
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostGetDevicePointer_v2(
    dptr: *mut CuPtr,
    p: *mut c_void,
    _flags: c_uint,
) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuMemHostGetDevicePointer", || unsafe {
        host_device_pointer(dptr, p)
    })
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostGetDevicePointer(
    dptr: *mut CuPtr,
    p: *mut c_void,
    _flags: c_uint,
) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuMemHostGetDevicePointer", || unsafe {
        host_device_pointer(dptr, p)
    })
}

/// One attribute value, written with the attribute's C type.
enum Val {
    U32(u32),
    I32(i32),
    U64(u64),
    Ptr(usize),
}

/// The value of `attr` for pointer `p`; `Ok(None)` for unknown host memory.
fn attr_value(s: &State, attr: c_int, p: usize) -> Result<Option<Val>, CuResult> {
    let kind = s.mem.classify(p);
    let v = match kind {
        Kind::Device(b) => {
            let a = &s.mem.allocs[&b];
            match attr {
                1 => Val::Ptr(a.ctx),
                2 => Val::U32(MEMORYTYPE_DEVICE),
                3 => Val::U64(p as u64),
                4 if a.managed => Val::Ptr(p),
                4 => return Err(INVALID_VALUE),
                6 => Val::U32(a.sync_memops as u32),
                7 => Val::U64(a.buffer_id),
                8 => Val::U32(a.managed as u32),
                9 => Val::I32(a.ordinal),
                10 => Val::U32((!a.managed && matches!(a.origin, Origin::Own { .. })) as u32),
                11 => Val::U64(b as u64),
                12 => Val::U64(a.size as u64),
                13 => Val::U32(1),
                17 => Val::Ptr(0),
                _ => return Err(NOT_SUPPORTED),
            }
        }
        Kind::Host(b) => {
            let h = &s.mem.host[&b];
            match attr {
                1 => Val::Ptr(h.ctx),
                2 => Val::U32(MEMORYTYPE_HOST),
                3 | 4 => Val::Ptr(p),
                6 => Val::U32(0),
                7 => Val::U64(h.buffer_id),
                8 => Val::U32(0),
                9 => Val::I32(h.ordinal),
                10 => Val::U32(0),
                11 => Val::U64(b as u64),
                12 => Val::U64(h.size as u64),
                13 => Val::U32(1),
                17 => Val::Ptr(0),
                _ => return Err(NOT_SUPPORTED),
            }
        }
        Kind::Invalid | Kind::Unknown => match attr {
            1..=4 | 6..=13 | 17 => return Ok(None),
            _ => return Err(NOT_SUPPORTED),
        },
    };
    Ok(Some(v))
}

/// Writes `v` (or the zero of `attr`'s type) to `data`.
///
/// # Safety
/// `data` is writable for the attribute's C type.
unsafe fn write_attr(data: *mut c_void, attr: c_int, v: Option<Val>) -> Result<(), CuResult> {
    let v = v.unwrap_or(match attr {
        1 | 4 | 17 => Val::Ptr(0),
        3 | 7 | 11 | 12 => Val::U64(0),
        9 => Val::I32(0),
        _ => Val::U32(0),
    });
    // SAFETY: per the contract.
    unsafe {
        match v {
            Val::U32(x) => put(data.cast(), x),
            Val::I32(x) => put(data.cast(), x),
            Val::U64(x) => put(data.cast(), x),
            Val::Ptr(x) => put(data.cast(), x),
        }
    }
}

fn unsupported_attr(attr: c_int) -> CuResult {
    crate::log!("pointer attribute {attr} is not modelled (CUDA_ERROR_NOT_SUPPORTED)");
    NOT_SUPPORTED
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuPointerGetAttribute(data: *mut c_void, attr: c_int, p: CuPtr) -> c_int {
    entry("cuPointerGetAttribute", || {
        state::run(|s| match attr_value(s, attr, p as usize) {
            Err(NOT_SUPPORTED) => Err(unsupported_attr(attr)),
            Err(e) => Err(e),
            // The driver: memory it does not know is an invalid value.
            Ok(None) => Err(INVALID_VALUE),
            // SAFETY: `data` fits the attribute per the API.
            Ok(v) => unsafe { write_attr(data, attr, v) },
        })
    })
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuPointerGetAttributes(
    num: c_uint,
    attrs: *const c_int,
    data: *mut *mut c_void,
    p: CuPtr,
) -> c_int {
    entry("cuPointerGetAttributes", || {
        state::run(|s| {
            if attrs.is_null() || data.is_null() {
                return Err(INVALID_VALUE);
            }
            for i in 0..num as usize {
                // SAFETY: `attrs` and `data` hold `num` entries per the API.
                let (attr, out) = unsafe { (*attrs.add(i), *data.add(i)) };
                let v = match attr_value(s, attr, p as usize) {
                    Ok(v) => v,
                    // Unlike the single query, device-only attributes of host memory read 0.
                    Err(INVALID_VALUE) => None,
                    Err(NOT_SUPPORTED) => return Err(unsupported_attr(attr)),
                    Err(e) => return Err(e),
                };
                // SAFETY: each data entry fits its attribute per the API.
                unsafe { write_attr(out, attr, v)? };
            }
            Ok(())
        })
    })
}

/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuPointerSetAttribute(
    value: *const c_void,
    attr: c_int,
    p: CuPtr,
) -> c_int {
    entry("cuPointerSetAttribute", || {
        state::run(|s| {
            if attr != 6 {
                return Err(unsupported_attr(attr));
            }
            if value.is_null() {
                return Err(INVALID_VALUE);
            }
            let Kind::Device(b) = s.mem.classify(p as usize) else {
                return Err(INVALID_VALUE);
            };
            // SAFETY: SYNC_MEMOPS takes a pointer to an int-sized boolean.
            let on = unsafe { value.cast::<u32>().read_unaligned() } != 0;
            if let Some(a) = s.mem.allocs.get_mut(&b) {
                a.sync_memops = on;
            }
            Ok(())
        })
    })
}

/// Which sides of a typed copy must be device memory (`None`: unified, any).
#[derive(Clone, Copy)]
struct Sides {
    dst_dev: Option<bool>,
    src_dev: Option<bool>,
}

const UNIFIED: Sides = Sides {
    dst_dev: None,
    src_dev: None,
};
const HTOD: Sides = Sides {
    dst_dev: Some(true),
    src_dev: Some(false),
};
const DTOH: Sides = Sides {
    dst_dev: Some(false),
    src_dev: Some(true),
};
const DTOD: Sides = Sides {
    dst_dev: Some(true),
    src_dev: Some(true),
};

fn check_sides(s: &State, dst: usize, src: usize, n: usize, sides: Sides) -> Result<(), CuResult> {
    if n == 0 {
        return Ok(());
    }
    for (p, want) in [(dst, sides.dst_dev), (src, sides.src_dev)] {
        match want {
            Some(true) => s.mem.check_device_side(p, n)?,
            Some(false) => {
                if matches!(s.mem.classify(p), Kind::Device(_) | Kind::Invalid) {
                    return Err(INVALID_VALUE);
                }
            }
            None => {}
        }
    }
    Ok(())
}

fn copy(dst: usize, src: usize, n: usize, sides: Sides, stream: Option<Handle>) -> CuResult {
    state::run(|s| {
        check_sides(s, dst, src, n, sides)?;
        match stream {
            None => s.copy_now(dst, src, n),
            Some(st) => s.copy_async(dst, src, n, st as usize),
        }
    })
}

macro_rules! copy_entry {
    ($sync:ident, $sync_v2:ident, $plain:literal, $dst:ty, $src:ty, $sides:expr) => {
        /// # Safety
        /// Both ranges valid for `n` bytes, as in the C API.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $sync(dst: $dst, src: $src, n: usize) -> c_int {
            entry($plain, || copy(dst as usize, src as usize, n, $sides, None))
        }

        /// # Safety
        /// Both ranges valid for `n` bytes, as in the C API.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $sync_v2(dst: $dst, src: $src, n: usize) -> c_int {
            entry($plain, || copy(dst as usize, src as usize, n, $sides, None))
        }
    };
}

macro_rules! async_entry {
    ($name:ident, $name_v2:ident, $plain:literal, $dst:ty, $src:ty, $sides:expr) => {
        /// # Safety
        /// Both ranges valid for `n` bytes until the copy ran, as in the C API.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(dst: $dst, src: $src, n: usize, stream: Handle) -> c_int {
            entry($plain, || {
                copy(dst as usize, src as usize, n, $sides, Some(stream))
            })
        }

        /// # Safety
        /// Both ranges valid for `n` bytes until the copy ran, as in the C API.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name_v2(dst: $dst, src: $src, n: usize, stream: Handle) -> c_int {
            entry($plain, || {
                copy(dst as usize, src as usize, n, $sides, Some(stream))
            })
        }
    };
}

copy_entry!(
    cuMemcpyHtoD,
    cuMemcpyHtoD_v2,
    "cuMemcpyHtoD",
    CuPtr,
    *const c_void,
    HTOD
);
copy_entry!(
    cuMemcpyDtoH,
    cuMemcpyDtoH_v2,
    "cuMemcpyDtoH",
    *mut c_void,
    CuPtr,
    DTOH
);
copy_entry!(
    cuMemcpyDtoD,
    cuMemcpyDtoD_v2,
    "cuMemcpyDtoD",
    CuPtr,
    CuPtr,
    DTOD
);
async_entry!(
    cuMemcpyHtoDAsync,
    cuMemcpyHtoDAsync_v2,
    "cuMemcpyHtoDAsync",
    CuPtr,
    *const c_void,
    HTOD
);
async_entry!(
    cuMemcpyDtoHAsync,
    cuMemcpyDtoHAsync_v2,
    "cuMemcpyDtoHAsync",
    *mut c_void,
    CuPtr,
    DTOH
);
async_entry!(
    cuMemcpyDtoDAsync,
    cuMemcpyDtoDAsync_v2,
    "cuMemcpyDtoDAsync",
    CuPtr,
    CuPtr,
    DTOD
);

/// # Safety
/// Both ranges valid for `n` bytes, as in the C API.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpy(dst: CuPtr, src: CuPtr, n: usize) -> c_int {
    entry("cuMemcpy", || {
        copy(dst as usize, src as usize, n, UNIFIED, None)
    })
}

/// # Safety
/// Both ranges valid for `n` bytes until the copy ran, as in the C API.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyAsync(dst: CuPtr, src: CuPtr, n: usize, stream: Handle) -> c_int {
    entry("cuMemcpyAsync", || {
        // `cuMemcpyAsync@ipc`: only the copies that read another process's memory (a
        // transport's IPC get), so a test can fail those and not the MPI library's own.
        let from_peer = crate::inject::armed()
            && state::lock()
                .as_ref()
                .is_some_and(|s| s.mem.in_ipc_mapping(src as usize));
        if from_peer && let Some(code) = crate::inject::check("cuMemcpyAsync@ipc") {
            return code;
        }
        copy(dst as usize, src as usize, n, UNIFIED, Some(stream))
    })
}

/// # Safety
/// Both ranges valid for `n` bytes, as in the C API.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyPeer(
    dst: CuPtr,
    _dctx: Handle,
    src: CuPtr,
    _sctx: Handle,
    n: usize,
) -> c_int {
    entry("cuMemcpyPeer", || {
        copy(dst as usize, src as usize, n, DTOD, None)
    })
}

/// # Safety
/// Both ranges valid for `n` bytes until the copy ran, as in the C API.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyPeerAsync(
    dst: CuPtr,
    _dctx: Handle,
    src: CuPtr,
    _sctx: Handle,
    n: usize,
    stream: Handle,
) -> c_int {
    entry("cuMemcpyPeerAsync", || {
        copy(dst as usize, src as usize, n, DTOD, Some(stream))
    })
}

fn memset(dst: CuPtr, value: u8, n: usize, stream: Option<Handle>) -> CuResult {
    state::run(|s| {
        let dst = dst as usize;
        if n == 0 {
            return Ok(());
        }
        s.mem.check_device_side(dst, n)?;
        match stream {
            Some(st) => s.enqueue(st as usize, Op::Set { dst, value, n }),
            None => {
                // On the legacy stream, after every blocking stream's work (enqueue).
                s.enqueue(0, Op::Set { dst, value, n })?;
                // On device memory the driver returns before the device has set it,
                // unless the allocation is SYNC_MEMOPS: with lazy streams it waits on
                // the legacy stream like any queued work (a transport copying into
                // this buffer on a non-blocking stream could run before it).
                let returns_early = matches!(s.mem.classify(dst),
                    Kind::Device(b) if !s.mem.allocs[&b].sync_memops);
                if returns_early { Ok(()) } else { s.drain(0) }
            }
        }
    })
}

/// # Safety
/// `[dst, dst + n)` device memory, as in the C API.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD8_v2(dst: CuPtr, value: u8, n: usize) -> c_int {
    entry("cuMemsetD8", || memset(dst, value, n, None))
}

/// # Safety
/// `[dst, dst + n)` device memory, as in the C API.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD8(dst: CuPtr, value: u8, n: usize) -> c_int {
    entry("cuMemsetD8", || memset(dst, value, n, None))
}

/// # Safety
/// `[dst, dst + n)` device memory, as in the C API.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD8Async(dst: CuPtr, value: u8, n: usize, stream: Handle) -> c_int {
    entry("cuMemsetD8Async", || memset(dst, value, n, Some(stream)))
}

/// No allocation of this driver is a VMM allocation (cuMemCreate is not supported), so
/// this fails as the driver does for ordinary allocations.
///
/// # Safety
/// See `cuMemAlloc_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemRetainAllocationHandle(_handle: *mut u64, _p: *mut c_void) -> c_int {
    entry("cuMemRetainAllocationHandle", || INVALID_VALUE)
}
