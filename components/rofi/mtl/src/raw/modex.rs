//! Publishing our endpoint name and reading the peers' through the modex.

use mca::component::Exported;
use mca::proc::{self, Proc};
use mca::{Error, Result, sys};

use crate::Rofi;

/// Publishes this process's endpoint name, its receive-context count (a 4-byte
/// little-endian trailer: senders need it to name the context a communicator's
/// messages must reach) and whether it matches messages itself (a last byte: each
/// process decides with its own matching probe, and peers that decided differently
/// cannot talk, so add_procs refuses them instead of hanging).
pub fn send(name: &[u8], ctxts: u32, host_matching: bool) -> Result<()> {
    let mut blob = name.to_vec();
    blob.extend_from_slice(&ctxts.to_le_bytes());
    blob.push(u8::from(host_matching));
    // SAFETY: Rofi::raw() is the exported component structure.
    unsafe { proc::modex_send(Rofi::raw(), &blob) }
}

/// The endpoint name, context count and host-matching flag `p` published.
pub fn recv(p: *mut sys::ompi_proc_t) -> Result<(Vec<u8>, u32, bool)> {
    // SAFETY: `p` is a live ompi_proc_t from the PML, whose first member is its
    // opal_proc_t; Rofi::raw() is the exported component structure.
    let mut blob = unsafe { Proc::from_raw(p.cast()).modex_recv(Rofi::raw()) }?;
    let host_matching = blob.pop().ok_or(Error::UNREACH)? != 0;
    let Some(at) = blob.len().checked_sub(4) else {
        return Err(Error::UNREACH);
    };
    let ctxts = u32::from_le_bytes(blob[at..].try_into().map_err(|_| Error::UNREACH)?);
    blob.truncate(at);
    Ok((blob, ctxts.max(1), host_matching))
}
