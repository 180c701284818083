//! mpi4py's own test suite (built from its PyPI sdist by configure-support/mpi4py)
//! as an external conformance check of a configuration.

use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

use crate::{McaConfig, component_path, parse_counts, repo_root};

/// What to run of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every module (minus spawn and the process pool, which need a launcher we lack).
    Full,
    /// The point-to-point, collective, RMA, datatype and communicator modules: what a
    /// transport can break.
    Subset,
}

/// Runs the suite under `config` with `ranks` ranks; `skip` names test methods that
/// show a known defect of the configuration (passed as `-x` patterns). Panics unless
/// some tests passed and none failed.
pub fn assert_passes(config: &McaConfig, ranks: u32, scope: Scope, skip: &[&str]) {
    // The first run builds the shared venv under build/mpi4py: runs of one test
    // binary take turns, so two tests never build it at once.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let script = repo_root().join("configure-support/mpi4py");
    let mut command = Command::new(&script);
    command.args(["run", "--np", &ranks.to_string(), "--timeout", "600"]);
    if scope == Scope::Subset {
        command.arg("--subset");
    }
    for (key, value) in &config.params {
        command.args(["--mca", key, value]);
    }
    command.envs(config.env.iter().map(|(k, v)| (k, v)));
    if !skip.is_empty() {
        command.arg("--");
        for test in skip {
            command.args(["-x", test]);
        }
    }
    let started = Instant::now();
    let out = command
        .env("OMPI_MCA_mca_base_component_path", component_path())
        .output()
        .expect("run configure-support/mpi4py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let counts = stdout.lines().rev().find_map(parse_counts);
    println!(
        "{} np={ranks}: {} ({:.0} s)",
        config.name,
        stdout.lines().last().unwrap_or(""),
        started.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success() && counts.is_some_and(|(passed, failed)| passed > 0 && failed == 0),
        "mpi4py on {} with {ranks} ranks: counts {counts:?}\n{stdout}\n{}",
        config.name,
        String::from_utf8_lossy(&out.stderr)
    );
}
