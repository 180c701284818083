//! Descriptors: the `mca_btl_base_descriptor_t` ob1 holds between our calls.

use std::ptr::NonNull;

use ompi_sys as sys;

/// A descriptor handed across the C boundary. Copyable like the C pointer it is:
/// who owns it at any moment follows the BTL contract (REFERENCE.md §4.1), which
/// the compiler cannot check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor(NonNull<sys::mca_btl_base_descriptor_t>);

// SAFETY: a descriptor is a plain heap object; ownership transfer between threads
// is governed by the BTL contract, exactly as for the C pointer.
unsafe impl Send for Descriptor {}

impl Descriptor {
    /// Wraps a non-NULL descriptor pointer.
    pub fn from_raw(raw: *mut sys::mca_btl_base_descriptor_t) -> Option<Descriptor> {
        NonNull::new(raw).map(Descriptor)
    }

    /// The C pointer.
    pub fn as_ptr(self) -> *mut sys::mca_btl_base_descriptor_t {
        self.0.as_ptr()
    }

    /// `des_flags` (ownership, ALWAYS_CALLBACK, priority ...).
    pub fn flags(self) -> u32 {
        // SAFETY: a Descriptor always points to a live descriptor while it is used.
        unsafe { (*self.as_ptr()).des_flags }
    }

    /// Adds bits to `des_flags`.
    pub fn add_flags(self, bits: u32) {
        // SAFETY: as above; only the current owner calls this.
        unsafe { (*self.as_ptr()).des_flags |= bits }
    }

    /// True if the BTL may free the descriptor after its callback (BTL_OWNERSHIP).
    pub fn btl_owned(self) -> bool {
        self.flags() & sys::MCA_BTL_DES_FLAGS_BTL_OWNERSHIP != 0
    }

    /// True if the PML demands a callback even for inline completion.
    pub fn always_callback(self) -> bool {
        self.flags() & sys::MCA_BTL_DES_SEND_ALWAYS_CALLBACK != 0
    }

    /// The segments as (address, length) pairs.
    pub fn segments(self) -> Vec<(*mut u8, usize)> {
        // SAFETY: des_segments points to des_segment_count initialised segments.
        unsafe {
            let des = &*self.as_ptr();
            (0..des.des_segment_count)
                .map(|i| {
                    let seg = &*des.des_segments.add(i);
                    (seg.seg_addr.pval as *mut u8, seg.seg_len as usize)
                })
                .collect()
        }
    }
}

/// A descriptor we allocate: the C descriptor first, two inline segments, then the
/// module's own per-fragment data.
#[repr(C)]
pub struct Frag<T> {
    /// What ob1 sees.
    pub descriptor: sys::mca_btl_base_descriptor_t,
    /// `descriptor.des_segments` points here.
    pub segments: [sys::mca_btl_base_segment_t; 2],
    /// The module's data (buffers, endpoint, ...).
    pub extra: T,
}

impl<T> Frag<T> {
    /// A constructed fragment with no segments in use.
    pub fn new_boxed(extra: T) -> Box<Frag<T>> {
        let mut frag = Box::new(Frag {
            descriptor: sys::mca_btl_base_descriptor_t::default(),
            segments: [sys::mca_btl_base_segment_t::default(); 2],
            extra,
        });
        // SAFETY: the descriptor's first member is an opal_free_list_item_t; constructing
        // it with its class gives ob1 a valid object header should it inspect one.
        unsafe {
            crate::object::construct(
                (&raw mut frag.descriptor.super_).cast(),
                &raw mut sys::opal_free_list_item_t_class,
            );
        }
        frag.descriptor.des_segments = frag.segments.as_mut_ptr();
        frag.descriptor.order = sys::MCA_BTL_NO_ORDER as u8;
        frag
    }

    /// Points segment `index` at `len` bytes from `addr` and sets the segment count.
    pub fn set_segments(&mut self, segments: &[(*mut u8, usize)]) {
        assert!(segments.len() <= 2, "a Frag has two segments");
        for (slot, (addr, len)) in self.segments.iter_mut().zip(segments) {
            slot.seg_addr.pval = (*addr).cast();
            slot.seg_len = *len as u64;
        }
        self.descriptor.des_segment_count = segments.len();
    }

    /// Gives the fragment to C as a descriptor (reclaim with [`Frag::from_descriptor`]).
    pub fn into_descriptor(self: Box<Self>) -> Descriptor {
        let raw = Box::into_raw(self);
        // SAFETY: repr(C) with the descriptor first: the pointers coincide.
        Descriptor::from_raw(raw.cast()).expect("Box is non-null")
    }

    /// The fragment behind a descriptor we produced with `into_descriptor`.
    ///
    /// # Safety
    /// `descriptor` must come from `Frag::<T>::into_descriptor` (same `T`) and be
    /// live; the reference must not outlive it or alias another one.
    pub unsafe fn peek<'a>(descriptor: Descriptor) -> &'a mut Frag<T> {
        // SAFETY: forwarded contract.
        unsafe { &mut *descriptor.as_ptr().cast::<Frag<T>>() }
    }

    /// A shared view of the fragment behind a descriptor (for fields the module
    /// synchronises itself, e.g. atomics in `extra`).
    ///
    /// # Safety
    /// `descriptor` must come from `Frag::<T>::into_descriptor` (same `T`) and stay
    /// live while the reference is used; no `&mut` to it may exist meanwhile.
    pub unsafe fn peek_ref<'a>(descriptor: Descriptor) -> &'a Frag<T> {
        // SAFETY: forwarded contract.
        unsafe { &*descriptor.as_ptr().cast::<Frag<T>>() }
    }

    /// Takes back ownership of a fragment.
    ///
    /// # Safety
    /// As for [`Frag::peek`], and no one may use the descriptor afterwards.
    pub unsafe fn from_descriptor(descriptor: Descriptor) -> Box<Frag<T>> {
        // SAFETY: forwarded contract.
        unsafe { Box::from_raw(descriptor.as_ptr().cast::<Frag<T>>()) }
    }
}

impl<T> Drop for Frag<T> {
    fn drop(&mut self) {
        // SAFETY: constructed in new_boxed, destructed exactly once here.
        unsafe { crate::object::destruct((&raw mut self.descriptor.super_).cast()) };
    }
}
