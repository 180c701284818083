//! Regressions stay visible: this run's ratios (each configuration over its
//! reference, at every test and size) against the same ratios computed from a previous
//! run's summary.csv (by default the committed docs/bench/summary.csv). A ratio that
//! got more than [`THRESHOLD_PERCENT`] worse is flagged; nothing here fails the run.
//!
//! Pure: parsing, comparing and printing only; main.rs picks the files.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::pairs::size_label;
use crate::report::{LIMITS, Summaries};
use crate::results::{higher_is_better, point_key};

/// A ratio that moved more than this many percent in the worse direction is flagged.
pub const THRESHOLD_PERCENT: f64 = 5.0;

/// Float noise in a change computed from printed medians (1.05 / 1.00 - 1 is
/// 0.050000000000000044): a change this close to the threshold counts as on it.
const EPSILON_PERCENT: f64 = 1e-9;

/// At most this many compared rows go to stdout; beyond it only the flagged ones
/// (the file always has every row).
pub const STDOUT_ROWS: usize = 30;

/// The median of one configuration at one point.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub config: String,
    pub test: String,
    pub size: u64,
    pub unit: String,
    pub median: f64,
}

/// The points of a summary.csv (`config,test,size,unit,median,...`, columns found by
/// their header names); the machine's limits are left out.
pub fn parse_csv(text: &str) -> Result<Vec<Point>, String> {
    let mut lines = text.lines().enumerate();
    let header: Vec<&str> = lines
        .next()
        .map(|(_, l)| l.split(',').map(str::trim).collect())
        .ok_or("empty file")?;
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| format!("no '{name}' column in the header"))
    };
    let (c, t, s, u, m) = (
        column("config")?,
        column("test")?,
        column("size")?,
        column("unit")?,
        column("median")?,
    );
    let mut points = Vec::new();
    for (index, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let field = |i: usize| {
            fields
                .get(i)
                .copied()
                .ok_or_else(|| format!("line {}: too few fields", index + 1))
        };
        let config = field(c)?;
        if config == LIMITS {
            continue;
        }
        let size = field(s)?;
        let median = field(m)?;
        points.push(Point {
            config: config.to_owned(),
            test: field(t)?.to_owned(),
            size: size
                .parse()
                .map_err(|_| format!("line {}: size '{size}' is not a number", index + 1))?,
            unit: field(u)?.to_owned(),
            median: median
                .parse()
                .map_err(|_| format!("line {}: median '{median}' is not a number", index + 1))?,
        });
    }
    Ok(points)
}

/// The points of this run's summaries (limits left out).
pub fn points_of(all: &Summaries) -> Vec<Point> {
    all.values()
        .filter(|s| s.config != LIMITS)
        .map(|s| Point {
            config: s.config.clone(),
            test: s.test.clone(),
            size: s.size,
            unit: s.unit.clone(),
            median: s.median,
        })
        .collect()
}

/// (config, reference, test position, test, size, unit).
type RatioKey = (String, String, usize, String, u64, String);

/// config / reference at every point where both have a positive median.
fn ratios(points: &[Point], reference: &dyn Fn(&str) -> Option<String>) -> BTreeMap<RatioKey, f64> {
    let median: BTreeMap<(&str, &str, u64, &str), f64> = points
        .iter()
        .filter(|p| p.median.is_finite() && p.median > 0.0)
        .map(|p| {
            (
                (p.config.as_str(), p.test.as_str(), p.size, p.unit.as_str()),
                p.median,
            )
        })
        .collect();
    let mut out = BTreeMap::new();
    for (&(config, test, size, unit), &value) in &median {
        let Some(base) = reference(config).filter(|r| r != config) else {
            continue;
        };
        let Some(&base_value) = median.get(&(base.as_str(), test, size, unit)) else {
            continue;
        };
        let (position, ..) = point_key(test, size, unit);
        out.insert(
            (
                config.to_owned(),
                base,
                position,
                test.to_owned(),
                size,
                unit.to_owned(),
            ),
            value / base_value,
        );
    }
    out
}

/// How a ratio of one point compares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Status {
    /// In both runs: `change` is new / old - 1, in percent.
    Compared {
        old: f64,
        new: f64,
        change: f64,
        worse: bool,
    },
    /// Only in this run.
    New { new: f64 },
    /// Only in the previous run, for a configuration this run measured.
    Dropped { old: f64 },
}

/// One ratio: `config / reference` at (test, size, unit).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub config: String,
    pub reference: String,
    pub test: String,
    pub size: u64,
    pub unit: String,
    pub status: Status,
}

/// Everything a comparison found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Comparison {
    pub rows: Vec<Row>,
    /// Configurations of the previous run that this run did not measure.
    pub not_measured: Vec<String>,
}

impl Comparison {
    pub fn flagged(&self) -> impl Iterator<Item = &Row> {
        self.rows
            .iter()
            .filter(|r| matches!(r.status, Status::Compared { worse: true, .. }))
    }

    fn count(&self, which: fn(&Status) -> bool) -> usize {
        self.rows.iter().filter(|r| which(&r.status)).count()
    }
}

/// The change of a ratio in percent (new / old - 1) and whether it is more than
/// `threshold` percent worse: up for latency (us), down for bandwidth and rate.
pub fn change(old: f64, new: f64, unit: &str, threshold: f64) -> (f64, bool) {
    let change = (new / old - 1.0) * 100.0;
    let worse = if higher_is_better(unit) {
        change < -(threshold + EPSILON_PERCENT)
    } else {
        change > threshold + EPSILON_PERCENT
    };
    (change, worse)
}

/// This run's ratios against the previous run's. `reference` names the configuration
/// each one is divided by (None, or itself: no ratio), for both runs alike.
pub fn compare(
    old: &[Point],
    new: &[Point],
    reference: &dyn Fn(&str) -> Option<String>,
    threshold: f64,
) -> Comparison {
    let old_ratios = ratios(old, reference);
    let new_ratios = ratios(new, reference);
    let measured: BTreeSet<&str> = new.iter().map(|p| p.config.as_str()).collect();
    let keys: BTreeSet<&RatioKey> = old_ratios
        .keys()
        .filter(|k| measured.contains(k.0.as_str()))
        .chain(new_ratios.keys())
        .collect();
    let rows = keys
        .into_iter()
        .map(|key| {
            let status = match (old_ratios.get(key), new_ratios.get(key)) {
                (Some(&old), Some(&new)) => {
                    let (change, worse) = change(old, new, &key.5, threshold);
                    Status::Compared {
                        old,
                        new,
                        change,
                        worse,
                    }
                }
                (None, Some(&new)) => Status::New { new },
                (Some(&old), None) => Status::Dropped { old },
                (None, None) => unreachable!("a key comes from one of the maps"),
            };
            Row {
                config: key.0.clone(),
                reference: key.1.clone(),
                test: key.3.clone(),
                size: key.4,
                unit: key.5.clone(),
                status,
            }
        })
        .collect();
    let not_measured: BTreeSet<String> = old
        .iter()
        .filter(|p| !measured.contains(p.config.as_str()))
        .map(|p| p.config.clone())
        .collect();
    Comparison {
        rows,
        not_measured: not_measured.into_iter().collect(),
    }
}

fn ratio_name(row: &Row) -> String {
    format!("{} / {}", row.config, row.reference)
}

/// New or dropped points, one line per ratio and test with its sizes.
fn one_sided(c: &Comparison, label: &str, which: fn(&Status) -> bool) -> String {
    let mut groups: BTreeMap<(String, usize, String), Vec<u64>> = BTreeMap::new();
    for row in c.rows.iter().filter(|r| which(&r.status)) {
        let (position, ..) = point_key(&row.test, row.size, &row.unit);
        groups
            .entry((ratio_name(row), position, row.test.clone()))
            .or_default()
            .push(row.size);
    }
    let mut out = String::new();
    for ((name, _, test), sizes) in groups {
        let sizes: Vec<String> = sizes.into_iter().map(size_label).collect();
        let _ = writeln!(out, "{label:<8} {name}  {test}: {}", sizes.join(", "));
    }
    out
}

/// The comparison as text. `full`: every compared row (the file); otherwise every row
/// when there are at most [`STDOUT_ROWS`], else the flagged ones only (stdout).
pub fn render(c: &Comparison, previous: &str, threshold: f64, full: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# regressions: this run's ratios against {previous}, both computed from the medians \
         (ratio = config / its stock counterpart, else / the baseline)"
    );
    let _ = writeln!(
        out,
        "# WORSE: more than {threshold} % worse (us: the ratio went up; MB/s, Mmsg/s: it went \
         down); flags only, the exit status does not depend on them"
    );
    let compared: Vec<&Row> = c
        .rows
        .iter()
        .filter(|r| matches!(r.status, Status::Compared { .. }))
        .collect();
    let flagged = c.flagged().count();
    let shown: Vec<&Row> = if full || compared.len() <= STDOUT_ROWS {
        compared.clone()
    } else {
        c.flagged().collect()
    };
    if !shown.is_empty() {
        let width = shown
            .iter()
            .map(|r| ratio_name(r).len())
            .max()
            .unwrap_or(0)
            .max("configuration".len());
        let _ = writeln!(
            out,
            "{:<width$} {:<8} {:>8} {:<6} {:>9} {:>9} {:>8}  flag",
            "configuration", "test", "size", "unit", "old", "new", "change"
        );
        for row in &shown {
            let Status::Compared {
                old,
                new,
                change,
                worse,
            } = row.status
            else {
                continue;
            };
            let line = format!(
                "{:<width$} {:<8} {:>8} {:<6} {old:>9.3} {new:>9.3} {change:>+7.1}%  {}",
                ratio_name(row),
                row.test,
                size_label(row.size),
                row.unit,
                if worse { "WORSE" } else { "" }
            );
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    let new = c.count(|s| matches!(s, Status::New { .. }));
    let dropped = c.count(|s| matches!(s, Status::Dropped { .. }));
    let _ = writeln!(
        out,
        "# {flagged} of {} compared ratio(s) more than {threshold} % worse{}; {new} new, \
         {dropped} dropped (not flagged)",
        compared.len(),
        if flagged == 0 { " (none)" } else { "" }
    );
    if full {
        out.push_str(&one_sided(c, "new", |s| matches!(s, Status::New { .. })));
        out.push_str(&one_sided(c, "dropped", |s| {
            matches!(s, Status::Dropped { .. })
        }));
        if !c.not_measured.is_empty() {
            let _ = writeln!(
                out,
                "# not measured in this run: {}",
                c.not_measured.join(", ")
            );
        }
    } else if shown.len() < compared.len() || new + dropped > 0 || !c.not_measured.is_empty() {
        let _ = writeln!(
            out,
            "# every compared row, the new and dropped points: regressions.txt"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(config: &str, test: &str, size: u64, unit: &str, median: f64) -> Point {
        Point {
            config: config.to_owned(),
            test: test.to_owned(),
            size,
            unit: unit.to_owned(),
            median,
        }
    }

    /// ours / stock for "ours", else / "base".
    fn reference(config: &str) -> Option<String> {
        Some(if config == "ours" { "stock" } else { "base" }.to_owned())
    }

    #[test]
    fn previous_csv_parses_by_header_and_leaves_limits_out() {
        let text = "config,test,size,unit,median,min,max,rounds,ratio_to_baseline\n\
                    limits,memcpy,8,MB/s,7872.8,7775.5,7873.2,3,\n\
                    rusnic,latency,8,us,9.6,9.1,10.2,3,0.92\n\
                    \n\
                    stock-tcp,bw,4194304,MB/s,2601.85,2500,2700,3,1\n";
        let points = parse_csv(text).unwrap();
        assert_eq!(
            points,
            vec![
                point("rusnic", "latency", 8, "us", 9.6),
                point("stock-tcp", "bw", 4 << 20, "MB/s", 2601.85),
            ]
        );
        // Columns are found by name, in any order.
        let moved = parse_csv("median,unit,size,test,config\n2.5,us,8,latency,a\n").unwrap();
        assert_eq!(moved, vec![point("a", "latency", 8, "us", 2.5)]);
        assert!(parse_csv("").unwrap_err().contains("empty"));
        assert!(
            parse_csv("config,test,size,unit\n")
                .unwrap_err()
                .contains("'median'")
        );
        let bad = parse_csv("config,test,size,unit,median\na,bw,x,MB/s,1\n").unwrap_err();
        assert!(bad.contains("line 2") && bad.contains("'x'"), "{bad}");
        let short = parse_csv("config,test,size,unit,median\na,bw\n").unwrap_err();
        assert!(short.contains("too few"), "{short}");
    }

    #[test]
    fn the_committed_summaries_parse() {
        let root = mca_harness::repo_root().join("docs/bench");
        for file in ["summary.csv", "ompi5.csv"] {
            let text = std::fs::read_to_string(root.join(file)).unwrap();
            let points = parse_csv(&text).unwrap();
            assert!(points.len() > 100, "{file}: {}", points.len());
            assert!(points.iter().all(|p| p.config != LIMITS));
        }
    }

    #[test]
    fn direction_depends_on_the_unit() {
        // Latency ratio up 10 %: worse; down 10 %: better.
        assert!(change(1.0, 1.1, "us", 5.0).1);
        assert!(!change(1.0, 0.9, "us", 5.0).1);
        // Bandwidth and rate: the other way round.
        assert!(change(1.0, 0.9, "MB/s", 5.0).1);
        assert!(!change(1.0, 1.1, "MB/s", 5.0).1);
        assert!(change(2.0, 1.8, "Mmsg/s", 5.0).1);
        let (percent, _) = change(0.8, 0.6, "us", 5.0);
        assert!((percent + 25.0).abs() < 1e-9, "{percent}");
    }

    #[test]
    fn exactly_the_threshold_is_not_flagged_just_beyond_it_is() {
        // 1.05 / 1.00 - 1 is a hair above 5 % in floating point: still not flagged.
        assert!(!change(1.0, 1.05, "us", 5.0).1);
        assert!(change(1.0, 1.0501, "us", 5.0).1);
        assert!(!change(1.0, 0.95, "MB/s", 5.0).1);
        assert!(!change(0.2, 0.19, "MB/s", 5.0).1);
        assert!(change(1.0, 0.9499, "MB/s", 5.0).1);
        // Another threshold.
        assert!(!change(1.0, 1.09, "us", 10.0).1);
        assert!(change(1.0, 1.11, "us", 10.0).1);
        // No change at all.
        assert_eq!(change(1.3, 1.3, "us", 5.0), (0.0, false));
    }

    #[test]
    fn ratios_are_compared_and_one_sided_points_listed_not_flagged() {
        let old = [
            point("stock", "latency", 8, "us", 10.0),
            point("ours", "latency", 8, "us", 8.0),
            point("stock", "bw", 1 << 20, "MB/s", 1000.0),
            point("ours", "bw", 1 << 20, "MB/s", 1500.0),
            point("stock", "latency", 1024, "us", 10.0),
            point("ours", "latency", 1024, "us", 10.0),
            // A configuration this run did not measure: named once, no rows.
            point("other", "latency", 8, "us", 3.0),
            point("base", "latency", 8, "us", 3.0),
        ];
        let new = [
            // Latency 0.80 -> 0.90: 12.5 % worse.
            point("stock", "latency", 8, "us", 10.0),
            point("ours", "latency", 8, "us", 9.0),
            // Bandwidth 1.50 -> 1.20: 20 % worse; the medians themselves both rose.
            point("stock", "bw", 1 << 20, "MB/s", 2000.0),
            point("ours", "bw", 1 << 20, "MB/s", 2400.0),
            // Only now.
            point("stock", "bw", 4 << 20, "MB/s", 1000.0),
            point("ours", "bw", 4 << 20, "MB/s", 900.0),
            // Zero medians give no ratio at all.
            point("stock", "bw", 0, "MB/s", 0.0),
            point("ours", "bw", 0, "MB/s", 0.0),
        ];
        let c = compare(&old, &new, &reference, THRESHOLD_PERCENT);
        let by = |test: &str, size: u64| {
            c.rows
                .iter()
                .find(|r| r.test == test && r.size == size)
                .unwrap()
                .status
        };
        let Status::Compared { change, worse, .. } = by("latency", 8) else {
            panic!("{c:?}")
        };
        assert!(worse && (change - 12.5).abs() < 1e-9);
        let Status::Compared {
            old, new, worse, ..
        } = by("bw", 1 << 20)
        else {
            panic!("{c:?}")
        };
        assert!(worse && (old - 1.5).abs() < 1e-12 && (new - 1.2).abs() < 1e-12);
        assert!(matches!(by("bw", 4 << 20), Status::New { .. }));
        assert!(matches!(by("latency", 1024), Status::Dropped { .. }));
        // stock / base was a ratio before; base was not measured now: dropped.
        assert_eq!(c.rows.len(), 5, "{c:?}");
        let gone = c.rows.iter().find(|r| r.config == "stock").unwrap();
        assert_eq!(gone.reference, "base");
        assert!(matches!(gone.status, Status::Dropped { .. }));
        assert_eq!(c.flagged().count(), 2);
        assert_eq!(c.not_measured, ["base", "other"]);
    }

    #[test]
    fn a_missing_reference_gives_no_ratio_and_a_config_is_not_its_own() {
        let old = [point("base", "latency", 8, "us", 2.0)];
        let new = [
            point("base", "latency", 8, "us", 2.0),
            // Its stock counterpart was not measured: nothing to compare.
            point("ours", "latency", 8, "us", 1.0),
        ];
        let c = compare(&old, &new, &reference, THRESHOLD_PERCENT);
        assert!(c.rows.is_empty(), "{c:?}");
        assert!(c.not_measured.is_empty());
    }

    #[test]
    fn the_table_names_the_flagged_rows_and_says_it_does_not_fail() {
        let old = [
            point("stock", "latency", 8, "us", 10.0),
            point("ours", "latency", 8, "us", 8.0),
            point("stock", "latency", 16, "us", 10.0),
            point("ours", "latency", 16, "us", 8.0),
        ];
        let new = [
            point("stock", "latency", 8, "us", 10.0),
            point("ours", "latency", 8, "us", 9.0),
            point("stock", "latency", 16, "us", 10.0),
            point("ours", "latency", 16, "us", 8.1),
            point("stock", "rate", 8, "Mmsg/s", 1.0),
            point("ours", "rate", 8, "Mmsg/s", 1.0),
        ];
        let c = compare(&old, &new, &reference, THRESHOLD_PERCENT);
        let text = render(&c, "docs/bench/summary.csv", THRESHOLD_PERCENT, true);
        assert!(text.contains("exit status does not depend"), "{text}");
        let header = text
            .lines()
            .find(|l| l.starts_with("configuration"))
            .unwrap();
        for column in ["test", "size", "old", "new", "change", "flag"] {
            assert!(header.contains(column), "{header}");
        }
        let worse = text.lines().find(|l| l.contains(" 8 B ")).unwrap();
        assert!(
            worse.starts_with("ours / stock")
                && worse.contains("0.800")
                && worse.contains("0.900")
                && worse.contains("+12.5%")
                && worse.ends_with("WORSE"),
            "{text}"
        );
        let fine = text.lines().find(|l| l.contains(" 16 B ")).unwrap();
        assert!(fine.ends_with("+1.2%"), "{text}");
        assert!(
            text.contains("1 of 2 compared ratio(s) more than 5 % worse; 1 new, 0 dropped"),
            "{text}"
        );
        assert!(text.contains("new      ours / stock  rate: 8 B"), "{text}");

        // On stdout, past STDOUT_ROWS compared rows, only the flagged ones.
        let mut old = Vec::new();
        let mut new = Vec::new();
        for size in 1..=(STDOUT_ROWS as u64 + 5) {
            old.push(point("stock", "latency", size, "us", 10.0));
            old.push(point("ours", "latency", size, "us", 10.0));
            new.push(point("stock", "latency", size, "us", 10.0));
            let worse = if size == 3 { 12.0 } else { 10.0 };
            new.push(point("ours", "latency", size, "us", worse));
        }
        let c = compare(&old, &new, &reference, THRESHOLD_PERCENT);
        let short = render(&c, "x.csv", THRESHOLD_PERCENT, false);
        let rows: Vec<&str> = short.lines().filter(|l| l.starts_with("ours")).collect();
        assert_eq!(rows.len(), 1, "{short}");
        assert!(rows[0].contains(" 3 B ") && rows[0].ends_with("WORSE"));
        assert!(short.contains("regressions.txt"), "{short}");
        let long = render(&c, "x.csv", THRESHOLD_PERCENT, true);
        assert_eq!(
            long.lines().filter(|l| l.starts_with("ours")).count(),
            STDOUT_ROWS + 5
        );
        // Nothing flagged says so.
        let c = compare(&old, &old, &reference, THRESHOLD_PERCENT);
        assert!(render(&c, "x.csv", THRESHOLD_PERCENT, false).contains("worse (none)"));
    }
}
