//! The buffer `MPI_Buffer_attach` gave, for an MTL's own copies of buffered sends.
//! Open MPI 6.0 attaches buffers to communicators and MPI Sessions too (MPI 4.1), so its
//! functions name the communicator whose buffer serves; 4.1 and 5.0 have one buffer
//! per process.

use std::ffi::c_void;

use ompi_sys as sys;

/// `len` bytes of the buffer that serves `comm` (6.0: the communicator's, else its
/// MPI Session's, else the process's; before 6.0: the process's), or NULL when there is
/// none or it has no room.
///
/// # Safety
/// `comm` is a live communicator; the bytes are given back with [`free`] on the same
/// communicator.
pub unsafe fn alloc(comm: *mut sys::ompi_communicator_t, len: usize) -> *mut c_void {
    #[cfg(ompi6)]
    // SAFETY: caller contract.
    return unsafe { sys::mca_pml_base_bsend_request_alloc_buf(comm, len) };
    #[cfg(not(ompi6))]
    {
        let _ = comm;
        // SAFETY: the process's buffer; NULL when none is attached.
        unsafe { sys::mca_pml_base_bsend_request_alloc_buf(len) }
    }
}

/// Gives back bytes [`alloc`] returned for `comm`.
///
/// # Safety
/// `ptr` came from [`alloc`] on `comm` and is freed once.
pub unsafe fn free(comm: *mut sys::ompi_communicator_t, ptr: *mut c_void) {
    #[cfg(ompi6)]
    // SAFETY: caller contract.
    unsafe {
        sys::mca_pml_base_bsend_request_free(comm, ptr);
    }
    #[cfg(not(ompi6))]
    {
        let _ = comm;
        // SAFETY: caller contract.
        unsafe {
            sys::mca_pml_base_bsend_request_free(ptr);
        }
    }
}
