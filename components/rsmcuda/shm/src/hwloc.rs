//! Open MPI's hwloc topology, read through the symbols already in the process (raw).
//!
//! libopen-pal loads the node's topology once (`opal_hwloc_topology`; if nothing asked
//! for it yet, `opal_hwloc_base_get_topology` loads it, as smcuda does) and links hwloc
//! (Debian: the system libhwloc.so.15), so its functions are found with `dlsym` and no
//! link-time dependency: outside Open MPI (the crate's own tests) or with an Open MPI
//! whose hwloc symbols are renamed (an embedded copy), the caller falls back to sysfs.
//! The two fields read from `struct hwloc_obj` (`os_index`, `cpuset`) are at the offsets
//! of the hwloc 2.x ABI (libhwloc.so.15), checked against `hwloc_get_api_version`.

use std::ffi::{CStr, c_int, c_uint, c_void};

type Topology = *mut c_void;
type Bitmap = *mut c_void;

/// `HWLOC_TYPE_DEPTH_NUMANODE`, `HWLOC_CPUBIND_THREAD`.
const DEPTH_NUMANODE: c_int = -3;
const CPUBIND_THREAD: c_int = 2;
/// `offsetof(struct hwloc_obj, os_index)` and `cpuset` in hwloc 2.x (x86_64/aarch64).
const OFF_OS_INDEX: usize = 16;
const OFF_CPUSET: usize = 184;

fn sym(name: &CStr) -> Result<*mut c_void, String> {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks the symbol up.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if p.is_null() {
        Err(format!("no symbol {}", name.to_string_lossy()))
    } else {
        Ok(p)
    }
}

/// The number of NUMA nodes in Open MPI's topology and the OS indexes of those whose
/// CPUs intersect the calling thread's binding; `Err` says why it cannot be read.
pub fn numa_of_binding() -> Result<(usize, Vec<u32>), String> {
    if !cfg!(target_pointer_width = "64") {
        return Err("hwloc object offsets are only known for 64-bit targets".into());
    }
    let topo_var = sym(c"opal_hwloc_topology")?.cast::<Topology>();
    // SAFETY: `opal_hwloc_topology` is libopen-pal's `hwloc_topology_t` variable.
    let mut topo = unsafe { *topo_var };
    if topo.is_null() {
        // Not loaded yet (mpirun's daemon may not have asked for it): load it as smcuda
        // does, from what the daemon shares or by discovery.
        // SAFETY: libopen-pal's `int opal_hwloc_base_get_topology(void)`.
        let get_topology = unsafe {
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(sym(
                c"opal_hwloc_base_get_topology",
            )?)
        };
        // SAFETY: no arguments; it sets opal_hwloc_topology on success (OPAL_SUCCESS 0).
        let rc = unsafe { get_topology() };
        // SAFETY: as above.
        topo = unsafe { *topo_var };
        if rc != 0 || topo.is_null() {
            return Err(format!("opal_hwloc_base_get_topology failed ({rc})"));
        }
    }
    // SAFETY: (all transmutes) each symbol is the hwloc 2.x function of that name, whose
    // C signature (hwloc.h) is the type it is given here.
    let (api, nbobjs, get_obj, alloc, free, intersects, get_cpubind) = unsafe {
        (
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_uint>(sym(
                c"hwloc_get_api_version",
            )?),
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn(Topology, c_int) -> c_int>(
                sym(c"hwloc_get_nbobjs_by_depth")?,
            ),
            std::mem::transmute::<
                *mut c_void,
                unsafe extern "C" fn(Topology, c_int, c_uint) -> *const u8,
            >(sym(c"hwloc_get_obj_by_depth")?),
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> Bitmap>(sym(
                c"hwloc_bitmap_alloc",
            )?),
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn(Bitmap)>(sym(
                c"hwloc_bitmap_free",
            )?),
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn(Bitmap, Bitmap) -> c_int>(sym(
                c"hwloc_bitmap_intersects",
            )?),
            std::mem::transmute::<
                *mut c_void,
                unsafe extern "C" fn(Topology, Bitmap, c_int) -> c_int,
            >(sym(c"hwloc_get_cpubind")?),
        )
    };
    // SAFETY: no arguments, returns a constant.
    let version = unsafe { api() };
    if version >> 16 != 2 {
        return Err(format!("hwloc API {version:#x} is not 2.x"));
    }
    // SAFETY: a loaded topology; the depth is a valid virtual depth.
    let n = unsafe { nbobjs(topo, DEPTH_NUMANODE) }.max(0);
    // SAFETY: allocates an empty bitmap we free below.
    let binding = unsafe { alloc() };
    if binding.is_null() {
        return Err("hwloc_bitmap_alloc failed".into());
    }
    // SAFETY: topology and bitmap are live; hwloc writes the calling thread's binding.
    if unsafe { get_cpubind(topo, binding, CPUBIND_THREAD) } != 0 {
        // SAFETY: the bitmap from alloc, freed once.
        unsafe { free(binding) };
        return Err(format!(
            "hwloc_get_cpubind failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    let mut hits = Vec::new();
    for i in 0..n as c_uint {
        // SAFETY: i is below the node count of a loaded topology; the object lives as
        // long as the topology, and the two fields are read at their 2.x offsets.
        unsafe {
            let obj = get_obj(topo, DEPTH_NUMANODE, i);
            if obj.is_null() {
                continue;
            }
            let os_index = obj.add(OFF_OS_INDEX).cast::<c_uint>().read_unaligned();
            let cpuset = obj.add(OFF_CPUSET).cast::<Bitmap>().read_unaligned();
            if !cpuset.is_null() && intersects(cpuset, binding) != 0 {
                hits.push(os_index);
            }
        }
    }
    // SAFETY: the bitmap from alloc, freed once.
    unsafe { free(binding) };
    Ok((n as usize, hits))
}
