//! `rmca-bench --memory`: the memory each transport keeps, measured at several rank
//! counts on one node with tests/bench/memprobe (every rank in contact with every
//! other, then each reads its own /proc/self/smaps_rollup and smaps while all are
//! still inside MPI).
//!
//! Two views, written as memory.txt, memory.csv, memory.png and memory-rank.png:
//! * the shared memory of the node: every shared mapping of the job except PMIx's
//!   own (the transport's segments), counted once per file (device, inode) — its
//!   mapped size, and what the file has allocated (tmpfs and memfd pages that exist);
//! * each rank's private memory (smaps_rollup `Anonymous`: heap and private anonymous
//!   mappings, no shared or file pages), its growth over a 1-rank `btl self` job per
//!   peer, and the slope of a straight line through the rank counts (the cost of one
//!   more peer, without the fixed cost of the transport).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use mca_harness::{Job, McaConfig};

use crate::configs::{self, BenchConfig, Series};
use crate::pairs;
use crate::plot;
use crate::results::{self, Sample};

pub const USAGE: &str = "\
usage: rmca-bench --memory [--ranks 2,4,8,16] [--configs a,b,...] [--config NAME='--mca K V ...']
                           [--out DIR]
                           [--timeout SECONDS] [--no-plots] [-- memprobe arguments...]

  Runs tests/bench/memprobe under each configuration (default: each 4.1 pair of ours
  and its stock counterpart whose component was built) at each rank count, one node,
  oversubscribed, and a 1-rank `--mca btl self` job as the baseline; writes
  memory.txt, memory.csv, memory.png and memory-rank.png to --out (default
  build/bench/<stamp>-memory; `--out docs/bench` refreshes the committed ones).
";

/// The name of the baseline job in tables and files.
pub const BASELINE: &str = "btl-self-1rank";

/// One `MEM` line: a rank's smaps_rollup at a phase, in bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct RankMem {
    pub rank: u32,
    pub phase: String,
    pub rss: i64,
    pub pss: i64,
    pub private_dirty: i64,
    pub anonymous: i64,
}

/// One `SEG` line: a shared mapping seen by a rank.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub rank: u32,
    pub dev: String,
    pub inode: u64,
    pub size: u64,
    /// Bytes its file has allocated, -1 when memprobe could not tell.
    pub alloc: i64,
    pub path: String,
}

/// What memprobe printed.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Probe {
    pub ranks: Vec<RankMem>,
    pub segments: Vec<Segment>,
}

/// The `key=value` words of `line` after `prefix`; `path=` takes the rest of the line
/// (a mapping's name can hold spaces: `/memfd:x (deleted)`).
fn fields<'a>(line: &'a str, prefix: &str) -> Option<BTreeMap<&'a str, &'a str>> {
    let mut rest = line.trim_end().strip_prefix(prefix)?;
    let mut map = BTreeMap::new();
    while !rest.is_empty() {
        if let Some(path) = rest.strip_prefix("path=") {
            map.insert("path", path);
            break;
        }
        let (word, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        let (key, value) = word.split_once('=')?;
        map.insert(key, value);
        rest = tail.trim_start();
    }
    Some(map)
}

/// The MEM and SEG lines of memprobe's stdout; other lines are ignored.
pub fn parse(stdout: &str) -> Probe {
    let mut probe = Probe::default();
    for line in stdout.lines() {
        if let Some(f) = fields(line, "MEM ") {
            let num = |k: &str| f.get(k).and_then(|v| v.parse::<i64>().ok());
            let mem = (|| {
                Some(RankMem {
                    rank: f.get("rank")?.parse().ok()?,
                    phase: (*f.get("phase")?).to_owned(),
                    rss: num("rss")?,
                    pss: num("pss")?,
                    private_dirty: num("private_dirty")?,
                    anonymous: num("anonymous")?,
                })
            })();
            probe.ranks.extend(mem);
        } else if let Some(f) = fields(line, "SEG ") {
            let seg = (|| {
                Some(Segment {
                    rank: f.get("rank")?.parse().ok()?,
                    dev: (*f.get("dev")?).to_owned(),
                    inode: f.get("inode")?.parse().ok()?,
                    size: f.get("size")?.parse().ok()?,
                    alloc: f.get("alloc")?.parse().ok()?,
                    path: (*f.get("path")?).to_owned(),
                })
            })();
            probe.segments.extend(seg);
        }
    }
    probe
}

/// The runtime's own shared files (PMIx's data store in the job's temporary directory): the
/// same under every transport, so not counted as the transport's.
pub fn is_runtime(path: &str) -> bool {
    path.contains("pmix")
}

/// One configuration at one rank count.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub config: String,
    pub ranks: u32,
    /// The transport's shared files, each once.
    pub segments: usize,
    /// Their mapped sizes (the largest mapping of each file).
    pub shared_mapped: u64,
    /// What they have allocated (the mapped size where memprobe could not tell).
    pub shared_alloc: u64,
    /// Means over the ranks, at the last phase memprobe reached.
    pub anonymous: f64,
    pub private_dirty: f64,
    pub pss: f64,
    pub rss: f64,
}

/// The point of `probe`, which must hold one last-phase line per rank.
pub fn point(config: &str, ranks: u32, probe: &Probe) -> Result<Point, String> {
    let phase = if probe.ranks.iter().any(|m| m.phase == "contact") {
        "contact"
    } else {
        "init"
    };
    let last: Vec<&RankMem> = probe.ranks.iter().filter(|m| m.phase == phase).collect();
    if last.len() != ranks as usize {
        return Err(format!(
            "{config} at {ranks} ranks: {} memory lines at phase {phase}, expected {ranks}",
            last.len()
        ));
    }
    let mean =
        |f: fn(&RankMem) -> i64| last.iter().map(|m| f(m) as f64).sum::<f64>() / ranks as f64;
    let mut files: BTreeMap<(&str, u64), (u64, u64)> = BTreeMap::new();
    for s in probe.segments.iter().filter(|s| !is_runtime(&s.path)) {
        let alloc = u64::try_from(s.alloc).unwrap_or(s.size);
        let entry = files.entry((&s.dev, s.inode)).or_default();
        entry.0 = entry.0.max(s.size);
        entry.1 = entry.1.max(alloc);
    }
    Ok(Point {
        config: config.to_owned(),
        ranks,
        segments: files.len(),
        shared_mapped: files.values().map(|f| f.0).sum(),
        shared_alloc: files.values().map(|f| f.1).sum(),
        anonymous: mean(|m| m.anonymous),
        private_dirty: mean(|m| m.private_dirty),
        pss: mean(|m| m.pss),
        rss: mean(|m| m.rss),
    })
}

/// Growth of `value` over the baseline's, per peer.
pub fn per_peer(value: f64, base: f64, ranks: u32) -> Option<f64> {
    (ranks > 1).then(|| (value - base) / f64::from(ranks - 1))
}

/// The least-squares slope of `value` against the number of peers (None below two
/// rank counts): the cost of one more peer.
pub fn slope(points: &[&Point], value: fn(&Point) -> f64) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let xs: Vec<f64> = points.iter().map(|p| f64::from(p.ranks) - 1.0).collect();
    let ys: Vec<f64> = points.iter().map(|p| value(p)).collect();
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

fn mib(bytes: f64) -> String {
    format!("{:.2} MiB", bytes / f64::from(1u32 << 20))
}

fn kib(bytes: f64) -> String {
    format!("{:+.0} KiB", bytes / 1024.0)
}

fn find<'a>(points: &'a [Point], config: &str, ranks: u32) -> Option<&'a Point> {
    points
        .iter()
        .find(|p| p.config == config && p.ranks == ranks)
}

/// The text of memory.txt: the shared-memory table (the configurations in `shm` that
/// have segments),
/// each pair's verdict, and the per-rank table.
pub fn table(
    points: &[Point],
    configs: &[String],
    shm: &[String],
    counts: &[u32],
    base: Option<&Point>,
) -> String {
    let mut t = String::new();
    let shared: Vec<&String> = shm
        .iter()
        .filter(|c| points.iter().any(|p| &p.config == *c && p.segments > 0))
        .collect();
    if !shared.is_empty() {
        let _ = writeln!(
            t,
            "Shared memory per node: the transport's segments, each file once (PMIx's excluded)\n\
             mapped = sum of mapping sizes; allocated = pages the files hold (tmpfs/memfd)\n\
             (configurations on a shared-memory BTL; the others' segments, e.g. vader's opened\n\
             beside the cm PML, are in memory.csv)\n"
        );
        let _ = write!(t, "{:<6}", "ranks");
        for c in &shared {
            let _ = write!(
                t,
                " {:>24} {:>24}",
                format!("{c} mapped"),
                format!("{c} alloc.")
            );
        }
        t.push('\n');
        for &n in counts {
            let _ = write!(t, "{n:<6}");
            for c in &shared {
                let cell = |f: fn(&Point) -> u64| {
                    find(points, c, n).map_or("-".to_owned(), |p| mib(f(p) as f64))
                };
                let _ = write!(
                    t,
                    " {:>24} {:>24}",
                    cell(|p| p.shared_mapped),
                    cell(|p| p.shared_alloc)
                );
            }
            t.push('\n');
        }
        t.push('\n');
        for pair in pairs::pairs(Series::Ompi41) {
            if shared.contains(&&pair.ours) && shared.contains(&&pair.stock) {
                t.push_str(&verdict(points, &pair.ours, &pair.stock, counts));
            }
        }
    }
    let _ = writeln!(
        t,
        "\nPrivate memory per rank (smaps_rollup Anonymous, mean over the ranks) and, in\n\
         brackets, its growth per peer over the 1-rank `btl self` job{}\n",
        base.map_or(" (not measured)".to_owned(), |b| format!(
            " ({})",
            mib(b.anonymous)
        ))
    );
    let _ = write!(t, "{:<6}", "ranks");
    for c in configs {
        let _ = write!(t, " {c:>24}");
    }
    t.push('\n');
    for &n in counts {
        let _ = write!(t, "{n:<6}");
        for c in configs {
            let cell = find(points, c, n).map_or("-".to_owned(), |p| {
                let growth = base
                    .and_then(|b| per_peer(p.anonymous, b.anonymous, n))
                    .map_or(String::new(), |g| format!(" ({})", kib(g)));
                format!("{}{growth}", mib(p.anonymous))
            });
            let _ = write!(t, " {cell:>24}");
        }
        t.push('\n');
    }
    let _ = write!(t, "{:<6}", "slope");
    for c in configs {
        let mine: Vec<&Point> = points.iter().filter(|p| &p.config == c).collect();
        let cell =
            slope(&mine, |p| p.anonymous).map_or("-".to_owned(), |s| format!("{}/peer", kib(s)));
        let _ = write!(t, " {cell:>24}");
    }
    t.push_str("\n(slope: least squares of the mean against the number of peers)\n");
    t
}

/// Whether `ours` maps at most what `stock` maps at every count, and how each grows
/// from the smallest to the largest count measured by both.
pub fn verdict(points: &[Point], ours: &str, stock: &str, counts: &[u32]) -> String {
    let both: Vec<(&Point, &Point)> = counts
        .iter()
        .filter_map(|&n| Some((find(points, ours, n)?, find(points, stock, n)?)))
        .collect();
    let (Some(first), Some(last)) = (both.first(), both.last()) else {
        return String::new();
    };
    let mut t = String::new();
    for (what, f) in [
        ("mapped", (|p: &Point| p.shared_mapped) as fn(&Point) -> u64),
        ("allocated", |p: &Point| p.shared_alloc),
    ] {
        let over: Vec<String> = both
            .iter()
            .filter(|(o, s)| f(o) > f(s))
            .map(|(o, s)| format!("{} ranks x{:.2}", o.ranks, f(o) as f64 / f(s) as f64))
            .collect();
        // The factor, then the bytes it adds: a small first count makes a large factor
        // of few bytes, so both are shown.
        let growth = |a: &Point, b: &Point| {
            let added = f(b).saturating_sub(f(a)) as f64;
            let per_rank = added / f64::from(b.ranks.saturating_sub(a.ranks).max(1));
            format!(
                "x{:.1} (+{}, {} a rank)",
                f(b) as f64 / f(a).max(1) as f64,
                mib(added),
                kib(per_rank)
            )
        };
        let _ = writeln!(
            t,
            "{ours} vs {stock}, {what}: {}; growth {}->{} ranks: {ours} {}, {stock} {}",
            if over.is_empty() {
                "at most the stock one's at every count".to_owned()
            } else {
                format!("MORE than the stock one's at {}", over.join(", "))
            },
            first.0.ranks,
            last.0.ranks,
            growth(first.0, last.0),
            growth(first.1, last.1),
        );
    }
    t
}

/// memory.csv: one line per configuration and rank count (bytes; per-peer growth over
/// the baseline empty where there is none).
pub fn csv(points: &[Point], base: Option<&Point>) -> String {
    let mut t = String::from(
        "config,ranks,segments,shared_mapped,shared_alloc,anonymous,private_dirty,pss,rss,\
         anonymous_per_peer,private_dirty_per_peer\n",
    );
    for p in base.into_iter().chain(points) {
        let growth = |f: fn(&Point) -> f64| {
            base.and_then(|b| per_peer(f(p), f(b), p.ranks))
                .map_or(String::new(), |g| format!("{g:.0}"))
        };
        let _ = writeln!(
            t,
            "{},{},{},{},{},{:.0},{:.0},{:.0},{:.0},{},{}",
            p.config,
            p.ranks,
            p.segments,
            p.shared_mapped,
            p.shared_alloc,
            p.anonymous,
            p.private_dirty,
            p.pss,
            p.rss,
            growth(|p| p.anonymous),
            growth(|p| p.private_dirty),
        );
    }
    t
}

/// The points as samples for the plot code (size = rank count): the shared memory of
/// the configurations in `shm`, the private memory of all.
fn samples(points: &[Point], shm: &[String]) -> (Vec<Sample>, Vec<String>, Vec<String>) {
    let mut all = Vec::new();
    let (mut shared, mut private) = (Vec::new(), Vec::new());
    let mut add = |config: String, test: &str, p: &Point, value: f64, names: &mut Vec<String>| {
        if !names.contains(&config) {
            names.push(config.clone());
        }
        all.push(Sample {
            config,
            round: 1,
            test: test.to_owned(),
            size: u64::from(p.ranks),
            unit: "bytes".to_owned(),
            value,
        });
    };
    for p in points {
        if p.segments > 0 && shm.contains(&p.config) {
            let mapped = format!("{} mapped", p.config);
            add(mapped, "memory", p, p.shared_mapped as f64, &mut shared);
            let alloc = format!("{} allocated", p.config);
            add(alloc, "memory", p, p.shared_alloc as f64, &mut shared);
        }
        add(
            p.config.clone(),
            "memory-rank",
            p,
            p.anonymous,
            &mut private,
        );
    }
    (all, shared, private)
}

#[derive(Debug)]
struct Options {
    counts: Vec<u32>,
    configs: Vec<BenchConfig>,
    out: PathBuf,
    timeout: Duration,
    plots: bool,
    probe_args: Vec<String>,
}

fn parse_options(args: &[String]) -> Result<Option<Options>, String> {
    let mut counts = vec![2, 4, 8, 16];
    let mut names: Option<Vec<String>> = None;
    let mut extra = Vec::new();
    let mut out = None;
    let mut timeout = Duration::from_secs(180);
    let mut plots = true;
    let mut probe_args = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |what: &str| it.next().ok_or_else(|| format!("{arg} needs {what}"));
        match arg.as_str() {
            "--ranks" => {
                let v = value("a list of rank counts")?;
                counts = v
                    .split(',')
                    .map(|n| n.parse::<u32>().ok().filter(|n| (2..=64).contains(n)))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| format!("--ranks: '{v}' is not a list of counts in 2..=64"))?;
                counts.sort_unstable();
                counts.dedup();
            }
            "--configs" => names = Some(value("a list")?.split(',').map(str::to_owned).collect()),
            "--config" => extra.push(value("NAME='--mca K V ...'")?.clone()),
            "--out" => out = Some(PathBuf::from(value("a directory")?)),
            "--timeout" => {
                let v = value("seconds")?;
                timeout = Duration::from_secs(
                    v.parse::<u64>()
                        .ok()
                        .filter(|s| *s > 0)
                        .ok_or_else(|| format!("--timeout: '{v}' is not a positive number"))?,
                );
            }
            "--no-plots" => plots = false,
            "--help" | "-h" => {
                print!("{USAGE}");
                return Ok(None);
            }
            "--" => probe_args.extend(it.by_ref().cloned()),
            other => return Err(format!("unknown option '{other}'\n{USAGE}")),
        }
    }
    let mut configs = match names {
        Some(names) => names
            .iter()
            .map(|n| configs::resolve(n))
            .collect::<Result<Vec<_>, _>>()?,
        None if extra.is_empty() => default_configs(),
        None => Vec::new(),
    };
    for spec in &extra {
        configs.push(configs::resolve(spec)?);
    }
    if let Some(c) = configs.iter().find(|c| c.series != Series::Ompi41) {
        return Err(format!(
            "--memory runs on the system's Open MPI only ({} is 5.0's)",
            c.config.name
        ));
    }
    if configs.is_empty() {
        return Err("no configuration to measure (make components?)".to_owned());
    }
    Ok(Some(Options {
        counts,
        configs,
        out: out.unwrap_or_else(|| {
            mca_harness::repo_root()
                .join("build/bench")
                .join(format!("{}-memory", crate::run::utc_stamp()))
        }),
        timeout,
        plots,
        probe_args,
    }))
}

/// Whether `config` names a shared-memory BTL (vader, sm, rsmcuda) in its `btl` list.
pub fn on_shared_memory(config: &McaConfig) -> bool {
    config.params.iter().any(|(key, value)| {
        key == "btl"
            && value
                .split(',')
                .any(|b| matches!(b, "vader" | "sm" | "rsmcuda"))
    })
}

/// Each 4.1 pair whose component of ours was built: stock first, then ours.
fn default_configs() -> Vec<BenchConfig> {
    pairs::pairs(Series::Ompi41)
        .into_iter()
        .filter_map(|p| {
            let ours = configs::resolve(&p.ours).ok().filter(|c| c.available())?;
            Some([configs::resolve(&p.stock).ok()?, ours])
        })
        .flatten()
        .collect()
}

/// memprobe under `config` at `ranks` ranks; its output kept in `out/runs`.
fn probe(
    config: &McaConfig,
    ranks: u32,
    args: &[String],
    timeout: Duration,
    out: &Path,
) -> Result<Probe, String> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // Oversubscribed: no binding.
    let job = Job::new(config, ranks, config.program("memprobe"))
        .args(&args)
        .mpirun_args(&crate::run::mpirun_args(config, "none"))
        .timeout(timeout);
    let result = job.run();
    let label = format!("{}.{ranks}", config.name);
    let runs = out.join("runs");
    let _ = std::fs::write(runs.join(format!("{label}.out")), &result.stdout);
    let _ = std::fs::write(runs.join(format!("{label}.err")), &result.stderr);
    if !result.succeeded() {
        return Err(format!(
            "{label}: {} (see {})",
            if result.timed_out {
                "timed out".to_owned()
            } else {
                format!("exit {:?}", result.code)
            },
            runs.join(format!("{label}.err")).display()
        ));
    }
    Ok(parse(&result.stdout))
}

/// `rmca-bench --memory ...`.
pub fn main(args: &[String]) -> Result<ExitCode, String> {
    let Some(opts) = parse_options(args)? else {
        return Ok(ExitCode::SUCCESS);
    };
    let mut configs = opts.configs.clone();
    configs::locate(&mut configs, &mca_harness::ompi5::component_dir(), || {
        Err("not used".to_owned())
    })?;
    std::fs::create_dir_all(opts.out.join("runs"))
        .map_err(|e| format!("{}: {e}", opts.out.display()))?;
    let mut failures = Vec::new();
    let base_config = McaConfig::new(BASELINE, &[("pml", "ob1"), ("btl", "self")]);
    eprintln!("rmca-bench: memory: {BASELINE}");
    let base = probe(&base_config, 1, &opts.probe_args, opts.timeout, &opts.out)
        .and_then(|p| point(BASELINE, 1, &p))
        .map_err(|e| failures.push(e))
        .ok();
    let mut points = Vec::new();
    for &n in &opts.counts {
        for c in &configs {
            eprintln!("rmca-bench: memory: {} at {n} ranks", c.config.name);
            match probe(&c.config, n, &opts.probe_args, opts.timeout, &opts.out)
                .and_then(|p| point(&c.config.name, n, &p))
            {
                Ok(p) => points.push(p),
                Err(e) => failures.push(e),
            }
        }
    }
    let names: Vec<String> = configs.iter().map(|c| c.config.name.clone()).collect();
    let shm: Vec<String> = configs
        .iter()
        .filter(|c| on_shared_memory(&c.config))
        .map(|c| c.config.name.clone())
        .collect();
    let mut text = format!(
        "# rmca-bench --memory: tests/bench/memprobe {}on one node ({} CPUs, oversubscribed),\n\
         # {}; every rank exchanged 8 B messages and one large one with every other rank\n\n",
        opts.probe_args.join(" ") + if opts.probe_args.is_empty() { "" } else { " " },
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        crate::run::ompi_version(Path::new("ompi_info")),
    );
    text.push_str(&table(&points, &names, &shm, &opts.counts, base.as_ref()));
    print!("{text}");
    let write = |file: &str, body: &str| {
        let path = opts.out.join(file);
        std::fs::write(&path, body).map_err(|e| format!("{}: {e}", path.display()))
    };
    write("memory.txt", &text)?;
    write("memory.csv", &csv(&points, base.as_ref()))?;
    if opts.plots {
        let (all, shared, private) = samples(&points, &shm);
        let summaries = results::summarise(&all);
        for (chart, names) in [(&CHARTS[0], &shared), (&CHARTS[1], &private)] {
            match plot::draw(&summaries, names, chart, &opts.out) {
                Ok(Some(path)) => eprintln!("rmca-bench: plot {}", path.display()),
                Ok(None) => {}
                Err(e) => failures.push(format!("plot: {e}")),
            }
        }
    }
    eprintln!("rmca-bench: results in {}", opts.out.display());
    for f in &failures {
        eprintln!("rmca-bench: FAILED: {f}");
    }
    Ok(if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

const CHARTS: [plot::Chart<'static>; 2] = [
    plot::Chart {
        test: "memory",
        title: "Shared memory per node (the transport's segments)",
        unit: "bytes",
        x_desc: "ranks on the node",
        limit: None,
    },
    plot::Chart {
        test: "memory-rank",
        title: "Private memory per rank (Anonymous, mean)",
        unit: "bytes",
        x_desc: "ranks on the node",
        limit: None,
    },
];

#[cfg(test)]
mod tests;
