//! The MTL framework (interface 2.0.0): module trait, C trampolines, requests.
//!
//! `mca_base_select` keeps the module pointer returned by the component's *query*
//! and only checks `mtl_init` for NULL, so the module cell ([`Mtl`]) is created at
//! query time with every function pointer set, and init fills in the Rust state.
//! Per-request state lives in the `mtl_request_size` bytes the PML reserves after
//! each `mca_mtl_request_t` ([`RequestSlot`]).

mod component;
mod trampolines;

pub use component::{MtlComponent, MtlLimits, mtl_component_structure};

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::OnceLock;

use crate::convertor::Convertor;
use crate::error::Result;
use ompi_sys as sys;

/// How a send must complete (`mca_pml_base_send_mode_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendMode {
    Standard,
    Buffered,
    Synchronous,
    Ready,
    /// Used by the PML for internal sends that must complete locally.
    Complete,
}

impl SendMode {
    fn from_raw(mode: sys::mca_pml_base_send_mode_t) -> SendMode {
        match mode {
            sys::MCA_PML_BASE_SEND_BUFFERED => SendMode::Buffered,
            sys::MCA_PML_BASE_SEND_SYNCHRONOUS => SendMode::Synchronous,
            sys::MCA_PML_BASE_SEND_READY => SendMode::Ready,
            sys::MCA_PML_BASE_SEND_COMPLETE => SendMode::Complete,
            _ => SendMode::Standard,
        }
    }
}

/// What a completed receive or probe reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Status {
    pub source: i32,
    pub tag: i32,
    /// An MPI error class (0 = MPI_SUCCESS), e.g. MPI_ERR_TRUNCATE.
    pub error: i32,
    pub cancelled: bool,
    /// Bytes received (or that a probed message holds).
    pub count: usize,
}

impl Status {
    /// Fills a request's own status, MPI_ERROR included: the PML reads the error
    /// from there and copies it to the user only for multiple-completion calls.
    fn write_to_request(&self, out: *mut sys::ompi_status_public_t) {
        if out.is_null() {
            return;
        }
        self.write_to_user(out);
        // SAFETY: non-NULL status pointer from the PML.
        unsafe { (*out).MPI_ERROR = self.error };
    }

    /// Fills a status the user passed to a single-completion call (a probe):
    /// everything but MPI_ERROR, which the MPI standard leaves to the caller there
    /// (ob1 and the C MTLs copy with `OMPI_COPY_STATUS(.., false)` alike).
    fn write_to_user(&self, out: *mut sys::ompi_status_public_t) {
        if out.is_null() {
            return;
        }
        // SAFETY: non-NULL status pointer from the PML.
        unsafe {
            (*out).MPI_SOURCE = self.source;
            (*out).MPI_TAG = self.tag;
            (*out)._cancelled = self.cancelled as i32;
            (*out)._ucount = self.count;
        }
    }
}

/// The `mtl_flags` bit of an MTL that sends on communicators whose members index them
/// differently (made from groups: [`Comm::remote_context_id`]); without it 5.0's cm
/// refuses such communicators. Open MPI 4.1 has none, and no such bit.
#[cfg(ompi5)]
pub const FLAG_EXTENDED_CIDS: u32 = sys::MCA_MTL_BASE_FLAG_SUPPORTS_EXT_CID;
#[cfg(not(ompi5))]
pub const FLAG_EXTENDED_CIDS: u32 = 0;

/// How long the first message to a peer on a communicator made from a group waits for
/// the peer to publish its index of it (the peer publishes it while it makes the
/// communicator, in the same collective call as ours).
#[cfg(ompi5)]
const PEER_INDEX_TIMEOUT_S: u32 = 60;

/// A borrowed communicator.
#[derive(Debug, Clone, Copy)]
pub struct Comm(*mut sys::ompi_communicator_t);

impl Comm {
    /// A communicator the MTL found again through a message handle or kept in a request.
    ///
    /// # Safety
    /// `raw` must be a live communicator for as long as the `Comm` is used.
    pub unsafe fn from_raw(raw: *mut sys::ompi_communicator_t) -> Comm {
        Comm(raw)
    }

    /// The raw pointer (messages and MTL endpoints need it).
    pub fn as_ptr(&self) -> *mut sys::ompi_communicator_t {
        self.0
    }
    /// The context id that keeps communicators' traffic apart.
    #[cfg(not(ompi5))]
    pub fn context_id(&self) -> u32 {
        // SAFETY: valid communicator for the duration of the MTL call.
        unsafe { (*self.0).c_contextid }
    }

    /// The context id that keeps communicators' traffic apart: in Open MPI 5 this
    /// process's 32-bit index of the communicator (`ompi_comm_get_local_cid`). Receives
    /// and probes match on it; a message carries its receiver's index
    /// ([`Comm::remote_context_id`]).
    #[cfg(ompi5)]
    pub fn context_id(&self) -> u32 {
        // SAFETY: valid communicator for the duration of the MTL call.
        unsafe { (*self.0).c_index }
    }

    /// The context id a message to `dest` carries: the one `dest` matches on. Every
    /// member of a communicator made the MPI-3 way shares one index; one made from a
    /// group (MPI Sessions: `MPI_Comm_create_from_group`,
    /// `MPI_Intercomm_create_from_groups`, and the communicators derived from them) has
    /// an index per process, which each member publishes through PMIx
    /// ([`Comm::publish_index`]). The first message to each peer looks it up (waiting
    /// at most `PEER_INDEX_TIMEOUT_S` for the peer to publish it) and Open MPI's
    /// communicator keeps the answer. (5.0.7 has `ompi_comm_get_remote_cid` for this,
    /// as 6.0's UCX PML uses it, but its PMIx lookup finds nothing under 5.0.7's
    /// runtime.)
    #[cfg(ompi5)]
    #[inline]
    pub fn remote_context_id(&self, dest: i32) -> Result<u32> {
        if self.shares_one_index() {
            return Ok(self.context_id());
        }
        let mut index = 0u32;
        // SAFETY: `dest` is a rank the PML checked; `index` is a valid out pointer.
        let rc =
            unsafe { sys::rmca_comm_remote_index(self.0, dest, PEER_INDEX_TIMEOUT_S, &mut index) };
        crate::error::to_result(rc).map(|_| index)
    }

    /// Publishes this process's index of a communicator made from a group, for its
    /// peers' [`Comm::remote_context_id`]; nothing for any other communicator.
    #[cfg(ompi5)]
    pub fn publish_index(&self) -> Result<()> {
        if self.shares_one_index() {
            return Ok(());
        }
        // SAFETY: valid communicator for the duration of the MTL call.
        crate::error::to_result(unsafe { sys::rmca_comm_publish_index(self.0) }).map(|_| ())
    }

    /// Every member indexes this communicator alike (made the MPI-3 way), which is
    /// what `OMPI_COMM_IS_GLOBAL_INDEX` tells.
    #[cfg(ompi5)]
    #[inline]
    fn shares_one_index(&self) -> bool {
        // SAFETY: valid communicator for the duration of the MTL call.
        unsafe { (*self.0).c_flags & sys::OMPI_COMM_GLOBAL_INDEX != 0 }
    }

    /// A 32-bit id of the communicator that every member computes alike, for choices
    /// both ends of a message must make the same way (which receive context of a
    /// scalable endpoint serves it): the shared index where there is one, else a fold
    /// of the 128-bit extended id the members agreed on.
    #[cfg(ompi5)]
    pub fn agreed_id(&self) -> u32 {
        if self.shares_one_index() {
            return self.context_id();
        }
        // SAFETY: valid communicator for the duration of the MTL call; `cid_sub` is a
        // union of a u64 and 8 bytes, either reading of which is defined.
        let id = unsafe { (*self.0).c_contextid };
        // SAFETY: as above.
        let folded = id.cid_base ^ unsafe { id.cid_sub.u64_ }.rotate_left(32);
        (folded ^ (folded >> 32)) as u32
    }

    /// Open MPI 4.1 has one context id per communicator, shared by all its members.
    #[cfg(not(ompi5))]
    #[inline]
    pub fn remote_context_id(&self, _dest: i32) -> Result<u32> {
        Ok(self.context_id())
    }

    /// Open MPI 4.1: the shared context id.
    #[cfg(not(ompi5))]
    pub fn agreed_id(&self) -> u32 {
        self.context_id()
    }

    /// Open MPI 4.1: every communicator's id is shared; nothing to publish.
    #[cfg(not(ompi5))]
    pub fn publish_index(&self) -> Result<()> {
        Ok(())
    }
    /// Our rank in the communicator.
    pub fn rank(&self) -> i32 {
        // SAFETY: as above.
        unsafe { (*self.0).c_my_rank }
    }
    /// Number of ranks.
    pub fn size(&self) -> i32 {
        // SAFETY: as above.
        unsafe { sys::ompi_comm_size(self.0) }
    }
    /// The process behind `rank`.
    pub fn peer(&self, rank: i32) -> *mut sys::ompi_proc_t {
        // SAFETY: as above; rank is checked by the PML before reaching the MTL.
        unsafe { sys::ompi_comm_peer_lookup(self.0, rank) }
    }
}

/// The PML-owned request memory of one operation, with our state `R` after it.
#[repr(C)]
struct RequestMemory<R> {
    base: sys::mca_mtl_request_t,
    state: MaybeUninit<R>,
}

/// One outstanding operation's request. Raw like a descriptor: the PML owns the
/// memory, the operation owns the state between `init` and `complete`.
#[derive(Debug)]
pub struct RequestSlot<R>(*mut RequestMemory<R>);

// SAFETY: a request is handed between threads exactly as the C pointer is.
unsafe impl<R: Send> Send for RequestSlot<R> {}

impl<R> RequestSlot<R> {
    /// # Safety
    /// `raw` must be a PML request with at least `size_of::<R>()` bytes reserved after it.
    pub unsafe fn from_raw(raw: *mut sys::mca_mtl_request_t) -> RequestSlot<R> {
        RequestSlot(raw.cast())
    }

    /// A stable key (the request address) to find this request again.
    pub fn key(&self) -> usize {
        self.0 as usize
    }

    /// Where the state lives, without reading it: an address to compare with, valid
    /// to dereference only under the contract of `state_mut`.
    pub fn state_ptr(&self) -> *mut R {
        // SAFETY: projecting a field of the PML's request memory reads nothing.
        unsafe { (&raw mut (*self.0).state).cast() }
    }

    /// Stores the operation's state.
    pub fn init(&self, state: R) {
        // SAFETY: the reserved bytes are ours; uninitialised until now.
        unsafe { (*self.0).state.write(state) };
    }

    /// The operation's state.
    ///
    /// # Safety
    /// `init` must have run and `complete` not yet; no other reference may exist.
    #[expect(
        clippy::mut_from_ref,
        reason = "the PML request memory is not owned by the slot handle"
    )]
    pub unsafe fn state_mut(&self) -> &mut R {
        // SAFETY: forwarded contract.
        unsafe { (*self.0).state.assume_init_mut() }
    }

    /// Reports completion to the PML: fills the MPI status, drops our state and runs
    /// the PML's completion callback (after which the memory is no longer ours).
    ///
    /// # Safety
    /// `init` must have run; the slot must not be used afterwards.
    pub unsafe fn complete(self, status: Status) {
        // SAFETY: forwarded contract; ompi_req is set by the PML before calling us.
        unsafe {
            (*self.0).state.assume_init_drop();
            let ompi_req = (*self.0).base.ompi_req;
            if !ompi_req.is_null() {
                status.write_to_request(&raw mut (*ompi_req).req_status);
            }
            if let Some(callback) = (*self.0).base.completion_callback {
                callback(self.0.cast());
            }
        }
    }
}

/// An MTL module implemented in Rust.
pub trait MtlModule: Send + Sync + Sized + 'static {
    /// Per-request state kept in the PML's request memory.
    type Request: Send + 'static;

    fn add_procs(mtl: &Mtl<Self>, procs: &[*mut sys::ompi_proc_t]) -> Result<()>;
    fn del_procs(mtl: &Mtl<Self>, procs: &[*mut sys::ompi_proc_t]) -> Result<()>;
    fn finalize(mtl: &Mtl<Self>) -> Result<()>;
    /// Blocking send: the buffer is reusable on return.
    fn send(
        mtl: &Mtl<Self>,
        comm: Comm,
        dest: i32,
        tag: i32,
        convertor: &mut Convertor,
        mode: SendMode,
    ) -> Result<()>;
    #[allow(clippy::too_many_arguments)]
    fn isend(
        mtl: &Mtl<Self>,
        comm: Comm,
        dest: i32,
        tag: i32,
        convertor: &mut Convertor,
        mode: SendMode,
        blocking: bool,
        request: RequestSlot<Self::Request>,
    ) -> Result<()>;
    fn irecv(
        mtl: &Mtl<Self>,
        comm: Comm,
        src: i32,
        tag: i32,
        convertor: &mut Convertor,
        request: RequestSlot<Self::Request>,
    ) -> Result<()>;
    /// A matching message's status, without receiving it.
    fn iprobe(mtl: &Mtl<Self>, comm: Comm, src: i32, tag: i32) -> Result<Option<Status>>;
    /// Claims a matching message: the returned `ompi_message_t` (from
    /// `ompi_message_alloc`) is later handed to `imrecv`.
    fn improbe(
        mtl: &Mtl<Self>,
        comm: Comm,
        src: i32,
        tag: i32,
    ) -> Result<Option<(*mut sys::ompi_message_t, Status)>>;
    fn imrecv(
        mtl: &Mtl<Self>,
        convertor: &mut Convertor,
        message: *mut sys::ompi_message_t,
        request: RequestSlot<Self::Request>,
    ) -> Result<()>;
    /// Cancels a request if it has not matched yet (it then completes as cancelled).
    fn cancel(mtl: &Mtl<Self>, request: RequestSlot<Self::Request>, flag: i32) -> Result<()>;
    fn add_comm(mtl: &Mtl<Self>, comm: Comm) -> Result<()> {
        let _ = (mtl, comm);
        Ok(())
    }
    fn del_comm(mtl: &Mtl<Self>, comm: Comm) -> Result<()> {
        let _ = (mtl, comm);
        Ok(())
    }
}

/// The memory cm knows as `mca_mtl_base_module_t*`.
#[repr(C)]
pub struct Mtl<M: MtlModule> {
    base: UnsafeCell<sys::mca_mtl_base_module_t>,
    module: OnceLock<M>,
}

// SAFETY: the C part is written only during selection/init, before concurrent use.
unsafe impl<M: MtlModule> Sync for Mtl<M> {}
// SAFETY: as above.
unsafe impl<M: MtlModule> Send for Mtl<M> {}

impl<M: MtlModule> std::ops::Deref for Mtl<M> {
    type Target = M;
    fn deref(&self) -> &M {
        self.module
            .get()
            .expect("the PML calls an MTL only after mtl_init succeeded")
    }
}

impl<M: MtlModule> Mtl<M> {
    /// The pointer cm knows this module by.
    pub fn as_raw(&self) -> *mut sys::mca_mtl_base_module_t {
        self.base.get()
    }
}
