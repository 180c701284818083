//! Whether the running Open MPI lets a BTL move CUDA device memory. The series decide
//! this differently: 4.1 is built with or without CUDA (`opal_built_with_cuda_support`)
//! and can turn it off at run time (`opal_cuda_support`); 5.0 has no CUDA build flavour
//! but selects one accelerator component at `opal_init` (`cuda`, `rocm`, `ze` or `null`),
//! and its smcuda uses CUDA only when the selected one is `cuda`. A BTL that raised
//! GPU IPC with a peer in a process whose PML cannot handle device memory would make
//! ob1 abort the job, so "off" must be decided here, before any handshake.

/// Why CUDA is off for BTLs in this process, or `None` when a BTL may use it.
pub fn cuda_off_reason() -> Option<String> {
    series::cuda_off_reason()
}

/// Makes the PML recognise device buffers, as a CUDA-capable BTL must. 4.1's ob1 and
/// datatype engine mark a buffer as device memory (`CONVERTOR_CUDA`, copies through
/// `cuMemcpy`) only after some component called `mca_common_cuda_stage_one_init`:
/// smcuda, tcp and openib do it at init. Without it a device buffer is handled as host
/// memory and `memcpy` faults on a real GPU. 5.0's accelerator framework does this at
/// `opal_init` (nothing to do). `Ok(true)`: started, to be ended with
/// [`end_pml_cuda_support`]; `Err`: why it could not start.
pub fn start_pml_cuda_support() -> Result<bool, String> {
    series::start_pml_cuda_support()
}

/// Ends what a successful [`start_pml_cuda_support`] started (reference counted by
/// Open MPI, as every BTL that started it ends it at finalize).
pub fn end_pml_cuda_support() {
    series::end_pml_cuda_support()
}

#[cfg(not(ompi5))]
mod series {
    use std::ffi::{CStr, c_int, c_void};

    use crate::sys;

    pub fn cuda_off_reason() -> Option<String> {
        // SAFETY: plain bools exported by libopen-pal, set when it loads (built_with)
        // and at its parameter registration (cuda_support), before any BTL init.
        let (built_with, enabled) =
            unsafe { (sys::opal_built_with_cuda_support, sys::opal_cuda_support) };
        if !built_with {
            return Some("this Open MPI is built without CUDA support".into());
        }
        if !enabled {
            return Some("CUDA support is disabled in this Open MPI (opal_cuda_support)".into());
        }
        None
    }

    /// Open MPI 4.1's common CUDA library; ob1 links it, so it is loaded by the time
    /// the BTLs initialise.
    const COMMON_CUDA: &CStr = c"libmca_common_cuda.so.40";

    /// `name` in the common CUDA library (already loaded: nothing is loaded here).
    fn common_cuda_symbol(name: &CStr) -> Option<*mut c_void> {
        // SAFETY: RTLD_NOLOAD only returns a handle to a library that is already loaded
        // (taking a reference we drop below); both names are NUL-terminated.
        let sym = unsafe {
            let handle = libc::dlopen(COMMON_CUDA.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
            if handle.is_null() {
                libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr())
            } else {
                let sym = libc::dlsym(handle, name.as_ptr());
                // ob1 keeps the library loaded: this drops our reference only.
                libc::dlclose(handle);
                sym
            }
        };
        (!sym.is_null()).then_some(sym)
    }

    pub fn start_pml_cuda_support() -> Result<bool, String> {
        if cuda_off_reason().is_some() {
            return Ok(false);
        }
        let sym = common_cuda_symbol(c"mca_common_cuda_stage_one_init").ok_or_else(|| {
            "Open MPI's common CUDA library (libmca_common_cuda.so.40, which ob1 loads) \
             is not loaded in this process"
                .to_string()
        })?;
        // SAFETY: `int mca_common_cuda_stage_one_init(void)` (4.1's common_cuda.h),
        // called at BTL init as smcuda does; it counts its callers and reports its own
        // failures (show_help).
        let rc = unsafe {
            let start = std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(sym);
            start()
        };
        if rc != 0 {
            return Err(format!(
                "mca_common_cuda_stage_one_init failed ({rc}): Open MPI could not load \
                 the CUDA driver library"
            ));
        }
        Ok(true)
    }

    pub fn end_pml_cuda_support() {
        if let Some(sym) = common_cuda_symbol(c"mca_common_cuda_fini") {
            // SAFETY: `void mca_common_cuda_fini(void)`; pairs with a successful
            // stage-one init (reference counted by Open MPI).
            unsafe {
                let fini = std::mem::transmute::<*mut c_void, unsafe extern "C" fn()>(sym);
                fini();
            }
        }
    }
}

#[cfg(ompi5)]
mod series {
    use std::ffi::CStr;

    use crate::sys;

    pub fn cuda_off_reason() -> Option<String> {
        // SAFETY: opal_accelerator_base_selected_component is a structure in libopen-pal
        // that the accelerator framework fills during opal_init, before the BTL framework
        // opens; its name is a NUL-terminated array (all zero if nothing was selected).
        let name = unsafe {
            let selected = &raw const sys::opal_accelerator_base_selected_component;
            CStr::from_ptr((*selected).base_version.mca_component_name.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        match name.as_str() {
            "cuda" => None,
            "" => Some("Open MPI selected no accelerator component".into()),
            other => Some(format!(
                "the selected accelerator component is '{other}', not 'cuda' \
                 (Open MPI's accelerator framework)"
            )),
        }
    }

    /// The accelerator framework set up device-buffer detection at `opal_init`.
    pub fn start_pml_cuda_support() -> Result<bool, String> {
        Ok(false)
    }

    pub fn end_pml_cuda_support() {}
}
