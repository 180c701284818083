//! Processes and the modex: who a peer is, whether it shares our node, and the
//! contact blob each component publishes for its peers.

use crate::error::{Error, Result, to_result};
use ompi_sys as sys;

/// A borrowed `opal_proc_t` handed to add_procs/del_procs.
#[derive(Debug, Clone, Copy)]
pub struct Proc(*mut sys::opal_proc_t);

// SAFETY: opal_proc_t objects live for the job and are only read through Proc.
unsafe impl Send for Proc {}
// SAFETY: as above.
unsafe impl Sync for Proc {}

impl Proc {
    /// Wraps a process pointer from Open MPI.
    ///
    /// # Safety
    /// `proc_` must be a valid opal_proc_t that outlives the wrapper's use.
    pub unsafe fn from_raw(proc_: *mut sys::opal_proc_t) -> Proc {
        Proc(proc_)
    }

    /// The process named `jobid << 32 | vpid` (see [`Proc::name_hash`]), as the runtime
    /// knows it or creates it now (`opal_proc_for_name`); None if it cannot.
    pub fn for_name_hash(hash: u64) -> Option<Proc> {
        // SAFETY: the runtime returns a process object that lives for the job, or NULL.
        let raw = unsafe { sys::rmca_proc_for_name_hash(hash) };
        (!raw.is_null()).then_some(Proc(raw))
    }

    /// The raw pointer (for error callbacks that name the failing peer).
    pub fn as_ptr(&self) -> *mut sys::opal_proc_t {
        self.0
    }

    /// A stable 64-bit identity: `jobid << 32 | vpid`.
    pub fn name_hash(&self) -> u64 {
        // SAFETY: Proc holds a valid opal_proc_t.
        unsafe { sys::rmca_proc_name_hash(self.0) }
    }

    /// The job id and rank of the process.
    pub fn jobid_vpid(&self) -> (u32, u32) {
        let hash = self.name_hash();
        ((hash >> 32) as u32, hash as u32)
    }

    /// True if the process is on this node.
    pub fn is_local(&self) -> bool {
        // SAFETY: Proc holds a valid opal_proc_t.
        unsafe { sys::rmca_proc_on_local_node(self.0) != 0 }
    }

    /// True if this is the calling process.
    pub fn is_me(&self) -> bool {
        self.name_hash() == my_name_hash()
    }

    /// The peer's modex blob for `component` (what it passed to [`modex_send`]).
    ///
    /// # Safety
    /// `component` must be the component's static structure.
    pub unsafe fn modex_recv(
        &self,
        component: *const sys::mca_base_component_t,
    ) -> Result<Vec<u8>> {
        let mut data: *mut std::ffi::c_void = std::ptr::null_mut();
        let mut size: usize = 0;
        // SAFETY: valid component and proc; on success `data` is malloc'ed and ours.
        to_result(unsafe { sys::rmca_modex_recv(component, self.0, &mut data, &mut size) })?;
        if data.is_null() {
            return Err(Error::NOT_FOUND);
        }
        // SAFETY: data points to `size` bytes allocated by the modex for us.
        let blob = unsafe { std::slice::from_raw_parts(data as *const u8, size) }.to_vec();
        // SAFETY: OPAL_MODEX_RECV hands ownership of the buffer to the caller.
        unsafe { libc::free(data) };
        Ok(blob)
    }
}

/// Our own `jobid << 32 | vpid`.
pub fn my_name_hash() -> u64 {
    // SAFETY: reads the process name set up by opal_init (before any component init).
    unsafe { sys::rmca_my_name_hash() }
}

/// How this process started Open MPI, as a component's init sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Startup {
    /// `MPI_Init` is running: the world model (every process of the job exists).
    MpiInit,
    /// Something else started it: an MPI Session (Open MPI 5), which adds processes to
    /// the PML as communicators come to use them.
    Other,
    /// No MPI library state in this process (a tool such as ompi_info).
    Tool,
}

/// See [`Startup`].
pub fn startup() -> Startup {
    // SAFETY: reads a variable of the MPI library, if loaded.
    match unsafe { sys::rmca_mpi_init_running() } {
        1 => Startup::MpiInit,
        0 => Startup::Other,
        _ => Startup::Tool,
    }
}

/// Publishes `blob` for every peer under this component's name.
///
/// # Safety
/// `component` must be the component's static structure.
pub unsafe fn modex_send(component: *const sys::mca_base_component_t, blob: &[u8]) -> Result<()> {
    // SAFETY: valid component; the modex copies the bytes.
    to_result(unsafe { sys::rmca_modex_send(component, blob.as_ptr().cast(), blob.len()) })
        .map(drop)
}

/// Asks the runtime to remove the file `path` when this process terminates, however it
/// ends: `MPI_Abort` leaves with `_exit` (no destructor runs) and a killed process runs
/// nothing at all. The PMIx server (mpirun's) removes it; Open MPI's vader registers its
/// shared-memory segments the same way.
pub fn register_cleanup(path: &str) -> Result<()> {
    let path = std::ffi::CString::new(path).map_err(|_| Error::BAD_PARAM)?;
    // SAFETY: `path` is NUL-terminated and outlives the call; PMIx copies it.
    to_result(unsafe { sys::rmca_register_cleanup(path.as_ptr()) }).map(drop)
}

/// The temporary directory of this process's job on this node (`opal_process_info`),
/// which the runtime creates before components are opened and removes when the job ends;
/// `None` where there is none (a singleton, a tool) or it is not a directory.
pub fn job_directory() -> Option<std::path::PathBuf> {
    // SAFETY: opal_process_info is set up by the runtime's init before any component is
    // queried and not changed while components run; the string, when set, is a
    // NUL-terminated path owned by the runtime for the life of the job.
    let dir = unsafe {
        let raw = sys::opal_process_info.job_session_dir;
        if raw.is_null() {
            return None;
        }
        std::ffi::CStr::from_ptr(raw).to_string_lossy().into_owned()
    };
    let dir = std::path::PathBuf::from(dir);
    dir.is_dir().then_some(dir)
}
