//! Receive buffers over the PML's convertor.

use mca::convertor::{Convertor, ReceiveBuffer};

/// The buffer a receive posts (the user's memory, or a temporary one for
/// non-contiguous datatypes, unpacked at completion).
pub fn receive(convertor: &mut Convertor) -> ReceiveBuffer {
    // SAFETY: cm keeps a request's convertor alive until the request completes, and
    // rofi finishes the buffer in that completion at the latest.
    unsafe { ReceiveBuffer::new(convertor.as_ptr()) }
}
