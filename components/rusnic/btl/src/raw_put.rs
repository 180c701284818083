//! Raw: emulated PUT touches the application's memory directly. The sender lends the
//! source buffer to the protocol core until the peer acknowledged every byte; the
//! receiver writes arriving bytes into a registered buffer. Both rest on ob1's RDMA
//! contract, and this module is where that is taken on trust.

use std::mem::size_of;
use std::sync::Arc;

use mca::btl::{RdmaOp, Registration};
use rusnic_core::{Payload, PutTarget, Shared};

use crate::regions::Regions;

/// A source buffer of a PUT, lent by ob1 until the put's completion callback.
#[derive(Debug)]
pub struct Lent {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the bytes are only read, and ob1 neither writes nor frees them until the
// completion callback, which the module runs only once every clone of the `Lent` (in
// the core and the backend queues) was dropped (see `lend`).
unsafe impl Send for Lent {}
// SAFETY: as above; shared reads of unchanging memory.
unsafe impl Sync for Lent {}

/// Bytes `off..off + len` of a put's source, lent to the core.
pub fn lend(op: &RdmaOp, off: usize, len: usize) -> Shared {
    let len = len.min(op.size.saturating_sub(off));
    // SAFETY (of the `Lent`, and of the pointer arithmetic): `op.local..op.local +
    // op.size` is the put's source, which ob1 keeps readable and unchanged until the
    // completion callback; `Puts` runs that only once every clone of every piece was
    // dropped. `off + len <= op.size` by the clamp above.
    Arc::new(Lent {
        ptr: op.local.wrapping_add(off),
        len,
    })
}

impl Payload for Lent {
    fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: see `lend`: the range is readable and unchanged while `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// Where arriving PUT bytes go: the open regions, and only them.
pub struct RegionWriter<'a> {
    regions: &'a Regions,
    /// PUT payloads copied from a receive slot (rather than received in place).
    copied: usize,
}

/// Memory inside an open region that a datagram's payload may be received into.
pub struct Placement {
    ptr: *mut u8,
    len: usize,
}

impl Placement {
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The placed bytes, once received.
    pub fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: a Placement covers memory inside a region ob1 keeps registered while
        // the progress thread (holding the engine lock, as the writer does) uses it;
        // nothing else writes there before the request's FIN.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<'a> RegionWriter<'a> {
    pub fn new(regions: &'a Regions) -> RegionWriter<'a> {
        RegionWriter { regions, copied: 0 }
    }

    /// `addr..addr + len` as a receive destination, when one open region covers it.
    pub fn placement(&self, addr: u64, len: usize) -> Option<Placement> {
        self.regions.covers(addr, len as u64).then_some(Placement {
            ptr: addr as *mut u8,
            len,
        })
    }

    pub fn copied(&self) -> usize {
        self.copied
    }
}

impl PutTarget for RegionWriter<'_> {
    fn place(&mut self, addr: u64, data: &[u8]) -> bool {
        if !self.regions.covers(addr, data.len() as u64) {
            return false;
        }
        if data.as_ptr() as u64 == addr {
            // Received in place (a `Placement`): nothing to copy.
            return true;
        }
        self.copied += 1;
        if !data.is_empty() {
            // SAFETY: the range lies inside a region ob1 registered in this process and has
            // not deregistered yet: memory it keeps for exactly these writes (the receive
            // buffer of a request whose FIN has not arrived). A datagram is not a Rust
            // reference, so the source cannot overlap the destination.
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len());
            }
        }
        true
    }
}

/// What a registration handle holds; ob1 copies the first [`HANDLE_WIRE_LEN`] bytes
/// (the region) to the peer, which checks its put against them.
#[repr(C)]
struct Handle {
    base: u64,
    len: u64,
    key: u64,
}

/// Bytes of a handle the PML sends to the peer: base and length.
pub const HANDLE_WIRE_LEN: usize = 2 * size_of::<u64>();

/// A handle for the region `key` covering `base..base + len`.
pub fn new_handle(base: u64, len: u64, key: u64) -> Registration {
    let raw = Box::into_raw(Box::new(Handle { base, len, key }));
    Registration::from_raw(raw.cast()).expect("Box::into_raw is never NULL")
}

/// Takes back a handle from [`new_handle`] (ob1's deregister_mem); returns its region key.
pub fn take_handle(handle: Registration) -> u64 {
    // SAFETY: ob1 gives back to deregister_mem exactly the handles register_mem made
    // with `new_handle`, each once: a Box<Handle> we leaked.
    let h = unsafe { Box::from_raw(handle.as_ptr().cast::<Handle>()) };
    h.key
}

/// The region a peer's handle describes, as its PML copied it to us (a `remote_handle`
/// of a put: ob1 copies our `registration_handle_size`, [`HANDLE_WIRE_LEN`] bytes).
pub fn peer_region(handle: Registration) -> (u64, u64) {
    let p = handle.as_ptr().cast::<u8>();
    // SAFETY: ob1 passes the peer's handle bytes it received in the PUT control message,
    // HANDLE_WIRE_LEN of them (set in add_procs on every rank); the copy has no
    // alignment guarantee, hence unaligned reads.
    unsafe {
        (
            std::ptr::read_unaligned(p.cast::<u64>()),
            std::ptr::read_unaligned(p.add(size_of::<u64>()).cast::<u64>()),
        )
    }
}
