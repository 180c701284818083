//! The rsmcuda BTL under real mpirun: the conformance programs with `self,rsmcuda`
//! (2 and 4 ranks; `threads` runs MPI_THREAD_MULTIPLE), a FIFO stress that must hit
//! backpressure, segment cleanup after a normal exit, after `kill -9` of a rank and
//! with a local rank that never attaches, and a bad parameter (mpi4py: tests/mpi4py.rs).

use std::path::Path;
use std::time::Duration;

use mca_harness::shm::{
    assert_no_rsmcuda_segment_left, assert_rsmcuda_segment_gone_after_kill_9,
    rsmcuda_segments_created,
};
use mca_harness::{
    Job, JobOutput, McaConfig, assert_bad_values_reported, assert_every_parameter_has_help, bad,
    exported_symbols, not_a_boolean, not_a_number, not_one_of, ompi_info_params, out_of_range,
    program,
};

fn rsmcuda() -> McaConfig {
    McaConfig::new("rsmcuda", &[("pml", "ob1"), ("btl", "self,rsmcuda")])
}

fn run(config: &McaConfig, ranks: u32, name: &str, args: &[&str]) -> JobOutput {
    Job::new(config, ranks, program(name))
        .args(args)
        .timeout(Duration::from_secs(180))
        .run()
}

// Every program of tests/programs except trunc_large (an ob1 defect for every BTL,
// asserted in tests/conformance.rs), at 2 and 4 ranks.
mca_harness::conformance_suite!(conformance, rsmcuda(), skip: ["trunc_large"]);

/// The shared object exports exactly the component structure (rustc's version
/// script hides everything else).
#[test]
fn only_the_component_symbol_is_exported() {
    assert_eq!(
        exported_symbols("mca_btl_rsmcuda.so"),
        ["mca_btl_rsmcuda_component"]
    );
}

/// `ompi_info --level 9` documents every rsmcuda parameter and pvar.
#[test]
fn ompi_info_documents_every_parameter() {
    let text = ompi_info_params("btl", "rsmcuda");
    assert_every_parameter_has_help(&text, "btl_rsmcuda_");
    for name in [
        "verbose",
        "auto_select",
        "fifo_size",
        "free_list_eager",
        "free_list_max",
        "attach_timeout",
        "poll_batch",
        "single_copy",
        "single_copy_threshold",
        "use_cuda_ipc",
        "use_cuda_ipc_same_gpu",
        "cuda_ipc_cache_limit",
        "cuda_event_max",
        "numa_placement",
        "eager_limit",
        "max_send_size",
        "get_limit",
    ] {
        assert!(
            text.contains(&format!("parameter \"btl_rsmcuda_{name}\"")),
            "btl_rsmcuda_{name} missing:\n{text}"
        );
    }
    for pvar in [
        "sends",
        "receives",
        "fifo_full",
        "pending_high_water",
        "single_copy_bytes",
        "cuda_ipc_cache_hits",
        "cuda_ipc_cache_misses",
        "cuda_ipc_cache_evictions",
        "cuda_ipc_peers",
        "cuda_ipc_unavailable_peers",
        "cuda_failures",
    ] {
        assert!(
            text.contains(&format!("performance \"btl_rsmcuda_{pvar}\"")),
            "pvar btl_rsmcuda_{pvar} missing:\n{text}"
        );
    }
    assert!(text.contains("current value: \"send,get\""), "{text}");
}

/// NUMA placement decides once per node, from Open MPI's hwloc topology, and says so;
/// the job runs the same with it on and off. On a single-node machine (this one) it must say there is nothing to do;
/// on a multi-node one, where ranks are bound to cores, it binds every rank's memory.
/// Each rank also says whether its CUDA path is on (off here: the Debian Open MPI
/// has no CUDA support).
#[test]
fn numa_placement_on_and_off_and_the_cuda_decision_are_reported() {
    let nodes = std::fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    let n = e.file_name();
                    let n = n.to_string_lossy();
                    n.starts_with("node") && n[4..].parse::<u32>().is_ok()
                })
                .count()
        })
        .unwrap_or(0);
    for on in [true, false] {
        let config = rsmcuda()
            .with("btl_rsmcuda_verbose", "1")
            .with("btl_rsmcuda_numa_placement", if on { "1" } else { "0" });
        let out = run(&config, 2, "p2p_sizes", &["--quick"]);
        out.assert_passed();
        let lines: Vec<&str> = out
            .stderr
            .lines()
            .chain(out.stdout.lines())
            .filter(|l| l.contains("btl:rsmcuda: NUMA placement"))
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "one decision, by the creator\n{}",
            out.report()
        );
        let expected = match (on, nodes) {
            (false, _) => "NUMA placement off: btl_rsmcuda_numa_placement is off",
            (true, 0 | 1) => "NUMA placement off: this machine has a single NUMA node",
            // Bound ranks are placed; mpirun binds 2 ranks to cores by default.
            (true, _) => "NUMA placement: rank 0 -> ",
        };
        assert!(
            lines[0].contains(expected)
                || (on && nodes > 1 && lines[0].contains("no rank is bound within one")),
            "{}\n{}",
            lines[0],
            out.report()
        );
        if on {
            assert!(
                lines[0].contains("topology: Open MPI's hwloc topology"),
                "the topology is Open MPI's own: {}\n{}",
                lines[0],
                out.report()
            );
        }
        let cuda_lines = out
            .stderr
            .lines()
            .chain(out.stdout.lines())
            .filter(|l| l.contains("btl:rsmcuda: CUDA IPC o"))
            .count();
        assert_eq!(
            cuda_lines,
            2,
            "each rank says whether CUDA IPC is on\n{}",
            out.report()
        );
    }
}

/// The same sizes with single copy off: every large message goes through the
/// segment's max fragments (copy in/out pipeline).
#[test]
fn p2p_sizes_without_single_copy() {
    let config = rsmcuda()
        .with("btl_rsmcuda_single_copy", "none")
        .with("btl_rsmcuda_verbose", "1");
    let out = run(&config, 2, "p2p_sizes", &[]);
    out.assert_passed();
    assert_eq!(counter(&out, "single-copy gets"), 0, "{}", out.report());
}

/// With the defaults, large contiguous messages go by CMA get (the counter proves
/// ob1 took the RGET path rather than falling back to copy in/out).
#[test]
fn large_messages_use_single_copy() {
    let config = rsmcuda().with("btl_rsmcuda_verbose", "1");
    let out = run(&config, 2, "p2p_sizes", &["--quick"]);
    out.assert_passed();
    assert!(
        counter(&out, "single-copy gets") > 0,
        "no CMA get happened\n{}",
        out.report()
    );
}

/// The names of the segments this job created, from the creators' verbose lines.
fn counter(out: &JobOutput, label: &str) -> u64 {
    out.stderr
        .lines()
        .filter(|l| l.contains("btl:rsmcuda: finalize"))
        .filter_map(|l| {
            let at = l.find(label)?;
            l[..at].rsplit([' ', '(']).nth(1)?.parse::<u64>().ok()
        })
        .sum()
}

/// 3 senders × 20 000 small messages into one receiver whose FIFO has 16 slots:
/// every byte and the per-sender order are checked, and the pending queues must
/// have been used (the stall counter is what proves the FIFO was full).
#[test]
fn fifo_stress_many_senders_one_receiver() {
    let config = rsmcuda()
        .with("btl_rsmcuda_fifo_size", "16")
        .with("btl_rsmcuda_verbose", "1");
    let out = run(&config, 4, "shm_fifo_stress", &[]);
    out.assert_passed();
    let stalls = counter(&out, "fifo-full stalls");
    assert!(stalls > 0, "the FIFO never filled up\n{}", out.report());
    assert_no_rsmcuda_segment_left(&out, 1);
}

#[test]
fn segment_is_gone_after_a_normal_exit() {
    let config = rsmcuda().with("btl_rsmcuda_verbose", "1");
    let out = run(&config, 4, "p2p_sizes", &["--quick"]);
    out.assert_passed();
    assert_no_rsmcuda_segment_left(&out, 1);
    // Without CUDA in this Open MPI: one line per rank says so, and the job ran.
    let cuda_lines = out.stderr.matches("btl:rsmcuda: CUDA IPC off").count();
    assert_eq!(cuda_lines, 4, "{}", out.report());
}

#[test]
fn segment_is_gone_after_kill_9_of_a_rank() {
    assert_rsmcuda_segment_gone_after_kill_9(
        &rsmcuda().with("btl_rsmcuda_verbose", "1"),
        Duration::from_secs(60),
    );
}

/// Local rank 0 runs without rsmcuda (per-rank MCA environment, MPMD): it never
/// attaches, the two others share a segment of 2 and unlink it, and the job passes
/// over tcp where rsmcuda does not reach.
#[test]
fn a_rank_that_never_attaches_leaks_nothing() {
    let config = McaConfig::new(
        "rsmcuda-partial",
        &[("pml", "ob1"), ("btl_rsmcuda_verbose", "1")],
    );
    let stress = program("shm_fifo_stress");
    let stress = stress.to_str().expect("utf-8 path");
    let out = Job::new(&config, 1, stress)
        .mpirun_args(&["-x", "OMPI_MCA_btl=self,tcp"])
        .args(&[
            "--quick",
            ":",
            "-np",
            "2",
            "-x",
            "OMPI_MCA_btl=self,rsmcuda,tcp",
            stress,
            "--quick",
        ])
        .timeout(Duration::from_secs(120))
        .run();
    out.assert_passed();
    assert!(
        out.stderr.contains(" of 2 ("),
        "the segment should have 2 ranks\n{}",
        out.report()
    );
    assert!(
        out.stderr.contains("did not publish a contact"),
        "the excluded rank should be named\n{}",
        out.report()
    );
    assert_no_rsmcuda_segment_left(&out, 1);
}

/// A FIFO size that is not a power of two is refused at registration with the
/// parameter named; Open MPI then stops at MPI_Init because the BTL list names
/// rsmcuda explicitly.
#[test]
fn bad_fifo_size_is_refused_with_a_clear_message() {
    let config = rsmcuda().with("btl_rsmcuda_fifo_size", "100");
    let out = run(&config, 2, "p2p_sizes", &["--quick"]);
    out.assert_refused_with(&["btl_rsmcuda_fifo_size = 100 is not a power of two"]);
}

/// Every parameter with a range or a set, the generic BTL ones included, refuses a bad
/// value with one message naming it, the value given and what is allowed (ompi_info).
#[test]
fn every_bad_parameter_value_is_reported() {
    let rows = [
        out_of_range("btl_rsmcuda_verbose", "101", "0 and 100"),
        out_of_range("btl_rsmcuda_verbose", "4294967296", "0 and 100"),
        not_a_number("btl_rsmcuda_verbose", "abc", "not a number", "0 and 100"),
        not_a_boolean("btl_rsmcuda_auto_select", "2"),
        out_of_range("btl_rsmcuda_fifo_size", "1", "2 and 16777216"),
        bad(
            "btl_rsmcuda_fifo_size",
            "3",
            "btl_rsmcuda_fifo_size = 3 is not a power of two: it must be a power of two between 2 and 16777216",
        ),
        out_of_range("btl_rsmcuda_free_list_eager", "0", "1 and 1048576"),
        out_of_range("btl_rsmcuda_free_list_max", "2M", "1 and 1048576"),
        out_of_range("btl_rsmcuda_attach_timeout", "9", "10 and 600000"),
        out_of_range("btl_rsmcuda_poll_batch", "-1", "1 and 65536"),
        not_one_of("btl_rsmcuda_single_copy", "xpmem", "none, cma"),
        out_of_range(
            "btl_rsmcuda_single_copy_threshold",
            "-1",
            "0 and 18446744073709551615",
        ),
        not_a_boolean("btl_rsmcuda_use_cuda_ipc", "maybe"),
        not_a_boolean("btl_rsmcuda_use_cuda_ipc_same_gpu", "-1"),
        not_a_number(
            "btl_rsmcuda_cuda_ipc_cache_limit",
            "12x",
            "not a number",
            "0 and 18446744073709551615",
        ),
        out_of_range("btl_rsmcuda_cuda_event_max", "65537", "1 and 65536"),
        not_a_boolean("btl_rsmcuda_numa_placement", "on"),
        // Generic BTL parameters (registered by Open MPI's BTL base): size_t, so the
        // variable system stored 999999999999 as it is and rsmcuda narrowed it to
        // 3567587327 in its segment layout, reported as a /dev/shm problem.
        out_of_range(
            "btl_rsmcuda_eager_limit",
            "999999999999",
            "1 and 1073741824",
        ),
        out_of_range("btl_rsmcuda_eager_limit", "0", "1 and 1073741824"),
        bad(
            "btl_rsmcuda_eager_limit",
            "64k",
            "btl_rsmcuda_eager_limit = 65536 is above btl_rsmcuda_max_send_size = 32768",
        ),
        out_of_range("btl_rsmcuda_max_send_size", "-1", "1 and 1073741824"),
        out_of_range("btl_rsmcuda_rndv_eager_limit", "2G", "0 and 1073741824"),
        out_of_range("btl_rsmcuda_exclusivity", "-1", "0 and 4294967295"),
        not_a_number(
            "btl_rsmcuda_get_limit",
            "lots",
            "not a number",
            "0 and 18446744073709551615",
        ),
    ];
    assert_bad_values_reported("btl", "rsmcuda", &rows);
}

/// A bad value in a job that does not name rsmcuda in its btl list (it competes through
/// btl_rsmcuda_auto_select): rsmcuda says why and steps aside, the job runs on without it.
#[test]
fn a_bad_value_leaves_the_job_to_the_other_btls() {
    let config = McaConfig::new("rsmcuda-bad", &[("pml", "ob1"), ("btl", "^openib,ofi")])
        .with("btl_rsmcuda_auto_select", "1")
        .with("btl_rsmcuda_eager_limit", "999999999999");
    let out = run(&config, 2, "p2p_sizes", &["--quick"]);
    out.assert_passed();
    assert!(
        out.stderr.contains(
            "btl_rsmcuda_eager_limit = 999999999999 is out of range: it must be between 1 and \
             1073741824"
        ) && !out.stderr.contains("/dev/shm"),
        "{}",
        out.report()
    );
}

/// Ranks with different fragment sizes cannot share a segment: the one that differs
/// says why and the job runs over tcp.
#[test]
fn mismatched_eager_limit_is_refused_with_a_clear_message() {
    let config = McaConfig::new("rsmcuda-mismatch", &[("pml", "ob1")]);
    let sizes = program("p2p_sizes");
    let sizes = sizes.to_str().expect("utf-8 path");
    let out = Job::new(&config, 1, sizes)
        .mpirun_args(&["-x", "OMPI_MCA_btl=self,rsmcuda,tcp"])
        .args(&[
            "--quick",
            ":",
            "-np",
            "1",
            "-x",
            "OMPI_MCA_btl=self,rsmcuda,tcp",
            "-x",
            "OMPI_MCA_btl_rsmcuda_eager_limit=8192",
            sizes,
            "--quick",
        ])
        .timeout(Duration::from_secs(120))
        .run();
    out.assert_passed();
    assert!(
        out.stderr.contains("created with")
            && out.stderr.contains("btl_rsmcuda_eager_limit is 8192"),
        "{}",
        out.report()
    );
}

/// The pids of a job's processes (spawned ones included), from their verbose init lines.
fn pids(out: &JobOutput) -> Vec<u32> {
    out.stderr
        .lines()
        .filter_map(|l| l.split("btl:rsmcuda: init, pid ").nth(1))
        .filter_map(|p| p.trim().parse().ok())
        .collect()
}

/// Every segment the job created is gone from /dev/shm, and no `rsmcuda-*` entry names
/// one of its processes (job segments carry the creator's pid, pair segments the
/// creator's pid too), once every process has exited (ranks of a killed mpirun exit
/// by themselves within seconds).
fn assert_nothing_left(out: &JobOutput) {
    let pids = pids(out);
    assert!(!pids.is_empty(), "no init lines\n{}", out.report());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while pids
        .iter()
        .any(|p| Path::new(&format!("/proc/{p}/cmdline")).exists())
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    for name in rsmcuda_segments_created(out) {
        let path = Path::new("/dev/shm").join(name.trim_start_matches('/'));
        assert!(
            !path.exists(),
            "{} left behind\n{}",
            path.display(),
            out.report()
        );
    }
    let left: Vec<String> = std::fs::read_dir("/dev/shm")
        .expect("/dev/shm")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("rsmcuda-"))
        .filter(|n| pids.iter().any(|p| n.contains(&format!("-{p}-"))))
        .collect();
    assert!(
        left.is_empty(),
        "left in /dev/shm: {left:?}\n{}",
        out.report()
    );
}

fn spawn_job(config: &McaConfig, ranks: u32, mode: &str, timeout: u64) -> JobOutput {
    Job::new(
        &config.clone().with("btl_rsmcuda_verbose", "1"),
        ranks,
        program("rsmcuda_spawn"),
    )
    .args(&[&format!("--mode={mode}")])
    .timeout(Duration::from_secs(timeout))
    .run()
}

/// Lines saying this many pair segments (with a process of another job) were created.
fn pairs_created(out: &JobOutput) -> usize {
    out.stderr
        .lines()
        .filter(|l| l.contains("btl:rsmcuda: created segment") && l.contains("shared with process"))
        .count()
}

/// The bug: a 1-rank job that MPI_Comm_spawn_multiple's 1 + 2 children saw its first
/// local peers at spawn time, counted them into a 4-member segment the children (who
/// had formed their own) never attached to, and hung with `self,rsmcuda,tcp`
/// (unreachable with `self,rsmcuda`). Now the children's job has its own segment and
/// the parent one pair segment with each child, with and without tcp, at 1 and 2
/// parent ranks.
#[test]
fn spawn_multiple_from_one_rank_reaches_every_child() {
    for btl in ["self,rsmcuda", "self,rsmcuda,tcp"] {
        for ranks in [1, 2] {
            let config = McaConfig::new("rsmcuda-spawn", &[("pml", "ob1"), ("btl", btl)]);
            let out = spawn_job(&config, ranks, "multiple", 60);
            out.assert_passed();
            assert_eq!(pairs_created(&out), 3 * ranks as usize, "{}", out.report());
            assert_nothing_left(&out);
        }
    }
}

/// Two spawned jobs meet with MPI_Comm_connect/accept and talk through rsmcuda alone:
/// every process of A has a pair segment with every process of B.
#[test]
fn connect_accept_between_spawned_jobs_uses_rsmcuda() {
    let out = spawn_job(&rsmcuda(), 1, "connect", 60);
    out.assert_passed();
    // parent-A 2, parent-B 2, A-B 4
    assert_eq!(pairs_created(&out), 8, "{}", out.report());
    assert_nothing_left(&out);
}

/// Two spawned jobs that never connected, joined by MPI_Intercomm_create through their
/// parent: Open MPI leaves their locality unknown (not local), so rsmcuda reads it from
/// the contacts (same node) and meets them. Before, with rsmcuda alone, the job stopped
/// with "unable to reach each other" (and hung there).
#[test]
fn intercomm_create_between_jobs_that_never_connected_uses_rsmcuda() {
    let out = spawn_job(&rsmcuda(), 1, "bridge", 60);
    out.assert_passed();
    // parent-A, parent-B, A-B
    assert_eq!(pairs_created(&out), 3, "{}", out.report());
    assert_nothing_left(&out);
}

/// Children with other fragment sizes cannot share a segment with the parent: both
/// sides see it from the contacts and leave each other unreachable at once (no wait).
/// With tcp the job passes over tcp; with rsmcuda alone Open MPI says the processes
/// cannot reach each other, like vader, and nothing hangs.
#[test]
fn another_job_with_other_sizes_is_left_to_another_btl() {
    let with_tcp = McaConfig::new(
        "rsmcuda-spawn-tcp",
        &[("pml", "ob1"), ("btl", "self,rsmcuda,tcp")],
    );
    let out = spawn_job(&with_tcp, 1, "mismatch", 60);
    out.assert_passed();
    assert_eq!(pairs_created(&out), 0, "{}", out.report());
    assert!(
        out.stderr.contains("uses other fragment sizes"),
        "{}",
        out.report()
    );
    assert_nothing_left(&out);
    let out = spawn_job(&rsmcuda(), 1, "mismatch", 60);
    out.assert_refused_with(&["unable to reach each other"]);
    assert_nothing_left(&out);
}

/// A child that calls MPI_Abort, and a job killed while its processes wait forever:
/// nothing of either is left in /dev/shm.
#[test]
fn aborted_and_killed_dynamic_jobs_leave_nothing() {
    let out = spawn_job(&rsmcuda(), 1, "abort", 60);
    assert!(
        !out.succeeded()
            && !out.timed_out
            && out.stderr.contains("child 1 calls MPI_Abort")
            && !out.stderr.contains("panicked"),
        "{}",
        out.report()
    );
    assert_nothing_left(&out);
    let out = spawn_job(&rsmcuda(), 1, "hang", 15);
    assert!(
        out.timed_out && out.stdout.contains("waiting forever"),
        "{}",
        out.report()
    );
    assert_eq!(pairs_created(&out), 3, "{}", out.report());
    assert_nothing_left(&out);
}

/// An installed rsmcuda stays out of jobs that do not ask for it: with no btl list, or
/// an exclude list like Debian's, its init returns no module (ob1 used to progress an
/// idle rsmcuda module beside vader in every default job); named, or with
/// btl_rsmcuda_auto_select, it opens one.
#[test]
fn rsmcuda_opens_a_module_only_when_named_or_opted_in() {
    mca_harness::assert_btl_opens_only_when_named("rsmcuda", "self,rsmcuda");
}

/// With a single-copy threshold above some rendezvous sizes, the sender declines to
/// register those buffers and ob1 asks the receiver's side to schedule puts, even on a
/// BTL that advertises only GET: rsmcuda serves them with a CMA write (before, its NULL
/// `btl_put` crashed the sender with SIGSEGV). Every byte is checked.
#[test]
fn ob1_puts_below_the_single_copy_threshold_complete() {
    for threshold in ["100000", "8388608"] {
        let config = rsmcuda()
            .with("btl_rsmcuda_single_copy_threshold", threshold)
            .named(&format!("rsmcuda-threshold-{threshold}"));
        for program in ["p2p_sizes", "sendrecv_sweep"] {
            for ranks in [2, 4] {
                run(&config, ranks, program, &["--quick"]).assert_passed();
            }
        }
    }
}
