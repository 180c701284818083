//! MPICH's test suite (test/mpi) under each configuration: our own small runner of
//! its testlist files instead of its perl `runtests` (which rebuilds and runs one
//! test at a time through one mpiexec): same rules, concurrent jobs.
//!
//! A testlist line is `program np key=value...`. Used: `arg=` (program argument),
//! `timeLimit=` (seconds), `resultTest=` (TestStatus/TestErrFatal: the test must
//! exit non-zero), `mem=` (GB per process: above MEM_LIMIT_GB not run on this
//! shared machine). Skipped like `runtests` in strict mode (`--enable-strictmpi`,
//! a non-MPICH MPI): `strict=false` (MPICH-only behaviour) and `mpix=true`; `xfail=`
//! marks MPICH's own bugs and is ignored in strict mode. `env=MPIR_CVAR_*` sets
//! MPICH's control variables, which mean nothing to Open MPI: such a line repeats
//! another, and is run once.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use mca_harness::{Job, JobOutput, McaConfig};

use crate::series::{Series, known_stock_failure};
use crate::{Findings, Outcome, Row, first_reason, run_parallel};

/// Seconds a test may run without a `timeLimit=` (MPICH's default is 180; a test
/// here takes under 10 s when it works, and hangs cost this much on every configuration).
const DEFAULT_TIME_LIMIT: u64 = 45;
/// Seconds ours may run a test that timed out on stock.
const STOCK_HUNG_LIMIT: u64 = 15;
/// Tests needing more memory per process than this (GB) are not run.
const MEM_LIMIT_GB: f64 = 2.0;

/// Tests that hang on every stock configuration of 4.1.4 and 5.0.7 (found by the full
/// runs): `--ci` does not run them (each costs a time limit per configuration); the
/// full run does.
const STOCK_HANGS: [(&str, &str); 3] = [
    ("pt2pt/scancel", "MPI_Cancel of a started send"),
    ("pt2pt/pscancel", "MPI_Cancel of a started persistent send"),
    ("pt2pt/cancelrecv", "MPI_Cancel of a started send"),
];

/// The built test/mpi tree (configure-support/validate-prepare mpich).
pub struct Tree {
    pub dir: PathBuf,
    /// `suite/program` -> why it does not build against this Open MPI.
    pub not_built: BTreeMap<String, String>,
}

/// Builds (once) the tree of `suites` with the mpicc of `prefix` (`None`: the one
/// on PATH, or of `OMPI_PREFIX` when set, as `make components` uses); each Open MPI
/// gets its own tree.
pub fn prepare(suites: &[&str], prefix: Option<&Path>) -> Result<Tree, String> {
    let script = mca_harness::repo_root().join("configure-support/validate-prepare");
    let mut command = Command::new(&script);
    if let Some(prefix) = prefix {
        command.env("OMPI_PREFIX", prefix);
    }
    let out = command
        .arg("mpich")
        .args(suites)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!("{} mpich failed", script.display()));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
    // The cache directory holds not-built-<suite>.txt beside mpich-<v>/test/mpi, and
    // is named ...-ompi<version>-<key>.
    let cache = dir.join("../../..").canonicalize().unwrap_or_default();
    let cache_name = cache
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let version = cache_name
        .split('-')
        .find_map(|part| part.strip_prefix("ompi"))
        .unwrap_or("?");
    let mut not_built = BTreeMap::new();
    for suite in suites {
        let list = dir.join(format!(
            "../../../not-built-{}.txt",
            suite.replace('/', "_")
        ));
        for (test, why) in std::fs::read_to_string(&list)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once('\t'))
        {
            not_built.insert(test.to_owned(), explain_build_failure(why, version));
        }
    }
    Ok(Tree { dir, not_built })
}

/// A compiler or linker error against Open MPI `version` turned into a reason.
fn explain_build_failure(why: &str, version: &str) -> String {
    if let Some(f) = why
        .strip_prefix("undefined reference to `")
        .and_then(|s| s.strip_suffix('\''))
    {
        return format!("does not link: {f} is not in Open MPI {version}");
    }
    if why.contains("MPI_LB") || why.contains("MPI_UB") {
        return format!(
            "does not compile: MPI_LB/MPI_UB were removed in MPI-3.0 (Open MPI {version} hides them)"
        );
    }
    if why.contains("MPI_COMM_TYPE_HW_") {
        return format!(
            "does not compile: MPI_COMM_TYPE_HW_GUIDED/UNGUIDED (MPI-4.0) are not in Open MPI {version}"
        );
    }
    if why.contains("MPI_Session") {
        return format!(
            "does not compile: MPI_Session (MPI-4.0 sessions) is not in Open MPI {version}"
        );
    }
    if why.contains("switch quantity not an integer") {
        return "does not compile: switches on MPI_Datatype values, pointers in Open MPI"
            .to_owned();
    }
    format!("does not compile: {why}")
}

/// One testlist entry as it is run.
#[derive(Clone, Debug)]
pub struct Case {
    pub suite: String,
    pub program: String,
    pub np: u32,
    pub args: Vec<String>,
    pub time_limit: u64,
    /// TestStatus / TestErrFatal: a non-zero exit is the expected result.
    pub expect_failure: bool,
}

impl Case {
    pub fn name(&self) -> String {
        let mut name = format!("{}/{} np={}", self.suite, self.program, self.np);
        for a in &self.args {
            name += " ";
            name += a;
        }
        name
    }
}

/// Adds `line` to `list` unless it is there (each series reads the same testlists).
fn push_once(list: &mut Vec<String>, line: String) {
    if !list.contains(&line) {
        list.push(line);
    }
}

/// The cases of one suite's testlist (and the ones not run, with why).
fn read_testlist(
    tree: &Path,
    suite: &str,
    np_max: u32,
    only_np_up_to: Option<u32>,
    skipped: &mut Vec<String>,
) -> Vec<Case> {
    let text = std::fs::read_to_string(tree.join(suite).join("testlist")).unwrap_or_default();
    let mut cases = Vec::new();
    let mut seen = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let program = words.next().unwrap_or_default().to_owned();
        let np_listed: u32 = words.next().and_then(|n| n.parse().ok()).unwrap_or(1);
        let mut case = Case {
            suite: suite.to_owned(),
            program,
            np: np_listed.min(np_max),
            args: Vec::new(),
            time_limit: DEFAULT_TIME_LIMIT,
            expect_failure: false,
        };
        let mut skip = None;
        for word in words {
            let Some((key, value)) = word.split_once('=') else {
                continue; // e.g. the test's source path in generated dtp lines
            };
            match key {
                "arg" => case.args.push(value.to_owned()),
                "timeLimit" => case.time_limit = value.parse().unwrap_or(DEFAULT_TIME_LIMIT),
                "resultTest" => case.expect_failure = true,
                "strict" if value.eq_ignore_ascii_case("false") => {
                    skip = Some("strict=false: tests MPICH-specific behaviour".to_owned());
                }
                "mpix" if value.eq_ignore_ascii_case("true") => {
                    skip = Some("mpix=true: tests MPICH's MPIX extensions".to_owned());
                }
                "mem" if value.parse::<f64>().is_ok_and(|gb| gb > MEM_LIMIT_GB) => {
                    skip = Some(format!(
                        "mem={value}: needs {value} GB per process (limit {MEM_LIMIT_GB} on this shared machine)"
                    ));
                }
                _ => {} // env=MPIR_CVAR_* (MPICH's own), xfail= (ignored in strict mode)
            }
        }
        if tree.join(suite).join(&case.program).is_dir() {
            continue; // a subdirectory with its own testlist: suites name theirs
        }
        if let Some(why) = skip {
            push_once(skipped, format!("{}: {why}", case.name()));
            continue;
        }
        if only_np_up_to.is_some_and(|n| np_listed > n) {
            continue;
        }
        let id = format!("{suite}/{}", case.program);
        if let Some((_, why)) = STOCK_HANGS.iter().find(|(t, _)| *t == id)
            && only_np_up_to.is_some()
        {
            push_once(
                skipped,
                format!(
                    "{} (--ci only): hangs on every stock configuration ({why}: ob1 and cm of 4.1.4 and 5.0.7 cannot cancel it)",
                    case.name()
                ),
            );
            continue;
        }
        if seen.insert(case.name()) {
            cases.push(case);
        }
    }
    cases
}

/// Runs one case; `limit` overrides its time limit (seconds).
fn run_case(tree: &Path, case: &Case, config: &McaConfig, limit: Option<u64>) -> Outcome {
    let dir = tree.join(&case.suite);
    let dir_arg = dir.display().to_string();
    let args: Vec<&str> = case.args.iter().map(String::as_str).collect();
    let limit = limit.unwrap_or(case.time_limit);
    // mpirun's own timeout (MPIEXEC_TIMEOUT, as runtests sets it) reports and ends the
    // job; the harness's, a little later, is the backstop.
    let out: JobOutput = Job::new(config, case.np, dir.join(&case.program))
        .args(&args)
        .launcher(&["env", "-C", &dir_arg])
        .env("MPIEXEC_TIMEOUT", &limit.to_string())
        .timeout(Duration::from_secs(limit + 15))
        .run();
    let no_errors = out
        .stdout
        .lines()
        .any(|l| l.trim().eq_ignore_ascii_case("no errors"));
    let (passed, why) = if case.expect_failure {
        let ok = !out.timed_out && out.code.is_some_and(|c| c != 0);
        (
            ok,
            if ok {
                String::new()
            } else {
                format!("expected a non-zero exit, got {}", first_reason(&out))
            },
        )
    } else if out.succeeded() && no_errors {
        (true, String::new())
    } else if out.succeeded() {
        (
            false,
            format!("exit 0 without \"No Errors\": {}", first_reason(&out)),
        )
    } else {
        (false, first_reason(&out))
    };
    Outcome::from_job(&out, passed, why)
}

/// How much of the suites is run, and how.
pub struct Plan {
    /// Process counts above this are capped to it.
    pub np_max: u32,
    /// Tests listed with more processes than this are not run (`--ci`: 2).
    pub only_np_up_to: Option<u32>,
    /// Concurrent mpirun jobs.
    pub jobs: usize,
    /// Stock runs a test only where one of ours failed it (`--ci`): enough to tell a
    /// failure of ours from a stock one at about half the cost, but the stock rows
    /// then count only those runs, and "passes only on ours" is not looked for.
    pub stock_where_ours_fails: bool,
}

pub fn run(
    tree: &Tree,
    out_dir: &Path,
    series: &Series,
    suites: &[&str],
    plan: &Plan,
    rows: &mut Vec<Row>,
    findings: &mut Findings,
) {
    let pairs = &series.pairs;
    let configs: Vec<&McaConfig> = pairs.iter().flat_map(|p| [&p.stock, &p.ours]).collect();
    let mut cases = Vec::new();
    for suite in suites {
        cases.extend(read_testlist(
            &tree.dir,
            suite,
            plan.np_max,
            plan.only_np_up_to,
            &mut findings.skipped,
        ));
    }
    let not_built = |c: &Case| {
        tree.not_built
            .get(&format!("{}/{}", c.suite, c.program))
            .cloned()
    };
    // Pairs sharing a stock configuration (rofi and rofi-shm both beside the stock OFI
    // MTL) share its runs.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (p, pair) in pairs.iter().enumerate() {
        match groups
            .iter_mut()
            .find(|g| pairs[g[0]].stock.name == pair.stock.name)
        {
            Some(group) => group.push(p),
            None => groups.push(vec![p]),
        }
    }
    // Every case under every group: stock first, then each of ours. Where stock hangs
    // (a test this Open MPI does not pass), ours gets STOCK_HUNG_LIMIT seconds to do
    // better. With `stock_where_ours_fails`, ours first, and stock only after a failure
    // (`None`: not run).
    let work: Vec<(usize, usize)> = (0..cases.len())
        .filter(|&i| not_built(&cases[i]).is_none())
        .flat_map(|i| (0..groups.len()).map(move |g| (i, g)))
        .collect();
    eprintln!(
        "validate: Open MPI {}: MPICH {}: {} tests x {} configurations",
        series.name,
        suites.join(" "),
        cases.len(),
        pairs.len() + groups.len()
    );
    let label = format!("Open MPI {} MPICH", series.name);
    // Each run as it ends, so that an interrupted validation leaves what it found:
    // build/validate/mpich-progress-<series>.tsv (the table comes at the end).
    let progress =
        std::fs::File::create(out_dir.join(format!("mpich-progress-{}.tsv", series.name)))
            .ok()
            .map(Mutex::new);
    let note = |case: &Case, config: &McaConfig, o: &Outcome| {
        if let Some(file) = &progress {
            let _ = writeln!(
                file.lock().unwrap(),
                "{}\t{}\t{}\t{:.1}\t{}",
                case.name(),
                config.name,
                o.passed,
                o.seconds,
                o.why
            );
        }
    };
    let run_noted = |case: &Case, config: &McaConfig, limit: Option<u64>| {
        let outcome = run_case(&tree.dir, case, config, limit);
        note(case, config, &outcome);
        outcome
    };
    let outcomes = run_parallel(&work, plan.jobs, &label, |&(i, g)| {
        let stock_config = &pairs[groups[g][0]].stock;
        if plan.stock_where_ours_fails {
            let ours: Vec<Outcome> = groups[g]
                .iter()
                .map(|&p| run_noted(&cases[i], &pairs[p].ours, None))
                .collect();
            let stock = ours
                .iter()
                .any(|o| !o.passed)
                .then(|| run_noted(&cases[i], stock_config, None));
            return (stock, ours);
        }
        let stock = run_noted(&cases[i], stock_config, None);
        let hung = stock.why.contains("timeout");
        let ours: Vec<Outcome> = groups[g]
            .iter()
            .map(|&p| run_noted(&cases[i], &pairs[p].ours, hung.then_some(STOCK_HUNG_LIMIT)))
            .collect();
        (Some(stock), ours)
    });
    let mut result: BTreeMap<(usize, usize), Outcome> = BTreeMap::new();
    // Stock runs left out (`stock_where_ours_fails`, every one of ours passed): entered
    // as passed, so that they are no finding, but not counted in the table.
    let mut not_run = BTreeSet::new();
    for (&(i, g), (stock, ours)) in work.iter().zip(outcomes) {
        for (&p, ours) in groups[g].iter().zip(ours) {
            let stock = stock.clone().unwrap_or_else(|| {
                not_run.insert((i, 2 * p));
                Outcome {
                    passed: true,
                    why: String::new(),
                    command: String::new(),
                    seconds: 0.0,
                }
            });
            result.insert((i, 2 * p), stock);
            result.insert((i, 2 * p + 1), ours);
        }
    }
    for (i, case) in cases.iter().enumerate() {
        if let Some(why) = not_built(case) {
            for c in 0..configs.len() {
                result.insert(
                    (i, c),
                    Outcome {
                        passed: false,
                        why: why.clone(),
                        command: String::new(),
                        seconds: 0.0,
                    },
                );
            }
        }
    }

    // Every run, for the record: build/validate/mpich-runs-<series>.tsv.
    let mut record = String::from("test\tconfiguration\tpassed\tseconds\twhy\n");
    let mut recorded = BTreeSet::new();
    for ((i, c), o) in &result {
        if not_run.contains(&(*i, *c)) || !recorded.insert((*i, &configs[*c].name)) {
            continue; // not run, or a shared stock run
        }
        record += &format!(
            "{}\t{}\t{}\t{:.1}\t{}\n",
            cases[*i].name(),
            configs[*c].name,
            o.passed,
            o.seconds,
            o.why
        );
    }
    let _ = std::fs::write(
        out_dir.join(format!("mpich-runs-{}.tsv", series.name)),
        record,
    );

    // Where ours fails and stock passes, run both once more, one at a time.
    let mut disagree = Vec::new();
    for i in 0..cases.len() {
        for p in 0..pairs.len() {
            if result[&(i, 2 * p)].passed && !result[&(i, 2 * p + 1)].passed {
                disagree.push((i, p));
            }
        }
    }
    let mut reruns = BTreeMap::new();
    if !disagree.is_empty() {
        eprintln!(
            "validate: Open MPI {}: MPICH: rerunning {} test(s) that failed on ours only",
            series.name,
            disagree.len()
        );
    }
    for &(i, p) in &disagree {
        let stock = run_case(&tree.dir, &cases[i], &pairs[p].stock, None);
        let ours = run_case(&tree.dir, &cases[i], &pairs[p].ours, None);
        reruns.insert((i, p), (stock, ours));
    }

    for suite in suites {
        let in_suite: Vec<usize> = (0..cases.len())
            .filter(|&i| cases[i].suite == *suite)
            .collect();
        for (p, pair) in pairs.iter().enumerate() {
            let ran = |c: usize| -> Vec<usize> {
                in_suite
                    .iter()
                    .copied()
                    .filter(|&i| !not_run.contains(&(i, c)))
                    .collect()
            };
            let count = |c: usize| ran(c).iter().filter(|&&i| result[&(i, c)].passed).count();
            let (stock_passed, ours_passed) = (count(2 * p), count(2 * p + 1));
            let stock_ran = ran(2 * p).len();
            let mut only_ours_fails = 0;
            let mut only_stock_fails = 0;
            for &i in &in_suite {
                // Tagged with the series: the same test is its own finding on each.
                let name = format!("[Open MPI {}] {}", series.name, cases[i].name());
                let (s, o) = (&result[&(i, 2 * p)], &result[&(i, 2 * p + 1)]);
                if !s.passed {
                    let test = format!("{}/{}", cases[i].suite, cases[i].program);
                    if let Some(why) = known_stock_failure(series.name, &test) {
                        findings.known.insert(name.clone(), why.to_owned());
                    }
                    let entry = findings
                        .stock_failures
                        .entry(name.clone())
                        .or_insert_with(|| (Vec::new(), s.why.clone()));
                    if !entry.0.contains(&pair.stock.name) {
                        entry.0.push(pair.stock.name.clone());
                    }
                }
                match (s.passed, o.passed) {
                    (true, false) => {
                        only_ours_fails += 1;
                        let (s2, o2) = &reruns[&(i, p)];
                        let report = format!(
                            "{name} on {}: {} ({:.1} s); rerun: {}; {} passed {}\n      reproduce: {}",
                            pair.ours.name,
                            o.why,
                            o.seconds,
                            if o2.passed {
                                "passed".to_owned()
                            } else {
                                o2.why.clone()
                            },
                            pair.stock.name,
                            if s2.passed {
                                "both times"
                            } else {
                                "once (failed on its rerun)"
                            },
                            o.command
                        );
                        if o2.passed || !s2.passed {
                            findings.flaky.push(report);
                        } else {
                            findings.regressions.push(report);
                        }
                    }
                    (false, true) => {
                        only_stock_fails += 1;
                        findings.better.push(format!(
                            "{name}: passes on {}, fails on {} ({})",
                            pair.ours.name, pair.stock.name, s.why
                        ));
                    }
                    _ => {}
                }
            }
            let suite_name = format!("MPICH {suite}");
            rows.push(Row {
                series: series.name.to_owned(),
                suite: suite_name.clone(),
                config: pair.stock.name.clone(),
                passed: stock_passed,
                total: stock_ran,
                versus: if stock_ran < in_suite.len() {
                    "(stock; run only where ours failed)".to_owned()
                } else {
                    "(stock)".to_owned()
                },
            });
            let versus = match (only_ours_fails, only_stock_fails) {
                (0, 0) if stock_ran < in_suite.len() => {
                    format!("no failure that {} does not share", pair.stock.name)
                }
                (0, 0) => format!("same tests pass as {}", pair.stock.name),
                (0, b) => format!("same as {} + {b} more pass", pair.stock.name),
                (a, b) => format!(
                    "!!! {a} FAIL ONLY ON {}{}",
                    pair.ours.name,
                    if b > 0 {
                        format!(" ({b} pass only here)")
                    } else {
                        String::new()
                    }
                ),
            };
            rows.push(Row {
                series: series.name.to_owned(),
                suite: suite_name,
                config: pair.ours.name.clone(),
                passed: ours_passed,
                total: in_suite.len(),
                versus,
            });
        }
    }
}
