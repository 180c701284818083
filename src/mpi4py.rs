//! mpi4py's own test suite (built from its PyPI sdist by configure-support/mpi4py)
//! as an external conformance check of a configuration.

use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

use crate::{McaConfig, Placement, component_path, parse_counts, repo_root};

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
///
/// A configuration on another installation (`config.prefix`, e.g.
/// [`crate::ompi5::on_ompi5`]) runs mpi4py built with that installation's `mpicc`
/// in its own venv (`configure-support/mpi4py --mpi-prefix`) under its `mpirun`,
/// with the component path a [`crate::Job`] of it gets.
pub fn assert_passes(config: &McaConfig, ranks: u32, scope: Scope, skip: &[&str]) {
    assert!(
        matches!(config.placement, Placement::Local) && config.loss.is_none(),
        "{}: the mpi4py runner launches on this host only, without injected loss",
        config.name
    );
    // The first run builds the venv (one per installation, under build/): runs of
    // one test binary take turns, so two tests never build it at once.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let script = repo_root().join("configure-support/mpi4py");
    let mut command = Command::new(&script);
    command.arg("run");
    if let Some(prefix) = &config.prefix {
        command.arg("--mpi-prefix").arg(prefix);
    }
    command.args(["--np", &ranks.to_string(), "--timeout", "600"]);
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
    match component_path_of(config) {
        Some(path) => command.env("OMPI_MCA_mca_base_component_path", path),
        None => command.env_remove("OMPI_MCA_mca_base_component_path"),
    };
    let started = Instant::now();
    let out = command.output().expect("run configure-support/mpi4py");
    crate::record_job_time(
        started.elapsed(),
        ranks,
        &config.name,
        &format!("mpi4py {scope:?}"),
        false,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let counts = stdout.lines().rev().find_map(parse_counts);
    println!(
        "{} np={ranks}: {} ({:.0} s)",
        config.name,
        stdout.lines().last().unwrap_or(""),
        started.elapsed().as_secs_f64()
    );
    let passed =
        out.status.success() && counts.is_some_and(|(passed, failed)| passed > 0 && failed == 0);
    if !passed {
        panic!(
            "mpi4py on {} with {ranks} ranks: counts {counts:?}\n{stdout}\n{}\n\
             --- the run's log ---\n{}",
            config.name,
            String::from_utf8_lossy(&out.stderr),
            log_tail(&stdout, 30)
        );
    }
}

/// From the log named in the runner's "mpi4py: run took ...; log PATH" line: the first
/// lines that look like an error report (a component's or Open MPI's message, a signal,
/// a failing test), then its last `lines` lines (where a hang or a crash shows).
fn log_tail(stdout: &str, lines: usize) -> String {
    let Some(path) = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("mpi4py: run took "))
        .and_then(|l| l.rsplit_once("; log "))
        .map(|(_, path)| path.trim())
    else {
        return "(no log named)".to_owned();
    };
    let text = match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => return format!("(cannot read {path}: {e})"),
    };
    let all: Vec<&str> = text.lines().collect();
    let marks = [
        "error", "Error", "ERROR", "FAIL", "abort", "signal", "invalid", "BTL", "MTL",
    ];
    let noted: Vec<&str> = all
        .iter()
        .filter(|l| marks.iter().any(|m| l.contains(m)))
        .take(20)
        .copied()
        .collect();
    format!(
        "{path}\n--- lines of note ---\n{}\n--- last {lines} lines ---\n{}",
        noted.join("\n"),
        all[all.len().saturating_sub(lines)..].join("\n")
    )
}

/// The component path of `config`'s jobs, as [`crate::Job`] sets it: on the system
/// Open MPI ours from build/mca first; on another installation our components built
/// for it (if any) before its own directory; `None` for an installation's own
/// components alone (its built-in default path).
fn component_path_of(config: &McaConfig) -> Option<String> {
    match (&config.prefix, &config.components) {
        (None, _) => Some(component_path()),
        (Some(prefix), Some(ours)) => Some(format!(
            "{}:{}",
            ours.display(),
            prefix.join("lib/openmpi").display()
        )),
        (Some(_), None) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::process::Command;

    use crate::{parse_counts, repo_root};

    /// `configure-support/mpi4py summarize` on `log` (mpirun exit status `rc`, `np`
    /// ranks): its stdout and whether it reported success.
    fn summarize(name: &str, log: &str, rc: i32, np: u32) -> (String, bool) {
        let path: PathBuf =
            std::env::temp_dir().join(format!("rmca-mpi4py-{}-{name}.log", std::process::id()));
        std::fs::write(&path, log).expect("write the log");
        let out = Command::new(repo_root().join("configure-support/mpi4py"))
            .arg("summarize")
            .arg(&path)
            .args([&rc.to_string(), "7", &np.to_string()])
            .output()
            .expect("run configure-support/mpi4py summarize");
        let _ = std::fs::remove_file(&path);
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            out.status.success(),
        )
    }

    fn totals(stdout: &str) -> String {
        stdout.lines().last().unwrap_or("").to_owned()
    }

    /// Open MPI 4.1's tags ("[job,rank]<stderr>:", no space) in front of every
    /// write, two ranks' writes interleaved inside physical lines, as in a real log:
    /// unittest writes "OK" and " (skipped=1)" separately, so the space of the second
    /// belongs to the text.
    #[test]
    fn open_mpi_4_tags_interleaved_inside_lines() {
        let log = "\
[1,0]<stderr>:testA (test_x.T.testA)[1,1]<stderr>:testA (test_x.T.testA)[1,0]<stderr>: ... \
[1,1]<stderr>: ... [1,0]<stderr>:ok[1,0]<stderr>:
[1,1]<stderr>:ok[1,0]<stderr>:testB (test_x.T.testB) ... skipped 'no'[1,1]<stderr>:
[1,0]<stderr>:
[1,1]<stderr>:testB (test_x.T.testB)[1,1]<stderr>: ... [1,0]<stderr>:
[1,0]<stderr>:----------------------------------------------------------------------[1,0]<stderr>:
[1,0]<stderr>:Ran 2 tests in 0.120s[1,1]<stderr>:skipped 'no'[1,0]<stderr>:
[1,1]<stderr>:
[1,0]<stderr>:
[1,0]<stderr>:OK[1,1]<stderr>:
[1,1]<stderr>:Ran 2 tests in 0.130s[1,0]<stderr>: (skipped=1)[1,0]<stderr>:
[1,1]<stderr>:
[1,1]<stderr>:OK[1,1]<stderr>: (skipped=1)[1,1]<stderr>:
";
        let (stdout, ok) = summarize("ompi4", log, 0, 2);
        assert!(ok, "{stdout}");
        assert_eq!(
            totals(&stdout),
            "mpi4py: 2 passed, 0 failed, 2 skipped",
            "{stdout}"
        );
        assert_eq!(parse_counts(&totals(&stdout)), Some((2, 0)));
    }

    /// Open MPI 5's `--output tag:raw` ("[job,rank]<stderr>: ", with a space) in front
    /// of every write, interleaved as with 4.1; a failure on one rank; mpirun's own
    /// untagged lines.
    #[test]
    fn open_mpi_5_raw_tags_with_a_failure() {
        let log = "\
[1,0]<stderr>: testA (test_x.T.testA) ... [1,1]<stderr>: testA (test_x.T.testA) ... [1,0]<stderr>: ok
[1,1]<stderr>: FAIL
[1,0]<stderr>: testB (test_x.T.testB) ... [1,1]<stderr>: testB (test_x.T.testB) ... [1,0]<stderr>: ok
[1,0]<stderr>: 
[1,0]<stderr>: ----------------------------------------------------------------------
[1,0]<stderr>: Ran 2 tests in 0.600s
[1,1]<stderr>: ok
[1,0]<stderr>: 
[1,0]<stderr>: OK
[1,1]<stderr>: 
[1,1]<stderr>: ======================================================================
[1,1]<stderr>: FAIL: testA (test_x.T.testA)
[1,1]<stderr>: ----------------------------------------------------------------------
[1,1]<stderr>: Ran 2 tests in 0.500s
[1,1]<stderr>: 
[1,1]<stderr>: FAILED (failures=1)
--------------------------------------------------------------------------
prterun detected that one or more processes exited with non-zero status
--------------------------------------------------------------------------
";
        let (stdout, ok) = summarize("ompi5", log, 1, 2);
        assert!(!ok, "{stdout}");
        assert_eq!(
            totals(&stdout),
            "mpi4py: 3 passed, 1 failed, 0 skipped",
            "{stdout}"
        );
        assert!(
            stdout.contains("mpi4py: FAIL: testA (test_x.T.testA) [rank 1]"),
            "{stdout}"
        );
    }

    /// A rank that printed no summary (killed, hung past the timeout) is a failure
    /// even when the others passed.
    #[test]
    fn a_rank_without_summary_fails_the_run() {
        let log = "\
[1,0]<stderr>: testA (test_x.T.testA) ... ok
[1,0]<stderr>: Ran 1 test in 0.100s
[1,0]<stderr>: OK
[1,1]<stderr>: testA (test_x.T.testA) ... 
";
        let (stdout, ok) = summarize("missing", log, 124, 2);
        assert!(!ok, "{stdout}");
        assert!(
            stdout.contains("1 of 2 ranks printed no summary; timed out"),
            "{stdout}"
        );
        assert_eq!(
            totals(&stdout),
            "mpi4py: 1 passed, 1 failed, 0 skipped",
            "{stdout}"
        );
    }
}
