//! BTL components: the exported structure, generic MCA parameters, init, progress.

use std::any::TypeId;
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::{Mutex, OnceLock};

use super::{Btl, BtlModule, trampolines};
use crate::component::{Exported, base_structure, component_data};
use crate::error::{Error, Result};
use ompi_sys::{self as sys, versions};

/// Values a BTL starts from before users override them with the generic
/// `btl_<name>_{eager_limit,exclusivity,...}` parameters.
#[derive(Debug, Clone, Copy)]
pub struct BtlDefaults {
    pub eager_limit: usize,
    pub rndv_eager_limit: usize,
    pub max_send_size: usize,
    pub exclusivity: u32,
    pub latency: u32,
    pub bandwidth: u32,
    pub flags: u32,
    pub put_limit: usize,
    pub get_limit: usize,
    pub rdma_pipeline_send_length: usize,
    pub rdma_pipeline_frag_size: usize,
    pub min_rdma_pipeline_size: usize,
}

/// A BTL component implemented in Rust.
pub trait BtlComponent: Exported {
    /// The module type init creates.
    type Module: BtlModule;
    /// Starting values of the generic BTL parameters.
    fn defaults() -> BtlDefaults;
    /// Creates the modules (none: the component is not used in this process).
    fn init(enable_progress_threads: bool, enable_mpi_threads: bool) -> Result<Vec<Self::Module>>;
    /// Component-wide progress; returns the number of events handled.
    fn progress() -> usize;
    /// True when a progress pass would certainly find nothing to do (a few loads), asked
    /// before [`Self::progress`] on every pass; false when unsure.
    #[inline]
    fn idle() -> bool {
        false
    }
    /// Largest fragment (`eager_limit`, `max_send_size`) the component can carry.
    const MAX_FRAGMENT: usize = usize::MAX;
    /// A rule between the effective `eager_limit` and `max_send_size` (each already
    /// within `1..=MAX_FRAGMENT`): the problem, naming the parameters, if broken.
    fn check_limits(_eager_limit: usize, _max_send_size: usize) -> Option<String> {
        None
    }
    /// The `btl_flags` each module of this process gets, from the effective parameter
    /// value (`btl_<name>_flags`): for a flag that depends on how the process started.
    fn module_flags(flags: u32) -> u32 {
        flags
    }
    /// In a CUDA-aware Open MPI: every device message by rendezvous (the GPU eager limit's
    /// default set to SIZE_MAX, as smcuda does), not staged through eager fragments.
    const DEVICE_RENDEZVOUS: bool = false;
}

/// Templates registered with `mca_btl_base_param_register`, one per component type.
/// The variable system writes user overrides into them, so they live forever.
fn templates() -> &'static Mutex<HashMap<TypeId, usize>> {
    static TEMPLATES: OnceLock<Mutex<HashMap<TypeId, usize>>> = OnceLock::new();
    TEMPLATES.get_or_init(Default::default)
}

fn template_of<C: BtlComponent>() -> Option<sys::mca_btl_base_module_t> {
    let map = templates().lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: the address was leaked from a Box<mca_btl_base_module_t> in register.
    map.get(&TypeId::of::<C>())
        .map(|&addr| unsafe { *(addr as *const sys::mca_btl_base_module_t) })
}

/// The effective `(eager_limit, max_send_size)` of component `C` after users' MCA
/// overrides, available from registration on: init uses it to publish limits in the
/// modex before any module exists.
pub fn effective_limits<C: BtlComponent>() -> Option<(usize, usize)> {
    template_of::<C>().map(|t| (t.btl_eager_limit, t.btl_max_send_size))
}

unsafe extern "C" fn btl_register<C: BtlComponent>() -> c_int {
    crate::guard::guard_code("btl register", || {
        crate::component::check_runtime(&name_of::<C>())?;
        // SAFETY: C::raw() is the exported static structure.
        let mut registrar = unsafe { crate::params::Registrar::new(C::raw()) };
        C::register(&mut registrar)?;
        let d = C::defaults();
        let mut template = Box::new(sys::mca_btl_base_module_t {
            btl_eager_limit: d.eager_limit,
            btl_rndv_eager_limit: d.rndv_eager_limit,
            btl_max_send_size: d.max_send_size,
            btl_rdma_pipeline_send_length: d.rdma_pipeline_send_length,
            btl_rdma_pipeline_frag_size: d.rdma_pipeline_frag_size,
            btl_min_rdma_pipeline_size: d.min_rdma_pipeline_size,
            btl_exclusivity: d.exclusivity,
            btl_latency: d.latency,
            btl_bandwidth: d.bandwidth,
            btl_flags: d.flags,
            btl_put_limit: d.put_limit,
            btl_get_limit: d.get_limit,
            ..Default::default()
        });
        // The BTL base drops GET/PUT from the flags (and skips their limit parameters)
        // when the function pointers are NULL, so the template carries the vtable.
        trampolines::fill_vtable::<C::Module>(&mut template);
        // SAFETY: valid component; the template is leaked below so the variables bound
        // to its fields stay valid for the life of the process.
        let rc = unsafe { sys::mca_btl_base_param_register(C::raw(), &mut *template) };
        if rc == 0 && C::DEVICE_RENDEZVOUS {
            // SAFETY: the component's static structure and the template the variable was
            // just bound to (still ours alone).
            unsafe { sys::rmca_btl_device_rendezvous_default(C::raw(), &mut *template) };
        }
        // Leaked whatever happens next: the variables are bound to its fields.
        let template: &'static sys::mca_btl_base_module_t = Box::leak(template);
        if rc != 0 {
            registrar.finish()?;
            return Err(Error::from_code(rc).unwrap_or(Error::ERROR));
        }
        check_generic(&mut registrar, template, C::MAX_FRAGMENT, C::check_limits);
        registrar.finish()?;
        let addr = template as *const sys::mca_btl_base_module_t as usize;
        let mut map = templates().lock().unwrap_or_else(|e| e.into_inner());
        map.insert(TypeId::of::<C>(), addr);
        Ok(())
    })
}

/// Checks the generic parameters Open MPI's BTL base registered for the component
/// (`btl_<name>_eager_limit` etc.): its variable system stores any text as a number
/// (`abc` as 0, `-1` as the largest size), so the text given is checked too, and the
/// fragment sizes must be ones the component can carry.
fn check_generic(
    reg: &mut crate::params::Registrar,
    t: &sys::mca_btl_base_module_t,
    max_fragment: usize,
    check_limits: fn(usize, usize) -> Option<String>,
) {
    let any = 0..=usize::MAX;
    let fragment = 1..=max_fragment;
    let eager_ok = reg.check_number("eager_limit", t.btl_eager_limit, &fragment);
    let max_ok = reg.check_number("max_send_size", t.btl_max_send_size, &fragment);
    let rndv = 0..=max_fragment;
    reg.check_number("rndv_eager_limit", t.btl_rndv_eager_limit, &rndv);
    if eager_ok
        && max_ok
        && let Some(problem) = check_limits(t.btl_eager_limit, t.btl_max_send_size)
    {
        reg.reject(problem);
    }
    reg.check_number("exclusivity", t.btl_exclusivity, &(0..=u32::MAX));
    if t.btl_put.is_some() {
        reg.check_number("put_limit", t.btl_put_limit, &any);
        let send_length = t.btl_rdma_pipeline_send_length;
        reg.check_number("rdma_pipeline_send_length", send_length, &any);
        let frag = t.btl_rdma_pipeline_frag_size;
        reg.check_number("rdma_pipeline_frag_size", frag, &(1..=usize::MAX));
        let min_pipeline = t.btl_min_rdma_pipeline_size;
        reg.check_number("min_rdma_pipeline_size", min_pipeline, &any);
        reg.check_number("latency", t.btl_latency, &(0..=u32::MAX));
        reg.check_number("bandwidth", t.btl_bandwidth, &(0..=u32::MAX));
    }
    if t.btl_get.is_some() && t.btl_flags & sys::MCA_BTL_FLAGS_GET != 0 {
        reg.check_number("get_limit", t.btl_get_limit, &any);
    }
}

fn name_of<C: Exported>() -> String {
    // SAFETY: exported structure with a NUL-terminated name.
    unsafe { std::ffi::CStr::from_ptr((*C::raw()).mca_component_name.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

unsafe extern "C" fn btl_init<C: BtlComponent>(
    num_btls: *mut c_int,
    enable_progress_threads: bool,
    enable_mpi_threads: bool,
) -> *mut *mut sys::mca_btl_base_module_t {
    let modules = crate::guard::guard("btl_init", Err(Error::ERROR), || {
        C::init(enable_progress_threads, enable_mpi_threads)
    });
    let modules = match modules {
        Ok(m) if !m.is_empty() => m,
        _ => {
            // SAFETY: ob1/bml passes a valid out-pointer.
            unsafe { *num_btls = 0 };
            return std::ptr::null_mut();
        }
    };
    let Some(template) = template_of::<C>() else {
        crate::output::emit_always(&format!(
            "[{}] init called before register; declining",
            name_of::<C>()
        ));
        // SAFETY: valid out-pointer.
        unsafe { *num_btls = 0 };
        return std::ptr::null_mut();
    };
    let count = modules.len();
    // SAFETY: malloc'ed because btl_base_select frees the array with free().
    let array = unsafe { libc::malloc(count * size_of::<*mut sys::mca_btl_base_module_t>()) }
        as *mut *mut sys::mca_btl_base_module_t;
    if array.is_null() {
        // SAFETY: valid out-pointer.
        unsafe { *num_btls = 0 };
        return std::ptr::null_mut();
    }
    for (i, module) in modules.into_iter().enumerate() {
        let mut base = template;
        base.btl_component = C::raw().cast();
        base.btl_flags = C::module_flags(base.btl_flags);
        trampolines::fill_vtable::<C::Module>(&mut base);
        let cell = Box::new(Btl {
            base: std::cell::UnsafeCell::new(base),
            error_callback: Mutex::new(None),
            module,
        });
        // SAFETY: i < count entries were allocated.
        unsafe { *array.add(i) = Box::into_raw(cell).cast() };
    }
    // SAFETY: valid out-pointer.
    unsafe { *num_btls = count as c_int };
    array
}

unsafe extern "C" fn btl_progress<C: BtlComponent>() -> c_int {
    // Two guarded steps: the quick "nothing to do" of most passes makes no call that can
    // unwind, so its guard needs no landing pad and the pass no stack frame; only a busy
    // pass goes on to the second, in a function of its own so that its frame (for the
    // landing pad) is set up there.
    if crate::guard::guard_hot("btl_progress", false, C::idle) {
        return 0;
    }
    busy_progress::<C>()
}

#[inline(never)]
fn busy_progress<C: BtlComponent>() -> c_int {
    crate::guard::guard_hot("btl_progress", 0, || C::progress() as c_int)
}

/// The exported `mca_btl_<name>_component` value for component type `C`.
pub const fn btl_component_structure<C: BtlComponent>(
    name: &str,
) -> sys::mca_btl_base_component_3_0_0_t {
    let mut version = base_structure::<C>(
        name,
        versions::BTL_MCA_VERSION,
        versions::BTL_PROJECT_NAME,
        versions::BTL_PROJECT_VERSION,
        versions::BTL_TYPE_NAME,
        versions::BTL_TYPE_VERSION,
        None,
    );
    version.mca_register_component_params = Some(btl_register::<C>);
    sys::mca_btl_base_component_3_0_0_t {
        btl_version: version,
        btl_data: component_data(),
        btl_init: Some(btl_init::<C>),
        btl_progress: Some(btl_progress::<C>),
    }
}

/// Declares the exported BTL component: `declare_btl_component!(mca_btl_NAME_component, "NAME", Type);`
#[macro_export]
macro_rules! declare_btl_component {
    ($symbol:ident, $name:literal, $ty:ty) => {
        const _: () = assert!(
            $crate::strings::const_str_eq(
                stringify!($symbol),
                concat!("mca_btl_", $name, "_component")
            ),
            "the exported symbol must be mca_btl_<name>_component"
        );
        /// The structure Open MPI's component repository looks up with dlsym.
        #[unsafe(no_mangle)]
        pub static mut $symbol: $crate::sys::mca_btl_base_component_3_0_0_t =
            $crate::btl::btl_component_structure::<$ty>($name);

        impl $crate::component::Exported for $ty {
            fn raw() -> *mut $crate::sys::mca_base_component_t {
                // SAFETY: taking the address of the static never reads it.
                unsafe { &raw mut $symbol.btl_version }
            }
        }
    };
}
