//! mpi4py's own test suite (built from its PyPI sdist by configure-support/mpi4py)
//! as an external conformance check, with 1 and 2 ranks per configuration.

use std::process::Command;

use mca_harness::{McaConfig, component_path, parse_counts, repo_root};

fn run_mpi4py(config: &McaConfig, ranks: u32) {
    let script = repo_root().join("configure-support/mpi4py");
    let mut command = Command::new(&script);
    command.args(["run", "--np", &ranks.to_string(), "--timeout", "600"]);
    for (key, value) in &config.params {
        command.args(["--mca", key, value]);
    }
    let out = command
        .env("OMPI_MCA_mca_base_component_path", component_path())
        .output()
        .expect("run configure-support/mpi4py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let counts = stdout.lines().rev().find_map(parse_counts);
    println!(
        "{} np={ranks}: {}",
        config.name,
        stdout.lines().last().unwrap_or("")
    );
    assert!(
        out.status.success() && counts.is_some_and(|(passed, failed)| passed > 0 && failed == 0),
        "mpi4py on {} with {ranks} ranks: counts {counts:?}\n{stdout}\n{}",
        config.name,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One test for every configuration: the first run builds the shared venv under
/// build/mpi4py, which concurrent tests would race on.
#[test]
fn mpi4py_suite_passes_on_the_stock_transports() {
    for config in [McaConfig::stock_tcp(), McaConfig::stock_vader()] {
        run_mpi4py(&config, 1);
        run_mpi4py(&config, 2);
    }
}
