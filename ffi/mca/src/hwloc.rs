//! The node's NUMA topology as Open MPI sees it: libopen-pal's hwloc topology
//! (`opal_hwloc_topology`), read through the bindings generated from the installed
//! `hwloc.h`, so the object layout is the one of the headers we are built against.

use std::ffi::c_uint;

use crate::sys;

/// RAII owner of an `hwloc_bitmap_alloc` bitmap, so every return path frees it once.
struct Bitmap(sys::hwloc_bitmap_t);

impl Drop for Bitmap {
    fn drop(&mut self) {
        // SAFETY: the pointer came from hwloc_bitmap_alloc, is non-null (checked at
        // construction) and is freed only here.
        unsafe { sys::hwloc_bitmap_free(self.0) };
    }
}

/// Libopen-pal's topology, loading it if nothing has yet (mpirun's daemon may not
/// have asked for it): as smcuda does, from what the daemon shares or by discovery.
fn topology() -> Result<sys::hwloc_topology_t, String> {
    // SAFETY: a plain read of libopen-pal's int, written only by opal_init/finalize.
    if unsafe { sys::opal_initialized } <= 0 {
        return Err("Open MPI (opal) is not initialized, so opal_hwloc_topology is absent".into());
    }
    // SAFETY: libopen-pal's `hwloc_topology_t` variable, read by value; Open MPI sets it
    // once during initialization on the thread that also calls the components.
    let topo = unsafe { sys::opal_hwloc_topology };
    if !topo.is_null() {
        return Ok(topo);
    }
    // SAFETY: no arguments; opal is initialized (checked above); on success
    // (OPAL_SUCCESS, 0) it sets opal_hwloc_topology.
    let rc = unsafe { sys::opal_hwloc_base_get_topology() };
    // SAFETY: as the first read.
    let topo = unsafe { sys::opal_hwloc_topology };
    if rc != 0 || topo.is_null() {
        return Err(format!("opal_hwloc_base_get_topology failed ({rc})"));
    }
    Ok(topo)
}

/// The number of NUMA nodes in Open MPI's topology and the OS indexes of those whose
/// CPUs intersect the calling thread's binding; `Err` says why it cannot be read
/// (outside Open MPI, no topology, a run-time hwloc of another ABI than the headers').
pub fn numa_of_binding() -> Result<(usize, Vec<u32>), String> {
    let topo = topology()?;
    // SAFETY: no arguments; returns the run-time library's constant.
    let runtime = unsafe { sys::hwloc_get_api_version() };
    // The object layout in the bindings is the headers'; hwloc keeps it within one
    // major API version (the library's soname changes with it).
    if runtime >> 16 != sys::HWLOC_API_VERSION >> 16 {
        return Err(format!(
            "run-time hwloc API {runtime:#x} differs from the headers' {:#x}",
            sys::HWLOC_API_VERSION
        ));
    }
    // SAFETY: a loaded topology; for NUMANODE hwloc 2.x returns its virtual depth.
    let depth = unsafe { sys::hwloc_get_type_depth(topo, sys::HWLOC_OBJ_NUMANODE) };
    // SAFETY: a loaded topology; an unknown depth yields 0.
    let n: c_uint = unsafe { sys::hwloc_get_nbobjs_by_depth(topo, depth) };
    // SAFETY: allocates an empty bitmap; ownership goes to `Bitmap`.
    let binding = Bitmap(unsafe { sys::hwloc_bitmap_alloc() });
    if binding.0.is_null() {
        return Err("hwloc_bitmap_alloc failed".into());
    }
    let thread = sys::HWLOC_CPUBIND_THREAD as std::ffi::c_int;
    // SAFETY: topology and bitmap are live; hwloc writes the calling thread's binding.
    if unsafe { sys::hwloc_get_cpubind(topo, binding.0, thread) } != 0 {
        return Err(format!(
            "hwloc_get_cpubind failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    let mut hits = Vec::new();
    for i in 0..n {
        // SAFETY: i is below the node count at this depth; the object lives as long as
        // the topology (libopen-pal keeps it until finalize).
        let obj = unsafe { sys::hwloc_get_obj_by_depth(topo, depth, i) };
        if obj.is_null() {
            continue;
        }
        // SAFETY: a valid object of the topology, read through the generated layout.
        let (os_index, cpuset) = unsafe { ((*obj).os_index, (*obj).cpuset) };
        // SAFETY: both bitmaps are live (the object's, and ours until `binding` drops).
        if !cpuset.is_null() && unsafe { sys::hwloc_bitmap_intersects(cpuset, binding.0) } != 0 {
            hits.push(os_index);
        }
    }
    Ok((n as usize, hits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_open_mpi_the_topology_is_absent_and_says_why() {
        let e = numa_of_binding().unwrap_err();
        assert!(e.contains("opal_hwloc_topology"), "{e}");
    }
}
