//! Raw: the pointers ob1 hands back to us. Descriptors we allocated come back as
//! `Descriptor`s and our module as the address progress needs; turning them into Rust
//! references and running completion callbacks is the only `unsafe` of the BTL proper.

use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, Ordering};

use mca::btl::{Btl, Descriptor, Frag};

use crate::module::Rusnic;

/// Our fragments: the C descriptor with one segment over an owned buffer.
pub type OurFrag = Frag<Vec<u8>>;

/// The live module, set at add_procs and cleared at finalize, for component progress
/// (which Open MPI calls without a module argument).
static MODULE: AtomicPtr<Btl<Rusnic>> = AtomicPtr::new(std::ptr::null_mut());

pub fn set_module(btl: &Btl<Rusnic>) {
    MODULE.store(btl as *const Btl<Rusnic> as *mut _, Ordering::Release);
}

pub fn clear_module() {
    MODULE.store(std::ptr::null_mut(), Ordering::Release);
}

/// Runs `f` with the live module, if there is one.
pub fn with_module<R>(f: impl FnOnce(&Btl<Rusnic>) -> R) -> Option<R> {
    let p = MODULE.load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: the pointer was stored from a live module in add_procs and is cleared in
    // finalize before ob1 frees the module cell; ob1 stops calling progress only after
    // finalize, and no call of ours runs concurrently with finalize.
    Some(f(unsafe { &*p }))
}

/// Buffers at least this large are recycled instead of freed: a fresh allocation of a
/// bandwidth-sized fragment (up to `max_send_size`) costs a zero fill and, above glibc's
/// mmap threshold, a page fault per 4 KiB, which dominated the sender's profile.
const POOL_MIN: usize = 16 * 1024;
/// Buffers kept for reuse (ob1 keeps a few fragments in flight per peer).
const POOL_MAX: usize = 32;

/// Large fragment buffers given back by `free`, for the next `new_frag`.
static POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// A buffer of exactly `len` initialized bytes (stale contents when recycled: every
/// caller overwrites what it sends).
fn buffer(len: usize) -> Vec<u8> {
    if len >= POOL_MIN {
        let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = pool.iter().rposition(|b| b.capacity() >= len) {
            let mut b = pool.swap_remove(i);
            drop(pool);
            // Shrinking keeps the capacity; growing within it fills only the tail.
            b.resize(len, 0);
            return b;
        }
    }
    vec![0u8; len]
}

fn recycle(mut b: Vec<u8>) {
    if b.capacity() < POOL_MIN {
        return;
    }
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if pool.len() < POOL_MAX {
        // Keep the whole capacity initialized so later `resize` calls fill nothing.
        let cap = b.capacity();
        b.resize(cap, 0);
        pool.push(b);
    }
}

/// A new BTL-side fragment with `len` usable bytes.
pub fn new_frag(len: usize) -> Box<OurFrag> {
    let mut frag = Frag::new_boxed(buffer(len));
    let addr = frag.extra.as_mut_ptr();
    frag.set_segments(&[(addr, len)]);
    frag
}

/// Calls `f` with the bytes a descriptor of ours describes (its first segment).
pub fn with_payload<R>(des: Descriptor, f: impl FnOnce(&[u8]) -> R) -> R {
    // SAFETY: ob1 only passes our own descriptors to send; the first segment points
    // into the fragment's own buffer (alloc/prepare_src keep it within bounds), and the
    // borrow ends with `f`, before the descriptor is completed or freed.
    let frag = unsafe { Frag::<Vec<u8>>::peek(des) };
    let len = (frag.segments[0].seg_len as usize).min(frag.extra.len());
    f(&frag.extra[..len])
}

/// Frees one of our descriptors.
pub fn free(des: Descriptor) {
    // SAFETY: a descriptor we made with `new_frag(..).into_descriptor()`, given back
    // once by ob1 (free) or owned by us (BTL ownership after completion).
    let mut frag = unsafe { Frag::<Vec<u8>>::from_descriptor(des) };
    recycle(std::mem::take(&mut frag.extra));
}

/// Runs a descriptor's completion callback, then frees it if the BTL owns it.
pub fn complete(btl: &Btl<Rusnic>, endpoint: usize, des: Descriptor, status: i32) {
    let owned = des.btl_owned();
    // SAFETY: a live descriptor of ours whose send was accepted; the callback may reuse
    // it only when ob1 owns it, and we free it afterwards only when we own it.
    unsafe { btl.complete(endpoint as *mut _, des, status) };
    if owned {
        free(des);
    }
}
