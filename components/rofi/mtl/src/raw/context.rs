//! Operation contexts: what the provider hands back in `op_context`.
//!
//! INVARIANT: a context pointer given to libfabric stays alive and unmoved until its
//! completion (or error completion) has been read, and only rofi's contexts are posted,
//! so every non-NULL `op_context` read from the CQ points to a live [`OpContext`].

use std::sync::Mutex;

use fabric_sys as fi;

use super::procs::Rail;

/// Which half of a request an operation belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leg {
    /// The data transfer (send, receive, matched receive).
    Data,
    /// A synchronous send's acknowledgement receive.
    Ack,
}

/// Where a completion goes.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// A PML request (its `mca_mtl_request_t` address).
    Request { raw: usize, leg: Leg },
    /// An operation a thread waits for in the call (blocking send, probes).
    Local(*const LocalOp),
    /// Host matching's untagged receive buffer number `n` (`super::bounce`) of a rail.
    Bounce(Rail, u32),
    /// An operation of the matching probe (`super::probe`) on its own endpoints, which
    /// tells its operations apart by context address; never read from the engine's CQs.
    Probe,
    /// Host matching's eager message of send `id`, sent with a completion.
    HostSend(u64),
    /// A buffered send whose request completed when it was posted; the box at this
    /// address (`super::bsend::BsendCopy`) owns its bytes until this completion.
    Detached(usize),
}

/// A completion, success or error, as rofi needs it.
#[derive(Debug, Clone)]
pub enum Event {
    Done {
        bits: u64,
        data: u64,
        len: u64,
    },
    Failed {
        err: i32,
        bits: u64,
        data: u64,
        /// Full message length (`len + olen` of the error entry).
        len: u64,
        message: String,
    },
}

/// The memory handed to libfabric as `void *context`.
#[repr(C)]
#[derive(Debug)]
pub struct OpContext {
    /// Provider scratch space (FI_CONTEXT/FI_CONTEXT2 mode); first, as the mode requires.
    fi: fi::fi_context2,
    pub target: Target,
}

impl OpContext {
    pub fn new(target: Target) -> OpContext {
        OpContext {
            fi: fi::fi_context2 {
                internal: [std::ptr::null_mut(); 8],
            },
            target,
        }
    }

    pub fn as_ptr(&mut self) -> *mut OpContext {
        self
    }
}

/// Where a CQ entry's completion goes; `None` for entries without a context.
pub fn target_of(ctx: *mut OpContext) -> Option<Target> {
    if ctx.is_null() {
        return None;
    }
    // SAFETY: module invariant: a non-NULL context from the CQ is one of ours, alive.
    Some(unsafe { (*ctx).target })
}

/// Result slot of an operation a thread waits for in the call.
#[derive(Debug, Default)]
pub struct LocalOp {
    event: Mutex<Option<Event>>,
}

impl LocalOp {
    pub fn take(&self) -> Option<Event> {
        self.event.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// Stores `event` for the waiting thread.
pub fn deliver_local(op: *const LocalOp, event: Event) {
    // SAFETY: module invariant: the waiting thread keeps its LocalOp alive until the
    // operation completed, which is this delivery.
    let op = unsafe { &*op };
    *op.event.lock().unwrap_or_else(|e| e.into_inner()) = Some(event);
}
