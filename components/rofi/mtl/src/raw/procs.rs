//! Each peer's fabric address, kept in `ompi_proc_t::proc_endpoints[MTL]`.

use mca::sys;

/// Which of rofi's providers reaches a peer (`mtl_rofi_local_provider`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rail {
    /// The provider selection chose: every peer, or those on other nodes.
    Main = 0,
    /// The provider for peers on this node, when one is opened beside the main one.
    Local = 1,
}

/// What rofi knows of a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Its endpoint in the AV of `rail`.
    pub addr: u64,
    /// Receive contexts it spreads communicators over (1 without thread grouping).
    pub ctxts: u32,
    pub rail: Rail,
}

fn slot(p: *mut sys::ompi_proc_t) -> *mut *mut std::ffi::c_void {
    // SAFETY: `p` is a live ompi_proc_t from the PML; the MTL slot is ours to use.
    unsafe { &raw mut (*p).proc_endpoints[sys::OMPI_PROC_ENDPOINT_TAG_MTL as usize] }
}

/// What was recorded for `p`, if add_procs reached it.
pub fn address(p: *mut sys::ompi_proc_t) -> Option<Peer> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the slot holds NULL or a Box<Peer> leaked by `record`.
    unsafe {
        let v = *slot(p);
        (!v.is_null()).then(|| *(v as *const Peer))
    }
}

/// Records `peer` for `p` (replacing any earlier one).
pub fn record(p: *mut sys::ompi_proc_t, peer: Peer) {
    forget(p);
    let boxed = Box::into_raw(Box::new(peer));
    // SAFETY: live proc; the slot now owns the box until `forget`.
    unsafe { *slot(p) = boxed.cast() };
}

/// Drops the address recorded for `p`.
pub fn forget(p: *mut sys::ompi_proc_t) {
    // SAFETY: the slot holds NULL or a Box<Peer> from `record`, freed once and cleared.
    unsafe {
        let v = *slot(p);
        if !v.is_null() {
            drop(Box::from_raw(v as *mut Peer));
            *slot(p) = std::ptr::null_mut();
        }
    }
}

/// The process's name (jobid in the high half, vpid in the low): the same for it in
/// every communicator, unlike its rank.
pub fn name(p: *mut sys::ompi_proc_t) -> u64 {
    if p.is_null() {
        return u64::MAX;
    }
    // SAFETY: `p` is a live ompi_proc_t from the PML (or ompi_proc_local's).
    let n = unsafe { (*p).super_.proc_name };
    (u64::from(n.jobid) << 32) | u64::from(n.vpid)
}

/// This process's name (see [`name`]). Not `comm.peer(comm.rank())`: in an
/// intercommunicator that is the remote group's process with our rank.
pub fn own_name() -> u64 {
    // SAFETY: the local proc exists from MPI_Init on, before any MTL call.
    name(unsafe { sys::ompi_proc_local() })
}
