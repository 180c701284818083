//! What differs between the BTL interfaces of Open MPI 4.1 (3.1.0) and 5.0 (3.3.0),
//! behind one signature each, so the rest of the crate is written once.

use crate::sys;

/// The error-callback flag by which ob1 learns that GPU IPC works with a peer:
/// `ADD_CUDA_IPC` in 4.1, renamed `ADD_ACCELERATOR_IPC` (same value) in 5.0.
#[cfg(not(ompi5))]
pub const ERROR_FLAGS_ADD_GPU_IPC: u32 = sys::MCA_BTL_ERROR_FLAGS_ADD_CUDA_IPC;
#[cfg(ompi5)]
pub const ERROR_FLAGS_ADD_GPU_IPC: u32 = sys::MCA_BTL_ERROR_FLAGS_ADD_ACCELERATOR_IPC;

/// Hands a received fragment to the callback registered for `tag`. 4.1 passes the
/// descriptor, tag and callback data as arguments; 5.0 passes one read-only receive
/// descriptor carrying the segments, tag, callback data and `endpoint`, the sender's
/// endpoint in this module: 5.0's active-message RDMA (osc/rdma's fallback for BTLs
/// without native atomics) answers through it and aborts on NULL. 4.1's callback has no
/// endpoint argument; there it is unused.
///
/// # Safety
/// `callback` is the registered receive callback; `des` and its segments outlive the
/// call; `endpoint` is NULL or an endpoint of `btl` that stays valid during the call.
#[cfg(not(ompi5))]
pub unsafe fn invoke_receive(
    callback: unsafe extern "C" fn(
        *mut sys::mca_btl_base_module_t,
        sys::mca_btl_base_tag_t,
        *mut sys::mca_btl_base_descriptor_t,
        *mut std::ffi::c_void,
    ),
    btl: *mut sys::mca_btl_base_module_t,
    endpoint: *mut sys::mca_btl_base_endpoint_t,
    tag: u8,
    des: &mut sys::mca_btl_base_descriptor_t,
    cbdata: *mut std::ffi::c_void,
) {
    let _ = endpoint;
    // SAFETY: the caller's contract.
    unsafe { callback(btl, tag, des, cbdata) }
}

/// See the 4.1 variant.
///
/// # Safety
/// As there.
#[cfg(ompi5)]
pub unsafe fn invoke_receive(
    callback: unsafe extern "C" fn(
        *mut sys::mca_btl_base_module_t,
        *const sys::mca_btl_base_receive_descriptor_t,
    ),
    btl: *mut sys::mca_btl_base_module_t,
    endpoint: *mut sys::mca_btl_base_endpoint_t,
    tag: u8,
    des: &mut sys::mca_btl_base_descriptor_t,
    cbdata: *mut std::ffi::c_void,
) {
    let received = sys::mca_btl_base_receive_descriptor_t {
        endpoint,
        des_segments: des.des_segments,
        des_segment_count: des.des_segment_count,
        tag,
        cbdata,
    };
    // SAFETY: the caller's contract; `received` lives on this frame for the call.
    unsafe { callback(btl, &received) }
}
