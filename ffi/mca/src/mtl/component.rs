//! MTL components: query creates the module cell, init fills it.

use std::ffi::c_int;
use std::sync::Mutex;

use super::{Mtl, MtlModule, trampolines};
use crate::component::{Exported, base_structure, component_data};
use crate::error::Result;
use ompi_sys::{self as sys, versions};

/// Limits the MTL announces to the PML.
#[derive(Debug, Clone, Copy)]
pub struct MtlLimits {
    pub max_contextid: i32,
    pub max_tag: i32,
    pub flags: u32,
}

/// An MTL component implemented in Rust.
pub trait MtlComponent: Exported {
    type Module: MtlModule;
    /// Whether this MTL can run here, and at which priority; decline with an error.
    fn query() -> Result<i32>;
    /// Creates the module (publishing modex data, not contacting peers).
    fn init(
        enable_progress_threads: bool,
        enable_mpi_threads: bool,
    ) -> Result<(Self::Module, MtlLimits)>;
}

/// The one cell per process (an MTL component is selected at most once).
static CELL: Mutex<usize> = Mutex::new(0);

fn cell<C: MtlComponent>() -> *mut Mtl<C::Module> {
    let mut slot = CELL.lock().unwrap_or_else(|e| e.into_inner());
    if *slot == 0 {
        let mut base = sys::mca_mtl_base_module_t {
            mtl_request_size: size_of::<super::RequestMemory<<C::Module as MtlModule>::Request>>()
                - size_of::<sys::mca_mtl_request_t>(),
            ..Default::default()
        };
        trampolines::fill_vtable::<C::Module>(&mut base);
        let cell: Box<Mtl<C::Module>> = Box::new(Mtl {
            base: std::cell::UnsafeCell::new(base),
            module: std::sync::OnceLock::new(),
        });
        *slot = Box::into_raw(cell) as usize;
    }
    *slot as *mut Mtl<C::Module>
}

unsafe extern "C" fn mtl_query<C: MtlComponent>(
    module: *mut *mut sys::mca_base_module_t,
    priority: *mut c_int,
) -> c_int {
    crate::guard::guard_code("mtl query", || {
        let chosen = C::query()?;
        // SAFETY: out-pointers from mca_base_select.
        unsafe {
            *priority = chosen;
            *module = cell::<C>().cast();
        }
        Ok(())
    })
}

/// Open MPI 5's init also asks whether the MTL moves accelerator (GPU) buffers itself;
/// ours does not: cm then stages them through host memory.
#[cfg(ompi5)]
unsafe extern "C" fn mtl_init<C: MtlComponent>(
    progress_threads: bool,
    mpi_threads: bool,
    accelerator_support: *mut bool,
) -> *mut sys::mca_mtl_base_module_t {
    if !accelerator_support.is_null() {
        // SAFETY: cm passes a pointer to a bool it reads after the call.
        unsafe { *accelerator_support = false };
    }
    // SAFETY: the same contract as the 4.1 entry point.
    unsafe { mtl_init_common::<C>(progress_threads, mpi_threads) }
}

#[cfg(not(ompi5))]
unsafe extern "C" fn mtl_init<C: MtlComponent>(
    progress_threads: bool,
    mpi_threads: bool,
) -> *mut sys::mca_mtl_base_module_t {
    // SAFETY: called by cm once, at MPI_Init.
    unsafe { mtl_init_common::<C>(progress_threads, mpi_threads) }
}

/// # Safety
/// Called by cm's MTL selection, before any other MTL entry point (again after
/// finalize when a later MPI Session selects again).
unsafe fn mtl_init_common<C: MtlComponent>(
    progress_threads: bool,
    mpi_threads: bool,
) -> *mut sys::mca_mtl_base_module_t {
    crate::guard::guard("mtl_init", std::ptr::null_mut(), || {
        let (module, limits) = match C::init(progress_threads, mpi_threads) {
            Ok(created) => created,
            Err(_) => return std::ptr::null_mut(),
        };
        // SAFETY: the cell is leaked for the process. Init runs before any other entry
        // point of this selection and after the finalize of any earlier one (a second
        // MPI Session selects again, in the same cell while our shared object stays
        // loaded): nothing else touches the cell meanwhile.
        unsafe {
            let cell = &mut *cell::<C>();
            let base = &mut *cell.base.get();
            base.mtl_max_contextid = limits.max_contextid;
            base.mtl_max_tag = limits.max_tag;
            base.mtl_flags = limits.flags;
            cell.module = std::sync::OnceLock::from(module);
            cell.as_raw()
        }
    })
}

/// The exported `mca_mtl_<name>_component` value for component type `C`.
pub const fn mtl_component_structure<C: MtlComponent>(
    name: &str,
) -> sys::mca_mtl_base_component_2_0_0_t {
    sys::mca_mtl_base_component_2_0_0_t {
        mtl_version: base_structure::<C>(
            name,
            versions::MTL_MCA_VERSION,
            versions::MTL_PROJECT_NAME,
            versions::MTL_PROJECT_VERSION,
            versions::MTL_TYPE_NAME,
            versions::MTL_TYPE_VERSION,
            Some(mtl_query::<C>),
        ),
        mtl_data: component_data(),
        mtl_init: Some(mtl_init::<C>),
        #[cfg(ompi5)]
        accelerator_support: false,
    }
}

/// Declares the exported MTL component: `declare_mtl_component!(mca_mtl_NAME_component, "NAME", Type);`
#[macro_export]
macro_rules! declare_mtl_component {
    ($symbol:ident, $name:literal, $ty:ty) => {
        const _: () = assert!(
            $crate::strings::const_str_eq(
                stringify!($symbol),
                concat!("mca_mtl_", $name, "_component")
            ),
            "the exported symbol must be mca_mtl_<name>_component"
        );
        /// The structure Open MPI's component repository looks up with dlsym.
        #[unsafe(no_mangle)]
        pub static mut $symbol: $crate::sys::mca_mtl_base_component_2_0_0_t =
            $crate::mtl::mtl_component_structure::<$ty>($name);

        impl $crate::component::Exported for $ty {
            fn raw() -> *mut $crate::sys::mca_base_component_t {
                // SAFETY: taking the address of the static never reads it.
                unsafe { &raw mut $symbol.mtl_version }
            }
        }
    };
}
