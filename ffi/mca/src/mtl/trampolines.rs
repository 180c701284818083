//! `extern "C"` entry points of an MTL module, each under the panic guard.

use std::ffi::c_int;

use super::{Comm, Mtl, MtlModule, RequestSlot, SendMode};
use crate::convertor::Convertor;
use ompi_sys as sys;

/// Fills the function pointers of a module structure for module type `M`.
pub(super) fn fill_vtable<M: MtlModule>(base: &mut sys::mca_mtl_base_module_t) {
    base.mtl_add_procs = Some(add_procs::<M>);
    base.mtl_del_procs = Some(del_procs::<M>);
    base.mtl_finalize = Some(finalize::<M>);
    base.mtl_send = Some(send::<M>);
    base.mtl_isend = Some(isend::<M>);
    base.mtl_irecv = Some(irecv::<M>);
    base.mtl_iprobe = Some(iprobe::<M>);
    base.mtl_imrecv = Some(imrecv::<M>);
    base.mtl_improbe = Some(improbe::<M>);
    base.mtl_cancel = Some(cancel::<M>);
    base.mtl_add_comm = Some(add_comm::<M>);
    base.mtl_del_comm = Some(del_comm::<M>);
}

/// # Safety
/// `mtl` must be the cell created for `M` by the component's query.
unsafe fn module<'a, M: MtlModule>(mtl: *mut sys::mca_mtl_base_module_t) -> &'a Mtl<M> {
    // SAFETY: repr(C) cell with the C struct first; caller contract.
    unsafe { &*mtl.cast::<Mtl<M>>() }
}

fn procs_of(procs: *mut *mut sys::ompi_proc_t, n: usize) -> Vec<*mut sys::ompi_proc_t> {
    // SAFETY: the PML passes n valid entries.
    (0..n).map(|i| unsafe { *procs.add(i) }).collect()
}

unsafe extern "C" fn add_procs<M: MtlModule>(
    mtl: *mut sys::mca_mtl_base_module_t,
    n: usize,
    procs: *mut *mut sys::ompi_proc_t,
) -> c_int {
    crate::guard::guard_code("mtl_add_procs", || {
        // SAFETY: pointers from cm.
        let this = unsafe { module::<M>(mtl) };
        M::add_procs(this, &procs_of(procs, n))
    })
}

unsafe extern "C" fn del_procs<M: MtlModule>(
    mtl: *mut sys::mca_mtl_base_module_t,
    n: usize,
    procs: *mut *mut sys::ompi_proc_t,
) -> c_int {
    crate::guard::guard_code("mtl_del_procs", || {
        // SAFETY: pointers from cm.
        let this = unsafe { module::<M>(mtl) };
        M::del_procs(this, &procs_of(procs, n))
    })
}

unsafe extern "C" fn finalize<M: MtlModule>(mtl: *mut sys::mca_mtl_base_module_t) -> c_int {
    // SAFETY: pointer from cm; the cell itself stays (query may be asked again in ompi_info).
    crate::guard::guard_code("mtl_finalize", || M::finalize(unsafe { module::<M>(mtl) }))
}

unsafe extern "C" fn send<M: MtlModule>(
    mtl: *mut sys::mca_mtl_base_module_t,
    comm: *mut sys::ompi_communicator_t,
    dest: c_int,
    tag: c_int,
    convertor: *mut sys::opal_convertor_t,
    mode: sys::mca_pml_base_send_mode_t,
) -> c_int {
    crate::guard::guard_code("mtl_send", || {
        // SAFETY: pointers from cm, valid for the call.
        let (this, mut conv) = unsafe { (module::<M>(mtl), Convertor::from_raw(convertor)) };
        M::send(
            this,
            Comm(comm),
            dest,
            tag,
            &mut conv,
            SendMode::from_raw(mode),
        )
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn isend<M: MtlModule>(
    mtl: *mut sys::mca_mtl_base_module_t,
    comm: *mut sys::ompi_communicator_t,
    dest: c_int,
    tag: c_int,
    convertor: *mut sys::opal_convertor_t,
    mode: sys::mca_pml_base_send_mode_t,
    blocking: bool,
    request: *mut sys::mca_mtl_request_t,
) -> c_int {
    crate::guard::guard_code("mtl_isend", || {
        // SAFETY: pointers from cm; the request has mtl_request_size bytes reserved.
        let (this, mut conv, req) = unsafe {
            (
                module::<M>(mtl),
                Convertor::from_raw(convertor),
                RequestSlot::from_raw(request),
            )
        };
        M::isend(
            this,
            Comm(comm),
            dest,
            tag,
            &mut conv,
            SendMode::from_raw(mode),
            blocking,
            req,
        )
    })
}

unsafe extern "C" fn irecv<M: MtlModule>(
    mtl: *mut sys::mca_mtl_base_module_t,
    comm: *mut sys::ompi_communicator_t,
    src: c_int,
    tag: c_int,
    convertor: *mut sys::opal_convertor_t,
    request: *mut sys::mca_mtl_request_t,
) -> c_int {
    crate::guard::guard_code("mtl_irecv", || {
        // SAFETY: as for isend.
        let (this, mut conv, req) = unsafe {
            (
                module::<M>(mtl),
                Convertor::from_raw(convertor),
                RequestSlot::from_raw(request),
            )
        };
        M::irecv(this, Comm(comm), src, tag, &mut conv, req)
    })
}

unsafe extern "C" fn iprobe<M: MtlModule>(
    mtl: *mut sys::mca_mtl_base_module_t,
    comm: *mut sys::ompi_communicator_t,
    src: c_int,
    tag: c_int,
    flag: *mut c_int,
    status: *mut sys::ompi_status_public_t,
) -> c_int {
    crate::guard::guard_code("mtl_iprobe", || {
        // SAFETY: pointer from cm.
        let found = M::iprobe(unsafe { module::<M>(mtl) }, Comm(comm), src, tag)?;
        // SAFETY: flag is a valid out-pointer; status may be NULL (handled by write_to_user).
        unsafe { *flag = found.is_some() as c_int };
        if let Some(s) = found {
            s.write_to_user(status);
        }
        Ok(())
    })
}

unsafe extern "C" fn improbe<M: MtlModule>(
    mtl: *mut sys::mca_mtl_base_module_t,
    comm: *mut sys::ompi_communicator_t,
    src: c_int,
    tag: c_int,
    matched: *mut c_int,
    message: *mut *mut sys::ompi_message_t,
    status: *mut sys::ompi_status_public_t,
) -> c_int {
    crate::guard::guard_code("mtl_improbe", || {
        // SAFETY: pointer from cm.
        let found = M::improbe(unsafe { module::<M>(mtl) }, Comm(comm), src, tag)?;
        // SAFETY: out-pointers from cm. An unmatched probe leaves the caller's
        // message handle and status as they were (the loop polling Improbe keeps
        // its MPI_MESSAGE_NULL).
        unsafe { *matched = found.is_some() as c_int };
        if let Some((handle, s)) = found {
            // SAFETY: as above.
            unsafe { *message = handle };
            s.write_to_user(status);
        }
        Ok(())
    })
}

unsafe extern "C" fn imrecv<M: MtlModule>(
    mtl: *mut sys::mca_mtl_base_module_t,
    convertor: *mut sys::opal_convertor_t,
    message: *mut *mut sys::ompi_message_t,
    request: *mut sys::mca_mtl_request_t,
) -> c_int {
    crate::guard::guard_code("mtl_imrecv", || {
        // SAFETY: pointers from cm; *message is the handle improbe produced.
        let (this, mut conv, req, msg) = unsafe {
            (
                module::<M>(mtl),
                Convertor::from_raw(convertor),
                RequestSlot::from_raw(request),
                *message,
            )
        };
        M::imrecv(this, &mut conv, msg, req)?;
        // SAFETY: the message handle is consumed: the PML expects MPI_MESSAGE_NULL back.
        unsafe { *message = &raw mut sys::ompi_message_null.message };
        Ok(())
    })
}

unsafe extern "C" fn cancel<M: MtlModule>(
    mtl: *mut sys::mca_mtl_base_module_t,
    request: *mut sys::mca_mtl_request_t,
    flag: c_int,
) -> c_int {
    crate::guard::guard_code("mtl_cancel", || {
        // SAFETY: pointers from cm for a request this MTL started.
        let (this, req) = unsafe { (module::<M>(mtl), RequestSlot::from_raw(request)) };
        M::cancel(this, req, flag)
    })
}

unsafe extern "C" fn add_comm<M: MtlModule>(
    mtl: *mut sys::mca_mtl_base_module_t,
    comm: *mut sys::ompi_communicator_t,
) -> c_int {
    crate::guard::guard_code("mtl_add_comm", || {
        // SAFETY: pointer from cm.
        let this = unsafe { module::<M>(mtl) };
        M::add_comm(this, Comm(comm))
    })
}

unsafe extern "C" fn del_comm<M: MtlModule>(
    mtl: *mut sys::mca_mtl_base_module_t,
    comm: *mut sys::ompi_communicator_t,
) -> c_int {
    crate::guard::guard_code("mtl_del_comm", || {
        // SAFETY: pointer from cm.
        let this = unsafe { module::<M>(mtl) };
        M::del_comm(this, Comm(comm))
    })
}
