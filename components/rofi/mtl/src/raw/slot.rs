//! The PML's request memory, reached again from a completion's target.
//!
//! INVARIANT: a `raw` request address is used here only while that request is
//! outstanding: from its `init` (before any operation naming it is posted) until
//! `complete`, which happens once, after every operation naming it has reported.

use mca::mtl::{RequestSlot, Status};
use mca::sys;

use super::Owned;
use crate::request::RequestState;

/// The request type rofi keeps in the PML's memory.
pub type Slot = RequestSlot<Owned<RequestState>>;

fn slot(raw: usize) -> Slot {
    // SAFETY: module invariant: `raw` is an outstanding request created by cm with
    // mtl_request_size bytes reserved for our state.
    unsafe { RequestSlot::from_raw(raw as *mut sys::mca_mtl_request_t) }
}

/// Runs `f` on the state of the outstanding request `raw`.
pub fn with_state<T>(raw: usize, f: impl FnOnce(&mut RequestState) -> T) -> T {
    let handle = slot(raw);
    // SAFETY: module invariant; callers hold the progress lock or are the only user
    // (posting), so no other reference to the state exists during `f`.
    let state = unsafe { handle.state_mut() };
    f(&mut state.0)
}

/// Reports the request complete to the PML (its state is dropped first).
pub fn complete(raw: usize, status: Status) {
    let state = slot(raw).state_ptr();
    // SAFETY: module invariant (the state is alive until the `complete` below); only a
    // shared reference to the atomic, which MPI_Cancel may be reading concurrently.
    unsafe { &(*state).0.finishing }.store(true, std::sync::atomic::Ordering::Release);
    // SAFETY: module invariant: called once per request, after its last operation.
    unsafe { slot(raw).complete(status) };
}

/// The address of a request's data context, without reading the request: cancel may
/// name a request that has already completed, whose state is gone.
pub fn data_context_addr(raw: usize) -> *mut super::context::OpContext {
    let state = slot(raw).state_ptr();
    // SAFETY: field projection on the (possibly dropped) state computes an address
    // and reads nothing; `Owned` is a single-field wrapper.
    unsafe { &raw mut (*state).0.data_ctx }
}

/// The context of `raw` if it is a plain receive still waiting for its message (the
/// only kind of request rofi cancels). The caller holds every progress lock.
///
/// MPI_Cancel may name a request that completed already (its state dropped) or whose
/// completion another thread is delivering right now (its state being dropped): the
/// MPI completion flag covers the first, the state's `finishing` flag, set under the
/// progress lock before any completion is delivered, the second. Only when both say
/// "pending" is the rest of the state read.
pub fn pending_receive_ctx(raw: usize) -> Option<u32> {
    let req = raw as *mut sys::mca_mtl_request_t;
    // SAFETY: cm passes its own live request; ompi_req is set before the MTL sees it;
    // req_complete is written concurrently by completion, hence the volatile read.
    let pending = unsafe {
        let ompi = (*req).ompi_req;
        !ompi.is_null() && std::ptr::read_volatile(&raw const (*ompi).req_complete).is_null()
    };
    if !pending {
        return None;
    }
    let state = slot(raw).state_ptr();
    // SAFETY: the request was not complete above, so `init` ran and its state was not
    // dropped before; a drop racing with this read runs drop glue, which never writes
    // the atomic, and the PML memory stays allocated while MPI_Cancel holds the request.
    let finishing = unsafe { &(*state).0.finishing };
    if finishing.load(std::sync::atomic::Ordering::Acquire) {
        return None;
    }
    // Not finishing, and the caller's locks keep it so: the state is alive and ours.
    with_state(raw, |st| match st.op {
        crate::request::Op::Recv { claim: None, .. } => Some(st.ctx),
        _ => None,
    })
}
