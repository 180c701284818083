//! The rusnic BTL under real mpirun: the conformance suite on both backends, under
//! in-process fault injection, under nftables loss on its UDP ports, across two
//! namespace hosts, mpi4py, datagrams forged and replayed from outside the job, and the
//! errors users must get instead of a hang.
//!
//! Build first: `make components` (the harness loads build/mca/mca_btl_rusnic.so).

use std::time::{Duration, Instant};

use mca_harness::{
    Job, McaConfig, assert_bad_values_reported, assert_every_parameter_has_help, bad,
    conformance_suite, exported_symbols, not_a_boolean, not_a_number, not_one_of, ompi_info_params,
    out_of_range, program,
};

/// UDP ports reserved for rusnic's loss tests (other suites use other ranges).
const PORT_MIN: &str = "31100";
const PORT_MAX: &str = "31199";

fn rusnic() -> McaConfig {
    McaConfig::new("rusnic", &[("pml", "ob1"), ("btl", "self,rusnic")])
}

fn rusnic_ofi() -> McaConfig {
    rusnic()
        .with("btl_rusnic_backend", "ofi")
        .named("rusnic-ofi")
}

/// Drop, duplicate, reorder and corrupt datagrams inside the sender (parts per million).
fn rusnic_faults() -> McaConfig {
    rusnic()
        .with("btl_rusnic_fault_seed", "20261122")
        .with("btl_rusnic_fault_drop", "20000")
        .with("btl_rusnic_fault_duplicate", "20000")
        .with("btl_rusnic_fault_reorder", "50000")
        .with("btl_rusnic_fault_corrupt", "10000")
        .named("rusnic-faults")
}

fn rusnic_on_ports() -> McaConfig {
    rusnic()
        .with("btl_rusnic_port_min", PORT_MIN)
        .with("btl_rusnic_port_max", PORT_MAX)
}

/// Runs a conformance program with `--quick` (p2p_sizes up to 1 MiB): the lossy runs
/// repair thousands of datagrams and the full 16 MiB sweep would dominate the suite.
fn run_quick(config: &McaConfig, name: &str, ranks: u32) {
    Job::new(config, ranks, program(name))
        .args(&["--quick"])
        .timeout(Duration::from_secs(180))
        .run()
        .assert_passed();
}

fn timed(what: &str, f: impl FnOnce()) {
    let start = Instant::now();
    f();
    println!("{what}: {:.1} s", start.elapsed().as_secs_f64());
}

conformance_suite!(rusnic_native, rusnic(), skip: ["trunc_large"]);
conformance_suite!(rusnic_ofi_backend, rusnic_ofi(), ranks: [2], skip: ["trunc_large"]);

/// Every byte verified while 2 % of datagrams are dropped, 2 % duplicated, 5 %
/// reordered and 1 % corrupted before they reach the socket.
#[test]
fn in_process_faults_lose_no_byte() {
    let cfg = rusnic_faults().with("btl_rusnic_stats", "3600");
    timed("faults p2p_sizes np=2", || run_quick(&cfg, "p2p_sizes", 2));
    timed("faults collectives np=4", || {
        run_quick(&cfg, "collectives", 4)
    });
    let out = Job::new(&cfg, 2, program("p2p_matching"))
        .timeout(Duration::from_secs(120))
        .run();
    out.assert_passed();
    // The final statistics line proves the faults happened and were repaired.
    let text = format!("{}{}", out.stdout, out.stderr);
    let resends = stats_counter(&text, true, "resends ");
    let crc = stats_counter(&text, false, " crc ");
    assert!(
        resends > 0 && crc > 0,
        "no repaired faults visible:\n{text}"
    );
}

/// Sums the counter after `label` (e.g. "put ") over every rank's statistics line, in
/// the sends part (`sends_part`) or the receives part of the line.
fn stats_counter(text: &str, sends_part: bool, label: &str) -> u64 {
    text.lines()
        .filter(|l| l.contains("btl:rusnic rank"))
        .filter_map(|l| {
            let (sends, recvs) = l.split_once(" recvs ")?;
            let part = if sends_part { sends } else { recvs };
            part.split(label)
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Same-node peers leave payload integrity to the loopback by default (the header keeps
/// its CRC); `btl_rusnic_payload_crc always` and fault injection turn payload CRCs on.
/// Every byte is verified either way; the verbose setup line says which applies.
#[test]
fn payload_crc_policy_applies_per_peer() {
    for (cfg, sent) in [
        (rusnic(), "payload CRC off (sent), no (required)"),
        (
            rusnic().with("btl_rusnic_payload_crc", "always"),
            "payload CRC on (sent), yes (required)",
        ),
        (rusnic_faults(), "payload CRC on (sent), no (required)"),
    ] {
        let cfg = cfg.with("btl_rusnic_verbose", "10");
        let out = Job::new(&cfg, 2, program("p2p_sizes"))
            .args(&["--quick"])
            .timeout(Duration::from_secs(180))
            .run();
        out.assert_passed();
        let text = format!("{}{}", out.stdout, out.stderr);
        assert_eq!(text.matches(sent).count(), 2, "{}: {text}", cfg.name);
    }
}

/// Large contiguous messages go through emulated PUT (ob1's RDMA protocol): the bytes
/// land straight in the receive buffer. Every byte is verified with PUT on, and again
/// with PUT taken out of `btl_rusnic_flags` (send/receive pipeline only).
#[test]
fn large_messages_use_emulated_put() {
    let cfg = rusnic().with("btl_rusnic_stats", "3600");
    let out = Job::new(&cfg, 2, program("p2p_sizes"))
        .timeout(Duration::from_secs(180))
        .run();
    out.assert_passed();
    let text = format!("{}{}", out.stdout, out.stderr);
    let (sent, placed) = (
        stats_counter(&text, true, "put "),
        stats_counter(&text, false, "put "),
    );
    assert!(
        sent > 0 && sent == placed,
        "PUT segments sent {sent}, placed {placed}:\n{text}"
    );
    let no_put = cfg
        .with("btl_rusnic_flags", "send,inplace")
        .named("rusnic-no-put");
    let out = Job::new(&no_put, 2, program("p2p_sizes"))
        .timeout(Duration::from_secs(180))
        .run();
    out.assert_passed();
    let text = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(stats_counter(&text, true, "put "), 0, "{text}");
    assert!(stats_counter(&text, true, "chunk ") > 0, "{text}");
}

fn rusnic_with_loss(percent: &str) -> McaConfig {
    rusnic_on_ports().with_loss(&[
        "--percent",
        percent,
        "--proto",
        "udp",
        "--ports",
        &format!("{PORT_MIN}-{PORT_MAX}"),
    ])
}

/// nftables drops 5 % of the datagrams on rusnic's ports; every job finishes.
#[test]
fn nftables_loss_5_percent() {
    let cfg = rusnic_with_loss("5");
    for (name, ranks) in [("p2p_sizes", 2), ("p2p_matching", 2), ("collectives", 4)] {
        timed(&format!("loss5 {name} np={ranks}"), || {
            run_quick(&cfg, name, ranks)
        });
    }
}

/// The lighter and the heavy loss rates of the issue: 1 % and 20 %.
#[test]
fn nftables_loss_1_and_20_percent() {
    for (percent, name) in [
        ("1", "p2p_sizes"),
        ("20", "p2p_sizes"),
        ("20", "p2p_matching"),
    ] {
        let cfg = rusnic_with_loss(percent);
        timed(&format!("loss{percent} {name} np=2"), || {
            run_quick(&cfg, name, 2)
        });
    }
}

/// Two network-namespace hosts over veth: rusnic must pick the shared subnet.
#[test]
fn across_two_namespace_hosts() {
    let cfg = rusnic()
        .with("btl_rusnic_if_include", "10.77.0.0/24")
        .across_hosts(2);
    for (name, ranks) in [("p2p_sizes", 2), ("collectives", 4), ("p2p_matching", 2)] {
        timed(&format!("hosts {name} np={ranks}"), || {
            run_quick(&cfg, name, ranks)
        });
    }
}

/// Contradicting parameters are reported with their names; the job ends at once.
#[test]
fn exclusive_interface_lists_are_rejected() {
    let cfg = rusnic()
        .with("btl_rusnic_if_include", "lo")
        .with("btl_rusnic_if_exclude", "eth0");
    let out = Job::new(&cfg, 2, program("p2p_matching"))
        .timeout(Duration::from_secs(60))
        .run();
    assert!(!out.succeeded(), "{}", out.report());
    assert!(
        out.stderr.contains("mutually exclusive"),
        "{}",
        out.report()
    );
}

/// Every parameter with a range or a set, the generic BTL ones included, refuses a bad
/// value with one message naming it, the value given and what is allowed (ompi_info).
#[test]
fn every_bad_parameter_value_is_reported() {
    let rows = [
        out_of_range("btl_rusnic_verbose", "101", "0 and 100"),
        not_a_boolean("btl_rusnic_auto_select", "2"),
        not_one_of("btl_rusnic_backend", "sctp", "udp-native, ofi"),
        bad(
            "btl_rusnic_ofi_provider",
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "btl_rusnic_ofi_provider = \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\" is invalid: must name one provider",
        ),
        bad(
            "btl_rusnic_if_include",
            "10.0.0.0/33",
            "the prefix length must be 0..32",
        ),
        bad(
            "btl_rusnic_if_exclude",
            "300.1.1.1/8",
            "btl_rusnic_if_exclude = \"300.1.1.1/8\" is invalid",
        ),
        out_of_range("btl_rusnic_port_min", "65536", "0 and 65535"),
        out_of_range("btl_rusnic_port_max", "-1", "0 and 65535"),
        out_of_range("btl_rusnic_mtu", "511", "512 and 65507"),
        out_of_range("btl_rusnic_priority_limit", "9000", "0 and 8192"),
        out_of_range("btl_rusnic_window", "0x10000", "1 and 32768"),
        out_of_range("btl_rusnic_credits", "0", "1 and 32768"),
        out_of_range("btl_rusnic_rto_initial", "0", "1 and 60000000"),
        out_of_range("btl_rusnic_rto_min", "-5", "1 and 60000000"),
        out_of_range("btl_rusnic_rto_max", "99999999999", "1 and 60000000"),
        not_a_number(
            "btl_rusnic_ack_delay",
            "50us",
            "not a number",
            "0 and 1000000",
        ),
        out_of_range("btl_rusnic_ack_every", "0", "1 and 32768"),
        out_of_range("btl_rusnic_dup_ack_threshold", "1001", "1 and 1000"),
        out_of_range("btl_rusnic_max_reassemblies", "2000", "1 and 1024"),
        out_of_range("btl_rusnic_max_queued", "0", "1 and 2147483647"),
        not_a_boolean("btl_rusnic_connectivity_check", "7"),
        out_of_range("btl_rusnic_connectivity_retries", "0", "1 and 100000"),
        out_of_range("btl_rusnic_connectivity_timeout", "0", "1 and 3600000"),
        out_of_range("btl_rusnic_backoff_min", "0", "1 and 60000000"),
        out_of_range("btl_rusnic_backoff_max", "60000001", "1 and 60000000"),
        out_of_range("btl_rusnic_max_timeouts", "-1", "0 and 1000000"),
        out_of_range("btl_rusnic_socket_buffer", "1k", "65536 and 1073741824"),
        out_of_range("btl_rusnic_recv_batch", "1025", "1 and 1024"),
        out_of_range("btl_rusnic_finalize_flush", "-1", "0 and 600000"),
        out_of_range("btl_rusnic_stats", "86401", "0 and 86400"),
        out_of_range("btl_rusnic_fault_seed", "-1", "0 and 2147483647"),
        out_of_range("btl_rusnic_fault_drop", "1000001", "0 and 1000000"),
        out_of_range("btl_rusnic_fault_duplicate", "-1", "0 and 1000000"),
        out_of_range("btl_rusnic_fault_reorder", "2000000", "0 and 1000000"),
        not_a_number(
            "btl_rusnic_fault_corrupt",
            "1.5",
            "not a number",
            "0 and 1000000",
        ),
        not_one_of("btl_rusnic_payload_crc", "never", "always, off-node"),
        // Generic BTL parameters (registered by Open MPI's BTL base).
        out_of_range("btl_rusnic_eager_limit", "99999999999", "1 and 4294967295"),
        out_of_range("btl_rusnic_max_send_size", "0", "1 and 4294967295"),
        out_of_range("btl_rusnic_rndv_eager_limit", "-1", "0 and 4294967295"),
        out_of_range("btl_rusnic_exclusivity", "4294967296", "0 and 4294967295"),
        not_a_number(
            "btl_rusnic_put_limit",
            "abc",
            "not a number",
            "0 and 18446744073709551615",
        ),
        out_of_range(
            "btl_rusnic_rdma_pipeline_frag_size",
            "0",
            "1 and 18446744073709551615",
        ),
        not_a_number(
            "btl_rusnic_rdma_pipeline_send_length",
            "1x",
            "not a number",
            "0 and 18446744073709551615",
        ),
        not_a_number(
            "btl_rusnic_min_rdma_pipeline_size",
            "big",
            "not a number",
            "0 and 18446744073709551615",
        ),
        out_of_range("btl_rusnic_latency", "-1", "0 and 4294967295"),
        out_of_range("btl_rusnic_bandwidth", "5000000000", "0 and 4294967295"),
    ];
    assert_bad_values_reported("btl", "rusnic", &rows);
}

/// A bad value in a job that does not name rusnic in its btl list (it competes through
/// btl_rusnic_auto_select): rusnic says why and steps aside, the job runs on without it.
/// (Named in the list, a component that refuses its parameters stops MPI_Init instead.)
#[test]
fn a_bad_value_leaves_the_job_to_the_other_btls() {
    let config = McaConfig::new("rusnic-bad", &[("pml", "ob1"), ("btl", "^openib,ofi")])
        .with("btl_rusnic_auto_select", "1")
        .with("btl_rusnic_window", "0x10000");
    let out = Job::new(&config, 2, program("p2p_sizes"))
        .args(&["--quick"])
        .timeout(Duration::from_secs(120))
        .run();
    out.assert_passed();
    assert!(
        out.stderr.contains(
            "btl_rusnic_window = 0x10000 is out of range: it must be between 1 and 32768"
        ),
        "{}",
        out.report()
    );
}

/// Ranks with different settings that must agree (the MTU, the payload-CRC policy)
/// cannot talk: a clear message naming the setting, not a hang.
#[test]
fn settings_mismatches_are_reported() {
    let prog = program("p2p_matching");
    let prog = prog.display().to_string();
    for (setting, named) in [
        ("OMPI_MCA_btl_rusnic_mtu=4000", "mtu"),
        ("OMPI_MCA_btl_rusnic_payload_crc=always", "payload_crc"),
    ] {
        let out = Job::new(&rusnic(), 1, &prog)
            .args(&[":", "-np", "1", "env", setting, &prog])
            .timeout(Duration::from_secs(60))
            .run();
        assert!(!out.succeeded(), "{}", out.report());
        assert!(
            out.stderr.contains("configured differently") && out.stderr.contains(named),
            "{setting}: {}",
            out.report()
        );
    }
}

/// A peer that answers nothing (all its datagrams dropped) is reported by the
/// connectivity check and the job aborts instead of hanging.
#[test]
fn unreachable_peer_is_reported() {
    let cfg = rusnic_on_ports()
        .with("btl_rusnic_connectivity_timeout", "50")
        .with("btl_rusnic_connectivity_retries", "10")
        .with_loss(&[
            "--percent",
            "99.99",
            "--proto",
            "udp",
            "--ports",
            &format!("{PORT_MIN}-{PORT_MAX}"),
        ]);
    let out = Job::new(&cfg, 2, program("p2p_matching"))
        .timeout(Duration::from_secs(60))
        .run();
    assert!(!out.succeeded(), "{}", out.report());
    assert!(
        out.stderr.contains("lost its connection") && out.stderr.contains("unreachable"),
        "{}",
        out.report()
    );
}

/// `ompi_info --param btl rusnic --level 9` documents every tunable, with its help.
#[test]
fn ompi_info_documents_every_parameter() {
    let text = ompi_info_params("btl", "rusnic");
    for name in [
        "verbose",
        "auto_select",
        "backend",
        "ofi_provider",
        "if_include",
        "if_exclude",
        "port_min",
        "port_max",
        "mtu",
        "priority_limit",
        "window",
        "credits",
        "rto_initial",
        "rto_min",
        "rto_max",
        "ack_delay",
        "ack_every",
        "tail_probe",
        "rack",
        "dup_ack_threshold",
        "max_reassemblies",
        "max_queued",
        "connectivity_check",
        "connectivity_retries",
        "connectivity_timeout",
        "backoff_min",
        "backoff_max",
        "max_timeouts",
        "socket_buffer",
        "recv_batch",
        "finalize_flush",
        "stats",
        "fault_seed",
        "fault_drop",
        "fault_duplicate",
        "fault_reorder",
        "fault_corrupt",
        "eager_limit",
        "rndv_eager_limit",
        "max_send_size",
    ] {
        assert!(
            text.contains(&format!("parameter \"btl_rusnic_{name}\"")),
            "btl_rusnic_{name} missing from ompi_info:\n{text}"
        );
    }
    assert_every_parameter_has_help(&text, "btl_rusnic_");
}

/// The shared object exports exactly the component structure.
#[test]
fn only_the_component_symbol_is_exported() {
    assert_eq!(
        exported_symbols("mca_btl_rusnic.so"),
        ["mca_btl_rusnic_component"]
    );
}

/// libfabric is loaded when the ofi backend first needs it, not with the component:
/// Open MPI loads rusnic into every job whose btl list does not exclude it, and
/// Debian's libfabric.so.1 costs about 0.2 s to load (ffi/fabric-sys/shim/load.c).
#[test]
fn libfabric_is_not_loaded_with_the_component() {
    mca_harness::assert_libfabric_not_needed("mca_btl_rusnic.so");
}

/// An installed rusnic stays out of jobs that do not ask for it: with no btl list, or an
/// exclude list like Debian's, its init returns no module (so ob1 never progresses an
/// idle rusnic beside vader); named, or with btl_rusnic_auto_select, it opens one.
#[test]
fn rusnic_opens_a_module_only_when_named_or_opted_in() {
    mca_harness::assert_btl_opens_only_when_named("rusnic", "self,vader,rusnic");
}

/// UDP ports of the foreign-datagram tests, one range each so that they may run at the
/// same time (the loss tests use 31100-31199).
const FOREIGN_PORTS: [&str; 2] = ["31700-31719", "31720-31739"];

/// A process outside the job sniffs the job's datagrams on the loopback (ports, sender
/// ids, sequence numbers, an open PUT region) and sends, while the job moves 8 B to
/// 4 MiB messages and verifies every byte: datagrams of valid format and CRC without
/// the key, with a member's sender id and the next sequence numbers, ACKs for
/// everything, PUTs into the open region, and replays of captured datagrams. The job
/// completes with every byte right; every crafted datagram that arrived is counted in
/// `num_foreign_recvs` (pvar and statistics line); the replays are discarded by the
/// receive window as old.
#[test]
fn foreign_datagrams_are_dropped_and_counted() {
    attack_from_outside(rusnic(), FOREIGN_PORTS[0]);
}

/// The same on the libfabric backend (1472-byte datagrams, no in-place receive).
#[test]
fn foreign_datagrams_are_dropped_on_the_ofi_backend() {
    attack_from_outside(rusnic_ofi(), FOREIGN_PORTS[1]);
}

/// Runs `foreign_traffic` with `config` pinned to `ports` while tests/foreign/forge.py
/// attacks it, and checks what the job and the statistics lines say.
fn attack_from_outside(config: McaConfig, ports: &str) {
    let (lo, hi) = ports.split_once('-').expect("a range");
    let cfg = config
        .with("btl_rusnic_port_min", lo)
        .with("btl_rusnic_port_max", hi)
        .with("btl_rusnic_stats", "3600");
    let forge = mca_harness::repo_root().join("tests/foreign/forge.py");
    let attacker = std::process::Command::new("python3")
        .arg(&forge)
        .args(["--ports", ports, "--sniff-seconds", "8"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs tests/foreign/forge.py");
    let out = Job::new(&cfg, 2, program("foreign_traffic"))
        .args(&["--seconds", "6"])
        .timeout(Duration::from_secs(90))
        .run();
    let attack = attacker.wait_with_output().expect("forge.py ends");
    let report = String::from_utf8_lossy(&attack.stdout).into_owned();
    let why = format!(
        "forge.py: {report}{}\n{}",
        String::from_utf8_lossy(&attack.stderr),
        out.report()
    );
    out.assert_passed();
    assert!(attack.status.success(), "nothing captured: {why}");
    let crafted = json_u64(&report, "\"crafted\": ");
    let puts = json_u64(&report, "\"put\": ");
    let replayed_data = json_u64(&report, "\"replay_data\": ");
    let lost = ["RcvbufErrors", "NoPorts"]
        .iter()
        .map(|k| {
            let after = report.split("\"udp_after\"").nth(1).unwrap_or("");
            let before = report.split("\"udp_after\"").next().unwrap_or("");
            let key = format!("\"{k}\": ");
            json_u64(after, &key).saturating_sub(json_u64(before, &key))
        })
        .sum::<u64>();
    assert!(
        crafted >= 600 && puts > 0,
        "too few crafted datagrams: {why}"
    );
    let text = format!("{}{}", out.stdout, out.stderr);
    let foreign = stats_counter(&text, false, " foreign ");
    let old = stats_counter(&text, false, " dup ") + oow_low(&text);
    println!(
        "crafted {crafted} (put {puts}), lost by the kernel {lost}, counted foreign {foreign}, \
         replayed data segments {replayed_data}, data segments seen as old {old}"
    );
    // Every one that arrived is counted, none more. The kernel drops some where the
    // sockets are small (the ofi provider keeps the default buffers: up to half under
    // load); without the check nothing is counted at all.
    assert!(
        foreign + lost >= crafted && foreign <= crafted && foreign > crafted / 4,
        "crafted {crafted}, kernel drops {lost}, counted foreign {foreign}: {why}"
    );
    // The replays passed the key check (they are real datagrams) and the window threw
    // them away: every one is a duplicate or below the window.
    assert!(
        old + lost >= replayed_data,
        "replayed {replayed_data} data segments, {old} seen as old: {why}"
    );
    let info = ompi_info_params("btl", "rusnic");
    assert!(
        info.contains("performance \"btl_rusnic_num_foreign_recvs\""),
        "pvar missing:\n{info}"
    );
}

/// The number after `key` in forge.py's JSON line (0 if absent).
fn json_u64(text: &str, key: &str) -> u64 {
    text.split(key)
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .unwrap_or(0)
}

/// Sum over ranks of the low part of "oow L/H" in the statistics lines.
fn oow_low(text: &str) -> u64 {
    text.lines()
        .filter(|l| l.contains("btl:rusnic rank"))
        .filter_map(|l| {
            l.split(" oow ")
                .nth(1)?
                .split('/')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}
