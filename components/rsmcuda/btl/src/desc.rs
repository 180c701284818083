//! Descriptors bound one-to-one to the segment's fragments.
//!
//! Every fragment this rank owns gets one descriptor at setup, whose segment points
//! straight at the fragment's payload in shared memory: ob1 writes its header (and
//! prepare_src packs the data) where the receiver will read it, with no staging copy.
//! The binding never changes, so an ACK (which names the fragment) finds its
//! descriptor by index, and a descriptor ob1 keeps after completion keeps its fragment.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use mca::btl::{Descriptor, Frag};
use rsmcuda_shm::{FragPool, PoolKind};

/// What rsmcuda keeps in each descriptor.
#[derive(Debug)]
pub struct Extra {
    /// The segment (index in the module's `Nodes`) whose fragment this is.
    pub node: u32,
    pub kind: PoolKind,
    pub index: u32,
    /// No completion callback is owed when the ACK comes back: the send returned 1
    /// (BTL-owned, no ALWAYS_CALLBACK), or the fragment was sent by sendi.
    pub silent: AtomicBool,
    /// The local rank the fragment was last sent to (set before it is pushed).
    pub peer: AtomicU32,
}

pub fn kind_index(kind: PoolKind) -> usize {
    match kind {
        PoolKind::Eager => 0,
        PoolKind::Max => 1,
    }
}

/// The descriptors of every fragment of this rank, by pool and index.
pub struct Table {
    descs: [Vec<Descriptor>; 2],
}

// SAFETY: the table only stores descriptor addresses, never dereferenced through
// `&Table` except via `extra` (atomics and immutable fields) and `prepare` (called
// by the descriptor's current owner only, per the BTL contract).
unsafe impl Sync for Table {}

impl Table {
    /// Allocates every fragment once to learn its payload address, builds its
    /// descriptor, and frees it again: the pool ends as it started.
    pub fn build(pool: &mut FragPool, node: u32) -> Table {
        let mut slots: [Vec<Option<Descriptor>>; 2] = [Vec::new(), Vec::new()];
        for kind in [PoolKind::Eager, PoolKind::Max] {
            let mut held = Vec::new();
            while let Some(mut frag) = pool.alloc_kind(kind) {
                let payload = pool.payload_mut(&mut frag);
                let (addr, capacity) = (payload.as_mut_ptr(), payload.len());
                let mut d = Frag::new_boxed(Extra {
                    node,
                    kind,
                    index: frag.index(),
                    silent: AtomicBool::new(false),
                    peer: AtomicU32::new(0),
                });
                d.set_segments(&[(addr, capacity)]);
                let list = &mut slots[kind_index(kind)];
                let at = frag.index() as usize;
                if list.len() <= at {
                    list.resize(at + 1, None);
                }
                list[at] = Some(d.into_descriptor());
                held.push(frag);
            }
            for frag in held {
                pool.free(frag);
            }
        }
        // Every index below the pool's count was handed out once, so no slot is empty.
        let descs = slots.map(|list| list.into_iter().flatten().collect());
        Table { descs }
    }

    pub fn get(&self, kind: PoolKind, index: u32) -> Option<Descriptor> {
        self.descs[kind_index(kind)].get(index as usize).copied()
    }

    /// The rsmcuda part of one of our descriptors.
    pub fn extra(&self, des: Descriptor) -> &Extra {
        extra(des)
    }

    /// Sets the segment length, flags and order of a descriptor being handed out.
    pub fn prepare(&self, des: Descriptor, len: usize, flags: u32, order: u8) {
        // SAFETY: called right after the fragment was allocated under the pool lock,
        // so this caller is the descriptor's only user; it comes from this table.
        let frag = unsafe { Frag::<Extra>::peek(des) };
        frag.segments[0].seg_len = len as u64;
        frag.descriptor.des_segment_count = 1;
        frag.descriptor.des_flags = flags;
        frag.descriptor.order = order;
        frag.extra.silent.store(false, Ordering::Relaxed);
    }

    /// Trims a descriptor's segment to the bytes actually filled.
    pub fn set_len(&self, des: Descriptor, len: usize) {
        // SAFETY: as in `prepare`: the caller holds the freshly allocated descriptor.
        unsafe { Frag::<Extra>::peek(des).segments[0].seg_len = len as u64 };
    }

    /// The payload address of a descriptor's fragment.
    pub fn payload(&self, des: Descriptor) -> *mut u8 {
        // SAFETY: as in `extra`; the segment address is fixed at build time.
        unsafe {
            Frag::<Extra>::peek_ref(des).segments[0]
                .seg_addr
                .pval
                .cast()
        }
    }
}

/// The rsmcuda part of a descriptor of any of this module's tables.
pub fn extra<'a>(des: Descriptor) -> &'a Extra {
    // SAFETY: every descriptor ob1 hands back to this module came from one of its tables
    // (Frag<Extra>), and they live until that table drops, with the module; only atomics
    // and fields fixed at build time are read through this shared reference.
    unsafe { &Frag::<Extra>::peek_ref(des).extra }
}

impl Drop for Table {
    fn drop(&mut self) {
        for list in &mut self.descs {
            for des in list.drain(..) {
                // SAFETY: each descriptor was leaked once from a Box<Frag<Extra>> in
                // build and is released once here, after ob1 finalized the module.
                drop(unsafe { Frag::<Extra>::from_descriptor(des) });
            }
        }
    }
}
