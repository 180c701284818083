//! Raw bindings over the system libfabric, generated from its installed headers.
//!
//! libfabric's data-path API (`fi_send`, `fi_cq_read`, `fi_tsend`, ...) is `static
//! inline` dispatch through provider ops tables; bindgen's `wrap_static_fns`
//! turns each into a real function compiled here, so the names are the ones
//! the man pages use. Flag macros are bound as `u64` (the API's width).

#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
#![allow(clippy::all, clippy::undocumented_unsafe_blocks)]
#![allow(unsafe_op_in_unsafe_fn)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

/// `FI_VERSION(major, minor)` from fabric.h.
pub const fn fi_version_of(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}
