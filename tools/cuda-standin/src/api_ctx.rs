//! Devices and contexts.

use std::ffi::{c_char, c_int, c_uint};

use crate::abi::{Handle, entry, put};
use crate::codes::*;
use crate::state::{self, Ctx, State};

/// Memory a device reports (cuDeviceTotalMem, cuMemGetInfo).
pub const DEVICE_MEMORY: usize = 16 << 30;

fn device_ok(s: &State, dev: c_int) -> Result<i32, CuResult> {
    s.physical(dev)
}

/// # Safety
/// Out-pointers NULL or writable, as in the C API (same below).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> c_int {
    entry("cuDeviceGetCount", || {
        state::run(|s| {
            // SAFETY: out-pointer per the API.
            unsafe { put(count, s.devices.len() as c_int) }
        })
    })
}

/// # Safety
/// See `cuDeviceGetCount`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGet(dev: *mut c_int, ordinal: c_int) -> c_int {
    entry("cuDeviceGet", || {
        state::run(|s| {
            device_ok(s, ordinal)?;
            // SAFETY: out-pointer per the API.
            unsafe { put(dev, ordinal) }
        })
    })
}

/// Writes `text` NUL-terminated into `buf` of `len` bytes (truncated as the driver does).
fn write_str(buf: *mut c_char, len: c_int, text: &str) -> Result<(), CuResult> {
    if buf.is_null() || len <= 0 {
        return Err(INVALID_VALUE);
    }
    let n = text.len().min(len as usize - 1);
    // SAFETY: `buf` holds `len` bytes per the API; we write n + 1 <= len.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
    }
    Ok(())
}

/// # Safety
/// `name` holds `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: c_int) -> c_int {
    entry("cuDeviceGetName", || {
        state::run(|s| {
            let p = device_ok(s, dev)?;
            write_str(name, len, &format!("rmca CUDA stand-in (device {p})"))
        })
    })
}

/// # Safety
/// `bus` holds `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetPCIBusId(bus: *mut c_char, len: c_int, dev: c_int) -> c_int {
    entry("cuDeviceGetPCIBusId", || {
        state::run(|s| {
            let p = device_ok(s, dev)?;
            write_str(bus, len, &format!("0000:{:02x}:00.0", 0x10 + p))
        })
    })
}

unsafe fn uuid(out: *mut u8, dev: c_int) -> c_int {
    state::run(|s| {
        let p = device_ok(s, dev)?;
        if out.is_null() {
            return Err(INVALID_VALUE);
        }
        let mut b = *b"rmca-standin-\0\0\0";
        b[13..].copy_from_slice(&(p as u16).to_be_bytes().repeat(2)[..3]);
        // SAFETY: CUuuid is 16 bytes per the API.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), out, 16) };
        Ok(())
    })
}

/// # Safety
/// `out` points at a 16-byte CUuuid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetUuid(out: *mut u8, dev: c_int) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuDeviceGetUuid", || unsafe { uuid(out, dev) })
}

/// # Safety
/// `out` points at a 16-byte CUuuid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetUuid_v2(out: *mut u8, dev: c_int) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuDeviceGetUuid", || unsafe { uuid(out, dev) })
}

unsafe fn total_mem(bytes: *mut usize, dev: c_int) -> c_int {
    state::run(|s| {
        device_ok(s, dev)?;
        // SAFETY: out-pointer per the API.
        unsafe { put(bytes, DEVICE_MEMORY) }
    })
}

/// # Safety
/// See `cuDeviceGetCount`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: c_int) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuDeviceTotalMem", || unsafe { total_mem(bytes, dev) })
}

/// # Safety
/// See `cuDeviceGetCount`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceTotalMem(bytes: *mut usize, dev: c_int) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuDeviceTotalMem", || unsafe { total_mem(bytes, dev) })
}

/// Attribute values of an A100-like device; `None` for attributes we do not model.
fn attribute(attr: c_int, physical: i32) -> Option<c_int> {
    Some(match attr {
        1 => 1024,             // MAX_THREADS_PER_BLOCK
        2 | 3 => 1024,         // MAX_BLOCK_DIM_X/Y
        4 => 64,               // MAX_BLOCK_DIM_Z
        5 => i32::MAX,         // MAX_GRID_DIM_X
        6 | 7 => 65535,        // MAX_GRID_DIM_Y/Z
        8 => 49152,            // MAX_SHARED_MEMORY_PER_BLOCK
        9 => 65536,            // TOTAL_CONSTANT_MEMORY
        10 => 32,              // WARP_SIZE
        11 => i32::MAX,        // MAX_PITCH
        12 => 65536,           // MAX_REGISTERS_PER_BLOCK
        13 => 1_410_000,       // CLOCK_RATE
        14 => 512,             // TEXTURE_ALIGNMENT
        15 => 1,               // GPU_OVERLAP
        16 => 108,             // MULTIPROCESSOR_COUNT
        17 | 18 => 0,          // KERNEL_EXEC_TIMEOUT, INTEGRATED
        19 => 1,               // CAN_MAP_HOST_MEMORY
        20 => 0,               // COMPUTE_MODE (default)
        31 | 32 => 1,          // CONCURRENT_KERNELS, ECC_ENABLED
        33 => 0x10 + physical, // PCI_BUS_ID
        34 | 35 => 0,          // PCI_DEVICE_ID, TCC_DRIVER
        36 => 1_215_000,       // MEMORY_CLOCK_RATE
        37 => 5120,            // GLOBAL_MEMORY_BUS_WIDTH
        38 => 40 << 20,        // L2_CACHE_SIZE
        39 => 2048,            // MAX_THREADS_PER_MULTIPROCESSOR
        40 => 3,               // ASYNC_ENGINE_COUNT
        41 => 1,               // UNIFIED_ADDRESSING
        50 => 0,               // PCI_DOMAIN_ID
        75 => 8,               // COMPUTE_CAPABILITY_MAJOR
        76 => 0,               // COMPUTE_CAPABILITY_MINOR
        78..=80 => 1,          // STREAM_PRIORITIES, GLOBAL/LOCAL_L1_CACHE
        81 => 167_936,         // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
        82 => 65536,           // MAX_REGISTERS_PER_MULTIPROCESSOR
        83 => 1,               // MANAGED_MEMORY
        84..=86 => 0,          // MULTI_GPU_BOARD(_GROUP_ID), HOST_NATIVE_ATOMIC
        88 => 0,               // PAGEABLE_MEMORY_ACCESS
        89 => 1,               // CONCURRENT_MANAGED_ACCESS
        90 | 91 => 1,          // COMPUTE_PREEMPTION, HOST_POINTER_FOR_REGISTERED_MEM
        95 | 96 => 1,          // COOPERATIVE_(MULTI_DEVICE_)LAUNCH
        97 => 166_912,         // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
        99 => 1,               // HOST_REGISTER_SUPPORTED
        100 | 101 => 0,        // PAGEABLE_..._HOST_PAGE_TABLES, DIRECT_MANAGED_MEM_ACCESS_FROM_HOST
        102 => 0,              // VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED (no cuMemCreate)
        103..=105 => 0,        // HANDLE_TYPE_*_SUPPORTED
        106 => 32,             // MAX_BLOCKS_PER_MULTIPROCESSOR
        108 => 0,              // MAX_PERSISTING_L2_CACHE_SIZE
        110 => 0,              // GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED
        113 => 1,              // READ_ONLY_HOST_REGISTER_SUPPORTED
        115 => 0,              // MEMORY_POOLS_SUPPORTED (no cuMemAllocAsync)
        116 => 0,              // GPU_DIRECT_RDMA_SUPPORTED
        124 => 0,              // DMA_BUF_SUPPORTED
        125 => 1,              // IPC_EVENT_SUPPORTED
        130 | 133 => 0,        // NUMA_CONFIG, MPS_ENABLED
        _ => return None,
    })
}

/// # Safety
/// See `cuDeviceGetCount`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetAttribute(value: *mut c_int, attr: c_int, dev: c_int) -> c_int {
    entry("cuDeviceGetAttribute", || {
        state::run(|s| {
            let p = device_ok(s, dev)?;
            match attribute(attr, p) {
                // SAFETY: out-pointer per the API.
                Some(v) => unsafe { put(value, v) },
                None => {
                    crate::log!(
                        "cuDeviceGetAttribute: attribute {attr} is not modelled (CUDA_ERROR_NOT_SUPPORTED)"
                    );
                    Err(NOT_SUPPORTED)
                }
            }
        })
    })
}

/// # Safety
/// See `cuDeviceGetCount`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceCanAccessPeer(can: *mut c_int, dev: c_int, peer: c_int) -> c_int {
    entry("cuDeviceCanAccessPeer", || {
        state::run(|s| {
            let a = device_ok(s, dev)?;
            let b = device_ok(s, peer)?;
            // Like the driver: a device is not its own peer.
            let ok = a != b && crate::config::CONFIG.peer_ok(a, b);
            // SAFETY: out-pointer per the API.
            unsafe { put(can, ok as c_int) }
        })
    })
}

/// # Safety
/// See `cuDeviceGetCount`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(pctx: *mut Handle, dev: c_int) -> c_int {
    entry("cuDevicePrimaryCtxRetain", || {
        state::run(|s| {
            device_ok(s, dev)?;
            let h = s.primary[dev as usize];
            if pctx.is_null() {
                return Err(INVALID_VALUE);
            }
            if let Some(c) = s.contexts.get_mut(&h) {
                c.retained += 1;
            }
            // SAFETY: out-pointer per the API.
            unsafe { put(pctx, h as Handle) }
        })
    })
}

fn primary_release(dev: c_int) -> CuResult {
    state::run(|s| {
        device_ok(s, dev)?;
        let h = s.primary[dev as usize];
        let c = s.contexts.get_mut(&h).ok_or(INVALID_CONTEXT)?;
        if c.retained == 0 {
            return Err(INVALID_CONTEXT);
        }
        c.retained -= 1;
        Ok(())
    })
}

/// # Safety
/// None beyond the C API's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease(dev: c_int) -> c_int {
    entry("cuDevicePrimaryCtxRelease", || primary_release(dev))
}

/// # Safety
/// None beyond the C API's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease_v2(dev: c_int) -> c_int {
    entry("cuDevicePrimaryCtxRelease", || primary_release(dev))
}

/// # Safety
/// See `cuDeviceGetCount`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxGetState(
    dev: c_int,
    flags: *mut c_uint,
    active: *mut c_int,
) -> c_int {
    entry("cuDevicePrimaryCtxGetState", || {
        state::run(|s| {
            device_ok(s, dev)?;
            let c = &s.contexts[&s.primary[dev as usize]];
            // SAFETY: out-pointers per the API.
            unsafe {
                put(flags, c.flags)?;
                put(active, (c.retained > 0) as c_int)
            }
        })
    })
}

/// The scheduling flags (CU_CTX_SCHED_*, CU_CTX_MAP_HOST, CU_CTX_LMEM_RESIZE_TO_MAX,
/// CU_CTX_COREDUMP_ENABLE and such: the low bits) the primary context will have; they
/// change nothing in the stand-in beyond what cuDevicePrimaryCtxGetState reports.
fn primary_set_flags(dev: c_int, flags: c_uint) -> CuResult {
    const SCHED_MASK: c_uint = 0x07;
    const KNOWN: c_uint = 0x07 | 0x08 | 0x10 | 0x20 | 0x40 | 0x80 | 0x100 | 0x200;
    if flags & !KNOWN != 0 || matches!(flags & SCHED_MASK, 3 | 5 | 6 | 7) {
        return INVALID_VALUE;
    }
    state::run(|s| {
        device_ok(s, dev)?;
        let h = s.primary[dev as usize];
        let c = s.contexts.get_mut(&h).ok_or(INVALID_CONTEXT)?;
        c.flags = flags;
        Ok(())
    })
}

/// # Safety
/// None beyond the C API's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxSetFlags(dev: c_int, flags: c_uint) -> c_int {
    entry("cuDevicePrimaryCtxSetFlags", || {
        primary_set_flags(dev, flags)
    })
}

/// # Safety
/// None beyond the C API's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxSetFlags_v2(dev: c_int, flags: c_uint) -> c_int {
    entry("cuDevicePrimaryCtxSetFlags", || {
        primary_set_flags(dev, flags)
    })
}

unsafe fn ctx_create(pctx: *mut Handle, flags: c_uint, dev: c_int) -> c_int {
    state::run(|s| {
        device_ok(s, dev)?;
        if pctx.is_null() {
            return Err(INVALID_VALUE);
        }
        let h = s.new_handle();
        s.contexts.insert(
            h,
            Ctx {
                ordinal: dev,
                primary: false,
                retained: 0,
                flags,
            },
        );
        state::push_current(h);
        // SAFETY: out-pointer per the API.
        unsafe { put(pctx, h as Handle) }
    })
}

/// # Safety
/// See `cuDeviceGetCount`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxCreate_v2(pctx: *mut Handle, flags: c_uint, dev: c_int) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuCtxCreate", || unsafe { ctx_create(pctx, flags, dev) })
}

/// # Safety
/// See `cuDeviceGetCount`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxCreate(pctx: *mut Handle, flags: c_uint, dev: c_int) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuCtxCreate", || unsafe { ctx_create(pctx, flags, dev) })
}

fn ctx_destroy(ctx: Handle) -> CuResult {
    state::run(|s| {
        let h = ctx as usize;
        match s.contexts.get(&h) {
            Some(c) if !c.primary => {}
            _ => return Err(INVALID_CONTEXT),
        }
        s.drain_all(false)?;
        s.contexts.remove(&h);
        if state::current() == Some(h) {
            state::pop_current();
        }
        Ok(())
    })
}

/// # Safety
/// None beyond the C API's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxDestroy_v2(ctx: Handle) -> c_int {
    entry("cuCtxDestroy", || ctx_destroy(ctx))
}

/// # Safety
/// None beyond the C API's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxDestroy(ctx: Handle) -> c_int {
    entry("cuCtxDestroy", || ctx_destroy(ctx))
}

/// # Safety
/// See `cuDeviceGetCount`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetCurrent(pctx: *mut Handle) -> c_int {
    entry("cuCtxGetCurrent", || {
        // SAFETY: out-pointer per the API.
        state::run(|_| unsafe { put(pctx, state::current().unwrap_or(0) as Handle) })
    })
}

/// # Safety
/// None beyond the C API's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxSetCurrent(ctx: Handle) -> c_int {
    entry("cuCtxSetCurrent", || {
        state::run(|s| {
            let h = ctx as usize;
            if h == 0 {
                state::set_current(None);
                return Ok(());
            }
            s.ctx_ordinal(h)?;
            state::set_current(Some(h));
            Ok(())
        })
    })
}

fn push(ctx: Handle) -> CuResult {
    state::run(|s| {
        s.ctx_ordinal(ctx as usize)?;
        state::push_current(ctx as usize);
        Ok(())
    })
}

/// # Safety
/// None beyond the C API's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxPushCurrent_v2(ctx: Handle) -> c_int {
    entry("cuCtxPushCurrent", || push(ctx))
}

/// # Safety
/// None beyond the C API's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxPushCurrent(ctx: Handle) -> c_int {
    entry("cuCtxPushCurrent", || push(ctx))
}

unsafe fn pop(pctx: *mut Handle) -> CuResult {
    state::run(|_| {
        let h = state::pop_current().ok_or(INVALID_CONTEXT)?;
        if !pctx.is_null() {
            // SAFETY: non-NULL out-pointer per the API.
            unsafe { put(pctx, h as Handle)? };
        }
        Ok(())
    })
}

/// # Safety
/// `pctx` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxPopCurrent_v2(pctx: *mut Handle) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuCtxPopCurrent", || unsafe { pop(pctx) })
}

/// # Safety
/// `pctx` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxPopCurrent(pctx: *mut Handle) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuCtxPopCurrent", || unsafe { pop(pctx) })
}

/// # Safety
/// See `cuDeviceGetCount`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetDevice(dev: *mut c_int) -> c_int {
    entry("cuCtxGetDevice", || {
        state::run(|s| {
            let ctx = s.current_ctx()?;
            let o = s.ctx_ordinal(ctx)?;
            // SAFETY: out-pointer per the API.
            unsafe { put(dev, o) }
        })
    })
}

/// # Safety
/// None beyond the C API's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxSynchronize() -> c_int {
    entry("cuCtxSynchronize", || {
        state::run(|s| {
            s.current_ctx()?;
            s.drain_all(false)
        })
    })
}
