//! The CUDA side, decided once at init. It is on only when (1) the user allows it
//! (btl_rsmcuda_use_cuda_ipc), (2) the running Open MPI is CUDA-aware — ob1 of a
//! build without CUDA aborts the job on the ADD_CUDA_IPC error callback, so it must
//! never be raised there — and (3) the CUDA driver library loads at run time.

use mca::output::Stream;
use mca::{sys, verbose};

use crate::params;

/// Why CUDA IPC is off, or None when it may run.
fn reason_off() -> Option<String> {
    if !params::get().use_cuda_ipc.enabled() {
        return Some("btl_rsmcuda_use_cuda_ipc is false".into());
    }
    // SAFETY: a plain bool exported by libopen-pal, set when it loads.
    if !unsafe { sys::opal_built_with_cuda_support } {
        return Some("this Open MPI is built without CUDA support".into());
    }
    None
}

/// The driver, when it loaded (kept for the life of the process: the driver must
/// not be unloaded).
static DRIVER: std::sync::OnceLock<cuda::Driver> = std::sync::OnceLock::new();

pub fn probe(stream: &Stream) {
    if let Some(why) = reason_off() {
        verbose!(
            stream,
            1,
            "btl:rsmcuda: CUDA IPC off: {why}; host path only"
        );
        return;
    }
    let driver = match cuda::Driver::load() {
        Ok(d) => d,
        Err(e) => {
            verbose!(stream, 1, "btl:rsmcuda: CUDA IPC off: {e}; host path only");
            return;
        }
    };
    let p = params::get();
    verbose!(
        stream,
        1,
        "btl:rsmcuda: CUDA driver {} with {} device(s) (same GPU {}, cache limit {} bytes, \
         {} events); the BTL-level IPC handshake is not wired yet, so device buffers take \
         the host path",
        driver.version().unwrap_or(0),
        driver.device_count().unwrap_or(0),
        p.use_cuda_ipc_same_gpu.enabled(),
        p.cuda_cache_limit.get(),
        p.cuda_event_max.get()
    );
    let _ = DRIVER.set(driver);
}
