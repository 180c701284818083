//! MPI on CUDA device memory, end to end, without a GPU: `MPI_Send` on a device
//! pointer through ob1 and a BTL to the bytes in the peer's device buffer, in the
//! CUDA-aware Open MPI 4.1.4 (configure-support/ompi-cuda) and 5.0.7
//! (configure-support/ompi5) on the driver stand-in (tools/cuda-standin), every byte
//! checked by tests/cuda/device_buffers.c. Every test runs on both series. rsmcuda
//! and, as the anchor, the stock smcuda run the same program; the stand-in's counters
//! and rsmcuda's pvars prove which path ran (IPC opens, device-to-device copies,
//! cache hits, a reallocated buffer's mapping replaced).
//!
//! `make check-cuda` builds the pieces and runs these; without them every test prints
//! `SKIPPED` and passes. With `RMCA_CUDA_REAL_DRIVER=1` they run on a real GPU (the
//! stand-in's counters are then not checked).

use std::path::PathBuf;
use std::time::Duration;

use mca_harness::cuda::{self, Counters, CudaBuild, pvar_total};
use mca_harness::{Job, JobOutput, McaConfig};

const PVARS: [&str; 9] = [
    "btl_rsmcuda_cuda_ipc_cache_hits",
    "btl_rsmcuda_cuda_ipc_cache_misses",
    "btl_rsmcuda_cuda_ipc_cache_evictions",
    "btl_rsmcuda_cuda_ipc_released",
    "btl_rsmcuda_cuda_ipc_release_notices",
    "btl_rsmcuda_cuda_ipc_peers",
    "btl_rsmcuda_cuda_ipc_unavailable_peers",
    "btl_rsmcuda_single_copy_ops",
    "btl_rsmcuda_cuda_failures",
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

    /// The stand-in counted `name` at least once in some rank.
    fn assert_counted(&self, name: &str) {
        assert!(
            self.count(name) > 0,
            "stand-in counter {name} is 0: {:?}",
            self.counters.per_process
        );
    }
}

fn run(
    build: &CudaBuild,
    name: &str,
    btl: &str,
    ranks: u32,
    args: &[&str],
    extra: &[(&str, &str)],
) -> Run {
    run_program(build, "device_buffers", name, btl, ranks, args, extra)
}

/// [`run`] with another program of tests/cuda.
fn run_program(
    build: &CudaBuild,
    program: &str,
    name: &str,
    btl: &str,
    ranks: u32,
    args: &[&str],
    extra: &[(&str, &str)],
) -> Run {
    let report = report_dir(&format!("{name}-{}", build.series));
    let mut config = build.config(
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
    // device_buffers prints the pvars it is asked for; the other programs take no such
    // flag.
    let pvars: Vec<String> = if program == "device_buffers" {
        PVARS.iter().map(|p| format!("--pvar={p}")).collect()
    } else {
        Vec::new()
    };
    let mut all_args: Vec<&str> = args.to_vec();
    all_args.extend(pvars.iter().map(String::as_str));
    let out = Job::new(&config, ranks, build.program(program))
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
fn rsmcuda_moves_device_buffers_through_ipc(build: &CudaBuild) {
    if !build.available() {
        return;
    }
    let run = run(
        build,
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
        run.assert_counted("ipc.open.ok");
        run.assert_counted("copy.dtod.count");
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
fn rsmcuda_moves_device_buffers_at_4_ranks(build: &CudaBuild) {
    if !build.available() {
        return;
    }
    let run = run(build, "rsmcuda-4", "self,rsmcuda", 4, &["--quick"], &[]);
    run.out.assert_passed();
    assert_standin_counted(&run, 4);
    assert!(run.pvar("btl_rsmcuda_cuda_ipc_peers") >= 4);
    if !cuda::real_driver() {
        run.assert_counted("copy.dtod.count");
    }
}

/// The stock smcuda on the same program and stand-in: the anchor.
fn stock_smcuda_moves_device_buffers(build: &CudaBuild) {
    if !build.available() {
        return;
    }
    let run = run(build, "stock-smcuda", "self,smcuda", 2, &[], &[]);
    run.out.assert_passed();
    assert_standin_counted(&run, 2);
    if !cuda::real_driver() {
        run.assert_counted("ipc.open.ok");
        run.assert_counted("copy.dtod.count");
    }
}

/// Two GPUs without peer access, one rank on each: rsmcuda cannot use CUDA IPC and
/// says so once per pair with the reason (and its pvar counts the peer); the device
/// messages still arrive, through host memory, and no IPC handle is opened.
fn rsmcuda_says_once_why_a_peer_has_no_cuda_ipc(build: &CudaBuild) {
    if !build.available() || cuda::real_driver() {
        return;
    }
    let run = run(
        build,
        "rsmcuda-no-peer",
        "self,rsmcuda",
        2,
        &["--quick"],
        &[
            ("RMCA_CUDA_STANDIN_DEVICES", "2"),
            ("RMCA_CUDA_STANDIN_NO_PEER", "all"),
        ],
    );
    run.out.assert_passed();
    assert_standin_counted(&run, 2);
    assert!(
        run.out.stdout.contains("device 1 of 2"),
        "{}",
        run.out.report()
    );
    let all = format!("{}{}", run.out.stdout, run.out.stderr);
    let notices = all
        .matches("cannot use CUDA IPC between local rank")
        .count();
    assert_eq!(
        notices,
        2,
        "one notice per rank and peer\n{}",
        run.out.report()
    );
    assert!(
        all.contains("cuDeviceCanAccessPeer says this process's GPU cannot access the peer's"),
        "{}",
        run.out.report()
    );
    assert_eq!(run.pvar("btl_rsmcuda_cuda_ipc_unavailable_peers"), 2);
    assert_eq!(run.pvar("btl_rsmcuda_cuda_ipc_peers"), 0);
    assert_eq!(
        run.count("ipc.open.ok"),
        0,
        "{:?}",
        run.counters.per_process
    );
}

/// A CUDA call failing in the middle of device gets (the stand-in injects it): the
/// message is not lost (ob1 resends that part through host memory), the failure is
/// named once per peer and call, counted, and no IPC mapping is left open.
fn survives_injected_failure(build: &CudaBuild, name: &str, inject: &str, call: &str) {
    if !build.available() || cuda::real_driver() {
        return;
    }
    let run = run(
        build,
        name,
        "self,rsmcuda",
        2,
        &["--quick", "--parts=pr"],
        &[("RMCA_CUDA_STANDIN_FAIL", inject)],
    );
    run.out.assert_passed();
    assert_standin_counted(&run, 2);
    run.assert_counted("inject.failures");
    assert!(
        run.pvar("btl_rsmcuda_cuda_failures") > 0,
        "{}",
        run.out.report()
    );
    let all = format!("{}{}", run.out.stdout, run.out.stderr);
    assert!(
        all.contains(&format!("{call} failed with CUresult")),
        "the help message names {call}\n{}",
        run.out.report()
    );
    // Later messages use IPC again.
    run.assert_counted("copy.dtod.count");
}

fn an_ipc_open_failing_mid_transfer_loses_nothing(build: &CudaBuild) {
    survives_injected_failure(
        build,
        "rsmcuda-fail-open",
        "cuIpcOpenMemHandle:2",
        "cuIpcOpenMemHandle",
    );
}

fn a_copy_failing_mid_transfer_loses_nothing(build: &CudaBuild) {
    survives_injected_failure(
        build,
        "rsmcuda-fail-copy",
        // Only rsmcuda's copies from IPC mappings: 5.0's own convertor copies with
        // cuMemcpyAsync too, and aborts the job when one fails.
        "cuMemcpyAsync@ipc:3",
        "cuMemcpyAsync",
    );
}

fn an_event_failing_mid_transfer_loses_nothing(build: &CudaBuild) {
    survives_injected_failure(
        build,
        "rsmcuda-fail-event",
        "cuEventRecord:4",
        "cuEventRecord",
    );
}

/// The stand-in's lazy streams: copies run only as their events are queried, so a
/// completion reported before its copy finished would show stale bytes.
fn rsmcuda_waits_for_copies_on_lazy_streams(build: &CudaBuild) {
    if !build.available() || cuda::real_driver() {
        return;
    }
    for btl in ["self,rsmcuda", "self,smcuda"] {
        let name = format!("{}-lazy", btl.trim_start_matches("self,"));
        let run = run(
            build,
            &name,
            btl,
            2,
            &["--quick"],
            &[("RMCA_CUDA_STANDIN_ASYNC", "1")],
        );
        run.out.assert_passed();
        assert_standin_counted(&run, 2);
        run.assert_counted("copy.dtod.count");
    }
}

/// Managed memory has no IPC handle; the bytes arrive through host memory and no IPC
/// mapping is opened. 4.1's ob1 sends it that way by itself (its datatype engine marks
/// it `CONVERTOR_CUDA_UNIFIED`, and ob1 never asks a BTL to register it); 5.0's asks
/// rsmcuda to register it, and rsmcuda, unable to share it, says so once per process
/// and counts it.
fn rsmcuda_says_once_that_managed_memory_cannot_be_shared(build: &CudaBuild) {
    if !build.available() || cuda::real_driver() {
        return;
    }
    let run = run(
        build,
        "rsmcuda-managed",
        "self,rsmcuda",
        2,
        &[
            "--quick",
            "--managed",
            "--pvar=btl_rsmcuda_cuda_unshareable_buffers",
        ],
        &[],
    );
    run.out.assert_passed();
    assert_standin_counted(&run, 2);
    let all = format!("{}{}", run.out.stdout, run.out.stderr);
    let notices = all.matches("cannot share the GPU buffer").count();
    let unshareable = run.pvar("btl_rsmcuda_cuda_unshareable_buffers");
    if build.series == "ompi41" {
        assert_eq!(
            (notices, unshareable),
            (0, 0),
            "4.1's ob1 never asks a BTL to register managed memory\n{}",
            run.out.report()
        );
    } else {
        assert_eq!(notices, 2, "one notice per process\n{}", run.out.report());
        assert!(
            all.contains("cuIpcGetMemHandle failed"),
            "{}",
            run.out.report()
        );
        assert!(unshareable > 0, "{}", run.out.report());
    }
    assert_eq!(
        run.count("ipc.open.ok"),
        0,
        "{:?}",
        run.counters.per_process
    );
}

/// A CPU-only application (no CUDA call, so no CUDA context) where rsmcuda's CUDA IPC
/// is on: no handshake can start, and rsmcuda must not ask the driver about it on every
/// send (on an H200 machine that cost 1.5-3.9 µs a message, 8-byte latency 4-9x
/// vader's), nor initialise CUDA itself. 4000 messages each way at 2 ranks: a few
/// questions, not one per send.
fn rsmcuda_does_not_ask_the_driver_on_every_send_without_a_context(build: &CudaBuild) {
    if !build.available() || cuda::real_driver() {
        return;
    }
    let run = run_program(
        build,
        "host_only",
        "rsmcuda-host-only",
        "self,rsmcuda",
        2,
        &[],
        &[("btl_rsmcuda_verbose", "1")],
    );
    run.out.assert_passed();
    assert_eq!(
        run.out.stderr.matches("CUDA IPC on: driver").count(),
        2,
        "CUDA IPC must be on for this to mean anything\n{}",
        run.out.report()
    );
    let asked = run.count("call.cuCtxGetDevice");
    assert!(
        asked <= 40,
        "the driver was asked {asked} times for 8000 sends: {:?}",
        run.counters.per_process
    );
    // Nor does it initialise CUDA behind the application's back: on 5.0 that turns
    // ob1's check of every host buffer into a cuMemRetainAllocationHandle call (2-4 µs
    // latency on an H200 machine instead of 0.4).
    assert_eq!(
        (
            run.count("call.cuInit"),
            run.count("call.cuMemRetainAllocationHandle")
        ),
        (0, 0),
        "{:?}",
        run.counters.per_process
    );
}

/// The driver calls a synchronous call waits in: the GPU must finish before it returns.
const SYNCHRONOUS: [&str; 9] = [
    "call.cuStreamSynchronize",
    "call.cuCtxSynchronize",
    "call.cuEventSynchronize",
    "call.cuMemcpy",
    "call.cuMemcpyDtoH",
    "call.cuMemcpyHtoD",
    "call.cuMemcpyDtoD",
    "call.cuMemcpyPeer",
    "call.cuMemsetD8",
];

/// What one 8-byte device message costs in driver work, from two ping-pong runs of
/// different lengths (their difference has no setup in it): (driver calls, synchronous
/// waits, IPC opens), each per message.
fn per_small_device_message(
    build: &CudaBuild,
    name: &str,
    btl: &str,
    extra: &[(&str, &str)],
) -> (f64, f64, f64) {
    let lat = |iters: u32| {
        let run = run_program(
            build,
            "device_bw",
            &format!("{name}-{iters}"),
            btl,
            2,
            &[
                "--parts=lat",
                "--lat-sizes=8",
                &format!("--lat-iters={iters}"),
            ],
            extra,
        );
        run.out.assert_passed();
        run
    };
    // device_bw's ping-pong: iters + iters/10 + 1 round trips (warm-up included), two
    // messages each.
    let messages = |iters: u32| f64::from(2 * (iters + iters / 10 + 1));
    let (short, long) = (lat(200), lat(600));
    let diff = |run: &Run, pick: &dyn Fn(&str) -> bool| -> u64 {
        run.counters
            .per_process
            .iter()
            .flat_map(|p| p.iter())
            .filter(|(k, _)| pick(k))
            .map(|(_, v)| *v)
            .sum()
    };
    let per = |pick: &dyn Fn(&str) -> bool| {
        (diff(&long, pick) as f64 - diff(&short, pick) as f64) / (messages(600) - messages(200))
    };
    (
        per(&|k| k.starts_with("call.")),
        per(&|k| {
            SYNCHRONOUS
                .iter()
                .any(|s| k == *s || k.strip_suffix("_v2") == Some(s))
        }),
        per(&|k| k == "call.cuIpcOpenMemHandle" || k == "call.cuIpcOpenMemHandle_v2"),
    )
}

/// Small device messages, counted on the stand-in beside stock smcuda in the same test:
/// rsmcuda sends every device message by rendezvous with one CUDA IPC copy (as smcuda;
/// staging through host memory took two synchronous copies, and on an H200 under MPS
/// 1.11-1.36x smcuda's latency), opens no IPC mapping per message (its cache), and
/// asks the driver no more per message than smcuda does.
fn rsmcuda_small_device_messages_cost_no_more_driver_work_than_smcuda(build: &CudaBuild) {
    if !build.available() || cuda::real_driver() {
        return;
    }
    let ours = per_small_device_message(build, "rsmcuda-count", "self,rsmcuda", &[]);
    let stock = per_small_device_message(build, "smcuda-count", "self,smcuda", &[]);
    // The route rsmcuda took before: staged through its eager fragments by ob1.
    let limit = if build.series == "ompi41" {
        "btl_rsmcuda_cuda_eager_limit"
    } else {
        "btl_rsmcuda_accelerator_eager_limit"
    };
    let staged = per_small_device_message(
        build,
        "rsmcuda-staged-count",
        "self,rsmcuda",
        &[(limit, "0")],
    );
    eprintln!(
        "per 8-byte device message, Open MPI {}: driver calls {:.2} (smcuda {:.2}, staged \
         {:.2}), synchronous waits {:.2} ({:.2}, {:.2}), IPC opens {:.3} ({:.3}, {:.3})",
        build.series,
        ours.0,
        stock.0,
        staged.0,
        ours.1,
        stock.1,
        staged.1,
        ours.2,
        stock.2,
        staged.2
    );
    assert!(
        staged.1 >= 1.0,
        "staging takes a synchronous copy per message (the reason for the rendezvous): \
         {staged:?}"
    );
    assert!(
        ours.0 <= stock.0 + 0.01 && ours.1 <= stock.1 + 0.01,
        "rsmcuda {ours:?} against smcuda {stock:?} (calls, waits, opens per message)"
    );
    assert!(ours.2 < 0.01, "an IPC open per message: {ours:?}");
}

/// What a job held of freed device memory, from malloc_bcast_free's summary (the job's
/// totals after each iteration's frees and a barrier) and the stand-in's reports (at
/// exit, and its high-water mark sampled at every IPC open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    /// Mappings of freed allocations: the most after any iteration, after the last.
    max: u64,
    max_bytes: u64,
    last: u64,
    last_bytes: u64,
    /// IPC mappings open at all: the most after any iteration.
    open_max: u64,
    /// Mappings of freed allocations held by some process at one of its IPC opens
    /// (the largest count of one process).
    at_open_max: u64,
    /// At exit: mappings of freed allocations, and mappings never closed (job totals).
    at_exit: u64,
    never_closed: u64,
}

/// malloc_bcast_free at 4 ranks on `btl`: passes, or the test fails; what it held.
fn malloc_bcast_free(build: &CudaBuild, name: &str, btl: &str, args: &[&str]) -> Held {
    let run = run_program(build, "malloc_bcast_free", name, btl, 4, args, &[]);
    run.out.assert_passed();
    assert_eq!(
        run.counters.per_process.len(),
        4,
        "one stand-in report per rank expected\n{}",
        run.out.report()
    );
    let line = run
        .out
        .stdout
        .lines()
        .find_map(|l| l.split_once("held after free: max ").map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("no summary line\n{}", run.out.report()));
    // "M mappings (B bytes), last L (LB bytes); open mappings: max O, last OL"
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let [max, max_bytes, last, last_bytes, open_max, _] = numbers[..] else {
        panic!("summary line not understood: {line}");
    };
    let held = Held {
        max,
        max_bytes,
        last,
        last_bytes,
        open_max,
        at_open_max: run
            .counters
            .each("ipc.freed_held.max")
            .into_iter()
            .max()
            .unwrap_or(0),
        at_exit: run.count("live.ipc_mappings_freed"),
        never_closed: run.count("live.ipc_mappings"),
    };
    eprintln!(
        "{name} on {}: {held:?}, IPC opens {}",
        build.series,
        run.count("ipc.open.ok")
    );
    held
}

/// ompi#12971's loop (cuMemAlloc, MPI_Bcast, cuMemFree) at 4 ranks, rsmcuda beside the
/// stock smcuda on the same stand-in, 200 iterations each: every byte right although
/// freed addresses come back (every time, or moving among three addresses), and
/// rsmcuda holds no IPC mapping of a freed allocation after any iteration, at any IPC
/// open, or at exit. smcuda keeps one per (peer, address) it read from, and with moving
/// addresses more and more (the known stock defect, ompi#12971). A buffer broadcast
/// twice before it is freed is kept by smcuda until its address comes back (only its
/// owner knows when it is freed); rsmcuda's owners tell their peers
/// (`rsmcuda_core::release`): an owner checks the allocations it exported whenever it
/// exports a new one (here every allocation it tracks: fewer than
/// `CHECKS_PER_EXPORT`) and from idle progress, so what a job can hold after an
/// iteration is each owner's latest allocation, freed since its last check, in every
/// other rank: at most ranks x (ranks - 1) = 12 mappings, however long it runs (smcuda:
/// one more per iteration); and what one process holds at any IPC open, the latest of
/// each other owner plus one whose notice is on its way: at most 2 x 3. Neither holds
/// anything at exit.
fn nothing_held_after_free(build: &CudaBuild) {
    if !build.available() || cuda::real_driver() {
        return;
    }
    let ours_and_stock = |name: &str, args: &[&str]| {
        let mut args = args.to_vec();
        args.push("--iterations=200");
        (
            malloc_bcast_free(build, &format!("rsmcuda-{name}"), "self,rsmcuda", &args),
            malloc_bcast_free(build, &format!("smcuda-{name}"), "self,smcuda", &args),
        )
    };
    for spread in ["--spread=1", "--spread=3"] {
        let (ours, stock) = ours_and_stock(&format!("free{spread}"), &[spread]);
        assert_eq!(
            (ours.max, ours.max_bytes, ours.at_open_max, ours.at_exit),
            (0, 0, 0, 0),
            "rsmcuda held mappings of freed allocations ({spread}): {ours:?}"
        );
        assert_eq!(
            (ours.open_max, ours.never_closed),
            (0, 0),
            "rsmcuda kept mappings of buffers read once ({spread}): {ours:?}"
        );
        assert!(
            stock.max > 0,
            "smcuda no longer holds freed buffers' mappings (ompi#12971 fixed?) ({spread}): \
             {stock:?}"
        );
        assert_eq!(stock.never_closed, 0, "{stock:?}");
    }
    let (ours, stock) = ours_and_stock("reused", &["--spread=3", "--uses=2"]);
    assert!(
        ours.max <= stock.max && ours.at_exit == 0 && ours.never_closed == 0,
        "rsmcuda {ours:?} against smcuda {stock:?} (buffers read twice)"
    );
    assert!(
        ours.max <= 4 * 3 && ours.at_open_max <= 2 * 3,
        "rsmcuda held more freed buffers read twice than its owners' latest: {ours:?}"
    );
    assert!(
        stock.max > 100,
        "smcuda no longer holds freed buffers read twice (ompi#12971 fixed?): {stock:?}"
    );
}

/// Each test above as `<test>::ompi41` and `<test>::ompi50`.
macro_rules! on_both_series {
    ($($test:ident),* $(,)?) => {
        $(
            mod $test {
                #[test]
                fn ompi41() {
                    super::$test(&super::cuda::ompi41());
                }
                #[test]
                fn ompi50() {
                    super::$test(&super::cuda::ompi50());
                }
            }
        )*
    };
}

on_both_series!(
    rsmcuda_moves_device_buffers_through_ipc,
    rsmcuda_moves_device_buffers_at_4_ranks,
    stock_smcuda_moves_device_buffers,
    rsmcuda_says_once_why_a_peer_has_no_cuda_ipc,
    an_ipc_open_failing_mid_transfer_loses_nothing,
    a_copy_failing_mid_transfer_loses_nothing,
    an_event_failing_mid_transfer_loses_nothing,
    rsmcuda_waits_for_copies_on_lazy_streams,
    rsmcuda_says_once_that_managed_memory_cannot_be_shared,
    rsmcuda_does_not_ask_the_driver_on_every_send_without_a_context,
    rsmcuda_small_device_messages_cost_no_more_driver_work_than_smcuda,
    nothing_held_after_free,
);

/// `make gpu-bundle`'s tarball, unpacked elsewhere, runs its whole `--quick` script
/// on the stand-in: the relocated 4.1 and 5.0 prefixes, our components and both programs work
/// without the checkout (the bundle carries no libcuda of its own).
#[test]
fn the_gpu_bundle_runs_from_anywhere() {
    let bundle = mca_harness::repo_root().join("build/gpu-bundle/rmca-gpu-bundle.tar.xz");
    if !bundle.is_file() {
        mca_harness::static_ompi::skip_unless_required(
            "RMCA_REQUIRE_OMPI_CUDA",
            "no build/gpu-bundle/rmca-gpu-bundle.tar.xz (`make gpu-bundle`)",
        );
        return;
    }
    if cuda::real_driver() || !cuda::ompi41().available() {
        return;
    }
    let dir = report_dir("bundle");
    let listing = std::process::Command::new("tar")
        .arg("tJf")
        .arg(&bundle)
        .output()
        .expect("tar");
    let names = String::from_utf8_lossy(&listing.stdout);
    assert!(
        !names
            .lines()
            .any(|n| n.rsplit('/').next().unwrap_or("").starts_with("libcuda")),
        "the bundle must use the machine's driver, not carry one"
    );
    let unpacked = std::process::Command::new("tar")
        .arg("xJf")
        .arg(&bundle)
        .arg("-C")
        .arg(&dir)
        .status()
        .expect("tar");
    assert!(unpacked.success());
    let out = std::process::Command::new(dir.join("rmca-gpu-bundle/run"))
        .arg("--quick")
        .current_dir(&dir)
        .env("LD_LIBRARY_PATH", cuda::standin_dir())
        .env("RMCA_CUDA_STANDIN", "1")
        .env_remove("OMPI_MCA_mca_base_component_path")
        .output()
        .expect("run the bundle");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success() && stdout.contains("ALL PASSED"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Both series, 4 ranks on the one (stand-in) GPU too.
    for job in [
        "device_buffers-41-rsmcuda-np4",
        "device_buffers-41-smcuda-np2",
        "device_buffers-50-rsmcuda-np2",
        "device_buffers-50-rsmcuda-np4",
        "device_buffers-50-smcuda-np4",
        "device_bw-41-rsmcuda",
        "device_bw-50-rsmcuda",
        "device_bw-50-smcuda",
    ] {
        assert!(stdout.contains(&format!("PASS {job} (")), "{job}\n{stdout}");
    }
}
