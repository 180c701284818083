//! Receive buffers over the PML's convertor.

use mca::convertor::{Convertor, ReceiveBuffer};

/// The buffer a receive posts (the user's memory, or a temporary one for
/// non-contiguous datatypes, unpacked at completion).
pub fn receive(convertor: &mut Convertor) -> ReceiveBuffer {
    // SAFETY: cm keeps a request's convertor alive until the request completes, and
    // rofi finishes the buffer in that completion at the latest.
    unsafe { ReceiveBuffer::new(convertor.as_ptr()) }
}

/// Copies `bytes` (at most the buffer's capacity) to where the receive lands.
pub fn copy_in(buffer: &ReceiveBuffer, bytes: &[u8]) {
    let n = bytes.len().min(buffer.capacity());
    if n > 0 {
        // SAFETY: the receive buffer has `capacity` writable bytes at as_mut_ptr, and
        // `bytes` is a separate allocation (the bounce buffer).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buffer.as_mut_ptr(), n) };
    }
}
