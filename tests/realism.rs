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

conformance_suite!(
    stock_tcp_two_hosts,
    McaConfig::stock_tcp().across_hosts(2),
    skip: ["trunc_large"]
);

conformance_suite!(stock_tcp_loss5, tcp_with_loss("5"), skip: ["trunc_large"]);
