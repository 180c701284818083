//! NetPIPE beside our own numbers: its MPI module (Debian's netpipe-openmpi installs it
//! as `NPopenmpi`, upstream calls it `NPmpi`), run once per configuration of each pair
//! of ours and its stock counterpart, with a bounded size range and a fixed repetition
//! count. Its output file (`np.out`: bytes, throughput in Mbps, seconds per half round
//! trip) gives a latency and a bandwidth curve per configuration.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::pairs::Pair;
use crate::plot::Chart;
use crate::report::Summaries;
use crate::results::{Summary, point_key};

/// The names NetPIPE's MPI module goes by, looked for on PATH in this order.
pub const BINARIES: &[&str] = &["NPmpi", "NPopenmpi"];

/// The largest message (NetPIPE's -u): the largest size of the pairs' table.
pub const UPPER_BYTES: u64 = 4 << 20;

/// Ping-pongs per size and trial (NetPIPE's -n; by default it picks a count per size
/// that fills about a quarter second: ~20 s a run here, against 3-15 s).
pub const REPEATS: u32 = 50;

/// The size whose latency the summary compares.
pub const LATENCY_BYTES: u64 = 8;

/// The tests under which the curves are plotted.
pub const LATENCY_TEST: &str = "netpipe_latency";
pub const BW_TEST: &str = "netpipe_bw";

pub const CHARTS: &[Chart<'static>] = &[
    Chart {
        test: LATENCY_TEST,
        title: "NetPIPE: half round trip",
        unit: "us",
        x_desc: crate::plot::MESSAGE_SIZE,
        limit: None,
    },
    Chart {
        test: BW_TEST,
        title: "NetPIPE: ping-pong throughput",
        unit: "MB/s",
        x_desc: crate::plot::MESSAGE_SIZE,
        limit: None,
    },
];

/// NetPIPE's MPI module from PATH.
pub fn find() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    BINARIES.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// Its arguments: 1 B .. [`UPPER_BYTES`], [`REPEATS`] repetitions, no perturbed sizes
/// (powers of two and the halves between them), output into `np_out`.
pub fn arguments(np_out: &Path) -> Vec<String> {
    vec![
        "-u".to_owned(),
        UPPER_BYTES.to_string(),
        "-n".to_owned(),
        REPEATS.to_string(),
        "-p".to_owned(),
        "0".to_owned(),
        "-o".to_owned(),
        np_out.display().to_string(),
    ]
}

/// One line of np.out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub size: u64,
    /// As NetPIPE prints it (its Mbps are 2^20 bits per second).
    pub mbps: f64,
    /// Half the round trip, in seconds.
    pub seconds: f64,
}

impl Point {
    pub fn latency_us(&self) -> f64 {
        self.seconds * 1e6
    }

    /// Bytes per half round trip in MB/s (1 MB = 1e6 B, as mpibench counts).
    pub fn mb_per_s(&self) -> f64 {
        self.size as f64 / self.seconds / 1e6
    }
}

/// The lines of np.out: `bytes Mbps seconds`, blank lines skipped.
pub fn parse(np_out: &str) -> Result<Vec<Point>, String> {
    let mut points = Vec::new();
    for (index, line) in np_out.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let bad = || format!("np.out line {}: '{}'", index + 1, line.trim());
        let [size, mbps, seconds, ..] = words.as_slice() else {
            return Err(bad());
        };
        let point = Point {
            size: size.parse().map_err(|_| bad())?,
            mbps: mbps.parse().map_err(|_| bad())?,
            seconds: seconds.parse().map_err(|_| bad())?,
        };
        if !(point.seconds.is_finite() && point.seconds > 0.0) {
            return Err(bad());
        }
        points.push(point);
    }
    if points.is_empty() {
        return Err("np.out has no measurement".to_owned());
    }
    Ok(points)
}

/// One configuration's curve.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    pub config: String,
    pub points: Vec<Point>,
}

impl Curve {
    fn latency_at(&self, size: u64) -> Option<f64> {
        self.points
            .iter()
            .find(|p| p.size == size)
            .map(Point::latency_us)
    }

    /// The highest bandwidth and the size it was reached at.
    fn peak(&self) -> Option<(f64, u64)> {
        self.points
            .iter()
            .map(|p| (p.mb_per_s(), p.size))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    }
}

/// Every curve: `config,size,mbps,mb_per_s,latency_us`.
pub fn csv(curves: &[Curve]) -> String {
    let mut out = String::from("config,size,mbps,mb_per_s,latency_us\n");
    for c in curves {
        for p in &c.points {
            let _ = writeln!(
                out,
                "{},{},{},{},{}",
                c.config,
                p.size,
                p.mbps,
                p.mb_per_s(),
                p.latency_us()
            );
        }
    }
    out
}

/// The curves as one-round summaries under [`LATENCY_TEST`] and [`BW_TEST`], for
/// plot.rs.
pub fn summaries(curves: &[Curve]) -> Summaries {
    let mut all = BTreeMap::new();
    for c in curves {
        for p in &c.points {
            for (test, unit, value) in [
                (LATENCY_TEST, "us", p.latency_us()),
                (BW_TEST, "MB/s", p.mb_per_s()),
            ] {
                let summary = Summary {
                    config: c.config.clone(),
                    test: test.to_owned(),
                    size: p.size,
                    unit: unit.to_owned(),
                    median: value,
                    min: value,
                    max: value,
                    rounds: 1,
                };
                all.insert((c.config.clone(), point_key(test, p.size, unit)), summary);
            }
        }
    }
    all
}

fn ratio(ours: Option<f64>, stock: Option<f64>) -> Option<f64> {
    match (ours, stock) {
        (Some(o), Some(s)) if s > 0.0 => Some(o / s),
        _ => None,
    }
}

fn cell(value: Option<f64>, width: usize, precision: usize) -> String {
    match value {
        Some(v) => format!("{v:>width$.precision$}"),
        None => format!("{:>width$}", "-"),
    }
}

/// Per pair whose two curves were measured: 8-byte latency and peak bandwidth of ours
/// and stock, and ours / stock. Empty when no pair was.
pub fn table(curves: &[Curve], pairs: &[Pair], binary: &str) -> String {
    let curve = |name: &str| curves.iter().find(|c| c.config == name);
    let mut rows = String::new();
    for pair in pairs {
        let (Some(ours), Some(stock)) = (curve(&pair.ours), curve(&pair.stock)) else {
            continue;
        };
        let (lat_o, lat_s) = (
            ours.latency_at(LATENCY_BYTES),
            stock.latency_at(LATENCY_BYTES),
        );
        let (peak_o, peak_s) = (ours.peak(), stock.peak());
        let _ = writeln!(
            rows,
            "{:<36} {} {} {}  {} {} {}",
            format!("{} / {}", pair.ours, pair.stock),
            cell(lat_o, 9, 2),
            cell(lat_s, 9, 2),
            cell(ratio(lat_o, lat_s), 6, 2),
            cell(peak_o.map(|p| p.0), 10, 0),
            cell(peak_s.map(|p| p.0), 10, 0),
            cell(ratio(peak_o.map(|p| p.0), peak_s.map(|p| p.0)), 6, 2),
        );
    }
    if rows.is_empty() {
        return rows;
    }
    format!(
        "# NetPIPE ({binary} -u {UPPER_BYTES} -n {REPEATS} -p 0, one run per configuration): \
         ours / stock\n\
         # lat 8B: half round trip in us (ratio below 1.00 is better); peak: the highest \
         bandwidth at any size in MB/s (above 1.00 is better)\n\
         {:<36} {:>9} {:>9} {:>6}  {:>10} {:>10} {:>6}\n{rows}",
        "pair", "lat ours", "stock", "ratio", "peak ours", "stock", "ratio"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configs::Series;
    use crate::pairs::pairs;

    /// The head of a real np.out (NPopenmpi -p 0 on vader).
    const NP_OUT: &str = "       1 5.765826   0.00000132
       2 12.343015   0.00000124
       8 107.202254   0.00000057
 2097152 20309.340306   0.00078781

 4194304 13147.09   0.00243400
";

    fn curve(config: &str, text: &str) -> Curve {
        Curve {
            config: config.to_owned(),
            points: parse(text).unwrap(),
        }
    }

    #[test]
    fn np_out_lines_give_latency_and_bandwidth() {
        let points = parse(NP_OUT).unwrap();
        assert_eq!(points.len(), 5);
        assert_eq!(points[2].size, 8);
        assert!((points[2].latency_us() - 0.57).abs() < 1e-9);
        assert_eq!(points[3].mbps, 20309.340306);
        // 2 MiB in 787.81 us: 2662 MB/s.
        assert!(
            (points[3].mb_per_s() - 2662.0).abs() < 0.5,
            "{:?}",
            points[3]
        );
        assert!(parse("").unwrap_err().contains("no measurement"));
        assert!(parse("8 1.0\n").unwrap_err().contains("line 1"));
        assert!(parse("8 x 0.1\n").unwrap_err().contains("'8 x 0.1'"));
        assert!(parse("8 1.0 0\n").is_err());
    }

    #[test]
    fn arguments_bound_sizes_and_repetitions() {
        let args = arguments(Path::new("/tmp/x/np.out"));
        assert_eq!(
            args,
            [
                "-u",
                "4194304",
                "-n",
                "50",
                "-p",
                "0",
                "-o",
                "/tmp/x/np.out"
            ]
        );
    }

    #[test]
    fn the_table_compares_8_byte_latency_and_peak_bandwidth() {
        let curves = [
            curve("rusnic", "8 1 0.000004\n1048576 1 0.0005\n"),
            curve(
                "stock-tcp",
                "8 1 0.000005\n1048576 1 0.001\n4194304 1 0.0035\n",
            ),
            // Its counterpart was not run: no row.
            curve("rsmcuda", "8 1 0.000001\n"),
        ];
        let t = table(&curves, &pairs(Series::Ompi41), "NPopenmpi");
        assert!(
            t.starts_with("# NetPIPE (NPopenmpi -u 4194304 -n 50"),
            "{t}"
        );
        let row = t
            .lines()
            .find(|l| l.starts_with("rusnic / stock-tcp"))
            .unwrap();
        let words: Vec<&str> = row.split_whitespace().collect();
        // 4.00 / 5.00 us; peaks 2097 (1 MiB in 500 us) / 1198 (4 MiB in 3.5 ms) MB/s.
        assert_eq!(
            words[3..],
            ["4.00", "5.00", "0.80", "2097", "1198", "1.75"],
            "{t}"
        );
        assert!(!t.contains("rsmcuda"), "{t}");
        assert_eq!(table(&curves[2..], &pairs(Series::Ompi41), "NPmpi"), "");
    }

    #[test]
    fn curves_become_csv_and_plottable_summaries() {
        let curves = [curve("rusnic", "8 1 0.000004\n1024 2 0.00001\n")];
        let text = csv(&curves);
        assert_eq!(text.lines().count(), 3);
        assert!(text.starts_with("config,size,mbps,mb_per_s,latency_us\n"));
        let row: Vec<f64> = text.lines().nth(1).unwrap()["rusnic,".len()..]
            .split(',')
            .map(|v| v.parse().unwrap())
            .collect();
        let expected = [8.0, 1.0, 2.0, 4.0];
        assert!(
            row.iter().zip(expected).all(|(v, e)| (v - e).abs() < 1e-9),
            "{text}"
        );
        let all = summaries(&curves);
        assert_eq!(all.len(), 4);
        let lat = &all[&("rusnic".to_owned(), point_key(LATENCY_TEST, 8, "us"))];
        assert_eq!((lat.median, lat.rounds), (4.0, 1));
        let bw = &all[&("rusnic".to_owned(), point_key(BW_TEST, 1024, "MB/s"))];
        assert!((bw.median - 102.4).abs() < 1e-9);
    }
}
