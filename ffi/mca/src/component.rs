//! Component declaration: the exported structure with every version field taken
//! from the bindings, lifecycle trampolines, and the refusal to run inside an
//! Open MPI other than the one we were built against.

use std::ffi::{CStr, c_int};

use crate::error::{Error, Result};
use crate::params::Registrar;
use crate::strings::c_array;
use ompi_sys::{self as sys, versions};

/// What every component implements: parameter registration, open and close.
pub trait Component: Sized + 'static {
    /// Registers the component's MCA parameters (called before open, also by ompi_info).
    fn register(registrar: &mut Registrar) -> Result<()>;
    /// Called when the framework opens; decline with `Err(NOT_AVAILABLE)`.
    fn open() -> Result<()> {
        Ok(())
    }
    /// Called when the framework closes.
    fn close() -> Result<()> {
        Ok(())
    }
}

/// Implemented by the declaration macros: where the exported structure lives.
pub trait Exported: Component {
    /// The exported `mca_<fw>_<name>_component` structure's base part.
    fn raw() -> *mut sys::mca_base_component_t;
}

/// Why a component refuses to run in this process, if it must.
pub fn runtime_mismatch(runtime_version: &str, runtime_cuda: bool) -> Option<String> {
    let built = versions::BUILT_AGAINST_VERSION_STRING;
    if runtime_version != built {
        return Some(format!(
            "it was built against Open MPI {built} but this process runs Open MPI {runtime_version}. \
             Components bind Open MPI's internal structures, which change between releases: \
             rebuild it against this installation (make OMPI_PREFIX=<prefix of Open MPI {runtime_version}>)."
        ));
    }
    if runtime_cuda != versions::BUILT_WITH_CUDA_SUPPORT {
        let (b, r) = (
            cuda_word(versions::BUILT_WITH_CUDA_SUPPORT),
            cuda_word(runtime_cuda),
        );
        return Some(format!(
            "it was built against an Open MPI {b} CUDA support but this process runs one {r}; \
             the BTL module structure differs between the two. Rebuild it with OMPI_PREFIX \
             pointing at this installation."
        ));
    }
    None
}

fn cuda_word(with: bool) -> &'static str {
    if with { "with" } else { "without" }
}

/// Checks the running Open MPI against the one we were built for (its release, CUDA
/// support, and the sizes of the structures ours reads: [`crate::layout`]); on mismatch
/// prints why (always shown) and declines.
pub fn check_runtime(component_name: &str) -> Result<()> {
    // SAFETY: opal_version_string is a NUL-terminated constant exported by libopen-pal;
    // opal_built_with_cuda_support is a plain bool set when libopen-pal loads.
    let (version, cuda) = unsafe {
        (
            CStr::from_ptr(sys::opal_version_string.as_ptr())
                .to_string_lossy()
                .into_owned(),
            sys::opal_built_with_cuda_support,
        )
    };
    match runtime_mismatch(&version, cuda).or_else(crate::layout::runtime_mismatch) {
        None => Ok(()),
        Some(reason) => {
            crate::help::show_help(
                "help-rmca.txt",
                "version mismatch",
                true,
                &[component_name, &reason],
            );
            Err(Error::NOT_AVAILABLE)
        }
    }
}

fn component_name<C: Exported>() -> String {
    // SAFETY: the exported structure is valid for the process and its name is NUL-terminated.
    unsafe { CStr::from_ptr((*C::raw()).mca_component_name.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

pub(crate) unsafe extern "C" fn register_trampoline<C: Exported>() -> c_int {
    crate::guard::guard_code("mca_register_component_params", || {
        check_runtime(&component_name::<C>())?;
        // SAFETY: C::raw() is the exported static structure.
        let mut registrar = unsafe { Registrar::new(C::raw()) };
        C::register(&mut registrar)?;
        registrar.finish()
    })
}

pub(crate) unsafe extern "C" fn open_trampoline<C: Exported>() -> c_int {
    crate::guard::guard_code("mca_open_component", C::open)
}

pub(crate) unsafe extern "C" fn close_trampoline<C: Exported>() -> c_int {
    crate::guard::guard_code("mca_close_component", C::close)
}

/// The base structure as `MCA_<FW>_DEFAULT_VERSION(name)` would fill it.
#[allow(clippy::too_many_arguments)]
pub const fn base_structure<C: Exported>(
    name: &str,
    mca_version: [i32; 3],
    project: &str,
    project_version: [i32; 3],
    type_name: &str,
    type_version: [i32; 3],
    query: sys::mca_base_query_component_2_0_0_fn_t,
) -> sys::mca_base_component_t {
    sys::mca_base_component_t {
        mca_major_version: mca_version[0],
        mca_minor_version: mca_version[1],
        mca_release_version: mca_version[2],
        mca_project_name: c_array(project),
        mca_project_major_version: project_version[0],
        mca_project_minor_version: project_version[1],
        mca_project_release_version: project_version[2],
        mca_type_name: c_array(type_name),
        mca_type_major_version: type_version[0],
        mca_type_minor_version: type_version[1],
        mca_type_release_version: type_version[2],
        mca_component_name: c_array(name),
        mca_component_major_version: versions::BUILT_AGAINST_VERSION[0],
        mca_component_minor_version: versions::BUILT_AGAINST_VERSION[1],
        mca_component_release_version: versions::BUILT_AGAINST_VERSION[2],
        mca_open_component: Some(open_trampoline::<C>),
        mca_close_component: Some(close_trampoline::<C>),
        mca_query_component: query,
        mca_register_component_params: Some(register_trampoline::<C>),
        mca_component_flags: 0,
        reserved: [0; 28],
    }
}

/// The metadata block every component carries.
pub const fn component_data() -> sys::mca_base_component_data_t {
    sys::mca_base_component_data_t {
        param_field: sys::MCA_BASE_METADATA_PARAM_CHECKPOINT,
        reserved: [0; 32],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_runtime_is_accepted_and_others_are_explained() {
        let built = versions::BUILT_AGAINST_VERSION_STRING;
        assert_eq!(
            runtime_mismatch(built, versions::BUILT_WITH_CUDA_SUPPORT),
            None
        );
        let other = runtime_mismatch("4.1.99", versions::BUILT_WITH_CUDA_SUPPORT).unwrap();
        assert!(
            other.contains(built) && other.contains("4.1.99") && other.contains("OMPI_PREFIX"),
            "{other}"
        );
        let cuda = runtime_mismatch(built, !versions::BUILT_WITH_CUDA_SUPPORT).unwrap();
        assert!(cuda.contains("CUDA"), "{cuda}");
    }
}
