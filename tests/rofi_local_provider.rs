//! rofi with two providers side by side (`mtl_rofi_local_provider`): shm for the peers
//! on a rank's own node, tcp;ofi_rxm for the others, under rofi's own matching on both
//! — what libfabric's lnx provider is meant to give, which 2.1's lnx cannot carry MPI
//! matching through (tests/libfabric2.rs). The nodes are namespace hosts (tests/hosts).

use std::time::Duration;

use mca_harness::{Job, JobOutput, McaConfig, conformance_suite, program};

fn tcp_beside_shm() -> McaConfig {
    McaConfig::new(
        "rofi-tcp+shm",
        &[
            ("pml", "cm"),
            ("mtl", "rofi"),
            ("mtl_rofi_provider_include", "tcp;ofi_rxm"),
            ("mtl_rofi_local_provider", "shm"),
        ],
    )
}

// Four ranks on two hosts, two on each: every rank has one peer over shm and two over
// tcp, and the programs' ANY_SOURCE receives, probes and per-peer order span both.
conformance_suite!(
    rofi_tcp_shm_two_hosts,
    tcp_beside_shm().across_hosts(2),
    ranks: [4],
    skip: []
);

/// `(main, local)` completion counts of every rank's finalize summary.
fn completions_per_rank(out: &JobOutput) -> Vec<(u64, u64)> {
    let log = format!("{}{}", out.stdout, out.stderr);
    log.lines()
        .filter_map(|l| {
            let rest = l.split("mtl:rofi: completions: ").nth(1)?;
            let mut numbers = rest
                .split_whitespace()
                .filter_map(|w| w.parse::<u64>().ok());
            Some((numbers.next()?, numbers.next()?))
        })
        .collect()
}

fn verbose_run(config: McaConfig, ranks: u32, name: &str) -> JobOutput {
    let out = Job::new(&config.with("mtl_rofi_verbose", "1"), ranks, program(name))
        .timeout(Duration::from_secs(180))
        .run();
    out.assert_passed();
    out
}

/// Every rank really uses both: shm completions for its neighbour on the host, tcp
/// completions for the two ranks on the other host.
#[test]
fn each_rank_reaches_its_host_over_shm_and_the_other_over_tcp() {
    let out = verbose_run(tcp_beside_shm().across_hosts(2), 4, "p2p_sizes");
    let log = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(
        log.matches("mtl:rofi: shm [").count(),
        4,
        "every rank opens shm beside tcp;ofi_rxm\n{}",
        out.report()
    );
    let counts = completions_per_rank(&out);
    assert!(
        counts.len() == 4 && counts.iter().all(|&(main, local)| main > 0 && local > 0),
        "every rank must complete messages over both providers: {counts:?}\n{}",
        out.report()
    );
}

/// On one host every peer is local: all traffic goes through shm, none through tcp
/// but what rofi's start-up posts (its receive buffers complete nothing).
#[test]
fn on_one_node_everything_goes_through_shm() {
    let out = verbose_run(tcp_beside_shm(), 2, "p2p_sizes");
    let counts = completions_per_rank(&out);
    assert!(
        counts.len() == 2 && counts.iter().all(|&(main, local)| main == 0 && local > 0),
        "{counts:?}\n{}",
        out.report()
    );
}

/// A provider that cannot be opened for the local peers ends the job with the reason,
/// naming both providers.
#[test]
fn an_unknown_local_provider_is_refused_with_the_reason() {
    let out = Job::new(
        &tcp_beside_shm().with("mtl_rofi_local_provider", "nosuchprovider"),
        2,
        program("p2p_sizes"),
    )
    .timeout(Duration::from_secs(120))
    .run();
    out.assert_refused_with(&[
        "\"nosuchprovider\" for the peers on",
        "\"tcp;ofi_rxm\" for the others",
        "not in mtl_rofi_provider_include",
    ]);
}

/// Two providers need rofi's own matching on both: `mtl_rofi_host_matching never`
/// beside it is refused at registration.
#[test]
fn host_matching_never_beside_a_local_provider_is_refused() {
    let out = Job::new(
        &tcp_beside_shm().with("mtl_rofi_host_matching", "never"),
        2,
        program("p2p_sizes"),
    )
    .timeout(Duration::from_secs(120))
    .run();
    out.assert_refused_with(&["mtl_rofi_local_provider needs rofi's own matching"]);
}
