//! rmca-validate: `make validate` and `make validate-ci`.
//!
//! Runs external suites and real applications under each component of ours and its
//! stock counterpart on the same Open MPI, for each series (Debian's 4.1.4 and the
//! project's 5.0.x, see series.rs), and prints one table: series, suite,
//! configuration, passed/total, and how ours compares with stock on that series.
//!
//! - MPICH's test suite (test/mpi of Debian's mpich 4.0.2 source package, built with
//!   each series' own mpicc by configure-support/validate-prepare, one tree per
//!   series): the testlist entries of pt2pt, coll, threads/pt2pt, datatype, comm,
//!   init and rma at their process counts, capped at 4. A test passes when it exits
//!   0 and prints "No Errors".
//! - LAMMPS (Debian's `lmp`): the bundled melt example, enlarged; thermo output must
//!   be identical to the stock run. Debian builds it (and GROMACS) against its 4.1.4;
//!   on 5.0 the same binary runs with 5.0's libmpi.so.40 (same soname and C ABI).
//! - GROMACS (Debian's `gmx_mpi`): a water box built with its own tools, a short MD
//!   run on 2 ranks; the log's energies must be identical to the stock run.
//!
//! A failure on ours where stock passes (confirmed by a rerun of both) is printed
//! loudly with its reproducer and makes the exit status 1; failures on stock too are
//! listed with their reason.

mod apps;
mod mpich;
mod series;

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;

use mca_harness::{JobOutput, repo_root};

pub use series::Pair;
use series::{COMPONENTS, SERIES, Series};

const USAGE: &str = "\
usage: rmca-validate [--ci] [--series 4.1,5.0] [--suites a,b,...] [--components a,b,...]
                     [--stock-where-ours-fails] [--jobs N] [--np-max N]

  (default)      the full validation on 4.1 and 5.0: MPICH pt2pt, coll, threads/pt2pt,
                 datatype, comm, init, rma (process counts capped at --np-max, 4);
                 LAMMPS and GROMACS (Debian's, on 5.0 through its libmpi.so.40);
                 under rusnic/stock-tcp, rsmcuda/stock-vader (stock-sm on 5.0),
                 rofi/stock-ofi-tcp, rofi-shm/stock-ofi-tcp (the stock OFI MTL
                 declines libfabric's shm)
  --ci           the CI subset: MPICH pt2pt tests of 1-2 ranks, stock run only
                 where ours fails, rusnic and rofi on 4.1, rsmcuda and rofi-shm
                 on 5.0; LAMMPS on 4.1
  --series       any of: 4.1 5.0 (5.0: RMCA_OMPI5_PREFIX and build/ompi5/mca must
                 exist, else it fails before running anything)
  --suites       any of: pt2pt coll threads/pt2pt datatype comm init rma lammps gromacs
  --components   ours to run (with their stock counterparts): rusnic rsmcuda rofi rofi-shm
  --stock-where-ours-fails
                 MPICH: stock runs a test only where ours failed it (half the time;
                 finds every failure of ours alone, not the tests only ours pass)
  --jobs N       concurrent mpirun jobs (default 2)
";

const MPICH_SUITES: [&str; 7] = [
    "pt2pt",
    "coll",
    "threads/pt2pt",
    "datatype",
    "comm",
    "init",
    "rma",
];

struct Options {
    series: Vec<String>,
    suites: Vec<String>,
    components: Vec<String>,
    jobs: usize,
    np_max: u32,
    ci: bool,
    stock_where_ours_fails: bool,
}

fn parse_args() -> Result<Options, String> {
    let mut options = Options {
        series: SERIES.iter().map(|s| (*s).to_owned()).collect(),
        suites: Vec::new(),
        components: COMPONENTS.iter().map(|c| (*c).to_owned()).collect(),
        jobs: 2,
        np_max: 4,
        ci: false,
        stock_where_ours_fails: false,
    };
    let mut args = std::env::args().skip(1);
    let list = |v: Option<String>| -> Result<Vec<String>, String> {
        Ok(v.ok_or("missing value")?
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect())
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--ci" => options.ci = true,
            "--stock-where-ours-fails" => options.stock_where_ours_fails = true,
            "--series" => options.series = list(args.next())?,
            "--suites" => options.suites = list(args.next())?,
            "--components" => options.components = list(args.next())?,
            "--jobs" => {
                options.jobs = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n > 0)
                    .ok_or("--jobs needs a positive number")?;
            }
            "--np-max" => {
                options.np_max = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n > 0)
                    .ok_or("--np-max needs a positive number")?;
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if options.suites.is_empty() {
        options.suites = if options.ci {
            vec!["pt2pt".into(), "lammps".into()]
        } else {
            MPICH_SUITES
                .iter()
                .map(|s| (*s).to_owned())
                .chain(["lammps".into(), "gromacs".into()])
                .collect()
        };
    }
    for s in &options.suites {
        if !MPICH_SUITES.contains(&s.as_str()) && s != "lammps" && s != "gromacs" {
            return Err(format!("unknown suite {s}"));
        }
    }
    for s in &options.series {
        if !SERIES.contains(&s.as_str()) {
            return Err(format!("unknown series {s}"));
        }
    }
    for c in &options.components {
        if !COMPONENTS.contains(&c.as_str()) {
            return Err(format!("unknown component {c}"));
        }
    }
    Ok(options)
}

/// The outcome of one test or application run under one configuration.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub passed: bool,
    /// Why it failed (one line), empty when it passed.
    pub why: String,
    /// The command line, with its directory, to reproduce it.
    pub command: String,
    pub seconds: f64,
}

impl Outcome {
    pub fn from_job(out: &JobOutput, passed: bool, why: String) -> Outcome {
        Outcome {
            passed,
            why,
            command: out.command.clone(),
            seconds: out.elapsed.as_secs_f64(),
        }
    }
}

/// The first line of a failed job's output that says something (for reports).
pub fn first_reason(out: &JobOutput) -> String {
    if out.timed_out {
        return format!("killed after {:.0} s (timeout)", out.elapsed.as_secs_f64());
    }
    let text = format!("{}\n{}", out.stdout, out.stderr);
    if text.contains("time limit for job execution has been reached") {
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("----") && !l.starts_with('['))
            .filter(|l| !l.starts_with("The user-provided time limit"));
        return match first {
            Some(line) => format!("timeout (MPIEXEC_TIMEOUT) after: {}", shorten(line, 90)),
            None => "timeout (MPIEXEC_TIMEOUT), no output".to_owned(),
        };
    }
    let interesting = text.lines().map(str::trim).find(|l| {
        !l.is_empty()
            && !l.starts_with("----")
            && !l.starts_with('[')
            && !l.contains("No Errors")
            && !l.starts_with("Primary job")
            && !l.starts_with("a non-zero exit code")
    });
    let code = out
        .code
        .map_or_else(|| "killed by a signal".to_owned(), |c| format!("exit {c}"));
    match interesting {
        Some(line) => format!("{code}: {}", shorten(line, 110)),
        None => code,
    }
}

pub fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
}

/// Runs `work` items on `jobs` threads; results come back in the items' order.
pub fn run_parallel<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    label: &str,
    work: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let queue = Mutex::new((0..items.len()).collect::<VecDeque<_>>());
    let results = Mutex::new((0..items.len()).map(|_| None).collect::<Vec<Option<R>>>());
    let done = Mutex::new(0usize);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(items.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let Some(i) = queue.lock().unwrap().pop_front() else {
                        break;
                    };
                    let r = work(&items[i]);
                    results.lock().unwrap()[i] = Some(r);
                    let mut d = done.lock().unwrap();
                    *d += 1;
                    if d.is_multiple_of(100) || *d == items.len() {
                        eprintln!(
                            "validate: {label}: {}/{} runs done ({:.0} s)",
                            *d,
                            items.len(),
                            started.elapsed().as_secs_f64()
                        );
                    }
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every item ran"))
        .collect()
}

/// One row of the final table.
pub struct Row {
    /// The Open MPI series (`4.1`, `5.0`).
    pub series: String,
    pub suite: String,
    pub config: String,
    pub passed: usize,
    pub total: usize,
    pub versus: String,
}

/// Findings printed below the table.
#[derive(Default)]
pub struct Findings {
    /// Ours fails where stock passes: the loud ones.
    pub regressions: Vec<String>,
    /// Failed on ours, passed on its rerun (stock passed both times).
    pub flaky: Vec<String>,
    /// Fails on stock: test -> (the stock configurations, the first reason).
    pub stock_failures: BTreeMap<String, (Vec<String>, String)>,
    /// Failing on stock with a known cause: test -> the cause.
    pub known: BTreeMap<String, String>,
    /// Passes on ours where stock fails.
    pub better: Vec<String>,
    /// Not run, with the reason.
    pub skipped: Vec<String>,
}

fn print_table(rows: &[Row]) -> String {
    let headers = ["Open MPI", "suite", "component", "passed/total", "vs stock"];
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            [
                r.series.clone(),
                r.suite.clone(),
                r.config.clone(),
                format!("{}/{}", r.passed, r.total),
                r.versus.clone(),
            ]
        })
        .collect();
    let mut widths = headers.map(str::len);
    for c in &cells {
        for (w, cell) in widths.iter_mut().zip(c) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |c: &[String]| {
        let mut s = String::from("|");
        for (w, cell) in widths.iter().zip(c) {
            s += &format!(" {cell:<w$} |");
        }
        s + "\n"
    };
    let mut out = line(&headers.map(str::to_owned));
    out += &line(&widths.map(|w| "-".repeat(w)));
    for c in &cells {
        out += &line(c);
    }
    out
}

/// `--ci`: MPICH's tests of each component run on one series, pairwise: rusnic and rofi
/// on `tcp;ofi_rxm` on 4.1, rsmcuda and rofi on `shm` on 5.0, so that every component
/// (and rofi's MTL code on both series) meets the suite and each series meets it, in
/// half the time of the whole product (`make validate` runs every pair on both).
fn ci_share_of_mpich(series: &Series, findings: &mut Findings) -> Series {
    let share: &[&str] = if series.prefix.is_none() {
        &["rusnic", "rofi"]
    } else {
        &["rsmcuda", "rofi-shm"]
    };
    let (pairs, elsewhere): (Vec<Pair>, Vec<Pair>) = series
        .pairs
        .iter()
        .cloned()
        .partition(|p| share.contains(&p.component));
    for p in &elsewhere {
        findings.skipped.push(format!(
            "MPICH's tests of {} on Open MPI {} (--ci only): the CI runs them on the other \
             series (`make validate` runs both)",
            p.component, series.name
        ));
    }
    Series {
        name: series.name,
        prefix: series.prefix.clone(),
        pairs,
    }
}

/// The suites of `options` on one series: MPICH's tests (its own tree, built with
/// that series' mpicc), then the applications.
fn run_series(
    series: &Series,
    options: &Options,
    out_dir: &std::path::Path,
    rows: &mut Vec<Row>,
    findings: &mut Findings,
) -> Result<(), String> {
    let mpich_suites: Vec<&str> = MPICH_SUITES
        .iter()
        .copied()
        .filter(|s| options.suites.iter().any(|o| o == s))
        .collect();
    if !mpich_suites.is_empty() {
        let plan = mpich::Plan {
            np_max: options.np_max,
            only_np_up_to: options.ci.then_some(2),
            jobs: options.jobs,
            stock_where_ours_fails: options.ci || options.stock_where_ours_fails,
        };
        let tree = mpich::prepare(&mpich_suites, series.prefix.as_deref())?;
        let mpich_series = if options.ci {
            ci_share_of_mpich(series, findings)
        } else {
            Series {
                name: series.name,
                prefix: series.prefix.clone(),
                pairs: series.pairs.clone(),
            }
        };
        mpich::run(
            &tree,
            out_dir,
            &mpich_series,
            &mpich_suites,
            &plan,
            rows,
            findings,
        );
    }
    // `--ci`: LAMMPS on 4.1 only (8 more runs of about 20 s on 5.0).
    let lammps =
        options.suites.iter().any(|s| s == "lammps") && !(options.ci && series.prefix.is_some());
    if options.ci && series.prefix.is_some() && options.suites.iter().any(|s| s == "lammps") {
        findings.skipped.push(format!(
            "LAMMPS on Open MPI {} (--ci only): the CI runs it on 4.1",
            series.name
        ));
    }
    let gromacs = options.suites.iter().any(|s| s == "gromacs");
    if !(lammps || gromacs) {
        return Ok(());
    }
    // Debian's lmp and gmx_mpi need only libmpi.so.40 of all Open MPI's libraries, and
    // 5.0 keeps that soname and 4.1's C ABI: on 5.0 the same binaries run with its
    // lib first in LD_LIBRARY_PATH (stock and ours alike, so they are compared fairly).
    let pairs: Vec<Pair> = match &series.prefix {
        None => series.pairs.clone(),
        Some(prefix) => {
            let lib = prefix.join("lib").display().to_string();
            let on_lib = |c: &mca_harness::McaConfig| c.clone().with_env("LD_LIBRARY_PATH", &lib);
            series
                .pairs
                .iter()
                .map(|p| Pair {
                    component: p.component,
                    stock: on_lib(&p.stock),
                    ours: on_lib(&p.ours),
                })
                .collect()
        }
    };
    apps::prepare()?;
    let work = out_dir.join(format!("apps-{}", series.name));
    if lammps {
        apps::lammps(&work, series.name, &pairs, rows, findings);
    }
    if gromacs {
        apps::gromacs(&work, series.name, &pairs, rows, findings);
    }
    Ok(())
}

fn main() -> ExitCode {
    let options = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("rmca-validate: {e}");
            }
            eprint!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    // Every series asked for must be there before anything runs: a missing 5.0
    // installation or 5.0 build is an error, never a silent skip.
    let mut all_series: Vec<Series> = Vec::new();
    for name in &options.series {
        match series::series(name, &options.components) {
            Ok(s) if s.pairs.is_empty() => {
                eprintln!("rmca-validate: no component selected");
                return ExitCode::from(2);
            }
            Ok(s) => all_series.push(s),
            Err(e) => {
                eprintln!("rmca-validate: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    // Reports, logs and application runs (RMCA_VALIDATE_DIR: elsewhere).
    let out_dir = std::env::var_os("RMCA_VALIDATE_DIR")
        .map_or_else(|| repo_root().join("build/validate"), PathBuf::from);
    let _ = std::fs::create_dir_all(&out_dir);
    let started = Instant::now();
    let mut rows = Vec::new();
    let mut findings = Findings::default();

    for series in &all_series {
        if let Err(e) = run_series(series, &options, &out_dir, &mut rows, &mut findings) {
            eprintln!("rmca-validate: Open MPI {}: {e}", series.name);
            return ExitCode::FAILURE;
        }
    }

    let mut report = print_table(&rows);
    if !findings.regressions.is_empty() {
        report += &format!(
            "\n!!! {} FAILURE(S) ON OURS THAT PASS ON STOCK (confirmed by a rerun):\n",
            findings.regressions.len()
        );
        for r in &findings.regressions {
            report += &format!("!!! {r}\n");
        }
    }
    if !findings.flaky.is_empty() {
        report += &format!(
            "\n!!! {} failure(s) on ours that passed on the rerun (stock passed both):\n",
            findings.flaky.len()
        );
        for r in &findings.flaky {
            report += &format!("!!! {r}\n");
        }
    }
    if !findings.stock_failures.is_empty() {
        report += "\nFailing on stock too (not ours to fix):\n";
        for (test, (configs, why)) in &findings.stock_failures {
            report += &format!("  {test} [{}]: {why}\n", configs.join(", "));
        }
    }
    if !findings.known.is_empty() {
        report += "\nKnown causes of the failures on stock:\n";
        for (test, why) in &findings.known {
            report += &format!("  {test}: {why}\n");
        }
    }
    if !findings.better.is_empty() {
        report += "\nPassing on ours where stock fails:\n";
        for b in &findings.better {
            report += &format!("  {b}\n");
        }
    }
    if !findings.skipped.is_empty() {
        report += "\nNot run:\n";
        for s in &findings.skipped {
            report += &format!("  {s}\n");
        }
    }
    report += &format!(
        "\nvalidate: {:.0} s ({} concurrent jobs)\n",
        started.elapsed().as_secs_f64(),
        options.jobs
    );
    print!("\n{report}");
    let _ = std::fs::write(out_dir.join("report.txt"), &report);
    if findings.regressions.is_empty() && findings.flaky.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
