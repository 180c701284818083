//! The conformance suite on the stock TCP BTL where the network is less kind than a
//! loopback: across two emulated hosts (network namespaces joined by veth, so no
//! shared memory and real Ethernet framing between them), and while nftables drops
//! 5 % of the TCP BTL's packets at random. Passing here proves the tooling
//! (tests/hosts, tests/loss) before the datagram BTL relies on it.

use mca_harness::{McaConfig, conformance_suite};

/// The TCP BTL listens in 31000..32000, below the ephemeral range, so the loss rule
/// catches exactly its connections (both directions: source or destination port).
/// The range is wide because the TCP BTL binds without SO_REUSEADDR: a port whose
/// earlier connection is in TIME-WAIT (60 s) cannot be bound again.
fn tcp_with_loss(percent: &str) -> McaConfig {
    McaConfig::stock_tcp_on_ports(31000, 1000).with_loss(&[
        "--percent",
        percent,
        "--proto",
        "tcp",
        "--ports",
        "31000-31999",
    ])
}

// Stock references: 2 ranks in every matrix, 4 in the full one (ours run 4 ranks
// across the hosts and under loss in their own files).
conformance_suite!(
    stock_tcp_two_hosts,
    McaConfig::stock_tcp().across_hosts(2),
    ranks: [2],
    full_matrix_ranks: [4],
    skip: ["trunc_large"]
);

conformance_suite!(
    stock_tcp_loss5,
    tcp_with_loss("5"),
    ranks: [2],
    full_matrix_ranks: [4],
    skip: ["trunc_large"]
);

/// Runs one of the tooling self-tests (a script that exits 0 only if every check passed).
fn selftest(script: &str) {
    let path = mca_harness::repo_root().join(script);
    let out = std::process::Command::new(&path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("ALL PASSED"),
        "{script} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// with-loss drops the share it is told to, only on its ports, and always removes its
/// tables (also when the command fails or is killed).
#[test]
fn loss_injection_selftest() {
    selftest("tests/loss/selftest");
}

/// Namespace hosts are separate nodes to Open MPI: shared memory cannot cross them,
/// and nothing is left behind.
#[test]
fn namespace_hosts_selftest() {
    selftest("tests/hosts/selftest");
}
