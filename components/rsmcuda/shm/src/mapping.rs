//! The one place that turns segment offsets into references.
//!
//! A [`Mapping`] owns an `mmap`ed range and hands out `&T` for [`Shared`] types at checked
//! offsets, plus raw byte ranges for fragment payloads. Everything above this module works
//! with offsets and safe references only.

use std::ptr::NonNull;

use crate::repr::Shared;
use crate::sys;

/// An owned shared mapping (unmapped on drop).
pub struct Mapping {
    // INVARIANT: `ptr..ptr+len` is a live MAP_SHARED read/write mapping owned by this value,
    // page aligned (so 64-byte aligned), and `len` > 0.
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; all shared access to it goes through atomics (the
// `Shared` types) or through byte ranges whose exclusive use the fragment protocol
// guarantees (see `freelist.rs`). Moving or sharing the handle between threads is sound.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Takes ownership of a mapping.
    ///
    /// # Safety
    /// `ptr`/`len` must be a live mapping from `sys::mmap_shared` that nothing else unmaps.
    pub unsafe fn from_raw(ptr: NonNull<u8>, len: usize) -> Self {
        debug_assert!(len > 0 && (ptr.as_ptr() as usize).is_multiple_of(4096));
        // INVARIANT: guaranteed by the caller.
        Self { ptr, len }
    }

    #[inline]
    fn check(&self, off: u64, bytes: u64, align: usize) -> usize {
        let end = off.checked_add(bytes);
        assert!(
            end.is_some_and(|e| e <= self.len as u64) && off.is_multiple_of(align as u64),
            "segment access out of bounds or misaligned: off {off} len {bytes} (mapped {})",
            self.len
        );
        off as usize
    }

    /// A reference to the `T` at `off`.
    ///
    /// Panics if `off` is out of bounds or misaligned: offsets come from a validated
    /// `Layout`, so that would be a bug in this crate, not bad input.
    #[inline]
    pub fn get<T: Shared>(&self, off: u64) -> &T {
        let off = self.check(off, size_of::<T>() as u64, align_of::<T>());
        // SAFETY: in bounds and aligned (checked above) inside a live mapping (type
        // invariant) that outlives `&self`; `T: Shared` is valid for every bit pattern and
        // only mutated through atomics, so a shared reference is sound even though other
        // processes write the same memory.
        unsafe { &*self.ptr.as_ptr().add(off).cast::<T>() }
    }

    /// A slice of `n` `T`s starting at `off`.
    pub fn slice<T: Shared>(&self, off: u64, n: usize) -> &[T] {
        let bytes = (size_of::<T>() as u64).checked_mul(n as u64);
        let off = self.check(off, bytes.unwrap_or(u64::MAX), align_of::<T>());
        // SAFETY: as in `get`, for `n` consecutive elements (bounds checked above).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(off).cast::<T>(), n) }
    }

    /// Raw pointer to `len` bytes at `off` (bounds checked).
    #[inline]
    pub fn bytes_ptr(&self, off: u64, len: usize) -> *mut u8 {
        let off = self.check(off, len as u64, 1);
        // SAFETY: `off + len` is within the mapping (checked above).
        unsafe { self.ptr.as_ptr().add(off) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: by the type invariant we own this exact mapping; `&mut self` in drop means
        // no reference derived from it is alive any more.
        unsafe { sys::munmap(self.ptr, self.len) }
    }
}
