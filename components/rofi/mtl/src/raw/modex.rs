//! Publishing our endpoint name and reading the peers' through the modex.

use mca::component::Exported;
use mca::proc::{self, Proc};
use mca::{Result, sys};

use crate::Rofi;

/// Publishes this process's endpoint name.
pub fn send(name: &[u8]) -> Result<()> {
    // SAFETY: Rofi::raw() is the exported component structure.
    unsafe { proc::modex_send(Rofi::raw(), name) }
}

/// The endpoint name `p` published.
pub fn recv(p: *mut sys::ompi_proc_t) -> Result<Vec<u8>> {
    // SAFETY: `p` is a live ompi_proc_t from the PML, whose first member is its
    // opal_proc_t; Rofi::raw() is the exported component structure.
    unsafe { Proc::from_raw(p.cast()).modex_recv(Rofi::raw()) }
}
