//! The user buffer behind a send: contiguous pointer or packing through the convertor.

use ompi_sys as sys;

/// A borrowed `opal_convertor_t` (the PML owns it).
#[derive(Debug)]
pub struct Convertor(*mut sys::opal_convertor_t);

impl Convertor {
    /// # Safety
    /// `raw` must be a valid convertor for the duration of the borrow.
    pub unsafe fn from_raw(raw: *mut sys::opal_convertor_t) -> Convertor {
        Convertor(raw)
    }

    /// The raw pointer, for the MTL datatype helpers.
    pub fn as_ptr(&self) -> *mut sys::opal_convertor_t {
        self.0
    }

    /// True if the data must be packed (non-contiguous, or not in host memory).
    pub fn needs_packing(&self) -> bool {
        // SAFETY: valid convertor (constructor contract).
        unsafe { sys::opal_convertor_need_buffers(self.0) != 0 }
    }

    /// Bytes not yet packed.
    pub fn remaining(&self) -> usize {
        // SAFETY: valid convertor; reads two size fields.
        unsafe { (*self.0).local_size - (*self.0).bConverted }
    }

    /// Total packed size of the whole message.
    pub fn packed_size(&self) -> usize {
        // SAFETY: valid convertor.
        unsafe { (*self.0).local_size }
    }

    /// Where the next unpacked byte lives, for contiguous data.
    pub fn current_pointer(&self) -> *mut u8 {
        let mut ptr: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: valid convertor; writes one pointer.
        unsafe { sys::opal_convertor_get_current_pointer(self.0, &mut ptr) };
        ptr.cast()
    }

    /// Packs up to `dst.len()` bytes; returns how many were packed.
    pub fn pack(&mut self, dst: &mut [u8]) -> usize {
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
        let mut position = self.position() + bytes;
        // SAFETY: valid convertor; set_position clamps to the message size.
        unsafe { sys::opal_convertor_set_position(self.0, &mut position) };
    }

    /// Current position in bytes.
    pub fn position(&self) -> usize {
        // SAFETY: valid convertor.
        unsafe { (*self.0).bConverted }
    }
}
