//! Untagged receive buffers kept posted for host matching (`crate::host`).
//!
//! INVARIANT: slot `i`'s buffer and context are written by the provider only while the
//! slot is posted; rofi reads the buffer only between that slot's completion and its
//! next post, under the progress lock of context 0 (the only context host matching
//! uses). Buffers and contexts are heap allocations that never move and are never
//! freed: the engine lives in a static for the rest of the process, and a receive
//! still posted when the fabric closes must not point to freed memory.

use super::context::{OpContext, Target};
use super::fabric::Fabric;
use super::procs::Rail;

#[derive(Debug)]
pub struct Bounces {
    size: usize,
    bufs: Vec<*mut u8>,
    ctxs: Vec<*mut OpContext>,
}

// SAFETY: the pointers are plain heap memory; the module invariant orders every access
// (the provider's writes, then reads under the progress lock).
unsafe impl Send for Bounces {}
// SAFETY: as above; shared access hands out pointers and reads completed slots only.
unsafe impl Sync for Bounces {}

impl Bounces {
    /// `count` buffers of `size` bytes for `rail`'s endpoint, none posted yet.
    pub fn new(rail: Rail, count: u32, size: usize) -> Bounces {
        let bufs = (0..count)
            .map(|_| Box::into_raw(vec![0u8; size].into_boxed_slice()).cast::<u8>())
            .collect();
        let ctxs = (0..count)
            .map(|i| Box::into_raw(Box::new(OpContext::new(Target::Bounce(rail, i)))))
            .collect();
        Bounces { size, bufs, ctxs }
    }

    pub fn count(&self) -> u32 {
        self.bufs.len() as u32
    }

    /// Posts slot `i` (not posted now) as an untagged receive on context 0.
    pub fn post(&self, fabric: &Fabric, i: u32) -> isize {
        let i = i as usize;
        // SAFETY: module invariant: the buffer and context live for the process and the
        // slot is not posted, so nothing else writes them.
        unsafe { fabric.recv(0, self.bufs[i], self.size, self.ctxs[i]) }
    }

    /// The `len` bytes slot `i` received (its completion was just read; it is not
    /// posted again until the caller is done with them).
    pub fn received(&self, i: u32, len: usize) -> &[u8] {
        // SAFETY: module invariant: the slot completed and is not posted; the provider
        // wrote `len` <= size bytes.
        unsafe { std::slice::from_raw_parts(self.bufs[i as usize], len.min(self.size)) }
    }
}
