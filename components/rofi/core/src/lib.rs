//! rofi core: OFI tag layouts, provider filtering and the synchronous-send protocol (sans-IO).
//!
//! Everything here is pure: the glue (`components/rofi/glue`) owns libfabric, the clock and
//! the PML callbacks, and asks this crate what bits to post, which provider to open, which
//! scalable-endpoint context a communicator uses, and when a receive must acknowledge a
//! synchronous send. See README.md for the invariants each module keeps.
#![forbid(unsafe_code)]

pub mod context;
pub use fast_hash as hash;
pub mod host;
pub mod provider;
pub mod stats;
pub mod sync;
pub mod tag;
