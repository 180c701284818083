//! The command line of `make bench` and `make demo`: the options, their checks, and
//! the configurations they choose.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use crate::configs::{self, BenchConfig, Series};
use crate::{demo, imb, run};

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
pub struct Options {
    pub demo: bool,
    pub quick: bool,
    pub rounds: u32,
    pub configs: Vec<BenchConfig>,
    /// The Open MPI 5 installation the 5.0 configurations run on (set by `locate`).
    pub ompi5_prefix: Option<PathBuf>,
    pub baseline: String,
    pub out: PathBuf,
    pub limits: bool,
    pub plots: bool,
    pub imb: Option<PathBuf>,
    pub netpipe: bool,
    /// Also MPI_Allreduce and MPI_Alltoall at 4 ranks (mpicoll) for every configuration.
    pub collectives: bool,
    /// The previous summary.csv to compare with (None: no comparison).
    pub previous: Option<PathBuf>,
    pub timeout: Duration,
    pub bench_args: Vec<String>,
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

pub fn parse_options(args: Vec<String>) -> Result<Option<Options>, String> {
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
    fn arguments_after_the_separator_go_to_mpibench() {
        let o = parse(&["--configs", "stock-vader", "--", "--test", "latency"])
            .unwrap()
            .unwrap();
        assert_eq!(o.bench_args, vec!["--test", "latency"]);
        assert_eq!(o.rounds, 3);
    }
}
