//! Raw: the pointers ob1 hands back to us. Descriptors we allocated come back as
//! `Descriptor`s and our module as the address progress needs; turning them into Rust
//! references and running completion callbacks is the only `unsafe` of the BTL proper.
//!
//! Below the module: generic over it ([`LiveModule`], [`Upcalls`]), so it never names
//! `module::Rusnic`.

use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex};

use mca::btl::{Btl, BtlModule, Descriptor, Frag};

use rusnic_core::Shared;

/// Our fragments: the C descriptor with one segment over a buffer the protocol core may
/// share once the fragment is sent (zero-copy: the core's datagrams refer to it until
/// the peer acknowledged them, possibly after ob1 freed the descriptor).
pub type OurFrag = Frag<FragBuf>;

/// A fragment buffer: handed to the core as a [`Shared`] (same allocation, same count),
/// reusable once the core dropped its clones.
pub type FragBuf = Arc<Vec<u8>>;

/// The live module, set at add_procs and cleared at finalize, for component progress
/// (which Open MPI calls without a module argument). The module keeps it as a static.
pub struct LiveModule<M: BtlModule>(AtomicPtr<Btl<M>>);

impl<M: BtlModule> LiveModule<M> {
    pub const fn new() -> Self {
        LiveModule(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// From add_procs: `btl` stays live until `clear` (called from its finalize).
    pub fn set(&self, btl: &Btl<M>) {
        self.0
            .store(btl as *const Btl<M> as *mut _, Ordering::Release);
    }

    pub fn clear(&self) {
        self.0.store(std::ptr::null_mut(), Ordering::Release);
    }

    /// Runs `f` with the live module, if there is one.
    pub fn with<R>(&self, f: impl FnOnce(&Btl<M>) -> R) -> Option<R> {
        let p = self.0.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: the pointer was stored from a live module in add_procs and is cleared
        // in finalize before ob1 frees the module cell; ob1 stops calling progress only
        // after finalize, and no call of ours runs concurrently with finalize.
        Some(f(unsafe { &*p }))
    }
}

/// Whether a module may still call into the PML (false once its finalize began: the
/// PML is gone).
pub trait Upcalls: BtlModule {
    fn upcalls(&self) -> bool;
}

/// Buffers at least this large are recycled instead of freed: a fresh allocation of a
/// bandwidth-sized fragment (up to `max_send_size`) costs a zero fill and, above glibc's
/// mmap threshold, a page fault per 4 KiB, which dominated the sender's profile.
const POOL_MIN: usize = 16 * 1024;
/// Buffers kept for reuse: the core holds a sent fragment's buffer until the peer
/// acknowledged it (a grant's worth of data, 8 MiB at the defaults), so more are
/// pooled than ob1 keeps in flight.
const POOL_MAX: usize = 64;

/// Large fragment buffers given back by `free`, for the next `new_frag`; one is
/// reusable once the core dropped its references (`Arc::get_mut` succeeds).
static POOL: Mutex<Vec<FragBuf>> = Mutex::new(Vec::new());

/// A buffer of at least `len` initialized bytes (stale contents when recycled: every
/// caller overwrites what it sends, and segments say how much of it is in use).
fn buffer(len: usize) -> FragBuf {
    if len >= POOL_MIN {
        let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        let free = pool
            .iter_mut()
            .rposition(|b| Arc::get_mut(b).is_some_and(|v| v.capacity() >= len));
        if let Some(i) = free {
            let mut b = pool.swap_remove(i);
            drop(pool);
            if let Some(v) = Arc::get_mut(&mut b) {
                // Never shrunk, so this fills at most once per buffer.
                if v.len() < len {
                    v.resize(len, 0);
                }
                return b;
            }
        }
    }
    Arc::new(vec![0u8; len])
}

fn recycle(b: FragBuf) {
    if b.capacity() < POOL_MIN {
        return;
    }
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if pool.len() < POOL_MAX {
        pool.push(b);
    }
}

/// The fragment's bytes for writing, before it is sent. Unique by then (the core gets
/// its reference in `send`), so `make_mut` never copies in practice.
pub fn bytes_mut(frag: &mut OurFrag) -> &mut Vec<u8> {
    Arc::make_mut(&mut frag.extra)
}

/// A new BTL-side fragment with `len` usable bytes.
pub fn new_frag(len: usize) -> Box<OurFrag> {
    let mut frag = Frag::new_boxed(buffer(len));
    let addr = bytes_mut(&mut frag).as_mut_ptr();
    frag.set_segments(&[(addr, len)]);
    frag
}

/// The bytes a descriptor of ours describes (its first segment: the head of the
/// buffer), shared without a copy when that is safe: the descriptor is BTL-owned, so
/// ob1 never writes into it again. An ob1-owned descriptor may be refilled and resent
/// by ob1 after its completion callback while the core still holds the bytes for
/// retransmission: it gets a copy.
pub fn share_payload(des: Descriptor) -> (Shared, usize) {
    // SAFETY: ob1 only passes our own descriptors to send, once, and does not touch the
    // descriptor while send runs.
    let frag = unsafe { Frag::<FragBuf>::peek_ref(des) };
    let len = (frag.segments[0].seg_len as usize).min(frag.extra.len());
    if des.btl_owned() {
        let shared: Shared = frag.extra.clone();
        (shared, len)
    } else {
        (Arc::new(frag.extra[..len].to_vec()), len)
    }
}

/// Frees one of our descriptors.
pub fn free(des: Descriptor) {
    // SAFETY: a descriptor we made with `new_frag(..).into_descriptor()`, given back
    // once by ob1 (free) or owned by us (BTL ownership after completion).
    let mut frag = unsafe { Frag::<FragBuf>::from_descriptor(des) };
    recycle(std::mem::take(&mut frag.extra));
}

/// Runs a descriptor's completion callback, then frees it if the BTL owns it.
/// After finalize began the PML is gone: the descriptor is only freed.
pub fn complete<M: Upcalls>(btl: &Btl<M>, endpoint: usize, des: Descriptor, status: i32) {
    if !btl.upcalls() {
        free(des);
        return;
    }
    let owned = des.btl_owned();
    // SAFETY: a live descriptor of ours whose send was accepted; the callback may reuse
    // it only when ob1 owns it, and we free it afterwards only when we own it.
    unsafe { btl.complete(endpoint as *mut _, des, status) };
    if owned {
        free(des);
    }
}
