//! The CUDA side, decided once at init. It is on only when (1) the user allows it
//! (btl_rsmcuda_use_cuda_ipc), (2) the running Open MPI is CUDA-aware — ob1 of a
//! build without CUDA aborts the job on the ADD_CUDA_IPC error callback, so it must
//! never be raised there — and (3) the CUDA driver library loads at run time.

use std::sync::atomic::{AtomicBool, Ordering};

use mca::output::Stream;
use mca::{sys, verbose};

use crate::params;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// True when the CUDA IPC path may run (and the ADD_CUDA_IPC callback may be raised).
#[allow(dead_code)]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Acquire)
}

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

pub fn probe(stream: &Stream) {
    match reason_off() {
        Some(why) => verbose!(
            stream,
            1,
            "btl:rsmcuda: CUDA IPC off: {why}; host path only"
        ),
        None => {
            let p = params::get();
            verbose!(
                stream,
                1,
                "btl:rsmcuda: CUDA-aware Open MPI (same GPU {}, cache limit {} bytes, {}                  events), but this build of rsmcuda has no driver binding yet; host path only",
                p.use_cuda_ipc_same_gpu.enabled(),
                p.cuda_cache_limit.get(),
                p.cuda_event_max.get()
            )
        }
    }
}
