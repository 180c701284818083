//! The little of opal_object_t that components need: construct and release.

use ompi_sys as sys;

/// `OBJ_RELEASE` on an object we hold a reference to.
///
/// # Safety
/// `object` must be a live opal_object_t on which the caller owns one reference.
pub unsafe fn release(object: *mut sys::opal_object_t) {
    // SAFETY: the caller owns a reference; opal_obj_update is the atomic refcount
    // step of OBJ_RELEASE, and at zero we run the destructors and free like the macro.
    unsafe {
        if sys::opal_obj_update(object, -1) == 0 {
            sys::opal_obj_run_destructors(object);
            libc::free(object.cast());
        }
    }
}

/// `OBJ_CONSTRUCT` on caller-owned memory.
///
/// # Safety
/// `object` must point to writable memory of at least `cls`'s object size.
pub unsafe fn construct(object: *mut sys::opal_object_t, cls: *mut sys::opal_class_t) {
    // SAFETY: forwarded contract; the shim runs OBJ_CONSTRUCT_INTERNAL.
    unsafe { sys::rmca_obj_construct(object, cls) }
}

/// `OBJ_DESTRUCT` on caller-owned memory constructed with [`construct`].
///
/// # Safety
/// `object` must have been constructed and not yet destructed.
pub unsafe fn destruct(object: *mut sys::opal_object_t) {
    // SAFETY: forwarded contract.
    unsafe { sys::rmca_obj_destruct(object) }
}
