//! The rofi MTL (`--mca pml cm --mca mtl rofi`) under real mpirun: the conformance
//! suite on tcp;ofi_rxm in auto mode, the point-to-point programs in each forced tag
//! mode and on the sockets provider, across two namespace hosts, bad parameters,
//! and the parameter documentation.
//!
//! The stock OFI MTL's known defects (tests/conformance.rs: ssend_mrecv hangs,
//! upstream #11327; p2p_cancel_trunc breaks the connection) are not skipped here:
//! rofi must pass both programs.

use std::time::Duration;

use mca_harness::{
    Job, JobOutput, McaConfig, assert_bad_values_reported, assert_every_parameter_has_help,
    conformance_suite, exported_symbols, not_a_boolean, not_a_number, not_one_of, ompi_info_params,
    out_of_range, program,
};

/// rofi with its default provider choice (tcp;ofi_rxm on this machine).
fn rofi() -> McaConfig {
    McaConfig::new("rofi", &[("pml", "cm"), ("mtl", "rofi")])
}

fn rofi_on(provider: &str) -> McaConfig {
    rofi()
        .with("mtl_rofi_provider_include", provider)
        .named(&format!("rofi-{provider}"))
}

/// ssend_mrecv at 2 ranks on `config` twice: at `mtl_rofi_verbose 1`, which must pass
/// (its output says how rofi matches), and with `mtl_rofi_host_matching never`, for
/// the caller to check the refusal of a provider with a known matching defect.
fn verbose_and_never_host_matching(config: McaConfig) -> (JobOutput, JobOutput) {
    let run = |config: McaConfig| {
        Job::new(&config, 2, program("ssend_mrecv"))
            .timeout(Duration::from_secs(120))
            .run()
    };
    let out = run(config.clone().with("mtl_rofi_verbose", "1"));
    out.assert_passed();
    (out, run(config.with("mtl_rofi_host_matching", "never")))
}

fn rofi_tag_mode(mode: &str) -> McaConfig {
    rofi_on("tcp;ofi_rxm")
        .with("mtl_rofi_tag_mode", mode)
        .named(&format!("rofi-tcp-{mode}"))
}

// Everything, 2 and 4 ranks; trunc_large passes too (the stock cm/ofi and ob1 do not).
conformance_suite!(rofi_tcp_auto, rofi(), skip: []);

// The whole suite in each forced layout (auto is ofi_tag_full here): ofi_tag_2 at 2
// and 4 ranks, ofi_tag_1 at 2 (at 4 in the full matrix: `rofi_sockets` below runs that
// layout at 4 ranks in every matrix).
conformance_suite!(
    rofi_tcp_ofi_tag_1,
    rofi_tag_mode("ofi_tag_1"),
    ranks: [2],
    full_matrix_ranks: [4],
    skip: []
);
conformance_suite!(rofi_tcp_ofi_tag_2, rofi_tag_mode("ofi_tag_2"), skip: []);

// The deprecated sockets provider (the only one here with scalable endpoints), in auto
// (ofi_tag_1 there: `sockets_is_refused_the_full_layout`) and in ofi_tag_2 (at 4 ranks
// in the full matrix: tcp's ofi_tag_2 suite runs that layout at 4 in every matrix).
conformance_suite!(rofi_sockets, rofi_on("sockets"), skip: []);
conformance_suite!(
    rofi_sockets_ofi_tag_2,
    rofi_on("sockets")
        .with("mtl_rofi_tag_mode", "ofi_tag_2")
        .named("rofi-sockets-ofi_tag_2"),
    ranks: [2],
    full_matrix_ranks: [4],
    skip: []
);

/// rofi on sockets with a scalable endpoint of `ctxts` contexts.
fn rofi_sep(ctxts: u32, grouping: bool) -> McaConfig {
    rofi_on("sockets")
        .with("mtl_rofi_enable_sep", "1")
        .with("mtl_rofi_num_ctxts", &ctxts.to_string())
        .with("mtl_rofi_thread_grouping", if grouping { "1" } else { "0" })
        .named(&format!(
            "rofi-sockets-sep{ctxts}{}",
            if grouping { "-grouping" } else { "" }
        ))
}

// Scalable endpoint, thread grouping, 4 contexts: the point-to-point programs and
// threads (phase B: one MPI_Comm_dup per thread, so each thread has its own context),
// 2 ranks and 4 (4 x 4 = all 16 contexts sockets has).
conformance_suite!(
    rofi_sockets_sep4_grouping,
    rofi_sep(4, true),
    ranks: [2, 4],
    skip: ["datatypes", "collectives", "checker_selftest", "trunc_large"]
);

// 3 contexts: communicator ids fall unevenly on them (cid modulo 3), and collectives
// run on their own communicators' contexts.
conformance_suite!(
    rofi_sockets_sep3_grouping,
    rofi_sep(3, true),
    ranks: [2],
    skip: ["p2p_sizes", "p2p_matching", "datatypes", "checker_selftest", "trunc_large"]
);

// A scalable endpoint without thread grouping: every communicator on context 0.
conformance_suite!(
    rofi_sockets_sep_single,
    rofi_sep(2, false),
    ranks: [2],
    skip: [
        "p2p_sizes",
        "p2p_matching",
        "p2p_cancel_trunc",
        "datatypes",
        "collectives",
        "checker_selftest",
        "trunc_large"
    ]
);

// udp;ofi_rxd, through host matching (rxd's tagged path is broken: its known_defect in
// rofi-core's provider selection; rxd_gets_host_matching_for_its_known_defect below).
// One job at a time: rxd is slow, and two rxd jobs at once starved each other on this
// 2-core machine. 2 ranks in CI (25 s); 4 ranks pass as well (85 s more).
// p2p_matching (1024 outstanding pairs of mixed sizes) passes alone but hung in 3 of 6
// runs beside a CPU hog (rxd's own retransmission under starvation, not understood; on
// libfabric 2.1 it hangs even alone): left out, as before host matching.
// mprobe_threads (4 threads a rank probing and receiving at once) hung to its 180 s
// limit beside other jobs three times in CI-like runs (2026-11-28 on 5.0.7,
// 2026-12-02 on 4.1.4 and on 5.0.7 beside a background build) and passes alone and
// beside two CPU hogs (30 of 30): the same starvation, so it runs in `make check-all`.
conformance_suite!(
    rofi_rxd,
    rofi_on("udp;ofi_rxd").one_at_a_time(),
    ranks: [2],
    full_matrix_ranks: [],
    full_matrix_programs: ["mprobe_threads"],
    skip: ["p2p_matching"]
);

// shm, single node. Through host matching, as its tagged matching fails rofi's
// matching probe (shm_gets_host_matching_for_the_checks_its_matching_probe_fails):
// the whole suite, 2 and 4 ranks. The stock OFI MTL declines shm.
conformance_suite!(rofi_shm, rofi_on("shm"), skip: []);

// Host matching forced on tcp;ofi_rxm: the same protocol (eager up to the inject size,
// rendezvous reads above) over a network provider, whose inject size differs from shm's.
conformance_suite!(
    rofi_tcp_host_matching,
    rofi_on("tcp;ofi_rxm")
        .with("mtl_rofi_host_matching", "always")
        .named("rofi-tcp-host-matching"),
    ranks: [2],
    skip: []
);

/// libfabric's rxd (1.17 here, 2.1 in tests/libfabric2.rs) loses tagged messages to
/// FI_PEEK|FI_CLAIM probes now and then: p2p_status hung in MPI_Improbe in about one run
/// in four, under rofi's native matching and the stock ofi MTL alike. rofi matches
/// messages itself on rxd (said at verbose 1), and the suite but p2p_matching passes there
/// (`rofi_rxd` above); `mtl_rofi_host_matching never` refuses rxd with the reason.
#[test]
fn rxd_gets_host_matching_for_its_known_defect() {
    let (out, never) = verbose_and_never_host_matching(rofi_on("udp;ofi_rxd").one_at_a_time());
    let log = format!("{}{}", out.stdout, out.stderr);
    assert!(
        log.contains("mtl:rofi: using udp;ofi_rxd [") && log.contains("], host matching (eager"),
        "{}",
        out.report()
    );
    never.assert_refused_with(
        &[
            "udp;ofi_rxd [",
            "rejected: libfabric's rxd (checked on 1.17 and 2.1) loses tagged messages to FI_PEEK|FI_CLAIM probes",
            "mtl_rofi_host_matching never forbids working around it",
        ],
    );
}

// The suite forces host matching on tcp at 2 ranks; the matched-probe and status
// programs (the probe outputs live partly in host matching's own code) at 4 too.
#[test]
fn probe_outputs_with_host_matching_forced_at_four_ranks() {
    let config = rofi_on("tcp;ofi_rxm")
        .with("mtl_rofi_host_matching", "always")
        .named("rofi-tcp-host-matching");
    for name in ["mprobe_threads", "p2p_status"] {
        mca_harness::conformance::run_program(&config, name, &[4]);
    }
}

conformance_suite!(
    rofi_tcp_two_hosts,
    rofi_on("tcp;ofi_rxm").across_hosts(2),
    ranks: [2],
    skip: ["p2p_matching", "datatypes", "collectives", "checker_selftest", "trunc_large"]
);

// Host matching between the namespace hosts: rendezvous reads (fi_read) cross the veth.
conformance_suite!(
    rofi_tcp_two_hosts_host_matching,
    rofi_on("tcp;ofi_rxm")
        .with("mtl_rofi_host_matching", "always")
        .named("rofi-tcp-host-matching")
        .across_hosts(2),
    ranks: [2],
    skip: []
);

/// A plain `--mca pml cm --mca mtl rofi` picks tcp;ofi_rxm and the full tag layout,
/// and reports its counters at finalize.
#[test]
fn default_selection_is_tcp_rxm_with_the_full_layout() {
    let out = Job::new(
        &rofi().with("mtl_rofi_verbose", "1"),
        2,
        program("ssend_mrecv"),
    )
    .timeout(Duration::from_secs(120))
    .run();
    out.assert_passed();
    let log = format!("{}{}", out.stdout, out.stderr);
    assert!(
        log.contains("mtl:rofi: using tcp;ofi_rxm") && log.contains("tag layout ofi_tag_full"),
        "{}",
        out.report()
    );
    // Its tagged matching was checked before it was used: once for the node, by local
    // rank 0, whose finding the other rank took (rofi_core::provider::shared).
    assert_eq!(
        log.matches("mtl:rofi: matching probe of tcp;ofi_rxm [")
            .count(),
        1,
        "{}",
        out.report()
    );
    assert_eq!(
        log.matches("mtl:rofi: tcp;ofi_rxm [").count(),
        1,
        "{}",
        out.report()
    );
    assert!(
        log.contains("]: took local rank 0's matching probe finding (every check passed, after "),
        "{}",
        out.report()
    );
    assert!(log.contains("): all 7 checks passed"), "{}", out.report());
    assert!(
        log.contains("ssend_acks_sent=") && !log.contains("ssend_acks_sent=0 "),
        "no ACK counted at finalize: {}",
        out.report()
    );
}

/// `mtl_rofi_matching_probe 0` trusts the provider: no probe, tcp;ofi_rxm natively.
#[test]
fn matching_probe_off_trusts_the_provider() {
    let config = rofi().with("mtl_rofi_verbose", "1");
    let config = config.with("mtl_rofi_matching_probe", "0");
    let out = Job::new(&config, 2, program("ssend_mrecv")).run();
    out.assert_passed();
    let log = format!("{}{}", out.stdout, out.stderr);
    let native = !log.contains("matching probe") && log.contains("tag layout ofi_tag_full");
    assert!(native, "{}", out.report());
}

/// Both provider lists set: registration refuses with a message naming both, and
/// the job fails instead of running on a guess.
#[test]
fn include_and_exclude_together_are_refused_clearly() {
    let config = rofi()
        .with("mtl_rofi_provider_include", "tcp")
        .with("mtl_rofi_provider_exclude", "shm");
    let out = Job::new(&config, 2, program("checker_selftest"))
        .timeout(Duration::from_secs(60))
        .run();
    assert!(!out.succeeded(), "{}", out.report());
    assert!(!out.timed_out, "{}", out.report());
    let log = format!("{}{}", out.stdout, out.stderr);
    assert!(
        log.contains("mutually exclusive")
            && log.contains("mtl_rofi_provider_include")
            && log.contains("mtl_rofi_provider_exclude"),
        "{}",
        out.report()
    );
}

/// Every parameter with a range or a set refuses a bad value with one message naming
/// it, the value given and what is allowed (ompi_info).
#[test]
fn every_bad_parameter_value_is_reported() {
    let rows = [
        out_of_range("mtl_rofi_priority", "-1", "0 and 100"),
        not_a_number("mtl_rofi_priority", "high", "not a number", "0 and 100"),
        not_a_boolean("mtl_rofi_auto_select", "maybe"),
        out_of_range("mtl_rofi_verbose", "4294967297", "0 and 100"),
        not_one_of(
            "mtl_rofi_tag_mode",
            "ofi_tag_9",
            "auto, ofi_tag_1, ofi_tag_2, ofi_tag_full",
        ),
        out_of_range("mtl_rofi_progress_event_cnt", "0", "1 and 4096"),
        not_a_boolean("mtl_rofi_rxm_dyn_rbuf", "3"),
        out_of_range("mtl_rofi_rxm_min_recv", "-1", "0 and 16777216"),
        not_a_number(
            "mtl_rofi_rxm_min_recv",
            "99999999999999999999",
            "too large",
            "0 and 16777216",
        ),
        not_a_boolean("mtl_rofi_isend_inject", "x"),
        not_a_boolean("mtl_rofi_bsend_copy", "2"),
        not_a_boolean("mtl_rofi_enable_sep", "5"),
        not_a_boolean("mtl_rofi_thread_grouping", "on"),
        out_of_range("mtl_rofi_num_ctxts", "0", "1 and 4096"),
        not_one_of("mtl_rofi_host_matching", "sometimes", "auto, always, never"),
        out_of_range("mtl_rofi_host_eager_size", "2M", "0 and 1048576"),
    ];
    assert_bad_values_reported("mtl", "rofi", &rows);
}

/// A bad value in a job that does not name rofi (it competes through
/// mtl_rofi_auto_select): rofi says why and steps aside, the job runs on ob1.
/// (Named in the mtl list, a component that refuses its parameters stops MPI_Init.)
#[test]
fn a_bad_value_leaves_the_job_to_the_other_transports() {
    let config = McaConfig::new("rofi-bad", &[("btl", "^openib,ofi")])
        .with("mtl_rofi_auto_select", "1")
        .with("mtl_rofi_tag_mode", "ofi_tag_9");
    let out = Job::new(&config, 2, program("p2p_sizes"))
        .args(&["--quick"])
        .timeout(Duration::from_secs(120))
        .run();
    out.assert_passed();
    assert!(
        out.stderr.contains(
            "mtl_rofi_tag_mode = \"ofi_tag_9\" is not one of: auto, ofi_tag_1, ofi_tag_2, ofi_tag_full"
        ),
        "{}",
        out.report()
    );
}

/// A provider that does not exist: rofi declines with the list of candidates and
/// why each was passed over; cm then fails cleanly (no crash, no hang).
#[test]
fn a_nonexistent_provider_declines_cleanly() {
    let out = Job::new(&rofi_on("nosuchprov"), 2, program("checker_selftest"))
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_refused_with(&[
        "found no libfabric provider it can use",
        "tcp;ofi_rxm",
        "not in mtl_rofi_provider_include",
    ]);
    let log = format!("{}{}", out.stdout, out.stderr);
    assert!(!log.contains("Segmentation fault"), "{}", out.report());
}

/// A forced tag mode is the layout used, with its own MPI_TAG_UB.
#[test]
fn a_forced_layout_is_the_one_used() {
    let out = Job::new(
        &rofi_tag_mode("ofi_tag_2").with("mtl_rofi_verbose", "1"),
        2,
        program("checker_selftest"),
    )
    .timeout(Duration::from_secs(60))
    .run();
    out.assert_passed();
    let log = format!("{}{}", out.stdout, out.stderr);
    assert!(
        log.contains("tag layout ofi_tag_2, max tag 524287"),
        "{}",
        out.report()
    );
}

/// sockets takes a message from a sender not yet in its address vector as coming from
/// anyone, so rofi does not match the source by address there: auto is ofi_tag_1 (the
/// source in the tag) and a forced ofi_tag_full is refused with the reason.
#[test]
fn sockets_is_refused_the_full_layout() {
    let run = |config: McaConfig| {
        Job::new(&config, 2, program("checker_selftest"))
            .timeout(Duration::from_secs(60))
            .run()
    };
    let auto = run(rofi_on("sockets").with("mtl_rofi_verbose", "1"));
    auto.assert_passed();
    let log = format!("{}{}", auto.stdout, auto.stderr);
    assert!(log.contains("tag layout ofi_tag_1,"), "{}", auto.report());
    run(rofi_on("sockets").with("mtl_rofi_tag_mode", "ofi_tag_full")).assert_refused_with(&[
        "sockets [",
        "not yet in the address vector",
        "use tag mode auto, ofi_tag_1 or ofi_tag_2",
    ]);
}

/// MPI_Cancel of receives racing their completion in another thread (which delivers
/// it): every message arrives once, intact, cancelled or not. On tcp;ofi_rxm, on
/// sockets with thread grouping, and on shm (host matching: cancel races the matcher).
#[test]
fn cancel_racing_completion_under_thread_multiple() {
    for config in [rofi(), rofi_sep(4, true), rofi_on("shm")] {
        // About 2 s on sockets since rofi asks for manual progress (25 s before, when
        // the provider's own thread competed with the spinning ones): room to spare.
        let out = Job::new(&config, 2, program("cancel_race"))
            .timeout(Duration::from_secs(300))
            .run();
        out.assert_passed();
    }
}

/// Thousands of tiny MPI_Sendrecv (to self on MPI_COMM_SELF, then around the ring:
/// mpi4py's test_msgspec array pattern), every array verified, on tcp;ofi_rxm, on
/// sockets, on sockets with a scalable endpoint and on shm; every process reports manual data
/// progress. Under sockets' default (auto) progress its own thread moved the data
/// while the MPI thread spun beside it on the same core: 65 s instead of under one
/// for this program, and mpi4py's testArray5/6 looked hung.
#[test]
fn tiny_sendrecv_sweep_progresses_manually() {
    for config in [
        rofi(),
        rofi_on("sockets"),
        rofi_sep(4, true),
        rofi_on("shm"),
    ] {
        let out = Job::new(
            &config.clone().with("mtl_rofi_verbose", "1"),
            2,
            program("sendrecv_sweep"),
        )
        .run();
        out.assert_passed();
        let log = format!("{}{}", out.stdout, out.stderr);
        assert_eq!(
            log.matches(", manual progress, ").count(),
            2,
            "{}: {}",
            config.name,
            out.report()
        );
    }
}

/// With thread grouping, each process opens the contexts asked for and the threads'
/// traffic reaches every one of them (phase B: four MPI_Comm_dup, consecutive ids).
#[test]
fn thread_grouping_opens_the_contexts_asked_for() {
    let out = Job::new(
        &rofi_sep(4, true).with("mtl_rofi_verbose", "1"),
        2,
        program("threads"),
    )
    .timeout(Duration::from_secs(300))
    .run();
    out.assert_passed();
    let log = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(
        log.matches("mtl:rofi: using sockets").count(),
        2,
        "{}",
        out.report()
    );
    assert_eq!(
        log.matches("scalable endpoint with 4 context(s), thread grouping")
            .count(),
        2,
        "{}",
        out.report()
    );
    let per_ctx: Vec<Vec<u64>> = log
        .lines()
        .filter_map(|l| l.split("completions per context: ").nth(1))
        .map(|v| v.trim().split('/').map(|n| n.parse().unwrap()).collect())
        .collect();
    assert_eq!(per_ctx.len(), 2, "{}", out.report());
    for counts in per_ctx {
        assert!(
            counts.len() == 4 && counts.iter().all(|&n| n > 0),
            "a context carried nothing: {counts:?}\n{}",
            out.report()
        );
    }
}

/// More contexts than this process's share of the provider's (16 on sockets, 2
/// processes: 8 each): a warning, then each process runs with its share.
#[test]
fn contexts_beyond_the_share_are_reduced_with_a_warning() {
    let out = Job::new(
        &rofi_sep(12, true).with("mtl_rofi_verbose", "1"),
        2,
        program("ssend_mrecv"),
    )
    .timeout(Duration::from_secs(120))
    .run();
    out.assert_passed();
    let log = format!("{}{}", out.stdout, out.stderr);
    assert!(
        log.contains("asked for 12 scalable-endpoint contexts")
            && log.matches("scalable endpoint with 8 context(s)").count() == 2,
        "{}",
        out.report()
    );
}

/// More contexts than one endpoint of any provider has: refused with the reason,
/// no provider chosen, the job fails cleanly.
#[test]
fn more_contexts_than_the_provider_has_are_refused() {
    let out = Job::new(&rofi_sep(17, true), 2, program("checker_selftest"))
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_refused_with(&["mtl_rofi_num_ctxts=17 exceeds the provider's 16 contexts"]);
}

/// Scalable endpoints on a provider without them (tcp;ofi_rxm: one context per
/// endpoint): refused with the reason.
#[test]
fn scalable_endpoints_on_tcp_are_refused() {
    let config = rofi_on("tcp;ofi_rxm")
        .with("mtl_rofi_enable_sep", "1")
        .with("mtl_rofi_num_ctxts", "2");
    let out = Job::new(&config, 2, program("checker_selftest"))
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_refused_with(&[
        "tcp;ofi_rxm",
        "scalable endpoints unavailable: the provider offers 1 context",
    ]);
}

/// Thread grouping without a scalable endpoint: refused at registration.
#[test]
fn thread_grouping_without_sep_is_refused() {
    let config = rofi_on("sockets").with("mtl_rofi_thread_grouping", "1");
    let out = Job::new(&config, 2, program("checker_selftest"))
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_refused_with(&["mtl_rofi_thread_grouping requires mtl_rofi_enable_sep=1"]);
}

/// The running libfabric's `(major, minor)`, from `fi_info --version`.
fn libfabric_version() -> (u32, u32) {
    let out = std::process::Command::new("fi_info")
        .arg("--version")
        .output()
        .expect("fi_info --version");
    let text = String::from_utf8_lossy(&out.stdout);
    let v = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("libfabric:"))
        .unwrap_or_else(|| panic!("no libfabric version in {text}"));
    let mut parts = v.trim().split('.').map(|p| p.parse::<u32>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}

/// shm's tagged matching as rofi's matching probe finds it: before libfabric 1.19 (this
/// machine's 1.17) a receive with ignore bits never takes an unexpected message, an
/// exact receive takes another tag's, FI_PEEK/FI_CLAIM are receives into no buffer (the
/// truncation checks are then not run): rofi matches messages itself on shm, and
/// `never` refuses shm naming the failed checks. Later ones (2.1, tests/libfabric2.rs)
/// only lose the CQ data of truncated receives, and a receive with an overflow sink is
/// never truncated: shm's own matching with the sink, `never` accepted. Local rank 0
/// probes, the other rank takes its finding; the verbose output names each failed check.
/// (The stock OFI MTL never selects shm: its hints ask for FI_REMOTE_COMM.)
#[test]
fn shm_gets_host_matching_for_the_checks_its_matching_probe_fails() {
    let (out, never) = verbose_and_never_host_matching(rofi_on("shm"));
    let log = format!("{}{}", out.stdout, out.stderr);
    let old = libfabric_version() < (1, 19);
    let (expected, taken) = if old {
        (
            vec![
                "using shm [shm], host matching (eager up to 16320 B, then fi_read)",
                "4 of 5 checks failed (truncation_posted, truncation_unexpected not run after \
                 a failed matching check)",
                "FAIL ignore_after_exact: timed out waiting for the completion of tag 0x142",
                "FAIL exact_after_any: got a completion for receive 0 with tag 0x20",
                "FAIL peek: got an FI_ETRUNC error entry",
                "FAIL peek_claim: ",
            ],
            "(failed: ",
        )
    } else {
        (
            vec![
                "an overflow sink behind every receive (the provider's truncation is wrong",
                "2 of 9 checks failed, the overflow checks passed",
                "FAIL truncation_posted: got an FI_ETRUNC error entry",
                "FAIL truncation_unexpected: ",
            ],
            "(matching right, truncation wrong but kept away by an overflow sink",
        )
    };
    let probes = log.matches("mtl:rofi: matching probe of shm [shm] on libfabric ");
    assert_eq!(probes.count(), 1, "{}", out.report());
    let taken_line =
        format!("mtl:rofi: shm [shm]: took local rank 0's matching probe finding {taken}");
    let taken = log.matches(&taken_line);
    assert_eq!(taken.count(), 1, "{}", out.report());
    for line in expected {
        assert!(log.contains(line), "{line:?} missing: {}", out.report());
    }
    assert!(!log.contains("FAIL remote_cq_data"), "{}", out.report());
    if !old {
        never.assert_passed();
        return;
    }
    never.assert_refused_with(&[
        "shm [shm]: rejected: rofi's matching probe found its tagged matching wrong: \
         ignore_after_exact (receives with ignore bits miss unexpected messages",
        "mtl_rofi_host_matching never forbids working around it",
    ]);
}

/// Context ids freed and reused by communicators whose ranks name other processes
/// (an intercommunicator, a dup, a reversed split): every message is delivered and
/// verified, on the tagged path and with host matching (shm, and forced on tcp), whose
/// per-process message numbering once named the intercommunicator's sender by the
/// remote process and hung (seen in mpi4py's test_cco_obj first).
#[test]
fn communicators_reusing_context_ids_keep_their_traffic_apart() {
    let host_tcp = rofi().with("mtl_rofi_host_matching", "always");
    for config in [rofi(), rofi_on("shm"), host_tcp] {
        for ranks in [2, 3, 4] {
            Job::new(&config, ranks, program("comm_reuse"))
                .timeout(Duration::from_secs(120))
                .run()
                .assert_passed();
        }
    }
}

/// Host matching cannot spread communicators over scalable-endpoint contexts: asking
/// for both is refused with the reason.
#[test]
fn host_matching_with_scalable_endpoints_is_refused() {
    let out = Job::new(
        &rofi_sep(2, false).with("mtl_rofi_host_matching", "always"),
        2,
        program("ssend_mrecv"),
    )
    .timeout(Duration::from_secs(120))
    .run();
    out.assert_refused_with(&["uses one endpoint context, and scalable endpoints were requested"]);
}

/// `ompi_info --param mtl rofi --level 9` documents every parameter.
#[test]
fn ompi_info_documents_every_parameter() {
    let text = ompi_info_params("mtl", "rofi");
    assert_every_parameter_has_help(&text, "mtl_rofi_");
    for name in [
        "mtl_rofi_priority",
        "mtl_rofi_auto_select",
        "mtl_rofi_verbose",
        "mtl_rofi_provider_include",
        "mtl_rofi_provider_exclude",
        "mtl_rofi_tag_mode",
        "mtl_rofi_progress_event_cnt",
        "mtl_rofi_rxm_dyn_rbuf",
        "mtl_rofi_rxm_min_recv",
        "mtl_rofi_isend_inject",
        "mtl_rofi_bsend_copy",
        "mtl_rofi_enable_sep",
        "mtl_rofi_thread_grouping",
        "mtl_rofi_num_ctxts",
        "mtl_rofi_host_matching",
        "mtl_rofi_host_eager_size",
        // MPI_T performance variables
        "mtl_rofi_sends",
        "mtl_rofi_injects",
        "mtl_rofi_ssend_acks_sent",
        "mtl_rofi_eagain_retries",
        "mtl_rofi_errors",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    assert!(
        text.contains("ofi_tag_full") && text.contains("mutually exclusive"),
        "{text}"
    );
}

/// Across two namespace hosts rofi runs on the veth network (not loopback, not shm:
/// the job is not single-node) and the synchronous-send ACKs cross it.
#[test]
fn two_hosts_use_the_veth_network() {
    let config = rofi()
        .with("mtl_rofi_verbose", "1")
        .named("rofi-verbose")
        .across_hosts(2);
    let out = Job::new(&config, 2, program("ssend_mrecv"))
        .timeout(Duration::from_secs(120))
        .run();
    out.assert_passed();
    let log = format!("{}{}", out.stdout, out.stderr);
    assert!(
        log.matches("mtl:rofi: using tcp;ofi_rxm [10.77.").count() == 2,
        "{}",
        out.report()
    );
}

/// The shared object exports exactly the component structure.
#[test]
fn only_the_component_symbol_is_exported() {
    assert_eq!(
        exported_symbols("mca_mtl_rofi.so"),
        ["mca_mtl_rofi_component"]
    );
}

/// libfabric is loaded when rofi first needs it (its query, once named), and stays
/// loaded (ffi/fabric-sys/shim/load.c), not as a dependency of the shared object.
#[test]
fn libfabric_is_not_a_dependency_of_the_shared_object() {
    mca_harness::assert_libfabric_not_needed("mca_mtl_rofi.so");
}

/// Persistent buffered sends started again (`tests/programs/persistent_bsend.c`: a
/// restart before the receiver took the previous message, one after, and the first in
/// 4 threads; the payload changes on every start). Open MPI 4.1.4's cm crashes or errs
/// in the first (`mca_pml_cm_start` builds the new request with the packed byte count
/// as element count) and resends the previous payload in the second; rofi packs every
/// start itself and completes the send when posted (`mtl_rofi_bsend_copy`), so cm never
/// takes either path. On tcp;ofi_rxm (1, 2, 3 ranks), sockets, and with host matching
/// (shm, where it is auto, 2 and 3 ranks; forced on tcp;ofi_rxm), whose detached sends
/// cover the eager message sent with a completion (8 KiB) and the rendezvous (16 KiB
/// and up). The threaded stream (part D) has its own test below.
#[test]
fn persistent_buffered_sends_restart_with_fresh_data() {
    let host_tcp = rofi_on("tcp;ofi_rxm")
        .with("mtl_rofi_host_matching", "always")
        .named("rofi-tcp-host-matching");
    let runs: [(McaConfig, u32, &[&str]); 7] = [
        (rofi(), 2, &[]),
        (rofi(), 1, &["--quick"]),
        (rofi(), 3, &["--quick"]),
        (rofi_on("sockets"), 2, &["--quick"]),
        (rofi_on("shm"), 2, &[]),
        (rofi_on("shm"), 3, &["--quick"]),
        (host_tcp, 2, &[]),
    ];
    for (config, ranks, args) in runs {
        Job::new(&config, ranks, program("persistent_bsend"))
            .args(&[args, &["--parts=ABC"]].concat())
            .timeout(Duration::from_secs(120))
            .run()
            .assert_passed();
    }
}

/// MPICH's threaded persistent buffered send case, our own program
/// (`persistent_bsend.c` part D): 4 threads per rank, each starting one persistent
/// buffered send of 4 Mi MPI_INT 8 times back to back into its partner's persistent
/// receive, with an attached buffer of exactly the 32 messages in flight. rofi used to
/// take its copy's slot while cm still held its own, so threads starting at once left
/// the last MPI_Start no room: MPI_ERR_BUFFER, which 4.1.4's MPI_Start returns without
/// calling the error handler, and MPICH's test then hung in MPI_Wait. Now the request
/// completes (cm frees its slot) before the copy is taken. On tcp;ofi_rxm and shm (host
/// matching) at 2 ranks, and at 3 (a rank paired with itself) with 1 MiB messages.
#[test]
fn threaded_persistent_bsend_stream_with_a_buffer_of_exactly_its_messages() {
    let runs: [(McaConfig, u32, &[&str]); 3] = [
        (rofi(), 2, &[]),
        (rofi_on("shm"), 2, &[]),
        (rofi_on("shm"), 3, &["--quick"]),
    ];
    for (config, ranks, args) in runs {
        Job::new(&config, ranks, program("persistent_bsend"))
            .args(&[args, &["--parts=D"]].concat())
            .timeout(Duration::from_secs(150))
            .run()
            .assert_passed();
    }
}

/// Without rofi's copy (`mtl_rofi_bsend_copy 0`) a restart after the receiver took
/// the previous message sends that message's bytes again: cm's defect, shown through
/// rofi, on the tagged path and with host matching (shm).
#[test]
fn without_the_bsend_copy_cm_resends_stale_data() {
    for config in [rofi(), rofi_on("shm")] {
        let out = Job::new(
            &config.with("mtl_rofi_bsend_copy", "0"),
            2,
            program("persistent_bsend"),
        )
        .args(&["--parts=B"])
        .timeout(Duration::from_secs(60))
        .run();
        assert!(!out.succeeded() && !out.timed_out, "{}", out.report());
        assert!(
            out.stdout.contains("FAIL persistent_bsend"),
            "{}",
            out.report()
        );
    }
}

/// Known upstream defects in Open MPI 4.1.4's cm PML, shown with the stock OFI MTL:
/// a persistent buffered send restarted before the receiver took the previous message
/// reads 4x its buffer (segfault in opal_convertor_pack from mca_pml_cm_start, or
/// MPI_Start returning MPI_ERR_BUFFER and the request never completing, or a message 4x
/// too long: MPI_ERR_TRUNCATE), and one restarted after it resends the previous payload
/// (fixed upstream by open-mpi/ompi#12797, in 4.1.x by #14366); the threaded stream
/// (part D) gets 4x messages or a segfault. ob1 handles the first (its restart path
/// keeps the element count): the report's scenario and the stream run clean there.
#[test]
fn stock_cm_mishandles_restarted_persistent_bsends() {
    for parts in ["--parts=A", "--parts=B", "--parts=C", "--parts=D"] {
        // A part takes a few seconds where it works (stock tcp below): 15 s is a hang.
        let out = Job::new(&McaConfig::stock_ofi_tcp(), 2, program("persistent_bsend"))
            .args(&[parts])
            .timeout(Duration::from_secs(15))
            .run();
        assert!(
            !out.succeeded(),
            "the known defect no longer shows ({parts}): {}",
            out.report()
        );
    }
    Job::new(&McaConfig::stock_tcp(), 2, program("persistent_bsend"))
        .args(&["--parts=ACD"])
        .timeout(Duration::from_secs(60))
        .run()
        .assert_passed();
}

/// Which PML a job ran, from `pml_base_verbose` (each rank prints its selection).
fn selected_pml(out: &JobOutput) -> Vec<String> {
    let log = format!("{}{}", out.stdout, out.stderr);
    log.lines()
        .filter_map(|l| l.split("select: component ").nth(1))
        .filter_map(|rest| rest.strip_suffix(" selected"))
        .map(str::to_owned)
        .collect()
}

/// An installed rofi stays out of jobs that do not ask for it: with build/mca in the
/// component path and no --mca pml/mtl, a job runs ob1 as before (4.1.4's cm takes its
/// MTL's priority, and rofi's 20 used to tie ob1's and win); naming rofi alone in the
/// mtl list (priority 25) or mtl_rofi_auto_select brings cm + rofi.
#[test]
fn rofi_competes_only_when_named_or_opted_in() {
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 3] = [
        ("default", &[], "ob1"),
        ("named", &[("mtl", "rofi")], "cm"),
        ("opted-in", &[("mtl_rofi_auto_select", "1")], "cm"),
    ];
    for (name, params, pml) in cases {
        let config = McaConfig::new(name, params).with("pml_base_verbose", "10");
        let out = Job::new(&config, 2, program("p2p_sizes"))
            .args(&["--quick"])
            .timeout(Duration::from_secs(120))
            .run();
        out.assert_passed();
        assert_eq!(selected_pml(&out), [pml, pml], "{name}: {}", out.report());
    }
}
