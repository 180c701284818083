//! One-sided operations (btl_get / btl_put) and memory registration: the
//! completion a module owes the caller, and the handles it hands out.

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

use super::{Btl, BtlModule};
use crate::error::Result;
use ompi_sys as sys;

/// A registration handle returned by `register_mem` (opaque to the PML, which copies
/// `btl_registration_handle_size` bytes of it to the peer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration(NonNull<sys::mca_btl_base_registration_handle_t>);

// SAFETY: a handle is an address the module hands out and takes back; the module
// decides what it points to and keeps it valid until deregister_mem.
unsafe impl Send for Registration {}

impl Registration {
    /// Wraps a non-NULL handle pointer.
    pub fn from_raw(raw: *mut sys::mca_btl_base_registration_handle_t) -> Option<Registration> {
        NonNull::new(raw).map(Registration)
    }

    /// A handle for modules that need no per-region data (`registration_handle_size`
    /// 0): a non-NULL address that tells the PML "registered" and is never read.
    pub fn empty() -> Registration {
        static NOTHING: u64 = 0;
        Registration::from_raw((&raw const NOTHING).cast_mut().cast())
            .expect("a static has a non-NULL address")
    }

    /// The C pointer.
    pub fn as_ptr(self) -> *mut sys::mca_btl_base_registration_handle_t {
        self.0.as_ptr()
    }
}

/// What a `get`/`put` must report once the transfer has completed (remotely for a
/// put): call [`RdmaCompletion::complete`] exactly once, inline or later from progress.
#[derive(Debug)]
pub struct RdmaCompletion {
    endpoint: *mut sys::mca_btl_base_endpoint_t,
    local_address: *mut c_void,
    local_handle: *mut sys::mca_btl_base_registration_handle_t,
    cbfunc: sys::mca_btl_base_rdma_completion_fn_t,
    context: *mut c_void,
    cbdata: *mut c_void,
}

// SAFETY: the PML's callback and its context may be invoked from any thread that
// drives progress; the pointers are the PML's and stay valid until the callback.
unsafe impl Send for RdmaCompletion {}

impl RdmaCompletion {
    /// Runs the PML's callback with `status` (Ok → OPAL_SUCCESS), consuming the completion.
    pub fn complete<M: BtlModule>(self, btl: &Btl<M>, status: Result<()>) {
        let code: c_int = crate::error::to_code(status);
        if let Some(callback) = self.cbfunc {
            // SAFETY: the arguments are the ones the PML passed to get/put for this
            // operation; the callback runs once (self is consumed).
            unsafe {
                callback(
                    btl.as_raw(),
                    self.endpoint,
                    self.local_address,
                    self.local_handle,
                    self.context,
                    self.cbdata,
                    code,
                )
            };
        }
    }
}

/// One get or put as the PML described it.
#[derive(Debug)]
pub struct RdmaOp {
    /// Local buffer (destination of a get, source of a put).
    pub local: *mut u8,
    /// Address in the peer's address space.
    pub remote: u64,
    /// Bytes to move.
    pub size: usize,
    /// The peer's registration handle (as its PML copied it to us).
    pub remote_handle: Option<Registration>,
    /// Our local handle, if the PML registered the local buffer.
    pub local_handle: Option<Registration>,
    /// MCA_BTL_IN_ORDER etc. (unused by most modules).
    pub flags: c_int,
    /// Requested order.
    pub order: c_int,
}

/// Builds the operation and its completion from the raw get/put arguments.
#[allow(clippy::too_many_arguments)]
pub(super) fn split(
    endpoint: *mut sys::mca_btl_base_endpoint_t,
    local_address: *mut c_void,
    remote_address: u64,
    local_handle: *mut sys::mca_btl_base_registration_handle_t,
    remote_handle: *mut sys::mca_btl_base_registration_handle_t,
    size: usize,
    flags: c_int,
    order: c_int,
    cbfunc: sys::mca_btl_base_rdma_completion_fn_t,
    context: *mut c_void,
    cbdata: *mut c_void,
) -> (RdmaOp, RdmaCompletion) {
    (
        RdmaOp {
            local: local_address.cast(),
            remote: remote_address,
            size,
            remote_handle: Registration::from_raw(remote_handle),
            local_handle: Registration::from_raw(local_handle),
            flags,
            order,
        },
        RdmaCompletion {
            endpoint,
            local_address,
            local_handle,
            cbfunc,
            context,
            cbdata,
        },
    )
}
