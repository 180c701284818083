//! `extern "C"` entry points of a BTL module. Each recovers the Rust module from
//! the C pointer, runs the safe method under the panic guard, and converts the
//! result to the C convention.

use std::ffi::{c_int, c_void};

use super::{Btl, BtlModule, Descriptor, Registration, SendStatus, rdma};
use crate::convertor::Convertor;
use crate::error::Error;
use crate::proc::Proc;
use ompi_sys as sys;

/// Fills the function pointers of a module structure for module type `M`.
pub(super) fn fill_vtable<M: BtlModule>(base: &mut sys::mca_btl_base_module_t) {
    base.btl_add_procs = Some(add_procs::<M>);
    base.btl_del_procs = Some(del_procs::<M>);
    base.btl_finalize = Some(finalize::<M>);
    base.btl_alloc = Some(alloc::<M>);
    base.btl_free = Some(free::<M>);
    base.btl_prepare_src = Some(prepare_src::<M>);
    base.btl_send = Some(send::<M>);
    base.btl_sendi = if M::HAS_SENDI { Some(sendi::<M>) } else { None };
    base.btl_register_error = Some(register_error::<M>);
    base.btl_flush = if M::HAS_FLUSH { Some(flush::<M>) } else { None };
    base.btl_get = if M::HAS_GET {
        Some(one_sided::<M, false>)
    } else {
        None
    };
    base.btl_put = if M::HAS_PUT {
        Some(one_sided::<M, true>)
    } else {
        None
    };
    if M::HAS_REGISTER_MEM {
        base.btl_register_mem = Some(register_mem::<M>);
        base.btl_deregister_mem = Some(deregister_mem::<M>);
    }
}

/// # Safety
/// `btl` must be a module created by `btl_init` for `M`.
unsafe fn module<'a, M: BtlModule>(btl: *mut sys::mca_btl_base_module_t) -> &'a Btl<M> {
    // SAFETY: repr(C) cell with the C struct first; caller contract.
    unsafe { &*btl.cast::<Btl<M>>() }
}

/// # Safety
/// `endpoint` must be NULL, MCA_BTL_ENDPOINT_ANY, or an endpoint from add_procs of `M`.
unsafe fn endpoint<'a, M: BtlModule>(
    endpoint: *mut sys::mca_btl_base_endpoint_t,
) -> Option<&'a M::Endpoint> {
    if endpoint.is_null() || endpoint as isize == -1 {
        None
    } else {
        // SAFETY: caller contract: a Box<M::Endpoint> we leaked in add_procs.
        Some(unsafe { &*endpoint.cast::<M::Endpoint>() })
    }
}

unsafe extern "C" fn add_procs<M: BtlModule>(
    btl: *mut sys::mca_btl_base_module_t,
    nprocs: usize,
    procs: *mut *mut sys::opal_proc_t,
    endpoints: *mut *mut sys::mca_btl_base_endpoint_t,
    reachable: *mut sys::opal_bitmap_t,
) -> c_int {
    crate::guard::guard_code("btl_add_procs", || {
        // SAFETY: ob1 passes nprocs valid procs and an endpoints array of the same length.
        let (this, list) = unsafe {
            let list: Vec<Proc> = (0..nprocs).map(|i| Proc::from_raw(*procs.add(i))).collect();
            (module::<M>(btl), list)
        };
        let created = M::add_procs(this, &list)?;
        if created.len() != nprocs {
            return Err(Error::ERROR);
        }
        for (i, ep) in created.into_iter().enumerate() {
            // SAFETY: i < nprocs; the bitmap is valid when non-NULL.
            unsafe {
                if let Some(ep) = ep {
                    if !(*endpoints.add(i)).is_null() {
                        // ob1 calls add_procs again for procs it already knows: keep the
                        // endpoint it holds and drop the duplicate.
                        continue;
                    }
                    let placed = Box::into_raw(Box::new(ep));
                    *endpoints.add(i) = placed.cast();
                    M::endpoint_placed(this, &*placed);
                    if !reachable.is_null() {
                        sys::opal_bitmap_set_bit(reachable, i as c_int);
                    }
                }
            }
        }
        Ok(())
    })
}

unsafe extern "C" fn del_procs<M: BtlModule>(
    btl: *mut sys::mca_btl_base_module_t,
    nprocs: usize,
    procs: *mut *mut sys::opal_proc_t,
    endpoints: *mut *mut sys::mca_btl_base_endpoint_t,
) -> c_int {
    crate::guard::guard_code("btl_del_procs", || {
        // SAFETY: module pointer from ob1.
        let this = unsafe { module::<M>(btl) };
        let mut gone = Vec::new();
        let mut owners = Vec::new();
        for i in 0..nprocs {
            // SAFETY: arrays of nprocs entries; non-NULL endpoints are our boxes, and
            // after del_procs ob1 no longer uses them.
            unsafe {
                let ep = *endpoints.add(i);
                if !ep.is_null() && ep as isize != -1 {
                    M::endpoint_leaving(this, &*ep.cast::<M::Endpoint>());
                    gone.push(*Box::from_raw(ep.cast::<M::Endpoint>()));
                    owners.push(Proc::from_raw(*procs.add(i)));
                }
            }
        }
        M::del_procs(this, &owners, gone)
    })
}

unsafe extern "C" fn finalize<M: BtlModule>(btl: *mut sys::mca_btl_base_module_t) -> c_int {
    crate::guard::guard_code("btl_finalize", || {
        // SAFETY: module pointer from ob1, finalized once, freed afterwards.
        let result = M::finalize(unsafe { module::<M>(btl) });
        // SAFETY: the cell was Box-leaked in btl_init; ob1 never uses it after finalize.
        drop(unsafe { Box::from_raw(btl.cast::<Btl<M>>()) });
        result
    })
}

unsafe extern "C" fn alloc<M: BtlModule>(
    btl: *mut sys::mca_btl_base_module_t,
    ep: *mut sys::mca_btl_base_endpoint_t,
    order: u8,
    size: usize,
    flags: u32,
) -> *mut sys::mca_btl_base_descriptor_t {
    crate::guard::guard_hot("btl_alloc", std::ptr::null_mut(), || {
        // SAFETY: pointers from ob1 for this module.
        let (this, ep) = unsafe { (module::<M>(btl), endpoint::<M>(ep)) };
        M::alloc(this, ep, order, size, flags).map_or(std::ptr::null_mut(), Descriptor::as_ptr)
    })
}

unsafe extern "C" fn free<M: BtlModule>(
    btl: *mut sys::mca_btl_base_module_t,
    des: *mut sys::mca_btl_base_descriptor_t,
) -> c_int {
    crate::guard::guard_code("btl_free", || {
        let des = Descriptor::from_raw(des).ok_or(Error::BAD_PARAM)?;
        // SAFETY: module pointer from ob1.
        M::free(unsafe { module::<M>(btl) }, des)
    })
}

unsafe extern "C" fn prepare_src<M: BtlModule>(
    btl: *mut sys::mca_btl_base_module_t,
    ep: *mut sys::mca_btl_base_endpoint_t,
    convertor: *mut sys::opal_convertor_t,
    order: u8,
    reserve: usize,
    size: *mut usize,
    flags: u32,
) -> *mut sys::mca_btl_base_descriptor_t {
    crate::guard::guard_hot("btl_prepare_src", std::ptr::null_mut(), || {
        // SAFETY: pointers from ob1; `size` is an in/out scalar.
        let (this, ep, mut conv, size) = unsafe {
            (
                module::<M>(btl),
                endpoint::<M>(ep),
                Convertor::from_raw(convertor),
                &mut *size,
            )
        };
        let Some(ep) = ep else {
            return std::ptr::null_mut();
        };
        M::prepare_src(this, ep, &mut conv, order, reserve, size, flags)
            .map_or(std::ptr::null_mut(), Descriptor::as_ptr)
    })
}

unsafe extern "C" fn send<M: BtlModule>(
    btl: *mut sys::mca_btl_base_module_t,
    ep: *mut sys::mca_btl_base_endpoint_t,
    des: *mut sys::mca_btl_base_descriptor_t,
    tag: sys::mca_btl_base_tag_t,
) -> c_int {
    crate::guard::guard_hot("btl_send", sys::OPAL_ERROR, || {
        // SAFETY: pointers from ob1.
        let (this, ep) = unsafe { (module::<M>(btl), endpoint::<M>(ep)) };
        let (Some(ep), Some(des)) = (ep, Descriptor::from_raw(des)) else {
            return Error::BAD_PARAM.code();
        };
        match M::send(this, ep, des, tag) {
            Ok(SendStatus::Queued) => 0,
            Ok(SendStatus::CompletedInline) => 1,
            Err(e) => e.code(),
        }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn sendi<M: BtlModule>(
    btl: *mut sys::mca_btl_base_module_t,
    ep: *mut sys::mca_btl_base_endpoint_t,
    convertor: *mut sys::opal_convertor_t,
    header: *mut c_void,
    header_size: usize,
    payload_size: usize,
    order: u8,
    flags: u32,
    tag: sys::mca_btl_base_tag_t,
    descriptor: *mut *mut sys::mca_btl_base_descriptor_t,
) -> c_int {
    crate::guard::guard_hot("btl_sendi", Error::RESOURCE_BUSY.code(), || {
        // SAFETY: pointers from ob1; the header is header_size readable bytes.
        let (this, ep, mut conv, header) = unsafe {
            (
                module::<M>(btl),
                endpoint::<M>(ep),
                Convertor::from_raw(convertor),
                std::slice::from_raw_parts(header as *const u8, header_size),
            )
        };
        let Some(ep) = ep else {
            return Error::BAD_PARAM.code();
        };
        match M::sendi(
            this,
            ep,
            &mut conv,
            header,
            payload_size,
            order,
            flags,
            tag,
            !descriptor.is_null(),
        ) {
            Ok(()) => 0,
            Err(refused) => {
                if !descriptor.is_null() {
                    // SAFETY: non-NULL out-pointer from ob1.
                    unsafe {
                        *descriptor = refused
                            .descriptor
                            .map_or(std::ptr::null_mut(), Descriptor::as_ptr)
                    };
                }
                Error::RESOURCE_BUSY.code()
            }
        }
    })
}

unsafe extern "C" fn register_error<M: BtlModule>(
    btl: *mut sys::mca_btl_base_module_t,
    callback: sys::mca_btl_base_module_error_cb_fn_t,
) -> c_int {
    crate::guard::guard_code("btl_register_error", || {
        // SAFETY: module pointer from ob1.
        let this = unsafe { module::<M>(btl) };
        *this
            .error_callback
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = callback;
        Ok(())
    })
}

unsafe extern "C" fn flush<M: BtlModule>(
    btl: *mut sys::mca_btl_base_module_t,
    ep: *mut sys::mca_btl_base_endpoint_t,
) -> c_int {
    crate::guard::guard_code("btl_flush", || {
        // SAFETY: pointers from the caller for this module.
        let (this, ep) = unsafe { (module::<M>(btl), endpoint::<M>(ep)) };
        M::flush(this, ep)
    })
}

/// `btl_get` (`IS_PUT = false`) and `btl_put` (`IS_PUT = true`): one body, two C entries.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn one_sided<M: BtlModule, const IS_PUT: bool>(
    btl: *mut sys::mca_btl_base_module_t,
    ep: *mut sys::mca_btl_base_endpoint_t,
    local_address: *mut c_void,
    remote_address: u64,
    local_handle: *mut sys::mca_btl_base_registration_handle_t,
    remote_handle: *mut sys::mca_btl_base_registration_handle_t,
    size: usize,
    flags: c_int,
    order: c_int,
    cbfunc: sys::mca_btl_base_rdma_completion_fn_t,
    cbcontext: *mut c_void,
    cbdata: *mut c_void,
) -> c_int {
    let entry = if IS_PUT { "btl_put" } else { "btl_get" };
    crate::guard::guard_code(entry, || {
        // SAFETY: pointers from the PML for this module.
        let (this, endpoint) = unsafe { (module::<M>(btl), endpoint::<M>(ep)) };
        let endpoint = endpoint.ok_or(Error::BAD_PARAM)?;
        let (op, done) = rdma::split(
            ep,
            local_address,
            remote_address,
            local_handle,
            remote_handle,
            size,
            flags,
            order,
            cbfunc,
            cbcontext,
            cbdata,
        );
        if IS_PUT {
            M::put(this, endpoint, op, done)
        } else {
            M::get(this, endpoint, op, done)
        }
    })
}

unsafe extern "C" fn register_mem<M: BtlModule>(
    btl: *mut sys::mca_btl_base_module_t,
    ep: *mut sys::mca_btl_base_endpoint_t,
    base: *mut c_void,
    size: usize,
    flags: u32,
) -> *mut sys::mca_btl_base_registration_handle_t {
    crate::guard::guard("btl_register_mem", std::ptr::null_mut(), || {
        // SAFETY: pointers from the PML for this module (endpoint may be NULL).
        let (this, ep) = unsafe { (module::<M>(btl), endpoint::<M>(ep)) };
        M::register_mem(this, ep, base.cast(), size, flags)
            .map_or(std::ptr::null_mut(), Registration::as_ptr)
    })
}

unsafe extern "C" fn deregister_mem<M: BtlModule>(
    btl: *mut sys::mca_btl_base_module_t,
    handle: *mut sys::mca_btl_base_registration_handle_t,
) -> c_int {
    crate::guard::guard_code("btl_deregister_mem", || {
        let handle = Registration::from_raw(handle).ok_or(Error::BAD_PARAM)?;
        // SAFETY: module pointer from the PML.
        M::deregister_mem(unsafe { module::<M>(btl) }, handle)
    })
}
