//! The conformance suite (tests/programs/*.c): every program verifies every byte it
//! receives and ends with an `N passed, M failed` line. A configuration joins the
//! suite with one line of [`conformance_suite!`](crate::conformance_suite), from any
//! test file:
//!
//! ```ignore
//! mca_harness::conformance_suite!(stock_tcp, McaConfig::stock_tcp(), skip: ["trunc_large"]);
//! mca_harness::conformance_suite!(
//!     stock_tcp_two_hosts, McaConfig::stock_tcp().across_hosts(2), ranks: [2, 4], skip: []
//! );
//! ```

use std::time::Duration;

use crate::{Job, McaConfig};

/// Every program of the suite.
pub const PROGRAMS: &[&str] = &[
    "p2p_sizes",
    "p2p_matching",
    "p2p_probe",
    "ssend_mrecv",
    "p2p_cancel_trunc",
    "datatypes",
    "collectives",
    "threads",
    "checker_selftest",
    "trunc_large",
    "mprobe_threads",
    "p2p_status",
];

/// How long one program may run before the job is killed and reported as hung.
pub const PROGRAM_TIMEOUT: Duration = Duration::from_secs(180);

/// Runs `name` under `config` once per rank count and asserts every check passed.
/// Returns without running anything when the configuration's Open MPI installation
/// is missing ([`McaConfig::available`] prints why).
pub fn run_program(config: &McaConfig, name: &str, ranks: &[u32]) {
    if !config.available() {
        return;
    }
    for &n in ranks {
        Job::new(config, n, config.program(name))
            .timeout(PROGRAM_TIMEOUT)
            .run()
            .assert_passed();
    }
}

/// The rank counts a suite runs at: `ranks` always, `full_matrix_ranks` only in the
/// full matrix (`make check-all`, [`crate::full_matrix`]).
pub fn ranks_to_run(ranks: &[u32], full_matrix_ranks: &[u32]) -> Vec<u32> {
    let mut all = ranks.to_vec();
    if full_matrix_ranks.is_empty()
        || crate::runs_in_this_matrix(&format!("the runs at {full_matrix_ranks:?} ranks"))
    {
        all.extend_from_slice(full_matrix_ranks);
    }
    all
}

/// One `#[test]` per conformance program under a configuration, in a module named
/// `$module`. `skip` lists programs that show a known defect of the configuration
/// (each such defect has its own test asserting it); `ranks` defaults to `[2, 4]` and
/// may be empty (a suite of the full matrix only);
/// `full_matrix_ranks` are run too by `make check-all` (README, "What runs where"), as
/// are the programs of `full_matrix_programs` (those a provider's own defect makes hang
/// now and then under load: the full matrix still runs them).
#[macro_export]
macro_rules! conformance_suite {
    ($module:ident, $config:expr, skip: [$($known:literal),* $(,)?]) => {
        $crate::conformance_suite!($module, $config, ranks: [2, 4], skip: [$($known),*]);
    };
    ($module:ident, $config:expr, ranks: [$($n:literal),*], skip: [$($known:literal),* $(,)?]) => {
        $crate::conformance_suite!(
            $module, $config, ranks: [$($n),*], full_matrix_ranks: [], skip: [$($known),*]
        );
    };
    (
        $module:ident,
        $config:expr,
        ranks: [$($n:literal),*],
        full_matrix_ranks: [$($full:literal),*],
        skip: [$($known:literal),* $(,)?]
    ) => {
        $crate::conformance_suite!(
            $module, $config, ranks: [$($n),*], full_matrix_ranks: [$($full),*],
            full_matrix_programs: [], skip: [$($known),*]
        );
    };
    (
        $module:ident,
        $config:expr,
        ranks: [$($n:literal),*],
        full_matrix_ranks: [$($full:literal),*],
        full_matrix_programs: [$($full_only:literal),*],
        skip: [$($known:literal),* $(,)?]
    ) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            fn config() -> $crate::McaConfig {
                $config
            }
            fn known_defect(name: &str) -> bool {
                let known: &[&str] = &[$($known),*];
                known.contains(&name)
            }
            fn run(name: &str) {
                if known_defect(name) {
                    // Recorded as a known defect by its own test.
                    return;
                }
                let full_only: &[&str] = &[$($full_only),*];
                if full_only.contains(&name)
                    && !$crate::runs_in_this_matrix(&format!("{name} on {}", config().name))
                {
                    return;
                }
                let ranks = $crate::conformance::ranks_to_run(&[$($n),*], &[$($full),*]);
                $crate::conformance::run_program(&config(), name, &ranks);
            }
            #[test]
            fn p2p_sizes() { run("p2p_sizes") }
            #[test]
            fn p2p_matching() { run("p2p_matching") }
            #[test]
            fn p2p_probe() { run("p2p_probe") }
            #[test]
            fn ssend_mrecv() { run("ssend_mrecv") }
            #[test]
            fn p2p_cancel_trunc() { run("p2p_cancel_trunc") }
            #[test]
            fn datatypes() { run("datatypes") }
            #[test]
            fn collectives() { run("collectives") }
            #[test]
            fn threads() { run("threads") }
            #[test]
            fn checker_selftest() { run("checker_selftest") }
            #[test]
            fn trunc_large() { run("trunc_large") }
            #[test]
            fn mprobe_threads() { run("mprobe_threads") }
            #[test]
            fn p2p_status() { run("p2p_status") }
            #[test]
            fn skip_list_names_real_programs() {
                for name in [$($known),*] {
                    assert!(
                        $crate::conformance::PROGRAMS.contains(&name),
                        "{name} in the skip list is not a conformance program"
                    );
                }
            }
        }
    };
}
