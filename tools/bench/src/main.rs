//! rmca-bench: `make bench` and `make demo`.
//!
//! Measures named MCA configurations with tests/bench/mpibench (two ranks bound to
//! cores) in one invocation, interleaved (every round runs every configuration, in a
//! rotated order) and repeated, and the machine's limits with tests/bench/limits in
//! the same rounds (with libfabric's fi_pingpong as the limit of the providers the OFI
//! MTLs run on); prints medians with ratios to a baseline and writes CSV, JSON
//! and PNG plots under build/bench/<stamp>/ (build/bench/latest points there). Then
//! NetPIPE for each pair of ours and its stock counterpart, and this run's ratios
//! against the previous committed ones (regressions.txt: flagged, never failed).

mod configs;
mod demo;
mod fi_pingpong;
mod imb;
mod memory;
mod netpipe;
mod pairs;
mod plot;
mod regress;
mod report;
mod results;
mod run;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use configs::{BenchConfig, Series};
use results::Sample;

const USAGE: &str = "\
usage: rmca-bench [--demo | --quick] [--rounds N] [--series 4.1,5.0] [--configs a,b,...]
                  [--config NAME='--mca K V ...'] [--baseline NAME] [--out DIR] [--no-limits]
                  [--no-plots] [--imb] [--no-coll] [--no-netpipe] [--baseline-csv FILE | --no-baseline-csv]
                  [--timeout SECONDS] [--list] [-- mpibench arguments...]
       rmca-bench --memory ...   memory per node and per rank at 2..16 ranks (--memory --help)

  --demo         make demo: each of ours beside its stock counterpart, latency and
                 bandwidth at four sizes, one short table (well under a minute)
  --quick        seconds: 1 round, mpibench/limits --quick
                 (default: the full sweep 0 B .. 16 MiB, 3 rounds: minutes)
  --rounds N     interleaved rounds; medians are taken over them
  --series       the Open MPI series whose default configurations (or --demo pairs) run:
                 4.1 (the system's, the default), 5.0 (`make ompi5`, ours from
                 `make components-ompi5`; RMCA_OMPI5_PREFIX or `make -s ompi5-prefix`)
                 or both, in the same interleaved rounds
  --configs      names from --list (default: stock-tcp, stock-vader, stock-ofi-tcp and
                 every component of ours that was built); NAME-ompi5 is NAME on 5.0
                 (stock-sm-ompi5 for stock-vader)
  --config       a further configuration: --mca triples and -x VAR=value
  --baseline     the configuration ratios are taken against (default: the first)
  --imb          also run IMB-MPI1 PingPong/Sendrecv/Exchange/Allreduce (from PATH)
  --no-coll      skip the 4-rank MPI_Allreduce / MPI_Alltoall latency (mpicoll, 8 B and
                 64 KiB, ranks unbound: 4 ranks on this 2-core machine), run by default in
                 full mode for every configuration; --coll runs it in quick mode too
  --no-netpipe   skip NetPIPE (NPmpi or Debian's NPopenmpi from PATH: once per configuration
                 of each 4.1 pair of ours and its stock counterpart measured, 1 B .. 4 MiB)
  --baseline-csv the previous results this run's ratios are compared with (default:
                 docs/bench/summary.csv, docs/bench/ompi5.csv when a 5.0 configuration runs);
                 ratios more than 5 % worse are flagged in regressions.txt, never failed
  --no-baseline-csv   no comparison with previous results
  after --        arguments for mpibench, e.g. -- --test latency,bw --sizes 0,8,1k,64k
";

#[derive(Debug)]
struct Options {
    demo: bool,
    quick: bool,
    rounds: u32,
    configs: Vec<BenchConfig>,
    /// The Open MPI 5 installation the 5.0 configurations run on (set by `locate`).
    ompi5_prefix: Option<PathBuf>,
    baseline: String,
    out: PathBuf,
    limits: bool,
    plots: bool,
    imb: Option<PathBuf>,
    netpipe: bool,
    /// Also MPI_Allreduce and MPI_Alltoall at 4 ranks (mpicoll) for every configuration.
    collectives: bool,
    /// The previous summary.csv to compare with (None: no comparison).
    previous: Option<PathBuf>,
    timeout: Duration,
    bench_args: Vec<String>,
}

fn default_configs(quick: bool, series: &[Series]) -> Vec<BenchConfig> {
    let stock: &[&str] = if quick {
        &["stock-tcp", "stock-vader", "stock-ofi-tcp", "default"]
    } else {
        &[
            "stock-tcp",
            "stock-vader",
            "stock-ofi-tcp",
            "stock-ofi-rxd",
            "default",
        ]
    };
    let registry = configs::registry();
    let mut chosen = Vec::new();
    for s in series {
        let stock: Vec<String> = stock.iter().filter_map(|n| s.name(n)).collect();
        chosen.extend(
            registry
                .iter()
                .filter(|c| c.series == *s)
                .filter(|c| match c.needs {
                    None => stock.contains(&c.config.name),
                    Some(_) => c.available(),
                })
                .cloned(),
        );
    }
    chosen
}

/// The pairs of `--demo` in `series` whose component of ours was built.
fn demo_configs(series: &[Series]) -> Vec<BenchConfig> {
    let mut names = Vec::new();
    for pair in demo::series_pairs(series) {
        if configs::resolve(&pair.ours).is_ok_and(|c| c.available()) {
            names.push(pair.stock);
            names.push(pair.ours);
        }
    }
    names.dedup();
    names
        .into_iter()
        .filter_map(|n| configs::resolve(&n).ok())
        .collect()
}

fn parse_options(args: Vec<String>) -> Result<Option<Options>, String> {
    let mut demo = false;
    let mut quick = false;
    let mut rounds = None;
    let mut series = None;
    let mut names: Option<Vec<String>> = None;
    let mut extra = Vec::new();
    let mut baseline = None;
    let mut out = None;
    let mut limits = true;
    let mut plots = true;
    let mut want_imb = false;
    let mut netpipe = true;
    let mut collectives = None;
    let mut previous: Option<Option<PathBuf>> = None;
    let mut timeout = None;
    let mut bench_args = Vec::new();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let mut value = |what: &str| it.next().ok_or_else(|| format!("{arg} needs {what}"));
        match arg.as_str() {
            "--demo" => {
                demo = true;
                quick = true;
            }
            "--quick" => quick = true,
            "--coll" => collectives = Some(true),
            "--no-coll" => collectives = Some(false),
            "--rounds" => {
                let v = value("a number")?;
                rounds = Some(
                    v.parse::<u32>()
                        .ok()
                        .filter(|n| (1..=50).contains(n))
                        .ok_or_else(|| format!("--rounds: '{v}' is not a number in 1..=50"))?,
                );
            }
            "--series" => series = Some(Series::parse_list(&value("4.1, 5.0 or 4.1,5.0")?)?),
            "--configs" => {
                names = Some(value("a list")?.split(',').map(str::to_owned).collect());
            }
            "--config" => extra.push(value("NAME='--mca K V ...'")?),
            "--baseline" => baseline = Some(value("a configuration name")?),
            "--out" => out = Some(PathBuf::from(value("a directory")?)),
            "--no-limits" => limits = false,
            "--no-plots" => plots = false,
            "--imb" => want_imb = true,
            "--no-netpipe" => netpipe = false,
            "--baseline-csv" => {
                let file = PathBuf::from(value("a summary.csv")?);
                if !file.is_file() {
                    return Err(format!("--baseline-csv: no file {}", file.display()));
                }
                previous = Some(Some(file));
            }
            "--no-baseline-csv" => previous = Some(None),
            "--timeout" => {
                let v = value("seconds")?;
                timeout = Some(Duration::from_secs(
                    v.parse::<u64>()
                        .ok()
                        .filter(|s| *s > 0)
                        .ok_or_else(|| format!("--timeout: '{v}' is not a positive number"))?,
                ));
            }
            "--list" => {
                // A closed pipe (`| head`) ends the list quietly.
                let mut out = std::io::stdout().lock();
                for c in configs::registry() {
                    let state = match (c.available(), c.series) {
                        (true, _) => "",
                        (false, Series::Ompi41) => "  (not built)",
                        (false, Series::Ompi50) => "  (not built: make components-ompi5)",
                    };
                    if writeln!(out, "{:<19} {}{state}", c.config.name, c.about).is_err() {
                        break;
                    }
                }
                return Ok(None);
            }
            "--help" | "-h" => {
                print!("{USAGE}");
                return Ok(None);
            }
            "--" => bench_args.extend(it.by_ref()),
            other => return Err(format!("unknown option '{other}'\n{USAGE}")),
        }
    }
    if series.is_some() && (names.is_some() || !extra.is_empty()) {
        return Err(
            "--series picks the default configurations; with --configs name each one \
             (NAME-ompi5 for 5.0)"
                .to_owned(),
        );
    }
    let series = series.unwrap_or_else(|| vec![Series::Ompi41]);
    let mut configs = match names {
        Some(names) => names
            .iter()
            .map(|n| configs::resolve(n))
            .collect::<Result<Vec<_>, _>>()?,
        None if extra.is_empty() && demo => demo_configs(&series),
        None if extra.is_empty() => default_configs(quick, &series),
        None => Vec::new(),
    };
    for spec in &extra {
        configs.push(configs::resolve(spec)?);
    }
    if configs.is_empty() {
        return Err("no configuration to measure".to_owned());
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = configs.iter().find(|c| !seen.insert(c.config.name.clone())) {
        return Err(format!("configuration {} given twice", dup.config.name));
    }
    let baseline = baseline.unwrap_or_else(|| configs[0].config.name.clone());
    if !configs.iter().any(|c| c.config.name == baseline) {
        return Err(format!(
            "baseline {baseline} is not among the configurations"
        ));
    }
    if want_imb && configs.iter().any(|c| c.series == Series::Ompi50) {
        return Err(
            "--imb runs the IMB-MPI1 on PATH, built for the system Open MPI: not with the \
             5.0 configurations"
                .to_owned(),
        );
    }
    let imb = match (want_imb, imb::find()) {
        (true, None) => return Err("--imb: no IMB-MPI1 on PATH".to_owned()),
        (true, found) => found,
        (false, _) => None,
    };
    if demo && bench_args.is_empty() {
        bench_args = demo::mpibench_args();
    }
    if quick && !bench_args.iter().any(|a| a == "--quick") {
        bench_args.push("--quick".to_owned());
    }
    let mode = if quick { "quick" } else { "full" };
    let previous = match previous {
        Some(choice) => choice,
        None if demo => None,
        None => Some(default_previous(&configs)),
    };
    Ok(Some(Options {
        demo,
        quick,
        rounds: rounds.unwrap_or(if quick { 1 } else { 3 }),
        configs,
        ompi5_prefix: None,
        baseline,
        out: out.unwrap_or_else(|| {
            mca_harness::repo_root()
                .join("build/bench")
                .join(format!("{}-{mode}", run::utc_stamp()))
        }),
        // The demo's table has no column for the machine's limits, nor plots.
        limits: limits && !demo,
        plots: plots && !demo,
        imb,
        netpipe: netpipe && !demo,
        collectives: collectives.unwrap_or(!quick),
        previous,
        timeout: timeout.unwrap_or(Duration::from_secs(if quick { 120 } else { 900 })),
        bench_args,
    }))
}

/// The committed results a run is compared with: those of both series when it
/// measures a 5.0 configuration, else 4.1's.
fn default_previous(configs: &[BenchConfig]) -> PathBuf {
    let file = if configs.iter().any(|c| c.series == Series::Ompi50) {
        "ompi5.csv"
    } else {
        "summary.csv"
    };
    mca_harness::repo_root().join("docs/bench").join(file)
}

/// The pairs NetPIPE runs for: 4.1's (NetPIPE on PATH is built for the system's Open
/// MPI) whose two configurations are both measured, and the configurations of them.
fn netpipe_pairs<'a>(
    configs: &'a [BenchConfig],
    names: &[String],
) -> (Vec<pairs::Pair>, Vec<&'a BenchConfig>) {
    let chosen: Vec<pairs::Pair> = pairs::pairs(Series::Ompi41)
        .into_iter()
        .filter(|p| p.measured_in(names))
        .collect();
    let run = configs
        .iter()
        .filter(|c| {
            chosen
                .iter()
                .any(|p| p.ours == c.config.name || p.stock == c.config.name)
        })
        .collect();
    (chosen, run)
}

/// This run's ratios against the previous results: the stdout text, and
/// regressions.txt in `out`. A file that cannot be read is one line, no comparison.
fn compare_with_previous(
    previous: &Path,
    all: &report::Summaries,
    baseline: &str,
    out: &Path,
) -> Result<String, String> {
    let shown = previous
        .strip_prefix(mca_harness::repo_root())
        .unwrap_or(previous)
        .display()
        .to_string();
    let old = match std::fs::read_to_string(previous)
        .map_err(|e| e.to_string())
        .and_then(|text| regress::parse_csv(&text))
    {
        Ok(points) => points,
        Err(e) => {
            return Ok(format!(
                "# regressions: not compared ({shown}: {e}; --no-baseline-csv skips)\n"
            ));
        }
    };
    let reference = |config: &str| Some(pairs::stock_of(config).unwrap_or(baseline.to_owned()));
    let threshold = regress::THRESHOLD_PERCENT;
    let c = regress::compare(&old, &regress::points_of(all), &reference, threshold);
    write_file(
        &out.join("regressions.txt"),
        &regress::render(&c, &shown, threshold, true),
    )?;
    Ok(regress::render(&c, &shown, threshold, false))
}

/// One line that rewrites itself on a terminal, plain lines otherwise.
struct Progress {
    started: Instant,
    done: usize,
    total: usize,
    tty: bool,
}

impl Progress {
    fn step(&mut self, what: &str) {
        self.done += 1;
        let line = format!(
            "[{}/{}] {what} ({:.0} s)",
            self.done,
            self.total,
            self.started.elapsed().as_secs_f64()
        );
        let mut err = std::io::stderr();
        if self.tty {
            let _ = write!(err, "\r\x1b[K{line}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn measure(opts: &Options) -> Result<ExitCode, String> {
    std::fs::create_dir_all(opts.out.join("runs"))
        .map_err(|e| format!("{}: {e}", opts.out.display()))?;
    configs::prepare(&opts.configs)?;
    let names: Vec<String> = opts.configs.iter().map(|c| c.config.name.clone()).collect();
    let mcas = || opts.configs.iter().map(|c| &c.config);
    // Said once when fi_pingpong is missing; run after limits in every round.
    let fipp = opts
        .limits
        .then(|| fi_pingpong::plan(mcas(), &opts.bench_args, opts.quick))
        .flatten();
    let per_round = opts.configs.len()
        * (1 + usize::from(opts.imb.is_some()) + usize::from(opts.collectives))
        + usize::from(opts.limits)
        + fipp.as_ref().map_or(0, |p| p.providers.len());
    let (np_pairs, np_configs) = netpipe_pairs(&opts.configs, &names);
    let np_binary = match (opts.netpipe, netpipe::find()) {
        (false, _) => None,
        (true, None) => {
            eprintln!(
                "rmca-bench: no {} on PATH (Debian: netpipe-openmpi): NetPIPE skipped",
                netpipe::BINARIES.join(" or ")
            );
            None
        }
        (true, Some(_)) if np_configs.is_empty() => {
            eprintln!(
                "rmca-bench: NetPIPE skipped: no 4.1 pair of ours and its stock counterpart \
                 among the configurations"
            );
            None
        }
        (true, found) => found,
    };
    let np_runs = if np_binary.is_some() {
        np_configs.len()
    } else {
        0
    };
    let mut progress = Progress {
        started: Instant::now(),
        done: 0,
        total: per_round * opts.rounds as usize + np_runs,
        tty: std::io::stderr().is_terminal(),
    };
    let mut samples: Vec<Sample> = Vec::new();
    let mut failures = Vec::new();
    for round in 1..=opts.rounds {
        if opts.limits {
            progress.step(&format!("round {round}/{}: limits", opts.rounds));
            match run::limits(opts.quick, &opts.bench_args, round, &opts.out) {
                Ok(mut s) => samples.append(&mut s),
                Err(e) => failures.push(e),
            }
        }
        if let Some(plan) = &fipp {
            for provider in &plan.providers {
                progress.step(&format!("round {round}/{}: {}", opts.rounds, provider.test));
                match run::fi_pingpong(plan, provider, round, opts.timeout, &opts.out) {
                    Ok(mut s) => samples.append(&mut s),
                    Err(e) => failures.push(e),
                }
            }
        }
        // Rotating the order spreads any drift of the machine over all configurations.
        let n = opts.configs.len();
        for i in 0..n {
            let config = &opts.configs[(i + round as usize - 1) % n];
            progress.step(&format!(
                "round {round}/{}: {}",
                opts.rounds, config.config.name
            ));
            match run::mpibench(
                &config.config,
                &opts.bench_args,
                round,
                opts.timeout,
                &opts.out,
            ) {
                Ok(mut s) => samples.append(&mut s),
                Err(e) => failures.push(e),
            }
            if let Some(imb_binary) = &opts.imb {
                progress.step(&format!(
                    "round {round}/{}: {} (IMB)",
                    opts.rounds, config.config.name
                ));
                match run::imb(&config.config, imb_binary, round, opts.timeout, &opts.out) {
                    Ok(mut s) => samples.append(&mut s),
                    Err(e) => failures.push(e),
                }
            }
            if opts.collectives {
                progress.step(&format!(
                    "round {round}/{}: {} ({} ranks: allreduce, alltoall)",
                    opts.rounds,
                    config.config.name,
                    run::COLL_RANKS
                ));
                match run::mpicoll(&config.config, opts.quick, round, opts.timeout, &opts.out) {
                    Ok(mut s) => samples.append(&mut s),
                    Err(e) => failures.push(e),
                }
            }
        }
    }
    let mut curves = Vec::new();
    if let Some(binary) = &np_binary {
        for config in &np_configs {
            progress.step(&format!("NetPIPE: {}", config.config.name));
            match run::netpipe(&config.config, binary, opts.timeout, &opts.out) {
                Ok(curve) => curves.push(curve),
                Err(e) => failures.push(e),
            }
        }
    }
    progress.finish();

    let summaries = results::summarise(&samples);
    let table = report::table(&summaries, &names, &opts.baseline, opts.rounds);
    let pairs_table = pairs::table(&samples, &names);
    let fipp_table = fi_pingpong::table(&samples, &fi_pingpong::compared(mcas()));
    let binary_name = np_binary
        .as_deref()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let np_table = netpipe::table(&curves, &np_pairs, &binary_name);
    let regressions = match &opts.previous {
        Some(previous) => compare_with_previous(previous, &summaries, &opts.baseline, &opts.out)?,
        None => String::new(),
    };
    if opts.demo {
        print!("{}", demo::table(&summaries, &names));
    } else {
        print!("{table}{pairs_table}{fipp_table}{np_table}{regressions}");
    }
    let mut text = table.clone();
    text.push_str(&pairs_table);
    text.push_str(&fipp_table);
    text.push_str(&np_table);
    text.push_str(&report::winners(&summaries, &names));
    write_file(&opts.out.join("summary.txt"), &text)?;
    write_file(
        &opts.out.join("samples.csv"),
        &report::samples_csv(&samples),
    )?;
    write_file(
        &opts.out.join("summary.csv"),
        &report::summary_csv(&summaries, &opts.baseline),
    )?;
    if !pairs_table.is_empty() {
        write_file(
            &opts.out.join("pairs.csv"),
            &pairs::csv(&summaries, &samples, &names),
        )?;
    }
    let config_lines: Vec<(String, String)> = opts
        .configs
        .iter()
        .map(|c| (c.config.name.clone(), run::describe(&c.config)))
        .collect();
    let mut meta = vec![
        ("mode", if opts.quick { "quick" } else { "full" }.to_owned()),
        ("rounds", opts.rounds.to_string()),
        ("baseline", opts.baseline.clone()),
        ("mpibench_args", opts.bench_args.join(" ")),
        ("open_mpi", run::ompi_version(Path::new("ompi_info"))),
        ("started_utc", run::utc_stamp()),
    ];
    if let Some(prefix) = &opts.ompi5_prefix {
        meta.push(("open_mpi_5_prefix", prefix.display().to_string()));
        meta.push((
            "open_mpi_5",
            run::ompi_version(&prefix.join("bin/ompi_info")),
        ));
    }
    write_file(
        &opts.out.join("results.json"),
        &report::json(&meta, &config_lines, &samples, &summaries),
    )?;
    if !curves.is_empty() {
        write_file(&opts.out.join("netpipe.csv"), &netpipe::csv(&curves))?;
    }
    if opts.plots {
        let np_summaries = netpipe::summaries(&curves);
        let charts = plot::CHARTS
            .iter()
            .map(|chart| (chart, &summaries))
            .chain(netpipe::CHARTS.iter().map(|chart| (chart, &np_summaries)));
        for (chart, all) in charts {
            match plot::draw(all, &names, chart, &opts.out) {
                Ok(Some(path)) => eprintln!("rmca-bench: plot {}", path.display()),
                Ok(None) => {}
                Err(e) => failures.push(format!("plot: {e}")),
            }
        }
    }
    let latest = opts.out.parent().map(|p| p.join("latest"));
    if let Some(latest) =
        latest.filter(|l| l.parent() == Some(&mca_harness::repo_root().join("build/bench")))
    {
        let _ = std::fs::remove_file(&latest);
        let _ = std::os::unix::fs::symlink(opts.out.file_name().unwrap_or_default(), &latest);
    }
    let mut files = vec!["summary.txt", "samples.csv", "summary.csv", "results.json"];
    for (wrote, file) in [
        (!pairs_table.is_empty(), "pairs.csv"),
        (!curves.is_empty(), "netpipe.csv"),
        (
            opts.out.join("regressions.txt").is_file(),
            "regressions.txt",
        ),
        (opts.plots, "*.png"),
    ] {
        if wrote {
            files.push(file);
        }
    }
    eprintln!(
        "rmca-bench: results in {} ({})",
        opts.out.display(),
        files.join(", ")
    );
    if failures.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        for f in &failures {
            eprintln!("rmca-bench: FAILED: {f}");
        }
        Ok(ExitCode::FAILURE)
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--memory") {
        return memory::main(&args[1..]).unwrap_or_else(|e| {
            eprintln!("rmca-bench: {e}");
            ExitCode::from(2)
        });
    }
    let result = parse_options(args).and_then(|opts| match opts {
        Some(mut opts) => {
            opts.ompi5_prefix = configs::locate(
                &mut opts.configs,
                &mca_harness::ompi5::component_dir(),
                configs::ompi5_prefix,
            )?;
            measure(&opts)
        }
        None => Ok(ExitCode::SUCCESS),
    });
    result.unwrap_or_else(|e| {
        eprintln!("rmca-bench: {e}");
        ExitCode::from(2)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Option<Options>, String> {
        parse_options(args.iter().map(|a| (*a).to_owned()).collect())
    }

    #[test]
    fn quick_mode_is_one_round_and_forwards_quick() {
        let o = parse(&["--quick", "--configs", "stock-tcp,stock-vader"])
            .unwrap()
            .unwrap();
        assert_eq!(o.rounds, 1);
        assert_eq!(o.bench_args, vec!["--quick"]);
        assert_eq!(o.baseline, "stock-tcp");
    }

    #[test]
    fn demo_pairs_ours_with_stock_and_measures_four_points() {
        let o = parse(&["--demo"]).unwrap().unwrap();
        assert!(o.demo && o.quick && !o.limits && !o.plots);
        assert_eq!(o.rounds, 1);
        assert_eq!(o.bench_args, demo::mpibench_args());
        let names: Vec<&str> = o.configs.iter().map(|c| c.config.name.as_str()).collect();
        for pair in demo::series_pairs(&[Series::Ompi41]) {
            if names.contains(&pair.ours.as_str()) {
                assert!(names.contains(&pair.stock.as_str()), "{names:?}");
            }
        }
        assert!(o.configs.iter().all(|c| c.series == Series::Ompi41));
    }

    #[test]
    fn bad_options_are_refused_with_a_reason() {
        assert!(parse(&["--rounds", "0"]).unwrap_err().contains("--rounds"));
        assert!(
            parse(&["--configs", "stock-tcp", "--baseline", "x"])
                .unwrap_err()
                .contains("baseline")
        );
        assert!(
            parse(&["--configs", "stock-tcp,stock-tcp"])
                .unwrap_err()
                .contains("twice")
        );
        assert!(
            parse(&["--frobnicate"])
                .unwrap_err()
                .contains("unknown option")
        );
        assert!(parse(&["--rounds"]).unwrap_err().contains("needs"));
    }

    #[test]
    fn series_choose_the_default_configurations_of_each() {
        let o = parse(&["--quick", "--series", "4.1,5.0"]).unwrap().unwrap();
        let names: Vec<&str> = o.configs.iter().map(|c| c.config.name.as_str()).collect();
        for stock in ["stock-tcp", "stock-vader", "stock-ofi-tcp", "default"] {
            assert!(names.contains(&stock), "{names:?}");
        }
        for stock in ["stock-tcp-ompi5", "stock-sm-ompi5", "stock-ofi-tcp-ompi5"] {
            assert!(names.contains(&stock), "{names:?}");
        }
        // 4.1's first (the baseline is 4.1's); 5.0's are named for their series.
        assert_eq!(o.baseline, o.configs[0].config.name);
        assert_eq!(o.configs[0].series, Series::Ompi41);
        assert!(
            o.configs
                .iter()
                .all(|c| (c.series == Series::Ompi50) == c.config.name.ends_with("-ompi5"))
        );
        let o = parse(&["--quick", "--series", "5.0"]).unwrap().unwrap();
        assert!(o.configs.iter().all(|c| c.series == Series::Ompi50));
        assert_eq!(o.baseline, "stock-tcp-ompi5");
        // The demo of 5.0 pairs only what was built for 5.0, each beside its stock one.
        let o = parse(&["--demo", "--series", "4.1,5.0"]).unwrap();
        if let Some(o) = o.filter(|o| !o.configs.is_empty()) {
            let names: Vec<&str> = o.configs.iter().map(|c| c.config.name.as_str()).collect();
            for pair in demo::series_pairs(&[Series::Ompi41, Series::Ompi50]) {
                if names.contains(&pair.ours.as_str()) {
                    assert!(names.contains(&pair.stock.as_str()), "{names:?}");
                }
            }
        }
    }

    #[test]
    fn series_options_that_cannot_work_are_refused() {
        assert!(parse(&["--series", "6.0"]).unwrap_err().contains("series"));
        assert!(
            parse(&["--series", "5.0", "--configs", "stock-tcp"])
                .unwrap_err()
                .contains("--series picks")
        );
        assert!(
            parse(&["--imb", "--configs", "stock-tcp-ompi5"])
                .unwrap_err()
                .contains("5.0")
        );
    }

    #[test]
    fn runs_compare_with_the_committed_results_of_their_series() {
        let docs = mca_harness::repo_root().join("docs/bench");
        let o = parse(&["--configs", "stock-tcp"]).unwrap().unwrap();
        assert_eq!(o.previous, Some(docs.join("summary.csv")));
        assert!(o.netpipe);
        let o = parse(&["--quick", "--series", "4.1,5.0"]).unwrap().unwrap();
        assert_eq!(o.previous, Some(docs.join("ompi5.csv")));
        let file = docs.join("summary.csv").display().to_string();
        let o = parse(&["--series", "5.0", "--baseline-csv", &file, "--no-netpipe"])
            .unwrap()
            .unwrap();
        assert_eq!(o.previous, Some(docs.join("summary.csv")));
        assert!(!o.netpipe);
        let o = parse(&["--no-baseline-csv"]).unwrap().unwrap();
        assert_eq!(o.previous, None);
        // The demo neither compares nor runs NetPIPE.
        let o = parse(&["--demo"]).unwrap().unwrap();
        assert!(o.previous.is_none() && !o.netpipe);
        assert!(
            parse(&["--baseline-csv", "/nonexistent/summary.csv"])
                .unwrap_err()
                .contains("no file /nonexistent/summary.csv")
        );
    }

    #[test]
    fn netpipe_runs_the_measured_4_1_pairs_only() {
        let o = parse(&["--configs", "stock-tcp,rusnic,stock-vader,rusnic-ompi5"]);
        // rusnic-ompi5 needs nothing to parse; only locate checks what was built.
        let o = o.unwrap().unwrap();
        let names: Vec<String> = o.configs.iter().map(|c| c.config.name.clone()).collect();
        let (pairs, run) = netpipe_pairs(&o.configs, &names);
        assert_eq!(pairs.len(), 1);
        assert_eq!(
            (pairs[0].ours.as_str(), pairs[0].stock.as_str()),
            ("rusnic", "stock-tcp")
        );
        let run: Vec<&str> = run.iter().map(|c| c.config.name.as_str()).collect();
        assert_eq!(run, ["stock-tcp", "rusnic"]);
    }

    #[test]
    fn arguments_after_the_separator_go_to_mpibench() {
        let o = parse(&["--configs", "stock-vader", "--", "--test", "latency"])
            .unwrap()
            .unwrap();
        assert_eq!(o.bench_args, vec!["--test", "latency"]);
        assert_eq!(o.rounds, 3);
    }
}
