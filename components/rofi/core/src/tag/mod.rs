//! MPI matching information packed into 64-bit libfabric tags.
//!
//! MPI needs 96 bits per message (context id, source rank, tag) and a synchronous-send
//! protocol; libfabric offers a 64-bit tag plus, on some providers, 32+ bits of remote CQ
//! data. [`TagMode`] is the user's choice (MCA `mtl_rofi_tag_mode`), [`TagLayout`] the
//! resolved, validated layout every post and completion goes through.
//!
//! Matching rule of libfabric tagged receives, used throughout and by [`matches()`]:
//! a posted receive `(match, ignore)` accepts a message tagged `bits` iff
//! `(bits & !ignore) == (match & !ignore)`.

mod error;
mod layout;
mod mode;

#[cfg(test)]
mod tests;

pub use error::TagError;
pub use layout::{LayoutKind, MIN_CID_BITS, MIN_CQ_DATA_SIZE, TagCaps, TagLayout};
pub use mode::TagMode;

/// libfabric's tagged-receive predicate, in software. The glue never needs it on the data
/// path (the provider matches); it exists so tests and debug assertions can state what a
/// `(match, ignore)` pair accepts.
#[must_use]
pub const fn matches(match_bits: u64, ignore_bits: u64, bits: u64) -> bool {
    (bits & !ignore_bits) == (match_bits & !ignore_bits)
}
