//! Real applications under each configuration, their results compared with the
//! stock run: LAMMPS (thermo output, exactly) and GROMACS (the log's energies,
//! exactly, and whether the energy files are bitwise identical).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use mca_harness::{Job, JobOutput, McaConfig};

use crate::{Findings, Outcome, Pair, Row, first_reason};

/// Ranks of every application run.
const RANKS: u32 = 2;

pub fn prepare() -> Result<(), String> {
    let script = mca_harness::repo_root().join("configure-support/validate-prepare");
    let status = Command::new(&script)
        .arg("apps")
        .status()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} apps failed", script.display()))
    }
}

/// Runs `program args` on RANKS ranks in `dir` under `config`.
fn run_in(dir: &Path, config: &McaConfig, program: &str, args: &[&str]) -> JobOutput {
    let dir_arg = dir.display().to_string();
    Job::new(config, RANKS, program)
        .args(args)
        .launcher(&["env", "-C", &dir_arg])
        .env("OMP_NUM_THREADS", "1")
        .timeout(Duration::from_secs(600))
        .run()
}

/// What one application run produced: the outcome and the values compared.
#[derive(Clone)]
struct AppRun {
    outcome: Outcome,
    values: Vec<String>,
    /// Bytes of a result file compared bitwise, if any.
    bytes: Option<Vec<u8>>,
}

/// Adds the rows of one application: every stock run (reference) and ours beside it.
fn compare(
    series: &str,
    suite: &str,
    what: &str,
    pairs: &[Pair],
    runs: &[(AppRun, AppRun)],
    rows: &mut Vec<Row>,
    findings: &mut Findings,
) {
    for (pair, (stock, ours)) in pairs.iter().zip(runs) {
        rows.push(Row {
            series: series.to_owned(),
            suite: suite.to_owned(),
            config: pair.stock.name.clone(),
            passed: usize::from(stock.outcome.passed),
            total: 1,
            versus: if stock.outcome.passed {
                format!("(stock; {} {what})", stock.values.len())
            } else {
                format!("(stock) failed: {}", stock.outcome.why)
            },
        });
        if !stock.outcome.passed {
            findings.stock_failures.insert(
                format!("[Open MPI {series}] {suite}"),
                (vec![pair.stock.name.clone()], stock.outcome.why.clone()),
            );
        }
        let versus = if !ours.outcome.passed {
            if stock.outcome.passed {
                findings.regressions.push(format!(
                    "[Open MPI {series}] {suite} on {}: {}\n      reproduce: {}",
                    pair.ours.name, ours.outcome.why, ours.outcome.command
                ));
            }
            format!("!!! FAILED: {}", ours.outcome.why)
        } else if !stock.outcome.passed {
            "stock failed: nothing to compare".to_owned()
        } else if stock.values == ours.values {
            let bitwise = match (&stock.bytes, &ours.bytes) {
                (Some(a), Some(b)) if a == b => ", energy file bitwise identical",
                (Some(_), Some(_)) => ", energy file differs in bytes",
                _ => "",
            };
            format!(
                "matches {}: {} {what} identical{bitwise}",
                pair.stock.name,
                ours.values.len()
            )
        } else {
            let first = stock
                .values
                .iter()
                .zip(&ours.values)
                .position(|(a, b)| a != b)
                .unwrap_or(stock.values.len().min(ours.values.len()));
            let show = |v: &[String]| v.get(first).cloned().unwrap_or_else(|| "(none)".into());
            let why = format!(
                "differs from {} at line {first}: `{}` vs `{}`",
                pair.stock.name,
                show(&stock.values).trim(),
                show(&ours.values).trim()
            );
            findings.regressions.push(format!(
                "[Open MPI {series}] {suite} on {}: {why}\n      reproduce: {}",
                pair.ours.name, ours.outcome.command
            ));
            format!("!!! {why}")
        };
        rows.push(Row {
            series: series.to_owned(),
            suite: suite.to_owned(),
            config: pair.ours.name.clone(),
            passed: usize::from(ours.outcome.passed && stock.values == ours.values),
            total: 1,
            versus,
        });
    }
}

/// Every pair's stock and ours runs; a stock configuration shared by pairs runs once.
fn run_pairs(pairs: &[Pair], run: impl Fn(&McaConfig) -> AppRun) -> Vec<(AppRun, AppRun)> {
    let mut stock_runs: Vec<(String, AppRun)> = Vec::new();
    pairs
        .iter()
        .map(|p| {
            let stock = match stock_runs.iter().find(|(name, _)| *name == p.stock.name) {
                Some((_, done)) => done.clone(),
                None => {
                    let done = run(&p.stock);
                    stock_runs.push((p.stock.name.clone(), done.clone()));
                    done
                }
            };
            (stock, run(&p.ours))
        })
        .collect()
}

/// LAMMPS input: the bundled 3d Lennard-Jones melt, its box 2x each way (32000
/// atoms) and 500 steps (about 20 s on 2 ranks here).
const LAMMPS_EXAMPLE: &str = "/usr/share/lammps/examples/melt/in.melt";

pub fn lammps(
    work: &Path,
    series: &str,
    pairs: &[Pair],
    rows: &mut Vec<Row>,
    findings: &mut Findings,
) {
    let dir = work.join("lammps");
    let _ = std::fs::create_dir_all(&dir);
    let input = match std::fs::read_to_string(LAMMPS_EXAMPLE) {
        Ok(text) => text
            .lines()
            .map(|l| {
                if l.starts_with("region") {
                    "region\t\tbox block 0 20 0 20 0 20".to_owned()
                } else if l.starts_with("run") {
                    "run\t\t500".to_owned()
                } else {
                    l.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => {
            findings.skipped.push(format!(
                "[Open MPI {series}] LAMMPS: cannot read {LAMMPS_EXAMPLE}: {e}"
            ));
            return;
        }
    };
    let _ = std::fs::write(dir.join("in.melt"), input + "\n");
    let run = |config: &McaConfig| -> AppRun {
        eprintln!("validate: LAMMPS melt on {}", config.name);
        let log = format!("log.{}", config.name);
        let out = run_in(&dir, config, "lmp", &["-in", "in.melt", "-log", &log]);
        let thermo = thermo_lines(&out.stdout);
        let (passed, why) = if !out.succeeded() {
            (false, first_reason(&out))
        } else if thermo.is_empty() {
            (false, "no thermo output".to_owned())
        } else {
            (true, String::new())
        };
        AppRun {
            outcome: Outcome::from_job(&out, passed, why),
            values: thermo,
            bytes: None,
        }
    };
    let runs = run_pairs(pairs, run);
    compare(
        series,
        "LAMMPS melt (32k atoms, 2 ranks)",
        "thermo lines",
        pairs,
        &runs,
        rows,
        findings,
    );
}

/// The thermo table of a LAMMPS run: the lines from the `Step ...` header to `Loop time`.
fn thermo_lines(stdout: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in stdout.lines() {
        if line.trim_start().starts_with("Step ") {
            inside = true;
        } else if line.starts_with("Loop time") {
            inside = false;
        }
        if inside {
            lines.push(line.trim_end().to_owned());
        }
    }
    lines
}

const GROMACS_TOPOLOGY: &str = r#"#include "oplsaa.ff/forcefield.itp"
#include "oplsaa.ff/spce.itp"

[ system ]
SPC/E water box

[ molecules ]
"#;

/// 5 ps of SPC/E water, PME, v-rescale with fixed seeds (velocities and thermostat).
const GROMACS_MDP: &str = "integrator      = md
dt              = 0.002
nsteps          = 2500
nstcalcenergy   = 50
nstenergy       = 50
nstlog          = 250
cutoff-scheme   = Verlet
coulombtype     = PME
rcoulomb        = 1.0
rvdw            = 1.0
tcoupl          = v-rescale
tc-grps         = System
tau-t           = 0.1
ref-t           = 300
gen-vel         = yes
gen-temp        = 300
gen-seed        = 1234
ld-seed         = 1234
constraints     = h-bonds
";

/// Runs one preparation step of GROMACS's own tools (no MPI: the `gmx` binary).
fn gmx(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("gmx")
        .arg("-quiet")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run gmx: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "gmx {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .join(" / ")
        ))
    }
}

pub fn gromacs(
    work: &Path,
    series: &str,
    pairs: &[Pair],
    rows: &mut Vec<Row>,
    findings: &mut Findings,
) {
    let dir = work.join("gromacs");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    // A 3 nm box of SPC/E water (about 880 molecules) from the bundled spc216.gro and
    // the OPLS-AA force field: solvate appends the SOL count to the topology.
    let prepared = std::fs::write(dir.join("topol.top"), GROMACS_TOPOLOGY)
        .and_then(|()| std::fs::write(dir.join("md.mdp"), GROMACS_MDP))
        .map_err(|e| e.to_string())
        .and_then(|()| {
            gmx(
                &dir,
                &[
                    "solvate",
                    "-cs",
                    "spc216.gro",
                    "-box",
                    "3",
                    "3",
                    "3",
                    "-o",
                    "water.gro",
                    "-p",
                    "topol.top",
                ],
            )
        })
        .and_then(|()| {
            gmx(
                &dir,
                &[
                    "grompp",
                    "-f",
                    "md.mdp",
                    "-c",
                    "water.gro",
                    "-p",
                    "topol.top",
                    "-o",
                    "md.tpr",
                ],
            )
        });
    if let Err(e) = prepared {
        findings.regressions.push(format!(
            "[Open MPI {series}] GROMACS: preparation failed: {e}"
        ));
        return;
    }
    let run = |config: &McaConfig| -> AppRun {
        eprintln!("validate: GROMACS water on {}", config.name);
        // -reprod: no run-time tuning that could change the arithmetic; one domain
        // decomposition (2 ranks, no separate PME rank, no load balancing).
        let name = config.name.clone();
        let out = run_in(
            &dir,
            config,
            "gmx_mpi",
            &[
                "-quiet",
                "mdrun",
                "-s",
                "md.tpr",
                "-deffnm",
                &name,
                "-ntomp",
                "1",
                "-reprod",
                "-dlb",
                "no",
                "-nb",
                "cpu",
                "-pin",
                "off",
                "-notunepme",
                "-npme",
                "0",
            ],
        );
        let log = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
        let energies = energy_lines(&log);
        let (passed, why) = if !out.succeeded() {
            (false, first_reason(&out))
        } else if energies.is_empty() {
            (false, "no energies in the log".to_owned())
        } else {
            (true, String::new())
        };
        AppRun {
            outcome: Outcome::from_job(&out, passed, why),
            values: energies,
            bytes: std::fs::read(dir.join(format!("{name}.edr"))).ok(),
        }
    };
    let runs = run_pairs(pairs, run);
    compare(
        series,
        "GROMACS water (2.6k atoms, 2 ranks)",
        "energy log lines",
        pairs,
        &runs,
        rows,
        findings,
    );
}

/// The energy blocks of a GROMACS log: each `Step Time` line with its values and
/// every `Energies` block (the averages included), as printed.
fn energy_lines(log: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut inside = false;
    let mut after_step_header = false;
    for line in log.lines() {
        if after_step_header {
            lines.push(line.trim_end().to_owned());
            after_step_header = false;
            continue;
        }
        if line.trim_start().starts_with("Step           Time") {
            after_step_header = true;
            continue;
        }
        if line.trim_start().starts_with("Energies (") {
            inside = true;
            continue;
        }
        if inside {
            if line.trim().is_empty() {
                inside = false;
            } else {
                lines.push(line.trim_end().to_owned());
            }
        }
    }
    lines
}
