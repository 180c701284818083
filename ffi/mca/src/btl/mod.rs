//! The BTL framework (interface 3.1.0): module trait, C trampolines, descriptors.
//!
//! A module is a `Btl<M>`: the C `mca_btl_base_module_t` first (so the pointer ob1
//! holds is the pointer to our cell), then the component's own state. Endpoints are
//! `Box<M::Endpoint>` handed to ob1 as opaque `mca_btl_base_endpoint_t*`.
//! Descriptors stay raw ([`Descriptor`]): ob1 owns them between calls and the
//! compiler cannot check lifetimes across asynchronous completion.

mod component;
mod descriptor;
mod rdma;
mod series;
mod trampolines;

pub use component::{BtlComponent, BtlDefaults, btl_component_structure, effective_limits};
pub use descriptor::{Descriptor, Frag};
pub use rdma::{RdmaCompletion, RdmaOp, Registration};

use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::sync::Mutex;

use crate::convertor::Convertor;
use crate::error::Result;
use crate::proc::Proc;
use ompi_sys as sys;

/// Outcome of a successful `send`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendStatus {
    /// Queued: the completion callback runs later (return value 0).
    Queued,
    /// Completed inline and the PML may skip the callback (return value 1); only
    /// allowed when the BTL owns the descriptor and ALWAYS_CALLBACK is clear.
    CompletedInline,
}

/// Why `sendi` did not send: ob1 falls back to alloc/prepare_src + send, using the
/// descriptor if one was produced.
#[derive(Debug)]
pub struct SendiRefused {
    /// A descriptor of `header_size + payload_size` bytes, if ob1 asked for one and we
    /// could allocate it.
    pub descriptor: Option<Descriptor>,
}

/// A BTL module implemented in Rust.
pub trait BtlModule: Send + Sync + Sized + 'static {
    /// Per-peer state, created in add_procs.
    type Endpoint: Send + Sync + 'static;
    /// Whether `sendi` is implemented (the vtable entry is NULL otherwise).
    const HAS_SENDI: bool = false;
    /// Whether `flush` is implemented.
    const HAS_FLUSH: bool = false;
    /// Whether `get` is implemented (advertise it with MCA_BTL_FLAGS_GET).
    const HAS_GET: bool = false;
    /// Whether `put` is implemented (advertise it with MCA_BTL_FLAGS_PUT).
    const HAS_PUT: bool = false;
    /// Whether `register_mem`/`deregister_mem` are implemented. Without them the PML
    /// treats every region as usable for get/put without registration.
    const HAS_REGISTER_MEM: bool = false;

    /// Creates endpoints for reachable peers (`None` = unreachable through us).
    fn add_procs(btl: &Btl<Self>, procs: &[Proc]) -> Result<Vec<Option<Self::Endpoint>>>;
    /// `endpoint` (created by add_procs) now sits at the address Open MPI knows it by,
    /// [`Btl::endpoint_ptr`]: a module remembers that address here to name the sender of
    /// what it delivers ([`Btl::deliver`]). Not called for a duplicate that add_procs
    /// returned for a peer whose endpoint Open MPI already held (it was placed earlier).
    fn endpoint_placed(btl: &Btl<Self>, endpoint: &Self::Endpoint) {
        let _ = (btl, endpoint);
    }
    /// `endpoint` is about to be freed (del_procs): its address must not be handed out
    /// any more. Called before [`del_procs`](Self::del_procs).
    fn endpoint_leaving(btl: &Btl<Self>, endpoint: &Self::Endpoint) {
        let _ = (btl, endpoint);
    }
    /// Releases the endpoints of departing peers.
    fn del_procs(btl: &Btl<Self>, procs: &[Proc], endpoints: Vec<Self::Endpoint>) -> Result<()>;
    /// Releases the module's resources; the cell is freed right after.
    fn finalize(btl: &Btl<Self>) -> Result<()>;
    /// A descriptor with room for `size` bytes (may be smaller), or None when out of resources.
    fn alloc(
        btl: &Btl<Self>,
        endpoint: Option<&Self::Endpoint>,
        order: u8,
        size: usize,
        flags: u32,
    ) -> Option<Descriptor>;
    /// Returns a descriptor obtained from alloc/prepare_src/sendi.
    fn free(btl: &Btl<Self>, descriptor: Descriptor) -> Result<()>;
    /// A descriptor holding `reserve` header bytes plus up to `*size` bytes of data.
    fn prepare_src(
        btl: &Btl<Self>,
        endpoint: &Self::Endpoint,
        convertor: &mut Convertor,
        order: u8,
        reserve: usize,
        size: &mut usize,
        flags: u32,
    ) -> Option<Descriptor>;
    /// Sends a descriptor's segments with an active-message tag.
    fn send(
        btl: &Btl<Self>,
        endpoint: &Self::Endpoint,
        descriptor: Descriptor,
        tag: u8,
    ) -> Result<SendStatus>;
    /// Immediate send of `header` + `payload_size` bytes from the convertor.
    #[allow(clippy::too_many_arguments)]
    fn sendi(
        btl: &Btl<Self>,
        endpoint: &Self::Endpoint,
        convertor: &mut Convertor,
        header: &[u8],
        payload_size: usize,
        order: u8,
        flags: u32,
        tag: u8,
        want_descriptor: bool,
    ) -> std::result::Result<(), SendiRefused> {
        let _ = (
            btl,
            endpoint,
            convertor,
            header,
            payload_size,
            order,
            flags,
            tag,
            want_descriptor,
        );
        Err(SendiRefused { descriptor: None })
    }
    /// Reads `op.size` bytes at the peer's `op.remote` into `op.local`. `Ok` means
    /// started: `done` must then be completed exactly once (inline or from progress).
    /// `Err(OUT_OF_RESOURCE)` asks the PML to retry later; other errors make it fall
    /// back to send/receive for this region. On `Err`, `done` is dropped unused.
    fn get(
        btl: &Btl<Self>,
        endpoint: &Self::Endpoint,
        op: RdmaOp,
        done: RdmaCompletion,
    ) -> Result<()> {
        let _ = (btl, endpoint, op, done);
        Err(crate::Error::NOT_SUPPORTED)
    }
    /// Writes `op.size` bytes from `op.local` to the peer's `op.remote`; as `get`.
    fn put(
        btl: &Btl<Self>,
        endpoint: &Self::Endpoint,
        op: RdmaOp,
        done: RdmaCompletion,
    ) -> Result<()> {
        let _ = (btl, endpoint, op, done);
        Err(crate::Error::NOT_SUPPORTED)
    }
    /// Registers `size` bytes at `base` for `flags` (MCA_BTL_REG_FLAG_*); `None`
    /// declines (the PML then uses send/receive for that message).
    fn register_mem(
        btl: &Btl<Self>,
        endpoint: Option<&Self::Endpoint>,
        base: *mut u8,
        size: usize,
        flags: u32,
    ) -> Option<Registration> {
        let _ = (btl, endpoint, base, size, flags);
        None
    }
    /// Releases a handle from `register_mem`.
    fn deregister_mem(btl: &Btl<Self>, handle: Registration) -> Result<()> {
        let _ = (btl, handle);
        Ok(())
    }
    /// Waits until every operation to `endpoint` (or all) has completed remotely.
    fn flush(btl: &Btl<Self>, endpoint: Option<&Self::Endpoint>) -> Result<()> {
        let _ = (btl, endpoint);
        Ok(())
    }
}

/// The memory ob1 knows as `mca_btl_base_module_t*`: the C struct, then ours.
#[repr(C)]
pub struct Btl<M: BtlModule> {
    base: UnsafeCell<sys::mca_btl_base_module_t>,
    error_callback: Mutex<sys::mca_btl_base_module_error_cb_fn_t>,
    module: M,
}

// SAFETY: the C part is only mutated by Open MPI during setup (parameter
// registration, selection) before concurrent use; Rust state is M: Sync.
unsafe impl<M: BtlModule> Sync for Btl<M> {}
// SAFETY: as above; M: Send.
unsafe impl<M: BtlModule> Send for Btl<M> {}

impl<M: BtlModule> std::ops::Deref for Btl<M> {
    type Target = M;
    fn deref(&self) -> &M {
        &self.module
    }
}

impl<M: BtlModule> Btl<M> {
    /// The pointer ob1 knows this module by.
    pub fn as_raw(&self) -> *mut sys::mca_btl_base_module_t {
        self.base.get()
    }

    /// The component this module belongs to (`btl_component`, set when it was made):
    /// what its modex entries are keyed by.
    pub fn component(&self) -> *const sys::mca_base_component_t {
        // SAFETY: `btl_component` is written once when the module is built (before it
        // is shared) and never again; reading a pointer field of our own cell.
        unsafe { (*self.base.get()).btl_component.cast_const().cast() }
    }

    /// Reads the effective limits (after MCA parameters were applied).
    pub fn eager_limit(&self) -> usize {
        // SAFETY: plain field read of our own struct.
        unsafe { (*self.base.get()).btl_eager_limit }
    }

    /// The module's `btl_flags` as ob1 sees them (`MCA_BTL_FLAGS_*`).
    pub fn flags(&self) -> u32 {
        // SAFETY: plain field read of our own struct.
        unsafe { (*self.base.get()).btl_flags }
    }

    /// Largest fragment ob1 will hand us.
    pub fn max_send_size(&self) -> usize {
        // SAFETY: plain field read of our own struct.
        unsafe { (*self.base.get()).btl_max_send_size }
    }

    /// Sets how many bytes of a registration handle the PML copies to the peer. Call it
    /// during setup (init or add_procs): the PML reads it when it builds RDMA headers.
    pub fn set_registration_handle_size(&self, bytes: usize) {
        // SAFETY: plain field write of our own struct; the PML only reads the field
        // while it runs RDMA protocols, after setup returned.
        unsafe { (*self.base.get()).btl_registration_handle_size = bytes };
    }

    /// The opaque pointer ob1 uses for one of our endpoints.
    pub fn endpoint_ptr(endpoint: &M::Endpoint) -> *mut sys::mca_btl_base_endpoint_t {
        endpoint as *const M::Endpoint as *mut sys::mca_btl_base_endpoint_t
    }

    /// Hands a received fragment to the upper layer registered for `tag`. The
    /// segments are only valid during the call (the callee copies what it keeps).
    /// `from` is the sender's endpoint in this module, or NULL when the sender has none
    /// here (5.0's active-message RDMA then aborts; ob1 itself does not read it).
    ///
    /// # Safety
    /// `from` is NULL or [`endpoint_ptr`](Self::endpoint_ptr) of an endpoint of this
    /// module that was placed (see [`BtlModule::endpoint_placed`]) and is not leaving:
    /// the upper layer may send through it during the call.
    pub unsafe fn deliver(
        &self,
        from: *mut sys::mca_btl_base_endpoint_t,
        tag: u8,
        segments: &[&[u8]],
    ) {
        let mut segs: Vec<sys::mca_btl_base_segment_t> = segments
            .iter()
            .map(|s| sys::mca_btl_base_segment_t {
                seg_addr: sys::opal_ptr_t {
                    pval: s.as_ptr() as *mut std::ffi::c_void,
                },
                seg_len: s.len() as u64,
            })
            .collect();
        let mut des = sys::mca_btl_base_descriptor_t {
            des_segments: segs.as_mut_ptr(),
            des_segment_count: segs.len(),
            ..Default::default()
        };
        // SAFETY: the trigger table is a global array of 256 entries indexed by a u8;
        // ob1 filled it at init. The descriptor and segments outlive the call; `from`
        // is valid by the caller's contract.
        unsafe {
            let entry = &*(&raw const sys::mca_btl_base_active_message_trigger)
                .cast::<sys::mca_btl_active_message_callback_t>()
                .add(tag as usize);
            if let Some(callback) = entry.cbfunc {
                series::invoke_receive(callback, self.as_raw(), from, tag, &mut des, entry.cbdata);
            }
        }
    }

    /// [`deliver`](Self::deliver) for the common single-segment case, without a heap
    /// allocation on the receive path.
    ///
    /// # Safety
    /// As for `deliver`.
    pub unsafe fn deliver_one(
        &self,
        from: *mut sys::mca_btl_base_endpoint_t,
        tag: u8,
        data: &[u8],
    ) {
        let mut seg = sys::mca_btl_base_segment_t {
            seg_addr: sys::opal_ptr_t {
                pval: data.as_ptr() as *mut std::ffi::c_void,
            },
            seg_len: data.len() as u64,
        };
        let mut des = sys::mca_btl_base_descriptor_t {
            des_segments: &mut seg,
            des_segment_count: 1,
            ..Default::default()
        };
        // SAFETY: as in `deliver`: a 256-entry global table indexed by a u8; the
        // descriptor and its segment live on this stack frame for the whole call; `from`
        // by the caller's contract.
        unsafe {
            let entry = &*(&raw const sys::mca_btl_base_active_message_trigger)
                .cast::<sys::mca_btl_active_message_callback_t>()
                .add(tag as usize);
            if let Some(callback) = entry.cbfunc {
                series::invoke_receive(callback, self.as_raw(), from, tag, &mut des, entry.cbdata);
            }
        }
    }

    /// Runs a descriptor's completion callback with `status` (`OPAL_SUCCESS` or an error).
    ///
    /// # Safety
    /// `descriptor` must be live and owned by this module; the callback may free or
    /// reuse it, so the caller must not touch it afterwards unless it still owns it.
    pub unsafe fn complete(
        &self,
        endpoint: *mut sys::mca_btl_base_endpoint_t,
        descriptor: Descriptor,
        status: c_int,
    ) {
        let raw = descriptor.as_ptr();
        // SAFETY: caller guarantees a live descriptor.
        unsafe {
            if let Some(callback) = (*raw).des_cbfunc {
                callback(self.as_raw(), endpoint, raw, status);
            }
        }
    }

    /// Tells ob1 of a CUDA-aware build that CUDA IPC works with `peer`
    /// (`MCA_BTL_ERROR_FLAGS_ADD_CUDA_IPC`; ob1 then marks this BTL CUDA_GET-capable for
    /// that peer). For this flag ob1 reads `btlinfo` as a pointer to an `int`, the output
    /// stream it logs the change on, not as a string. Only call it in a CUDA-aware Open
    /// MPI: any other ob1 aborts the job on every error callback.
    pub fn report_add_cuda_ipc(&self, peer: Proc, verbose_stream: c_int) {
        let callback = *self
            .error_callback
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(callback) = callback {
            let mut stream = verbose_stream;
            // SAFETY: ob1's callback takes the module, the flag, the peer's proc and an
            // int* it only reads during the call; `stream` outlives it.
            unsafe {
                callback(
                    self.as_raw(),
                    series::ERROR_FLAGS_ADD_GPU_IPC as i32,
                    peer.as_ptr(),
                    (&raw mut stream).cast(),
                )
            };
        }
    }

    /// Reports a fatal or non-fatal error to the PML (ob1 aborts the job on any).
    pub fn report_error(&self, flags: i32, peer: Option<Proc>, info: &str) {
        let callback = *self
            .error_callback
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(callback) = callback {
            let text = crate::strings::lossy_cstring(info);
            let proc_ptr = peer.map_or(std::ptr::null_mut(), |p| p.as_ptr());
            // SAFETY: ob1's callback takes the module, flags, peer (or NULL) and a string.
            unsafe { callback(self.as_raw(), flags, proc_ptr, text.as_ptr() as *mut _) };
        }
    }
}
