//! One benchmark run: every round of every configuration, NetPIPE, then the tables,
//! the files under the output directory, the plots and the comparison with the
//! committed results.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use crate::configs::{self, BenchConfig, Series};
use crate::options::Options;
use crate::results::{self, Sample};
use crate::{demo, fi_pingpong, floors, loss, netpipe, pairs, plot, regress, report, run};

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

pub fn measure(opts: &Options) -> Result<ExitCode, String> {
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
        + fipp.as_ref().map_or(0, |p| p.limits.len());
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
            for limit in &plan.limits {
                progress.step(&format!("round {round}/{}: {}", opts.rounds, limit.test));
                match run::fi_pingpong(plan, limit, round, opts.timeout, &opts.out) {
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
    let floors_table = floors::table(&samples, &names);
    let loss_table = loss::table(&samples, &names);
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
        print!("{table}{pairs_table}{fipp_table}{floors_table}{loss_table}{np_table}{regressions}");
    }
    let mut text = table.clone();
    text.push_str(&pairs_table);
    text.push_str(&fipp_table);
    text.push_str(&floors_table);
    text.push_str(&loss_table);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::parse_options;

    #[test]
    fn netpipe_runs_the_measured_4_1_pairs_only() {
        let args = ["--configs", "stock-tcp,rusnic,stock-vader,rusnic-ompi5"];
        let o = parse_options(args.iter().map(|a| (*a).to_owned()).collect());
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
}
