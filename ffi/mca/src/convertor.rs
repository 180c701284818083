//! The user buffer behind a send: contiguous pointer or packing through the convertor.

use ompi_sys as sys;

/// The flags that mark device memory, from the headers: 4.1's `CONVERTOR_CUDA |
/// CONVERTOR_CUDA_UNIFIED`, 5.0's and 6.0's `CONVERTOR_ACCELERATOR |
/// CONVERTOR_ACCELERATOR_UNIFIED` (the same bits as 4.1's on 5.0, others on 6.0).
#[cfg(not(ompi5))]
const ON_DEVICE: u32 = sys::CONVERTOR_CUDA | sys::CONVERTOR_CUDA_UNIFIED;
#[cfg(ompi5)]
const ON_DEVICE: u32 = sys::CONVERTOR_ACCELERATOR | sys::CONVERTOR_ACCELERATOR_UNIFIED;

/// The flags `opal_convertor_need_buffers` tests, from the headers like `ON_DEVICE`
/// (`CONVERTOR_HOMOGENEOUS` is 0x00080000 in 4.1 and 5.0).
const HOMOGENEOUS: u32 = sys::CONVERTOR_HOMOGENEOUS;
const FLAG_CONTIGUOUS: u32 = sys::OPAL_DATATYPE_FLAG_CONTIGUOUS;
const FLAG_NO_GAPS: u32 = sys::OPAL_DATATYPE_FLAG_NO_GAPS;

/// `opal_convertor_need_buffers(c) == 0` and not device memory, from the convertor's
/// flags and count. 4.1's function (CUDA build) and 5.0's are:
///
/// ```c
/// if (0 == (flags & CONVERTOR_HOMOGENEOUS)) return 1;
/// if (flags & (CONVERTOR_CUDA | CONVERTOR_CUDA_UNIFIED)) return 1;   /* 4.1 with CUDA */
/// if (flags & OPAL_DATATYPE_FLAG_NO_GAPS) return 0;
/// if ((count == 1) && (flags & OPAL_DATATYPE_FLAG_CONTIGUOUS)) return 0;
/// return 1;
/// ```
#[inline]
fn host_contiguous(flags: u32, count: u64) -> bool {
    flags & HOMOGENEOUS != 0
        && flags & ON_DEVICE == 0
        && (flags & FLAG_NO_GAPS != 0 || (count == 1 && flags & FLAG_CONTIGUOUS != 0))
}

/// A borrowed `opal_convertor_t` (the PML owns it), or none: a send with no payload
/// may come without a convertor (Open MPI 5's ob1 sends its control messages, e.g.
/// FIN, through `sendi` with a NULL convertor and a payload size of 0). Without one
/// every accessor describes an empty message.
#[derive(Debug)]
pub struct Convertor(*mut sys::opal_convertor_t);

impl Convertor {
    /// # Safety
    /// `raw` must be NULL or a valid convertor for the duration of the borrow.
    pub unsafe fn from_raw(raw: *mut sys::opal_convertor_t) -> Convertor {
        Convertor(raw)
    }

    /// Whether there is no convertor (no payload).
    pub fn is_none(&self) -> bool {
        self.0.is_null()
    }

    /// The raw pointer, for the MTL datatype helpers.
    pub fn as_ptr(&self) -> *mut sys::opal_convertor_t {
        self.0
    }

    /// The convertor's `CONVERTOR_*` flags (e.g. `CONVERTOR_CUDA` for a device buffer in
    /// a CUDA-aware 4.1 build).
    fn flags(&self) -> u32 {
        if self.0.is_null() {
            return 0;
        }
        // SAFETY: valid convertor (constructor contract); reads one field.
        unsafe { (*self.0).flags }
    }

    /// The data is GPU (or managed) memory, which the CPU must not read with `memcpy`.
    /// 5.0's `opal_convertor_need_buffers` no longer says so (4.1's did).
    pub fn on_device(&self) -> bool {
        self.flags() & ON_DEVICE != 0
    }

    /// True if the data must be packed (non-contiguous, or not in host memory).
    pub fn needs_packing(&self) -> bool {
        if self.0.is_null() {
            return false;
        }
        // SAFETY: valid convertor (constructor contract).
        unsafe { sys::opal_convertor_need_buffers(self.0) != 0 }
    }

    /// Bytes not yet packed.
    pub fn remaining(&self) -> usize {
        if self.0.is_null() {
            return 0;
        }
        // SAFETY: valid convertor; reads two size fields.
        unsafe { (*self.0).local_size - (*self.0).bConverted }
    }

    /// Total packed size of the whole message.
    pub fn packed_size(&self) -> usize {
        if self.0.is_null() {
            return 0;
        }
        // SAFETY: valid convertor.
        unsafe { (*self.0).local_size }
    }

    /// Where the next unpacked byte lives, for contiguous data.
    pub fn current_pointer(&self) -> *mut u8 {
        if self.0.is_null() {
            return std::ptr::null_mut();
        }
        let mut ptr: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: valid convertor; writes one pointer.
        unsafe { sys::opal_convertor_get_current_pointer(self.0, &mut ptr) };
        ptr.cast()
    }

    /// The next `len` bytes of the user's buffer in place, when they need no packing
    /// (contiguous host memory, `len` within what is left); the convertor does not move.
    /// A send that copies them whole and completes (a `sendi`) leaves the convertor
    /// behind as Open MPI's vader does: ob1 does not look at it again.
    ///
    /// The questions are `opal_convertor_need_buffers` and
    /// `opal_convertor_get_current_pointer` (static inline in `opal_convertor.h`, the same
    /// in 4.1 and 5.0) read here from the convertor's fields, not through their extern
    /// wrappers: this runs on every small send.
    #[inline(always)]
    pub fn contiguous(&self, len: usize) -> Option<&[u8]> {
        if len == 0 || self.0.is_null() {
            return None;
        }
        // SAFETY: valid convertor (constructor contract); reads plain fields.
        let c = unsafe { &*self.0 };
        // A valid convertor has bConverted <= local_size, both sizes of real memory: the
        // sum cannot wrap.
        if c.bConverted.wrapping_add(len) > c.local_size
            || !host_contiguous(c.flags, c.count as u64)
            || c.pDesc.is_null()
        {
            return None;
        }
        // opal_convertor_get_current_pointer:
        //   pConv->pBaseBuf + pConv->bConverted + pConv->pDesc->true_lb
        // SAFETY: a convertor's pDesc is its datatype, valid while the convertor is.
        let true_lb = unsafe { (*c.pDesc).true_lb };
        let ptr = c
            .pBaseBuf
            .wrapping_add(c.bConverted)
            .wrapping_offset(true_lb);
        if ptr.is_null() {
            return None;
        }
        // SAFETY: a convertor that needs no buffers describes `remaining()` contiguous
        // readable bytes at its current pointer (the user's send buffer, which the PML
        // keeps alive and unmodified during the send); `len` is within them.
        Some(unsafe { std::slice::from_raw_parts(ptr, len) })
    }

    /// Packs up to `dst.len()` bytes; returns how many were packed.
    pub fn pack(&mut self, dst: &mut [u8]) -> usize {
        if self.0.is_null() {
            return 0;
        }
        let mut iov = sys::iovec {
            iov_base: dst.as_mut_ptr().cast(),
            iov_len: dst.len(),
        };
        let mut count: u32 = 1;
        let mut size: usize = dst.len();
        // SAFETY: valid convertor; one iovec describing `dst`, which we exclusively borrow.
        unsafe { sys::opal_convertor_pack(self.0, &mut iov, &mut count, &mut size) };
        size
    }

    /// Moves the convertor past `bytes` without copying (data sent in place).
    pub fn skip(&mut self, bytes: usize) {
        if self.0.is_null() {
            return;
        }
        let mut position = self.position() + bytes;
        // SAFETY: valid convertor; set_position clamps to the message size.
        unsafe { sys::opal_convertor_set_position(self.0, &mut position) };
    }

    /// Current position in bytes.
    pub fn position(&self) -> usize {
        if self.0.is_null() {
            return 0;
        }
        // SAFETY: valid convertor.
        unsafe { (*self.0).bConverted }
    }
}

/// The contiguous bytes of an MTL send (`ompi_mtl_datatype_pack`): the user buffer
/// itself when contiguous, else a packed copy freed on drop.
#[derive(Debug)]
pub struct SendBuffer {
    ptr: *mut u8,
    len: usize,
    owned: bool,
}

impl SendBuffer {
    /// Packs (or points at) the whole message behind `convertor`.
    pub fn new(convertor: &mut Convertor) -> crate::Result<SendBuffer> {
        let mut ptr: *mut std::ffi::c_void = std::ptr::null_mut();
        let (mut len, mut owned) = (0usize, false);
        // SAFETY: valid convertor (constructor contract); out-pointers are ours.
        let rc =
            unsafe { sys::ompi_mtl_datatype_pack(convertor.0, &mut ptr, &mut len, &mut owned) };
        crate::error::to_result(rc)?;
        Ok(SendBuffer {
            ptr: ptr.cast(),
            len,
            owned,
        })
    }

    /// The message bytes.
    pub fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: pack produced `len` readable bytes at `ptr`, alive until drop (a
        // packed copy) or for the send's duration (the user's buffer).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for SendBuffer {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: ompi_mtl_datatype_pack malloc'ed this copy for us to free.
            unsafe { libc::free(self.ptr.cast()) };
        }
    }
}

/// Where an MTL receive lands (`ompi_mtl_datatype_recv_buf`): the user buffer when
/// contiguous, else a temporary one unpacked into the user's layout by `finish`.
#[derive(Debug)]
pub struct ReceiveBuffer {
    convertor: *mut sys::opal_convertor_t,
    ptr: *mut u8,
    capacity: usize,
}

impl ReceiveBuffer {
    /// A buffer for the receive described by `convertor`.
    ///
    /// # Safety
    /// `convertor` must stay valid until `finish`.
    pub unsafe fn new(convertor: *mut sys::opal_convertor_t) -> ReceiveBuffer {
        let mut ptr: *mut std::ffi::c_void = std::ptr::null_mut();
        let (mut capacity, mut free_on_error) = (0usize, false);
        // SAFETY: valid convertor (caller contract); out-pointers are ours.
        unsafe {
            sys::ompi_mtl_datatype_recv_buf(convertor, &mut ptr, &mut capacity, &mut free_on_error)
        };
        ReceiveBuffer {
            convertor,
            ptr: ptr.cast(),
            capacity,
        }
    }

    /// Bytes the receive can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Where a transport that writes the data itself (a posted libfabric receive) puts it:
    /// `capacity` writable bytes, valid until `finish`/`finish_in_place`.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Unpacks `received` bytes that a transport already wrote at `as_mut_ptr` (clamped
    /// to the capacity) and returns how many were taken.
    pub fn finish_in_place(self, received: usize) -> usize {
        let taken = received.min(self.capacity);
        // SAFETY: as in `finish`: unpacks (or no-ops for contiguous data) and frees a
        // temporary buffer; the convertor is valid (constructor contract).
        unsafe { sys::ompi_mtl_datatype_unpack(self.convertor, self.ptr.cast(), taken) };
        taken
    }

    /// Copies up to `capacity` bytes of `data` in, unpacks, and returns how many fit.
    pub fn finish(self, data: &[u8]) -> usize {
        let copied = data.len().min(self.capacity);
        if copied > 0 {
            // SAFETY: recv_buf gave `capacity` writable bytes at `ptr`.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr, copied) };
        }
        // SAFETY: unpacks into the user's layout and frees a temporary buffer (a no-op
        // for contiguous data); the convertor is valid (constructor contract).
        unsafe { sys::ompi_mtl_datatype_unpack(self.convertor, self.ptr.cast(), copied) };
        copied
    }
}
