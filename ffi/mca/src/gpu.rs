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

#[cfg(not(ompi5))]
mod series {
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
}
