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

/// Whether `raw` is a plain receive still waiting for its message: the only kind of
/// request rofi cancels. The MPI request's completion flag is read first, because
/// MPI_Cancel may name a request whose state is already gone.
pub fn is_pending_receive(raw: usize) -> bool {
    let req = raw as *mut sys::mca_mtl_request_t;
    // SAFETY: cm passes its own live request; ompi_req is set before the MTL sees it;
    // req_complete is written concurrently by completion, hence the volatile read.
    let pending = unsafe {
        let ompi = (*req).ompi_req;
        !ompi.is_null() && std::ptr::read_volatile(&raw const (*ompi).req_complete).is_null()
    };
    pending
        && with_state(raw, |st| {
            matches!(st.op, crate::request::Op::Recv { claim: None, .. })
        })
}
