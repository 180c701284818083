//! Posting operations whose buffers and contexts must outlive the call.
//!
//! Callers guarantee (and say so where they call): the bytes stay valid and the context
//! alive and unmoved until its completion has been handled.
//!
//! Everything here takes the [`Fabric`] alone, so `raw` does not depend on the engine
//! that calls it.

use rofi_core::sync::SendPlan;

use super::context::OpContext;
use super::fabric::{Fabric, Mr};

/// `(match, ignore, source address)` of a posted receive or probe.
#[derive(Debug, Clone, Copy)]
pub struct Matching {
    pub bits: u64,
    pub ignore: u64,
    pub src: u64,
}

/// A tagged receive into `buf` (address, length), with the overflow sink behind it
/// when given (`super::sink`: it lives for the process).
pub fn recv(
    f: &Fabric,
    c: u32,
    buf: (*mut u8, usize),
    sink: Option<(*mut u8, usize)>,
    m: &Matching,
    ctx: *mut OpContext,
    flags: u64,
) -> isize {
    // SAFETY: module contract (buffer and context outlive the operation); the sink
    // outlives everything.
    unsafe { f.trecv_sink(c, buf, sink, m.src, (m.bits, m.ignore), ctx, flags) }
}

pub fn ack_recv(f: &Fabric, c: u32, addr: u64, bits: u64, ctx: *mut OpContext) -> isize {
    // SAFETY: zero-byte receive (no buffer); module contract for the context.
    unsafe { f.trecv(c, std::ptr::null_mut(), 0, addr, bits, 0, ctx, 0) }
}

pub fn data(
    f: &Fabric,
    c: u32,
    bytes: (*const u8, usize),
    addr: u64,
    plan: &SendPlan,
    ctx: *mut OpContext,
) -> isize {
    // SAFETY: module contract (the bytes are read until the data completion).
    unsafe { f.tsend(c, bytes.0, bytes.1, addr, plan.bits, plan.cq_data, ctx) }
}

pub fn inject(f: &Fabric, c: u32, bytes: (*const u8, usize), addr: u64, plan: &SendPlan) -> isize {
    let slice = if bytes.1 == 0 {
        &[][..]
    } else {
        // SAFETY: the caller's SendBuffer holds these bytes for the duration of the call.
        unsafe { std::slice::from_raw_parts(bytes.0, bytes.1) }
    };
    f.tinject(c, slice, addr, plan.bits, plan.cq_data)
}

/// Host matching: reads `len` bytes of a peer's registration (`key`, offset `remote`)
/// into `buf`.
#[allow(clippy::too_many_arguments)]
pub fn read(
    f: &Fabric,
    buf: *mut u8,
    len: usize,
    src: u64,
    remote: u64,
    key: u64,
    ctx: *mut OpContext,
) -> isize {
    // SAFETY: module contract (the buffer is written until the read completes).
    unsafe { f.read(0, buf, len, src, remote, key, ctx) }
}

/// Host matching: registers `bytes` (address and length: a packed send buffer, or
/// rofi's own copy of a buffered send) for peers to read. The caller keeps the bytes
/// alive and unmoved as long as the registration (both sit in one pending send, the
/// registration dropped first).
pub fn register(f: &Fabric, bytes: (*const u8, usize), key: u64) -> Result<Mr, String> {
    // SAFETY: module contract (the bytes outlive the registration).
    unsafe { f.register(bytes.0, bytes.1, key) }
}

/// Host matching: sends `len` bytes at `buf` untagged, with a completion for `ctx`.
pub fn host_send(f: &Fabric, buf: *const u8, len: usize, dest: u64, ctx: *mut OpContext) -> isize {
    // SAFETY: module contract (the bytes and the context live until the completion).
    unsafe { f.send(0, buf, len, dest, ctx) }
}
