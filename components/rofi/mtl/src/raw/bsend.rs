//! Persistent buffered sends (`MPI_Bsend_init`): the user's data behind cm's request,
//! packed afresh into rofi's own slot of the attached buffer.
//!
//! cm (Open MPI 4.1.4 and 5.0.7 alike) mishandles a persistent buffered send started
//! again (see the README, "Persistent buffered sends"): before the previous start is
//! PML-complete it builds a new request with the packed byte count as element count
//! (the pack reads past the user's buffer), and after it, it resends the previous
//! start's bytes. rofi avoids both by packing the user's current data itself and
//! completing the request during `isend`. cm does not hand the user's buffer to the
//! MTL, so it is read from cm's heavy send request, whose layout is that release's own
//! (`sys::mca_pml_cm_hvy_send_request_t`, bindgen over cm's private headers in
//! ffi/ompi-sys), and checked field by field against what the MTL was given before
//! anything is trusted.

use std::ffi::c_void;

use mca::sys;

use super::context::{OpContext, Target};

/// The user's data of a persistent buffered send, as `MPI_Bsend_init` described it.
#[derive(Debug)]
pub struct UserData {
    addr: *const c_void,
    datatype: *mut sys::ompi_datatype_t,
    count: usize,
    pub bytes: usize,
    /// cm's packed copy (what the convertor the MTL got points at), `bytes` long.
    packed: *mut u8,
    /// The communicator, whose attached buffer (6.0) or the process's holds the copies.
    comm: *mut sys::ompi_communicator_t,
}

/// The user's data if `request` (an `mca_mtl_request_t` address) is cm's persistent
/// buffered send of `convertor` to `dest`/`tag` on `comm`; `None` for anything else,
/// including any field that does not agree (another PML or Open MPI layout).
pub fn persistent_bsend(
    request: usize,
    comm: *mut sys::ompi_communicator_t,
    dest: i32,
    tag: i32,
    convertor: *mut sys::opal_convertor_t,
) -> Option<UserData> {
    let mtl = request as *mut sys::mca_mtl_request_t;
    // SAFETY: cm passes its live request; `ompi_req`, the first field of the memory the
    // PML allocated for it, is set before the MTL is called.
    let ompi = unsafe { (*mtl).ompi_req };
    let offset = std::mem::offset_of!(sys::mca_pml_cm_hvy_send_request_t, req_mtl);
    if ompi.is_null() || (request as *const u8).wrapping_sub(offset) != ompi as *const u8 {
        return None;
    }
    let heavy = ompi.cast::<sys::mca_pml_cm_hvy_send_request_t>();
    // SAFETY: `ompi_req` is the start of the PML's request and the MTL's request lies
    // `offset` bytes into it, so the PML's allocation covers the whole heavy request
    // (whose last field is the MTL's request); the reads below are plain loads of
    // fields cm wrote before calling the MTL and does not change during the call.
    unsafe {
        let h = &*heavy;
        let base = &h.req_send.req_base;
        let agrees = base.req_ompi.req_persistent
            && base.req_pml_type == sys::MCA_PML_CM_REQUEST_SEND_HEAVY
            && h.req_send.req_send_mode == sys::MCA_PML_BASE_SEND_BUFFERED
            && std::ptr::eq(&raw const base.req_convertor, convertor)
            && base.req_comm == comm
            && h.req_peer == dest
            && h.req_tag == tag
            && !h.req_buff.is_null()
            && (*convertor).pBaseBuf.cast::<c_void>() == h.req_buff
            && (*convertor).local_size == h.req_count
            && !base.req_datatype.is_null();
        if !agrees {
            return None;
        }
        let size = (*base.req_datatype).super_.size;
        if size == 0 || h.req_count % size != 0 {
            return None;
        }
        Some(UserData {
            addr: h.req_addr,
            datatype: base.req_datatype,
            count: h.req_count / size,
            bytes: h.req_count,
            packed: h.req_buff.cast(),
            comm,
        })
    }
}

impl UserData {
    /// A convertor over the user's current data, checked to pack to the byte count cm
    /// announced; `None` if the datatype engine disagrees. Prepared before the request
    /// completes (the buffer, datatype and count stay valid while the persistent
    /// request exists, which MPI_Start's caller holds), packed after it.
    pub fn packer(&self) -> Option<Packer> {
        // SAFETY: ompi_mpi_local_convertor is set up by MPI_Init; create returns a new
        // convertor (one reference, owned by the Packer, which releases it), prepared
        // for the datatype and buffer the user gave MPI_Bsend_init.
        unsafe {
            let conv =
                sys::opal_convertor_create((*sys::ompi_mpi_local_convertor).remoteArch as i32, 0);
            if conv.is_null() {
                return None;
            }
            let packer = Packer {
                conv,
                bytes: self.bytes,
                comm: self.comm,
            };
            let rc = sys::opal_convertor_prepare_for_send(
                conv,
                &raw const (*self.datatype).super_,
                self.count,
                self.addr,
            );
            (rc == 0 && (*conv).local_size == self.bytes).then_some(packer)
        }
    }

    /// Packs the user's current data over cm's packed copy (which may hold a previous
    /// start's bytes), so the send posted from it carries this start's data.
    pub fn refresh_packed(&self) -> bool {
        self.packer().is_some_and(|p| p.pack_into(self.packed))
    }
}

/// The user's data of one start, ready to pack (`UserData::packer`).
#[derive(Debug)]
pub struct Packer {
    conv: *mut sys::opal_convertor_t,
    bytes: usize,
    comm: *mut sys::ompi_communicator_t,
}

impl Packer {
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Packs into `dst` (`self.bytes` writable bytes); false if the datatype engine
    /// produced another length.
    fn pack_into(&self, dst: *mut u8) -> bool {
        let mut iov = sys::iovec {
            iov_base: dst.cast(),
            iov_len: self.bytes,
        };
        let (mut n, mut packed): (u32, usize) = (1, self.bytes);
        // SAFETY: `conv` is prepared over the user's buffer (see `UserData::packer`) and
        // `dst` holds `bytes` writable bytes (caller contract).
        unsafe { sys::opal_convertor_pack(self.conv, &mut iov, &mut n, &mut packed) };
        packed == self.bytes
    }

    /// rofi's own packed copy of the user's current data: in the attached buffer
    /// (MPI_Buffer_detach then waits for it), or on the heap when the buffer has no
    /// room. Taken after cm freed its own slot (the request completed), so a message
    /// in flight holds one slot of the buffer, as the user sized it. `None` if packing
    /// failed.
    pub fn copy(self) -> Option<Box<BsendCopy>> {
        // SAFETY: the request's communicator, alive while its persistent request is;
        // the bytes go back through `BsendCopy`'s drop on the same communicator.
        let ptr = unsafe { mca::bsend::alloc(self.comm, self.bytes) }.cast::<u8>();
        let mut copy = Box::new(if ptr.is_null() {
            let mut heap = vec![0u8; self.bytes];
            BsendCopy {
                ctx: OpContext::new(Target::Local(std::ptr::null())),
                ptr: heap.as_mut_ptr(),
                len: self.bytes,
                heap: Some(heap),
                comm: self.comm,
            }
        } else {
            BsendCopy {
                ctx: OpContext::new(Target::Local(std::ptr::null())),
                ptr,
                len: self.bytes,
                heap: None,
                comm: self.comm,
            }
        });
        copy.ctx.target = Target::Detached(&raw const *copy as usize);
        self.pack_into(copy.ptr).then_some(copy)
    }
}

impl Drop for Packer {
    fn drop(&mut self) {
        // SAFETY: the convertor `UserData::packer` created, released once.
        unsafe { mca::object::release(self.conv.cast()) };
    }
}

/// A buffered send's bytes, owned by rofi until the provider's completion (the
/// request was completed when it was posted). With host matching the box is held by
/// the pending send instead (`crate::host`: eager completion or rendezvous Fin) and its
/// context goes unused.
#[derive(Debug)]
pub struct BsendCopy {
    ctx: OpContext,
    ptr: *mut u8,
    len: usize,
    /// The storage when the attached buffer had no room (`ptr` points into it).
    heap: Option<Vec<u8>>,
    /// Whose attached buffer `ptr` is in (when not `heap`).
    comm: *mut sys::ompi_communicator_t,
}

impl BsendCopy {
    pub fn bytes(&self) -> (*const u8, usize) {
        (self.ptr, self.len)
    }

    pub fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `ptr` is `len` bytes this copy owns (a slot of the attached buffer or
        // `heap`), all written by the pack in `UserData::copy`, and only read from then.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Posts the copy with `post` (given its bytes and context): on success the
    /// provider holds the copy, alive and unmoved, until its completion reaches
    /// [`finish`]; on failure it is freed here.
    pub fn post<E>(
        self: Box<Self>,
        post: impl FnOnce((*const u8, usize), *mut OpContext) -> Result<(), E>,
    ) -> Result<(), E> {
        let bytes = self.bytes();
        let raw = Box::into_raw(self);
        // SAFETY: `raw` is the box just leaked; projecting its field reads nothing.
        let ctx = unsafe { &raw mut (*raw).ctx };
        let posted = post(bytes, ctx);
        if posted.is_err() {
            // SAFETY: the post failed, so the provider never took the context: the box
            // is ours again, and freed.
            drop(unsafe { Box::from_raw(raw) });
        }
        posted
    }
}

/// The provider is done with the copy at `addr` (`Target::Detached`): frees it.
pub fn finish(addr: usize) {
    // SAFETY: context module invariant: a `Detached` target names a box leaked by
    // `into_context` whose completion is this one, delivered once.
    drop(unsafe { Box::from_raw(addr as *mut BsendCopy) });
}

impl Drop for BsendCopy {
    fn drop(&mut self) {
        if self.heap.is_none() {
            // SAFETY: `ptr` came from `mca::bsend::alloc` on `comm` and is freed once,
            // here.
            unsafe { mca::bsend::free(self.comm, self.ptr.cast()) };
        }
    }
}
