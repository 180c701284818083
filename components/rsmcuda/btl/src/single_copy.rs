//! Single copy for large contiguous host messages: cross-memory attach offered to
//! ob1 as RDMA get. The sender "registers" its buffer (nothing to pin: the handle is
//! empty) and ob1 sends its address in the RGET header; the receiver reads it
//! straight from the sender's address space with `process_vm_readv`.
//!
//! The size threshold is applied where ob1 asks for a registration for remote read:
//! declining below it sends the message with copy in/out instead. If the kernel
//! refuses CMA at run time, one verbose line says so, later registrations are
//! declined, and the failed get makes ob1 fall back to send/receive for that region.

use std::sync::atomic::{AtomicBool, Ordering};

use mca::btl::{Btl, BtlModule, RdmaCompletion, RdmaOp, Registration};
use mca::{Error, Result, sys, verbose};
use rsmcuda_shm::cma;

use crate::node::Node;
use crate::params::{self, SINGLE_COPY_CMA};
use crate::stats;

static CMA_ON: AtomicBool = AtomicBool::new(false);

/// Whether the generic flags should advertise GET (before any module exists).
pub fn wanted() -> bool {
    params::try_get().is_none_or(|p| p.single_copy.get() == SINGLE_COPY_CMA)
}

/// Decides at setup whether CMA is used, and says why not.
pub fn announce<M: BtlModule>(btl: &Btl<M>) {
    let stream = crate::params::stream();
    let flags_have_get = {
        // SAFETY: plain read of our own module's flags (set by the BTL base from the
        // generic btl_rsmcuda_flags parameter before add_procs).
        unsafe { (*btl.as_raw()).btl_flags & sys::MCA_BTL_FLAGS_GET != 0 }
    };
    if !wanted() || !flags_have_get {
        verbose!(
            stream,
            1,
            "btl:rsmcuda: single copy off (btl_rsmcuda_single_copy=none or GET not in btl_rsmcuda_flags)"
        );
        return;
    }
    match cma::ptrace_scope() {
        Some(scope) if scope > 0 => {
            verbose!(
                stream,
                1,
                "btl:rsmcuda: single copy off: kernel.yama.ptrace_scope is {scope}, which \
                 forbids process_vm_readv between sibling ranks; large messages are copied \
                 through the segment"
            );
        }
        _ => {
            CMA_ON.store(true, Ordering::Release);
            verbose!(
                stream,
                1,
                "btl:rsmcuda: single copy with CMA from {} bytes",
                params::get().single_copy_threshold.get()
            );
        }
    }
}

/// ob1's registration request: a sender's buffer for remote read is accepted while
/// CMA works and the message is large enough; anything else (the receiver's buffer of
/// a get, registered LOCAL_WRITE|REMOTE_WRITE) always, as CMA needs no registration.
/// PUT is never advertised, so no peer writes through these handles.
pub fn register<M: BtlModule>(_btl: &Btl<M>, size: usize, flags: u32) -> Option<Registration> {
    verbose!(
        crate::params::stream(),
        20,
        "btl:rsmcuda: register_mem {size} bytes, flags {flags:#x}, CMA {}",
        CMA_ON.load(Ordering::Relaxed)
    );
    if flags & sys::MCA_BTL_REG_FLAG_REMOTE_READ != 0
        && (!CMA_ON.load(Ordering::Acquire) || size < params::get().single_copy_threshold.get())
    {
        return None;
    }
    Some(Registration::empty())
}

/// The pid of `node`'s rank `rank` and the address of `op` in its address space.
fn peer_range(node: &Node, rank: u32, op: &RdmaOp) -> Result<(u32, usize)> {
    let pid = node.seg.peer_pid(rank).ok_or(Error::UNREACH)?;
    let remote = usize::try_from(op.remote).map_err(|_| Error::BAD_PARAM)?;
    Ok((pid, remote))
}

/// Reads the buffer of `node`'s rank `rank` into ours and completes inline.
pub fn get<M: BtlModule>(
    btl: &Btl<M>,
    node: &Node,
    rank: u32,
    op: RdmaOp,
    done: RdmaCompletion,
) -> Result<()> {
    let (pid, remote) = peer_range(node, rank, &op)?;
    let local = if op.size == 0 {
        &mut [][..]
    } else {
        // SAFETY: ob1 hands us its receive buffer region of op.size bytes for the
        // duration of the get, and does not touch it until the completion runs.
        unsafe { std::slice::from_raw_parts_mut(op.local, op.size) }
    };
    match cma::read_from(pid as i32, remote, local) {
        Ok(()) => {
            stats::bump(&stats::SINGLE_COPY_OPS);
            stats::add(&stats::SINGLE_COPY_BYTES, op.size as u64);
            done.complete(btl, Ok(()));
            Ok(())
        }
        Err(e) => {
            if CMA_ON.swap(false, Ordering::AcqRel) {
                verbose!(
                    crate::params::stream(),
                    1,
                    "btl:rsmcuda: CMA read from pid {pid} failed ({e}); single copy off, \
                     falling back to copy in/out"
                );
            }
            Err(Error::ERROR)
        }
    }
}

/// Writes our buffer into the buffer of `node`'s rank `rank` and completes inline. Only
/// reached when ob1 schedules a put on us (see the module's `put`); a failure is
/// returned without turning CMA off, since a bad target address is about this buffer
/// only, and ob1 copies that part in and out.
pub fn put<M: BtlModule>(
    btl: &Btl<M>,
    node: &Node,
    rank: u32,
    op: RdmaOp,
    done: RdmaCompletion,
) -> Result<()> {
    if !CMA_ON.load(Ordering::Acquire) {
        return Err(Error::NOT_SUPPORTED);
    }
    let (pid, remote) = peer_range(node, rank, &op)?;
    let local = if op.size == 0 {
        &[][..]
    } else {
        // SAFETY: ob1 hands us its send buffer region of op.size bytes for the duration
        // of the put, and does not touch it until the completion runs.
        unsafe { std::slice::from_raw_parts(op.local, op.size) }
    };
    // SAFETY: the remote range is the receive buffer the peer's ob1 announced in its put
    // request and leaves alone until our completion's FIN reaches it.
    match unsafe { cma::write_to(pid as i32, remote, local) } {
        Ok(()) => {
            stats::bump(&stats::SINGLE_COPY_OPS);
            stats::add(&stats::SINGLE_COPY_BYTES, op.size as u64);
            done.complete(btl, Ok(()));
            Ok(())
        }
        Err(e) => {
            verbose!(
                crate::params::stream(),
                1,
                "btl:rsmcuda: CMA write of {} bytes to pid {pid} failed ({e}); ob1 copies \
                 that part in and out",
                op.size
            );
            Err(Error::ERROR)
        }
    }
}
