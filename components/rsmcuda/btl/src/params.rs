//! The component's own MCA parameters (the generic `btl_rsmcuda_{eager_limit,
//! max_send_size,exclusivity,...}` ones are registered by Open MPI's BTL base).

use std::sync::OnceLock;

use mca::Result;
use mca::output::{ComponentStream, Stream};
use mca::params::{Level, Param, Registrar};

/// Every tunable of rsmcuda besides the generic BTL ones.
pub struct Params {
    pub verbose: Param<i32>,
    pub auto_select: Param<bool>,
    pub fifo_size: Param<i32>,
    pub eager_frags: Param<i32>,
    pub max_frags: Param<i32>,
    pub attach_timeout_ms: Param<i32>,
    pub poll_batch: Param<i32>,
    pub single_copy: Param<i32>,
    pub single_copy_threshold: Param<usize>,
    pub use_cuda_ipc: Param<bool>,
    pub use_cuda_ipc_same_gpu: Param<bool>,
    pub cuda_cache_limit: Param<usize>,
    pub cuda_event_max: Param<i32>,
    pub numa_placement: Param<bool>,
}

/// `single_copy` values.
pub const SINGLE_COPY_NONE: i32 = 0;
pub const SINGLE_COPY_CMA: i32 = 1;

static PARAMS: OnceLock<Params> = OnceLock::new();

/// The registered parameters. Open MPI calls register before any other entry point.
pub fn get() -> &'static Params {
    PARAMS
        .get()
        .expect("Open MPI registers parameters before any other entry point")
}

/// The parameters if already registered (the BTL defaults are computed during register).
pub fn try_get() -> Option<&'static Params> {
    PARAMS.get()
}

static STREAM: ComponentStream = ComponentStream::new();

/// The component's verbosity stream (btl_rsmcuda_verbose).
pub fn stream() -> Stream {
    STREAM.get(|| try_get().map_or(0, |p| p.verbose.get()))
}

/// Closes the verbose stream (at component close).
pub fn close_stream() {
    STREAM.close();
}

pub fn register(reg: &mut Registrar) -> Result<()> {
    let params = Params {
        verbose: reg.int(
            "verbose",
            0,
            0..=100,
            Level::DEV_BASIC,
            "Verbosity of the rsmcuda BTL (1: setup decisions, 10: every fragment)",
        ),
        auto_select: reg.bool(
            "auto_select",
            false,
            Level::USER_BASIC,
            "Open a module in jobs whose btl list does not name rsmcuda (no list, or an \
             exclude list such as Debian's ^uct,openib,ofi). Off by default: an installed \
             rsmcuda then leaves every job that does not ask for it exactly as it was",
        ),
        fifo_size: reg.int_power_of_two(
            "fifo_size",
            4096,
            2..=1 << 24,
            Level::TUNER_BASIC,
            "Entries in each receiver's FIFO. When a FIFO is full, senders queue \
             fragments on a pending list (backpressure)",
        ),
        eager_frags: reg.int(
            "free_list_eager",
            128,
            1..=1 << 20,
            Level::TUNER_DETAIL,
            "Eager fragments (btl_rsmcuda_eager_limit bytes each) each rank owns in the \
             shared segment",
        ),
        max_frags: reg.int(
            "free_list_max",
            32,
            1..=1 << 20,
            Level::TUNER_DETAIL,
            "Max-size fragments (btl_rsmcuda_max_send_size bytes each) each rank owns in \
             the shared segment",
        ),
        attach_timeout_ms: reg.int(
            "attach_timeout",
            20_000,
            10..=600_000,
            Level::TUNER_ALL,
            "Milliseconds a rank waits for the node's segment to appear, and the creating \
             rank waits for every peer to attach before unlinking it without them; also \
             the most add_procs waits to meet processes of another job (spawned or \
             connected), which are then left to another BTL",
        ),
        poll_batch: reg.int(
            "poll_batch",
            64,
            1..=65_536,
            Level::TUNER_ALL,
            "Most FIFO entries one progress call handles",
        ),
        single_copy: reg.enumeration(
            "single_copy",
            SINGLE_COPY_CMA,
            &[(SINGLE_COPY_NONE, "none"), (SINGLE_COPY_CMA, "cma")],
            Level::TUNER_BASIC,
            "Single-copy mechanism for large contiguous host messages (offered to ob1 as \
             RDMA get): none (copy in/out through the segment) or cma \
             (process_vm_readv; falls back to copying if the kernel forbids it)",
        ),
        single_copy_threshold: reg.size(
            "single_copy_threshold",
            0,
            0..=usize::MAX,
            Level::TUNER_BASIC,
            "Smallest message (bytes) sent with single copy; smaller ones above the \
             eager limit use copy in/out. 0: every message above the eager limit (CMA \
             measured faster from 8 KiB up)",
        ),
        use_cuda_ipc: reg.bool(
            "use_cuda_ipc",
            true,
            Level::TUNER_BASIC,
            "Use CUDA IPC for device buffers when Open MPI is CUDA-aware and a CUDA \
             driver is present (ignored otherwise)",
        ),
        use_cuda_ipc_same_gpu: reg.bool(
            "use_cuda_ipc_same_gpu",
            true,
            Level::TUNER_BASIC,
            "Allow CUDA IPC between processes on the same GPU",
        ),
        cuda_cache_limit: reg.size(
            "cuda_ipc_cache_limit",
            0,
            0..=usize::MAX,
            Level::TUNER_DETAIL,
            "Bytes of peers' device memory kept mapped in the IPC handle cache \
             (0: unlimited); least recently used mappings are closed first",
        ),
        cuda_event_max: reg.int(
            "cuda_event_max",
            400,
            1..=1 << 16,
            Level::TUNER_DETAIL,
            "CUDA events for asynchronous device copies in flight",
        ),
        numa_placement: reg.bool(
            "numa_placement",
            true,
            Level::TUNER_BASIC,
            "Place each rank's FIFO, fragments and incoming fast boxes on the NUMA node \
             the rank is bound to (from Open MPI's hwloc topology, else from sysfs; published \
             in the modex; the segment's creator binds the memory with a preferred \
             policy before allocating it). Nothing is done on a single-node \
             machine or for ranks not bound within one node",
        ),
    };
    let _ = PARAMS.set(params);
    Ok(())
}
