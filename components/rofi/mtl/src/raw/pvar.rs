//! Registering MPI_T performance variables against rofi's component structure.

use std::sync::atomic::AtomicU64;

use mca::component::Exported;
use mca::pvars::{self, PvarClass};

use crate::Rofi;

/// A read-only counter pvar `mtl_rofi_<name>` backed by `value`.
pub fn counter(name: &str, description: &str, value: &'static AtomicU64) {
    // SAFETY: Rofi::raw() is the exported component structure, valid for the process.
    let _ = unsafe { pvars::register(Rofi::raw(), name, description, PvarClass::Counter, value) };
}
