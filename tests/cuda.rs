//! MPI on CUDA device memory, end to end, without a GPU: `MPI_Send` on a device
//! pointer through ob1 and a BTL to the bytes in the peer's device buffer, in the
//! CUDA-aware Open MPI 4.1.4 (configure-support/ompi-cuda) on the driver stand-in
//! (tools/cuda-standin), every byte checked by tests/cuda/device_buffers.c. rsmcuda
//! and, as the anchor, the stock smcuda run the same program; the stand-in's counters
//! and rsmcuda's pvars prove which path ran (IPC opens, device-to-device copies,
//! cache hits, a reallocated buffer's mapping replaced).
//!
//! `make check-cuda` builds the pieces and runs these; without them every test prints
//! `SKIPPED` and passes. With `RMCA_CUDA_REAL_DRIVER=1` they run on a real GPU (the
//! stand-in's counters are then not checked).

use std::path::PathBuf;
use std::time::Duration;

use mca_harness::cuda::{self, Counters, on_cuda, pvar_total};
use mca_harness::{Job, JobOutput, McaConfig};

const PVARS: [&str; 6] = [
    "btl_rsmcuda_cuda_ipc_cache_hits",
    "btl_rsmcuda_cuda_ipc_cache_misses",
    "btl_rsmcuda_cuda_ipc_cache_evictions",
    "btl_rsmcuda_cuda_ipc_peers",
    "btl_rsmcuda_cuda_ipc_unavailable_peers",
    "btl_rsmcuda_single_copy_ops",
];

/// A fresh directory for one job's stand-in reports.
fn report_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rmca-cuda-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the report directory");
    dir
}

struct Run {
    out: JobOutput,
    counters: Counters,
}

impl Run {
    fn pvar(&self, name: &str) -> u64 {
        pvar_total(&self.out.stdout, name)
            .unwrap_or_else(|| panic!("no pvar {name} printed\n{}", self.out.report()))
    }

    /// A stand-in counter summed over the ranks (the job's mpirun does not load it).
    fn count(&self, name: &str) -> u64 {
        self.counters.total(name)
    }
}

fn run(name: &str, btl: &str, ranks: u32, args: &[&str], extra: &[(&str, &str)]) -> Run {
    let report = report_dir(name);
    let mut config = on_cuda(
        McaConfig::new(name, &[("pml", "ob1"), ("btl", btl)]),
        &report,
    );
    for (key, value) in extra {
        config = if key.starts_with("RMCA_") || key.starts_with("CUDA_") {
            config.with_env(key, value)
        } else {
            config.with(key, value)
        };
    }
    let pvars: Vec<String> = PVARS.iter().map(|p| format!("--pvar={p}")).collect();
    let mut all_args: Vec<&str> = args.to_vec();
    all_args.extend(pvars.iter().map(String::as_str));
    let out = Job::new(&config, ranks, cuda::program("device_buffers"))
        .args(&all_args)
        .timeout(Duration::from_secs(300))
        .run();
    let counters = Counters::read(&report);
    let _ = std::fs::remove_dir_all(&report);
    eprintln!("{}", out.report());
    Run { out, counters }
}

fn assert_standin_counted(run: &Run, ranks: usize) {
    if cuda::real_driver() {
        return;
    }
    assert_eq!(
        run.counters.per_process.len(),
        ranks,
        "one stand-in report per rank expected\n{}",
        run.out.report()
    );
    assert_eq!(
        run.count("live.ipc_mappings"),
        0,
        "IPC mappings left open at exit: {:?}",
        run.counters.per_process
    );
}

/// rsmcuda at 2 ranks: every byte right, the handshake done on both ranks, device
/// messages read through IPC (opens, device-to-device copies), repeated buffers hit
/// the cache, the reallocated buffer evicts its old mapping, host buffers on CMA.
#[test]
fn rsmcuda_moves_device_buffers_through_ipc() {
    if !cuda::available() {
        return;
    }
    let run = run(
        "rsmcuda",
        "self,rsmcuda",
        2,
        &[],
        &[("btl_rsmcuda_verbose", "1")],
    );
    run.out.assert_passed();
    assert_standin_counted(&run, 2);
    assert_eq!(
        run.pvar("btl_rsmcuda_cuda_ipc_peers"),
        2,
        "{}",
        run.out.report()
    );
    assert_eq!(run.pvar("btl_rsmcuda_cuda_ipc_unavailable_peers"), 0);
    assert!(run.pvar("btl_rsmcuda_cuda_ipc_cache_hits") > 0);
    assert!(run.pvar("btl_rsmcuda_cuda_ipc_cache_evictions") > 0);
    assert!(run.pvar("btl_rsmcuda_single_copy_ops") > 0);
    if !cuda::real_driver() {
        assert!(run.count("ipc.open") > 0, "{:?}", run.counters.per_process);
        assert!(
            run.count("copies.dtod") > 0,
            "{:?}",
            run.counters.per_process
        );
        assert!(
            run.out
                .stdout
                .contains("reallocated send buffer at the same address 2 of 2 times"),
            "the stand-in reuses a freed address\n{}",
            run.out.report()
        );
    }
}

/// The same at 4 ranks (two pairs; the collectives span all four).
#[test]
fn rsmcuda_moves_device_buffers_at_4_ranks() {
    if !cuda::available() {
        return;
    }
    let run = run("rsmcuda-4", "self,rsmcuda", 4, &["--quick"], &[]);
    run.out.assert_passed();
    assert_standin_counted(&run, 4);
    assert!(run.pvar("btl_rsmcuda_cuda_ipc_peers") >= 4);
    if !cuda::real_driver() {
        assert!(
            run.count("copies.dtod") > 0,
            "{:?}",
            run.counters.per_process
        );
    }
}

/// The stock smcuda on the same program and stand-in: the anchor.
#[test]
fn stock_smcuda_moves_device_buffers() {
    if !cuda::available() {
        return;
    }
    let run = run("stock-smcuda", "self,smcuda", 2, &[], &[]);
    run.out.assert_passed();
    assert_standin_counted(&run, 2);
    if !cuda::real_driver() {
        assert!(run.count("ipc.open") > 0, "{:?}", run.counters.per_process);
        assert!(
            run.count("copies.dtod") > 0,
            "{:?}",
            run.counters.per_process
        );
    }
}
