//! Open MPI 5.0.x where the machine is less kind than a quiet loopback: nftables
//! dropping datagrams on rusnic's ports (and TCP segments on the TCP BTL's, as the
//! control), ranks on two emulated hosts (network namespaces joined by veth; 5.0's
//! mpirun starts its PRRTE daemons through the same rsh agent as 4.1's ORTE), a rank
//! of an rsmcuda job killed with SIGKILL, and rsmcuda's GPU path staying off under
//! 5.0's `null` accelerator. The 4.1 counterparts live in tests/rusnic.rs,
//! tests/rofi.rs, tests/rsmcuda.rs and tests/realism.rs.
//!
//! Every test prints `SKIPPED` and passes when the 5.0 installation or our 5.0 build
//! is missing; `make check-ompi5` builds both and makes a missing one an error.

use std::time::{Duration, Instant};

use mca_harness::ompi5::{self, on_ompi5};
use mca_harness::shm::{assert_no_rsmcuda_segment_left, assert_rsmcuda_segment_gone_after_kill_9};
use mca_harness::{Job, JobOutput, McaConfig};

/// rusnic's UDP ports in these tests (tests/rusnic.rs uses 31100-31199).
const RUSNIC_PORTS: (&str, &str) = ("31200", "31299");
/// The TCP BTL's listening ports here, below the ephemeral range (see tests/realism.rs).
const TCP_FIRST_PORT: u16 = 32000;
const TCP_PORT_COUNT: u16 = 500;

fn rusnic() -> McaConfig {
    on_ompi5(McaConfig::new(
        "rusnic",
        &[("pml", "ob1"), ("btl", "self,rusnic")],
    ))
}

fn rusnic_with_loss(percent: &str) -> McaConfig {
    let (min, max) = RUSNIC_PORTS;
    rusnic()
        .with("btl_rusnic_port_min", min)
        .with("btl_rusnic_port_max", max)
        .with_loss(&[
            "--percent",
            percent,
            "--proto",
            "udp",
            "--ports",
            &format!("{min}-{max}"),
        ])
}

fn rsmcuda() -> McaConfig {
    on_ompi5(McaConfig::new(
        "rsmcuda",
        &[("pml", "ob1"), ("btl", "self,rsmcuda")],
    ))
    .with("btl_rsmcuda_verbose", "1")
}

/// Runs a conformance program with `--quick` (p2p_sizes up to 1 MiB) and checks it.
fn run_quick(config: &McaConfig, name: &str, ranks: u32) -> JobOutput {
    let started = Instant::now();
    let out = Job::new(config, ranks, config.program(name))
        .args(&["--quick"])
        .timeout(Duration::from_secs(240))
        .run();
    out.assert_passed();
    println!(
        "{} {name} np={ranks}: {:.1} s",
        config.name,
        started.elapsed().as_secs_f64()
    );
    out
}

/// The packets with-loss dropped, from its counter lines (one per table).
fn dropped(out: &JobOutput) -> u64 {
    out.stderr
        .lines()
        .filter(|l| l.starts_with("with-loss:"))
        .filter_map(|l| {
            l.split(", dropped ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// nftables drops 5 % of rusnic's datagrams: point-to-point, matching and 4-rank
/// collectives still deliver every byte (rusnic retransmits), and packets really were
/// dropped.
#[test]
fn rusnic_survives_5_percent_loss() {
    if !ompi5::available() {
        return;
    }
    let config = rusnic_with_loss("5");
    for (name, ranks) in [("p2p_sizes", 2), ("p2p_matching", 2), ("collectives", 4)] {
        let out = run_quick(&config, name, ranks);
        assert!(dropped(&out) > 0, "nothing was dropped\n{}", out.report());
    }
}

/// And 20 %: a fifth of every window lost.
#[test]
fn rusnic_survives_20_percent_loss() {
    if !ompi5::available() {
        return;
    }
    let out = run_quick(&rusnic_with_loss("20"), "p2p_sizes", 2);
    assert!(dropped(&out) > 0, "nothing was dropped\n{}", out.report());
}

/// The control: 5.0's TCP BTL under 5 % loss of its segments (the kernel retransmits).
#[test]
fn stock_tcp_survives_5_percent_loss() {
    if !ompi5::available() {
        return;
    }
    let config = on_ompi5(McaConfig::stock_tcp_on_ports(
        TCP_FIRST_PORT,
        TCP_PORT_COUNT,
    ))
    .with_loss(&[
        "--percent",
        "5",
        "--proto",
        "tcp",
        "--ports",
        &format!("{TCP_FIRST_PORT}-{}", TCP_FIRST_PORT + TCP_PORT_COUNT - 1),
    ]);
    let out = run_quick(&config, "p2p_sizes", 2);
    assert!(dropped(&out) > 0, "nothing was dropped\n{}", out.report());
}

/// Two namespace hosts: the ranks see different hostnames (so nothing is "local" across
/// them) and every byte crosses the veth link.
fn across_two_hosts(config: McaConfig, programs: &[(&str, u32)]) {
    let config = config.across_hosts(2);
    for &(name, ranks) in programs {
        run_quick(&config, name, ranks);
    }
}

/// 5.0's mpirun really places one rank on each host (its daemon on host 2 started
/// through the rsh agent), and the TCP BTL carries the traffic between them. The ranks
/// name their hosts from inside MPI (tests/programs/placement.c says why not
/// /bin/hostname).
#[test]
fn stock_tcp_across_two_hosts() {
    if !ompi5::available() {
        return;
    }
    let config = on_ompi5(McaConfig::stock_tcp());
    let out = Job::new(
        &config.clone().across_hosts(2),
        2,
        config.program("placement"),
    )
    .run();
    let mut hosts: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("placement: rank "))
        .filter_map(|l| l.split_once(" on ").map(|(_, host)| host))
        .collect();
    hosts.sort_unstable();
    hosts.dedup();
    assert!(
        out.succeeded() && hosts.len() == 2 && hosts.iter().all(|h| h.ends_with(['1', '2'])),
        "expected the ranks on two namespace hosts, got {hosts:?}\n{}",
        out.report()
    );
    across_two_hosts(config, &[("p2p_sizes", 2)]);
}

/// rusnic must pick the interface on the hosts' shared subnet.
#[test]
fn rusnic_across_two_hosts() {
    if !ompi5::available() {
        return;
    }
    across_two_hosts(
        rusnic().with("btl_rusnic_if_include", "10.77.0.0/24"),
        &[("p2p_sizes", 2), ("collectives", 4)],
    );
}

/// rusnic's libfabric backend (the udp provider) between the hosts.
#[test]
fn rusnic_ofi_backend_across_two_hosts() {
    if !ompi5::available() {
        return;
    }
    across_two_hosts(
        rusnic()
            .with("btl_rusnic_backend", "ofi")
            .with("btl_rusnic_if_include", "10.77.0.0/24")
            .named("rusnic-ofi-ompi5"),
        &[("p2p_sizes", 2)],
    );
}

/// rofi on tcp;ofi_rxm between the hosts, tagged and with host matching (its
/// rendezvous reads cross the link), synchronous sends included.
#[test]
fn rofi_across_two_hosts() {
    if !ompi5::available() {
        return;
    }
    let rofi = on_ompi5(McaConfig::new(
        "rofi-tcp",
        &[
            ("pml", "cm"),
            ("mtl", "rofi"),
            ("mtl_rofi_provider_include", "tcp;ofi_rxm"),
        ],
    ));
    across_two_hosts(rofi.clone(), &[("p2p_sizes", 2), ("ssend_mrecv", 2)]);
    across_two_hosts(
        rofi.with("mtl_rofi_host_matching", "always")
            .named("rofi-tcp-host-matching-ompi5"),
        &[("p2p_sizes", 2)],
    );
}

/// A rank killed with SIGKILL mid-traffic: the job dies with it and the node's segment
/// is gone (rsmcuda unlinks it once every local rank has attached, so no survivor has
/// to), as on 4.1.
#[test]
fn rsmcuda_segment_is_gone_after_kill_9_of_a_rank() {
    if !ompi5::available() {
        return;
    }
    assert_rsmcuda_segment_gone_after_kill_9(&rsmcuda(), Duration::from_secs(90));
}

/// And after a normal exit.
#[test]
fn rsmcuda_segment_is_gone_after_a_normal_exit() {
    if !ompi5::available() {
        return;
    }
    let out = run_quick(&rsmcuda(), "p2p_sizes", 4);
    assert_no_rsmcuda_segment_left(&out, 1);
}

/// This 5.0 has no CUDA: its accelerator framework selects `null`. rsmcuda asks the
/// framework (as 5.0's smcuda does) and keeps its GPU path off, saying why once per
/// rank, and the host path carries the job.
#[test]
fn rsmcuda_gpu_path_stays_off_under_the_null_accelerator() {
    if !ompi5::available() {
        return;
    }
    let out = run_quick(&rsmcuda(), "p2p_matching", 2);
    let off = "btl:rsmcuda: CUDA IPC off: the selected accelerator component is 'null'";
    assert_eq!(
        out.stderr.matches(off).count(),
        2,
        "expected one '{off}' line per rank\n{}",
        out.report()
    );
    // Naming the accelerator explicitly changes nothing.
    let explicit = rsmcuda()
        .with("accelerator", "null")
        .named("rsmcuda-accelerator-null-ompi5");
    let out = run_quick(&explicit, "p2p_sizes", 2);
    assert_eq!(out.stderr.matches(off).count(), 2, "{}", out.report());
}
