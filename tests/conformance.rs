//! The conformance suite (tests/programs/*.c) under real mpirun, on the stock
//! transports as a control. Our components add their configurations here as they
//! land: one `conformance_suite!` line each.

use std::time::Duration;

use mca_harness::conformance::PROGRAMS;
use mca_harness::{Job, McaConfig, conformance_suite, program};

// The stock controls run at 2 ranks here, and at 4 too in the full matrix (`make
// check-all`): ours run at both in every matrix (README, "What runs where").
conformance_suite!(
    stock_tcp,
    McaConfig::stock_tcp(),
    ranks: [2],
    full_matrix_ranks: [4],
    skip: ["trunc_large"]
);
conformance_suite!(
    stock_vader,
    McaConfig::stock_vader(),
    ranks: [2],
    full_matrix_ranks: [4],
    skip: ["trunc_large"]
);
conformance_suite!(
    stock_ofi_tcp,
    McaConfig::stock_ofi_tcp(),
    ranks: [2],
    full_matrix_ranks: [4],
    // p2p_status truncates eager messages in its part E: the same defect as
    // p2p_cancel_trunc (stock_ofi_mtl_breaks_after_a_truncated_receive).
    skip: ["ssend_mrecv", "p2p_cancel_trunc", "trunc_large", "p2p_status"]
);

/// Asserts that a stock configuration still shows a known upstream defect: the
/// program must fail or hang (killed at `timeout`). When a fixed Open MPI is
/// installed this test fails, telling us to move the program back into the suite.
fn assert_known_defect(config: McaConfig, name: &str, ranks: u32, timeout: u64) {
    let out = Job::new(&config, ranks, program(name))
        .timeout(Duration::from_secs(timeout))
        .run();
    assert!(
        !out.succeeded(),
        "the known defect no longer shows on {}: {}",
        config.name,
        out.report()
    );
}

/// Known upstream defect in 4.1.4 ob1 (any BTL): truncating a message above the
/// eager limit writes the whole message past the receive buffer (heap corruption,
/// crash or hang). See tests/programs/README.md.
#[test]
fn stock_ob1_corrupts_memory_when_truncating_a_rendezvous_message() {
    assert_known_defect(McaConfig::stock_vader(), "trunc_large", 2, 10);
}

/// Known upstream defect in the 4.1.4 OFI MTL on tcp;ofi_rxm: the truncation is
/// reported, but later traffic on the communicator fails or hangs.
#[test]
fn stock_ofi_mtl_breaks_after_a_truncated_receive() {
    assert_known_defect(McaConfig::stock_ofi_tcp(), "p2p_cancel_trunc", 2, 10);
}

/// Known upstream defect (open-mpi/ompi#11327, fixed in 5.0, not in 4.1.4): the OFI
/// MTL never sends the synchronous-send ACK for a receive completed through
/// Mprobe/Mrecv, so MPI_Ssend never returns. This test asserts the stock defect is
/// still there (the job hangs until killed); rofi's suite runs the same program.
#[test]
fn stock_ofi_mtl_deadlocks_on_ssend_received_by_mrecv_upstream_11327() {
    // The program takes about a second where it works: 10 s is a hang.
    let out = Job::new(&McaConfig::stock_ofi_tcp(), 2, program("ssend_mrecv"))
        .timeout(Duration::from_secs(10))
        .run();
    assert!(
        out.timed_out,
        "the stock OFI MTL no longer hangs here: {}",
        out.report()
    );
}

/// The control for Open MPI 5.0.7's negative-stride defect (tests/ompi5.rs): on 4.1.4
/// every case of tests/programs/neg_stride.c passes, the complex ones included, so the
/// program's checks are right and the 5.0.7 failures are 5.0.7's.
#[test]
fn backward_vectors_nested_in_indexed_types_are_right_on_4_1() {
    let out = Job::new(&McaConfig::stock_vader(), 1, program("neg_stride")).run();
    assert_eq!(out.counts(), Some((80, 0)), "{}", out.report());
    out.assert_passed();
}

/// The checker can fail: a run that corrupts one received byte must be reported
/// as failed, with the corrupted offset named.
#[test]
fn a_corrupted_byte_fails_the_run() {
    let out = Job::new(&McaConfig::stock_vader(), 2, program("p2p_sizes"))
        .args(&["--inject-corruption"])
        .timeout(Duration::from_secs(120))
        .run();
    assert!(
        !out.succeeded(),
        "corruption went unnoticed: {}",
        out.report()
    );
    let failed = out.counts().map(|(_, failed)| failed);
    assert!(
        failed.is_some_and(|f| f >= 1),
        "no failed count reported: {}",
        out.report()
    );
}

#[test]
fn every_program_of_the_suite_was_built() {
    for name in PROGRAMS {
        program(name);
    }
}
