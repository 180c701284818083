//! `rsmcuda`: a shared-memory BTL in the style of smcuda, for ob1.
//!
//! Host path: one segment per job and node (see `setup`) plus one per connected
//! process of another job on the node (see `pair`), per-receiver lock-free FIFOs of
//! fragment offsets, fragments from owner-only free lists, the fragment's return as
//! the ACK, pending queues when a FIFO is full, sendi, and single copy with CMA for
//! large contiguous messages (`single_copy`). CUDA path: see `cuda`; it stays off
//! unless the running Open MPI is CUDA-aware and a driver loads.

mod cuda;
mod desc;
mod help;
mod modex;
mod module;
mod node;
mod nodes;
mod numa;
mod pair;
mod params;
mod setup;
mod single_copy;
mod stats;

use mca::btl::{BtlComponent, BtlDefaults};
use mca::params::Registrar;
use mca::{Result, sys, verbose};

use module::Module;

pub struct Rsmcuda;

mca::declare_btl_component!(mca_btl_rsmcuda_component, "rsmcuda", Rsmcuda);

impl mca::component::Component for Rsmcuda {
    fn register(reg: &mut Registrar) -> Result<()> {
        params::register(reg)?;
        stats::register(<Rsmcuda as mca::component::Exported>::raw())
    }

    fn close() -> Result<()> {
        params::close_stream();
        Ok(())
    }
}

impl BtlComponent for Rsmcuda {
    type Module = Module;

    fn defaults() -> BtlDefaults {
        let mut flags = sys::MCA_BTL_FLAGS_SEND;
        if single_copy::wanted() {
            flags |= sys::MCA_BTL_FLAGS_GET;
        }
        BtlDefaults {
            eager_limit: 4 * 1024,
            rndv_eager_limit: 4 * 1024,
            max_send_size: 32 * 1024,
            // Above tcp and the other network BTLs for local peers, below self and vader.
            exclusivity: sys::MCA_BTL_EXCLUSIVITY_HIGH - 2,
            latency: 1,
            bandwidth: 20_000,
            flags,
            put_limit: 0,
            get_limit: usize::MAX,
            rdma_pipeline_send_length: 64 * 1024,
            rdma_pipeline_frag_size: 64 * 1024,
            min_rdma_pipeline_size: 64 * 1024,
        }
    }

    fn init(_progress_threads: bool, _mpi_threads: bool) -> Result<Vec<Module>> {
        let stream = params::stream();
        // Installed beside vader, rsmcuda stays out of jobs that did not ask for it: a
        // module that reaches peers is progressed by ob1 even while vader carries all
        // the traffic.
        if !mca::selection::competes("btl", "rsmcuda", params::get().auto_select.enabled()) {
            verbose!(
                stream,
                1,
                "btl:rsmcuda: not named in the btl list and btl_rsmcuda_auto_select is off: \
                 no module"
            );
            return Ok(Vec::new());
        }
        let Some(limits) = mca::btl::effective_limits::<Rsmcuda>() else {
            return Ok(Vec::new());
        };
        // Before the contact, which says whether CUDA IPC is active here.
        cuda::start_pml_support(&stream);
        cuda::probe(&stream);
        let contact = match setup::my_contact(limits) {
            Ok(c) => c,
            Err(e) => {
                cuda::end_pml_support();
                mca::help::show_help(help::HELP, "no segment name", true, &[&e]);
                return Ok(Vec::new());
            }
        };
        // SAFETY: our exported component structure.
        unsafe {
            mca::proc::modex_send(
                <Rsmcuda as mca::component::Exported>::raw(),
                &contact.encode(),
            )?
        };
        verbose!(stream, 1, "btl:rsmcuda: init, pid {}", contact.pid);
        Ok(vec![Module::new()])
    }

    fn progress() -> usize {
        module::progress()
    }

    #[inline]
    fn idle() -> bool {
        module::idle()
    }

    /// One CUDA IPC copy beats staging through host memory (a device-to-host copy, then
    /// host-to-device) even at 8 B: 0.99-1.10x smcuda's latency against 1.11-1.36x
    /// under CUDA MPS on an H200 (docs/bench/gpu-h200-2026-11-28.txt).
    const DEVICE_RENDEZVOUS: bool = true;

    /// Fragments live in the shared segment, whose layout takes at most 1 GiB each.
    const MAX_FRAGMENT: usize = rsmcuda_shm::MAX_FRAG_PAYLOAD as usize;

    fn check_limits(eager: usize, max: usize) -> Option<String> {
        (eager > max).then(|| {
            format!(
                "btl_rsmcuda_eager_limit = {eager} is above btl_rsmcuda_max_send_size = {max}: \
                 eager fragments must not be larger than max fragments"
            )
        })
    }
}
