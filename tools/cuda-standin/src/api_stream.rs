//! Streams, events and IPC.

use std::ffi::{c_int, c_uint};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::abi::{CuPtr, Handle, IpcHandle, entry, put};
use crate::codes::*;
use crate::state;
use crate::stream::{EvShared, Event, Stream, event_file, stream_key};

unsafe fn stream_create(ps: *mut Handle, flags: c_uint) -> CuResult {
    state::run(|s| {
        if ps.is_null() {
            return Err(INVALID_VALUE);
        }
        let ctx = s.current_ctx()?;
        let h = s.new_handle();
        s.streams.insert(
            h,
            Stream {
                ctx,
                flags,
                ..Stream::default()
            },
        );
        // SAFETY: out-pointer per the API.
        unsafe { put(ps, h as Handle) }
    })
}

/// # Safety
/// Pointer arguments as in the C API (same for every function here).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamCreate(ps: *mut Handle, flags: c_uint) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuStreamCreate", || unsafe { stream_create(ps, flags) })
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamCreateWithPriority(
    ps: *mut Handle,
    flags: c_uint,
    _prio: c_int,
) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuStreamCreateWithPriority", || unsafe {
        stream_create(ps, flags)
    })
}

fn stream_destroy(st: Handle) -> CuResult {
    state::run(|s| {
        let k = st as usize;
        if stream_key(k) == 0 || !s.streams.contains_key(&k) {
            return Err(INVALID_HANDLE);
        }
        // Work already queued still runs, as on the device.
        s.drain(k)?;
        s.streams.remove(&k);
        Ok(())
    })
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamDestroy_v2(st: Handle) -> c_int {
    entry("cuStreamDestroy", || stream_destroy(st))
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamDestroy(st: Handle) -> c_int {
    entry("cuStreamDestroy", || stream_destroy(st))
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamSynchronize(st: Handle) -> c_int {
    entry("cuStreamSynchronize", || {
        state::run(|s| {
            s.stream_mut(st as usize)?;
            s.drain(st as usize)
        })
    })
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamQuery(st: Handle) -> c_int {
    entry("cuStreamQuery", || {
        state::with(|s| s.query_stream(st as usize))
    })
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamWaitEvent(st: Handle, ev: Handle, _flags: c_uint) -> c_int {
    entry("cuStreamWaitEvent", || {
        state::run(|s| s.wait_event(st as usize, ev as usize))
    })
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventCreate(pe: *mut Handle, flags: c_uint) -> c_int {
    entry("cuEventCreate", || {
        state::run(|s| {
            if pe.is_null() || flags & !0x7 != 0 {
                return Err(INVALID_VALUE);
            }
            // An interprocess event must also disable timing.
            if flags & EVENT_INTERPROCESS != 0 && flags & 0x2 == 0 {
                return Err(INVALID_VALUE);
            }
            let ctx = s.current_ctx()?;
            let id = s.mem.next_id();
            let shared = if flags & EVENT_INTERPROCESS != 0 {
                EvShared::file(&event_file(std::process::id(), id), true)?
            } else {
                EvShared::heap()
            };
            let h = s.new_handle();
            s.events.insert(
                h,
                Event {
                    flags,
                    ctx,
                    id,
                    shared: Arc::new(shared),
                    last_stream: None,
                    ipc_opened: false,
                },
            );
            // SAFETY: out-pointer per the API.
            unsafe { put(pe, h as Handle) }
        })
    })
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventRecord(ev: Handle, st: Handle) -> c_int {
    entry("cuEventRecord", || {
        state::run(|s| s.record(ev as usize, st as usize))
    })
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventRecordWithFlags(ev: Handle, st: Handle, _flags: c_uint) -> c_int {
    entry("cuEventRecordWithFlags", || {
        state::run(|s| s.record(ev as usize, st as usize))
    })
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventQuery(ev: Handle) -> c_int {
    entry("cuEventQuery", || {
        state::with(|s| s.query_event(ev as usize))
    })
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventSynchronize(ev: Handle) -> c_int {
    entry("cuEventSynchronize", || {
        state::run(|s| s.sync_event(ev as usize))
    })
}

fn event_destroy(ev: Handle) -> CuResult {
    state::run(|s| {
        let e = s.events.remove(&(ev as usize)).ok_or(INVALID_HANDLE)?;
        e.shared.unlink();
        Ok(())
    })
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventDestroy_v2(ev: Handle) -> c_int {
    entry("cuEventDestroy", || event_destroy(ev))
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventDestroy(ev: Handle) -> c_int {
    entry("cuEventDestroy", || event_destroy(ev))
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventElapsedTime(ms: *mut f32, start: Handle, end: Handle) -> c_int {
    entry("cuEventElapsedTime", || {
        state::run(|s| {
            let a = s.event(start as usize)?;
            let b = s.event(end as usize)?;
            if (a.flags | b.flags) & 0x2 != 0 {
                return Err(INVALID_HANDLE);
            }
            let recorded = |e: &Event| e.shared.recorded().load(Ordering::Acquire) > 0;
            if !recorded(a) || !recorded(b) {
                return Err(INVALID_HANDLE);
            }
            if !a.shared.is_complete() || !b.shared.is_complete() {
                return Err(NOT_READY);
            }
            let t0 = a.shared.time_ns().load(Ordering::Acquire) as f64;
            let t1 = b.shared.time_ns().load(Ordering::Acquire) as f64;
            // SAFETY: out-pointer per the API.
            unsafe { put(ms, ((t1 - t0) / 1e6) as f32) }
        })
    })
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuIpcGetMemHandle(out: *mut IpcHandle, p: CuPtr) -> c_int {
    entry("cuIpcGetMemHandle", || {
        state::run(|s| {
            let bytes = s.ipc_get_mem(p as usize)?;
            crate::counters::add("ipc.get_handle", 1);
            // SAFETY: out-pointer per the API.
            unsafe { put(out, IpcHandle { reserved: bytes }) }
        })
    })
}

unsafe fn ipc_open(out: *mut CuPtr, h: IpcHandle) -> CuResult {
    let r = state::run(|s| {
        if out.is_null() {
            return Err(INVALID_VALUE);
        }
        let p = s.ipc_open_mem(&h.reserved)?;
        // SAFETY: out-pointer per the API.
        unsafe { put(out, p as CuPtr) }
    });
    match r {
        SUCCESS => crate::counters::add("ipc.open.ok", 1),
        ALREADY_MAPPED => {
            crate::counters::add("ipc.open.failed", 1);
            crate::counters::add("ipc.open.already_mapped", 1);
        }
        _ => crate::counters::add("ipc.open.failed", 1),
    }
    r
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuIpcOpenMemHandle_v2(
    out: *mut CuPtr,
    h: IpcHandle,
    _flags: c_uint,
) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuIpcOpenMemHandle", || unsafe { ipc_open(out, h) })
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuIpcOpenMemHandle(
    out: *mut CuPtr,
    h: IpcHandle,
    _flags: c_uint,
) -> c_int {
    // SAFETY: forwarded contract.
    entry("cuIpcOpenMemHandle", || unsafe { ipc_open(out, h) })
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuIpcCloseMemHandle(p: CuPtr) -> c_int {
    entry("cuIpcCloseMemHandle", || {
        state::run(|s| {
            s.ipc_close_mem(p as usize)?;
            crate::counters::add("ipc.close", 1);
            Ok(())
        })
    })
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuIpcGetEventHandle(out: *mut IpcHandle, ev: Handle) -> c_int {
    entry("cuIpcGetEventHandle", || {
        state::run(|s| {
            let bytes = s.ipc_get_event(ev as usize)?;
            // SAFETY: out-pointer per the API.
            unsafe { put(out, IpcHandle { reserved: bytes }) }
        })
    })
}

/// # Safety
/// See `cuStreamCreate`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuIpcOpenEventHandle(pe: *mut Handle, h: IpcHandle) -> c_int {
    entry("cuIpcOpenEventHandle", || {
        state::run(|s| {
            if pe.is_null() {
                return Err(INVALID_VALUE);
            }
            let e = s.ipc_open_event(&h.reserved)?;
            // SAFETY: out-pointer per the API.
            unsafe { put(pe, e as Handle) }
        })
    })
}
