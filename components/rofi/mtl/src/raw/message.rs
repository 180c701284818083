//! `ompi_message_t` handles for MPI_Improbe / MPI_Mrecv.

use mca::mtl::Comm;
use mca::sys;

/// A fresh handle naming a claimed message, or NULL when Open MPI has none left.
pub fn alloc(comm: Comm, peer: i32, count: usize) -> *mut sys::ompi_message_t {
    // SAFETY: allocates from Open MPI's message free list.
    let m = unsafe { sys::ompi_message_alloc() };
    if !m.is_null() {
        // SAFETY: a fresh message object; the PML reads comm/peer/count from it.
        unsafe {
            (*m).comm = comm.as_ptr();
            (*m).peer = peer;
            (*m).count = count;
        }
    }
    m
}

/// The communicator a handle from [`alloc`] belongs to.
pub fn comm(m: *mut sys::ompi_message_t) -> Comm {
    // SAFETY: handles reaching imrecv came from our improbe and are still live; the
    // communicator outlives its pending messages.
    unsafe { Comm::from_raw((*m).comm) }
}

/// Gives a handle back to Open MPI's free list.
pub fn release(m: *mut sys::ompi_message_t) {
    // SAFETY: a handle from `alloc`, returned once (imrecv consumes it).
    unsafe { sys::ompi_message_return(m) };
}
