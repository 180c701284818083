//! `make demo`: each of our transports beside the stock component it stands in for,
//! at a few sizes, in one short table a new user can read at a glance.

use std::fmt::Write as _;

use crate::configs::Series;
use crate::pairs::{Pair, median, pairs, size_label};
use crate::report::Summaries;
use crate::results::higher_is_better;

/// The pairs of the given series, in that order.
pub fn series_pairs(series: &[Series]) -> Vec<Pair> {
    series.iter().flat_map(|s| pairs(*s)).collect()
}

/// What the demo measures: small-message latency and large-message bandwidth only
/// (a bandwidth of zero-byte messages would be a row of zeros).
pub const POINTS: &[(&str, u64, &str)] = &[
    ("latency", 8, "us"),
    ("latency", 1 << 10, "us"),
    ("bw", 64 << 10, "MB/s"),
    ("bw", 1 << 20, "MB/s"),
];

/// mpibench's arguments for exactly the points above.
pub fn mpibench_args() -> Vec<String> {
    ["--test", "latency,bw", "--sizes", "8,1k,64k,1m", "--quick"]
        .iter()
        .map(|a| (*a).to_owned())
        .collect()
}

/// A difference smaller than this is within what one quick round can tell apart.
const SAME_WITHIN: f64 = 0.03;

fn verdict(ours: f64, stock: f64, unit: &str) -> String {
    // As a speed-up, so that "faster" means the same thing for both units.
    let speedup = if higher_is_better(unit) {
        ours / stock
    } else {
        stock / ours
    };
    if (speedup - 1.0).abs() < SAME_WITHIN {
        "about the same".to_owned()
    } else if speedup > 1.0 {
        format!("{speedup:.2}x faster")
    } else {
        format!("{:.2}x slower", 1.0 / speedup)
    }
}

fn value_label(value: f64, unit: &str) -> String {
    if unit == "us" {
        format!("{value:.2} us")
    } else {
        format!("{value:.0} {unit}")
    }
}

/// The table: a block per pair whose two configurations were both measured (4.1's
/// pairs, then 5.0's), a row per point that both measured with a positive value. Rows
/// that cannot be compared are left out rather than shown as zeros; a pair with no
/// such row says why.
pub fn table(all: &Summaries, measured: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<36} {:<16} {:>12} {:>12}  ours is",
        "ours vs stock", "test", "ours", "stock"
    );
    for pair in series_pairs(&[Series::Ompi41, Series::Ompi50]) {
        if !pair.measured_in(measured) {
            continue;
        }
        let (ours, stock, about) = (pair.ours.as_str(), pair.stock.as_str(), pair.about);
        let title = format!("{ours} vs {stock}");
        let _ = writeln!(out, "{title:<36} ({about})");
        let mut rows = 0;
        for (test, size, unit) in POINTS {
            let value = |config: &str| median(all, config, test, *size, unit);
            let (Some(o), Some(s)) = (value(ours), value(stock)) else {
                continue;
            };
            rows += 1;
            let name = if *test == "bw" { "bandwidth" } else { test };
            let _ = writeln!(
                out,
                "{:<36} {:<16} {:>12} {:>12}  {}",
                "",
                format!("{name} {}", size_label(*size)),
                value_label(o, unit),
                value_label(s, unit),
                verdict(o, s, unit)
            );
        }
        if rows == 0 {
            let _ = writeln!(
                out,
                "{:<36} no point measured by both (see the log above)",
                ""
            );
        }
    }
    let _ = writeln!(
        out,
        "one quick round, 2 ranks bound to cores; `make bench` takes medians over interleaved rounds"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::summarise;
    use crate::results::tests::sample;

    #[test]
    fn pairs_show_ours_beside_stock_with_a_verdict() {
        let all = summarise(&[
            sample("rusnic", "latency", 8, "us", 2.0),
            sample("stock-tcp", "latency", 8, "us", 4.0),
            sample("rusnic", "bw", 1 << 20, "MB/s", 1000.0),
            sample("stock-tcp", "bw", 1 << 20, "MB/s", 1010.0),
            sample("rsmcuda", "bw", 64 << 10, "MB/s", 500.0),
            sample("stock-vader", "bw", 64 << 10, "MB/s", 1000.0),
        ]);
        let measured: Vec<String> = ["rusnic", "stock-tcp", "rsmcuda", "stock-vader"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let t = table(&all, &measured);
        let lat = t.lines().find(|l| l.contains("latency 8 B")).unwrap();
        assert!(lat.contains("2.00 us") && lat.contains("4.00 us"), "{t}");
        assert!(lat.ends_with("2.00x faster"), "{t}");
        let bw = t.lines().find(|l| l.contains("bandwidth 1 MiB")).unwrap();
        assert!(bw.ends_with("about the same"), "{t}");
        let shm = t.lines().find(|l| l.contains("bandwidth 64 KiB")).unwrap();
        assert!(shm.ends_with("2.00x slower"), "{t}");
        // rofi was not measured: no block; unmeasured points: no row.
        assert!(!t.contains("rofi"), "{t}");
        assert!(!t.contains("latency 1 KiB"), "{t}");
    }

    #[test]
    fn zero_or_missing_values_make_no_row() {
        let all = summarise(&[
            sample("rusnic", "bw", 1 << 20, "MB/s", 0.0),
            sample("stock-tcp", "bw", 1 << 20, "MB/s", 900.0),
        ]);
        let measured = vec!["rusnic".to_owned(), "stock-tcp".to_owned()];
        let t = table(&all, &measured);
        assert!(!t.contains(" 0 MB/s"), "{t}");
        assert!(t.contains("no point measured by both"), "{t}");
    }
}
