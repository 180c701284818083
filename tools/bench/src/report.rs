//! The table on stdout and the files under build/bench: CSV and JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::results::{PointKey, Sample, Summary, higher_is_better, point_key};

/// The configuration name under which limits are recorded.
pub const LIMITS: &str = "limits";

pub type Summaries = BTreeMap<(String, PointKey), Summary>;

fn summary<'a>(all: &'a Summaries, config: &str, key: &PointKey) -> Option<&'a Summary> {
    all.get(&(config.to_owned(), key.clone()))
}

/// The physical limit that bounds a point, if measured: memcpy bandwidth of the same
/// size for bandwidths, half the raw UDP round trip for latencies up to the size of
/// that round trip's message.
pub fn limit_for(all: &Summaries, test: &str, size: u64) -> Option<f64> {
    let limit = match test {
        "bw" | "bibw" => summary(all, LIMITS, &point_key("memcpy", size, "MB/s")).map(|s| s.median),
        "latency" => all
            .iter()
            .find(|((c, k), _)| c == LIMITS && k.1 == "udp_rtt" && size <= k.2)
            .map(|(_, s)| s.median / 2.0),
        _ => None,
    };
    limit.filter(|l| *l > 0.0)
}

/// Every MPI point measured by any configuration, in display order.
fn mpi_points(all: &Summaries) -> Vec<PointKey> {
    let mut keys: Vec<PointKey> = all
        .keys()
        .filter(|(c, _)| c != LIMITS)
        .map(|(_, k)| k.clone())
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

pub fn human_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}

/// The summary table: medians over rounds, the ratio of each configuration to the
/// baseline, and the physical limit.
pub fn table(all: &Summaries, configs: &[String], baseline: &str, rounds: u32) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# medians over {rounds} interleaved round(s); ratio = config / {baseline} \
         (us: lower is better; MB/s, Mmsg/s: higher is better)"
    );
    let _ = writeln!(
        out,
        "# limit: memcpy bandwidth of that size (bw, bibw), half the raw UDP loopback round trip (latency)"
    );
    // A column is as wide as its name (5.0's are longer), at least 14.
    let width = |c: &str| c.len().max(14);
    let mut header = format!("{:<8} {:>6} {:<6}", "test", "size", "unit");
    for c in configs {
        let _ = write!(header, " {c:>w$} {:>6}", "ratio", w = width(c));
    }
    let _ = write!(header, " {:>12}", "limit");
    let _ = writeln!(out, "{header}");
    for key in mpi_points(all) {
        let (_, test, size, unit) = &key;
        let mut row = format!("{test:<8} {:>6} {unit:<6}", human_size(*size));
        let base = summary(all, baseline, &key).map(|s| s.median);
        for c in configs {
            match summary(all, c, &key) {
                Some(s) => {
                    let ratio = match base {
                        Some(b) if b > 0.0 => format!("{:6.2}", s.median / b),
                        _ => format!("{:>6}", "-"),
                    };
                    let _ = write!(row, " {:>w$.3} {ratio}", s.median, w = width(c));
                }
                None => {
                    let _ = write!(row, " {:>w$} {:>6}", "-", "-", w = width(c));
                }
            }
        }
        match limit_for(all, test, *size) {
            Some(l) => {
                let _ = write!(row, " {l:>12.3}");
            }
            None => {
                let _ = write!(row, " {:>12}", "-");
            }
        }
        let _ = writeln!(out, "{row}");
    }
    let limits: Vec<&Summary> = all
        .iter()
        .filter(|((c, _), _)| c == LIMITS)
        .map(|(_, s)| s)
        .collect();
    if !limits.is_empty() {
        let _ = writeln!(
            out,
            "# machine limits (no MPI; medians over rounds): udp_rtt, udp_mmsg_rtt, tcp_rtt a whole round \
             trip; fi_pingpong_* libfabric's own ping-pong, half a round trip like latency"
        );
        let width = limits
            .iter()
            .map(|s| s.test.len())
            .max()
            .unwrap_or(0)
            .max(8);
        for s in limits {
            let _ = writeln!(
                out,
                "{:<width$} {:>6} {:<6} {:>14.3}",
                s.test,
                human_size(s.size),
                s.unit,
                s.median
            );
        }
    }
    out
}

/// Which configuration is best at each point, in one line per test (for the README).
pub fn winners(all: &Summaries, configs: &[String]) -> String {
    let mut out = String::new();
    for key in mpi_points(all) {
        let best = configs
            .iter()
            .filter_map(|c| summary(all, c, &key).map(|s| (c, s.median)))
            .filter(|(_, v)| *v > 0.0)
            .reduce(|a, b| {
                let better = if higher_is_better(&key.3) {
                    b.1 > a.1
                } else {
                    b.1 < a.1
                };
                if better { b } else { a }
            });
        if let Some((c, v)) = best {
            let _ = writeln!(
                out,
                "{:<8} {:>6} best: {c} ({v:.3} {})",
                key.1,
                human_size(key.2),
                key.3
            );
        }
    }
    out
}

/// Every sample, one per line.
pub fn samples_csv(samples: &[Sample]) -> String {
    let mut out = String::from("config,round,test,size,unit,value\n");
    for s in samples {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{}",
            s.config, s.round, s.test, s.size, s.unit, s.value
        );
    }
    out
}

/// The summaries with ratios to the baseline.
pub fn summary_csv(all: &Summaries, baseline: &str) -> String {
    let mut out = String::from("config,test,size,unit,median,min,max,rounds,ratio_to_baseline\n");
    for ((config, key), s) in all {
        let ratio = summary(all, baseline, key)
            .filter(|b| b.median > 0.0 && config != LIMITS)
            .map(|b| format!("{}", s.median / b.median))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{config},{},{},{},{},{},{},{},{ratio}",
            s.test, s.size, s.unit, s.median, s.min, s.max, s.rounds
        );
    }
    out
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".to_owned()
    }
}

/// Everything in one document: the run's parameters, the configurations, every
/// sample and every summary.
pub fn json(
    meta: &[(&str, String)],
    configs: &[(String, String)],
    samples: &[Sample],
    all: &Summaries,
) -> String {
    let mut out = String::from("{\n");
    for (key, value) in meta {
        let _ = writeln!(out, "  {}: {},", json_string(key), json_string(value));
    }
    out.push_str("  \"configs\": [\n");
    for (i, (name, command)) in configs.iter().enumerate() {
        let comma = if i + 1 < configs.len() { "," } else { "" };
        let _ = writeln!(
            out,
            "    {{\"name\": {}, \"mpirun_args\": {}}}{comma}",
            json_string(name),
            json_string(command)
        );
    }
    out.push_str("  ],\n  \"samples\": [\n");
    for (i, s) in samples.iter().enumerate() {
        let comma = if i + 1 < samples.len() { "," } else { "" };
        let _ = writeln!(
            out,
            "    {{\"config\": {}, \"round\": {}, \"test\": {}, \"size\": {}, \"unit\": {}, \"value\": {}}}{comma}",
            json_string(&s.config),
            s.round,
            json_string(&s.test),
            s.size,
            json_string(&s.unit),
            json_number(s.value)
        );
    }
    out.push_str("  ],\n  \"summary\": [\n");
    let n = all.len();
    for (i, s) in all.values().enumerate() {
        let comma = if i + 1 < n { "," } else { "" };
        let _ = writeln!(
            out,
            "    {{\"config\": {}, \"test\": {}, \"size\": {}, \"unit\": {}, \"median\": {}, \"min\": {}, \"max\": {}, \"rounds\": {}}}{comma}",
            json_string(&s.config),
            json_string(&s.test),
            s.size,
            json_string(&s.unit),
            json_number(s.median),
            json_number(s.min),
            json_number(s.max),
            s.rounds
        );
    }
    out.push_str("  ]\n}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::summarise;
    use crate::results::tests::sample;

    #[test]
    fn table_shows_ratios_to_the_baseline_and_the_limit() {
        let all = summarise(&[
            sample("a", "latency", 8, "us", 10.0),
            sample("b", "latency", 8, "us", 5.0),
            sample("a", "bw", 1 << 20, "MB/s", 1000.0),
            sample("b", "bw", 1 << 20, "MB/s", 3000.0),
            sample(LIMITS, "memcpy", 1 << 20, "MB/s", 20000.0),
            sample(LIMITS, "udp_rtt", 8, "us", 12.0),
        ]);
        let configs = ["a".to_owned(), "b".to_owned()];
        let t = table(&all, &configs, "a", 1);
        let lat = t.lines().find(|l| l.starts_with("latency")).unwrap();
        assert!(lat.contains("0.50"), "{lat}");
        assert!(lat.trim_end().ends_with("6.000"), "{lat}");
        let bw = t.lines().find(|l| l.starts_with("bw")).unwrap();
        assert!(
            bw.contains("1M") && bw.contains("3.00") && bw.contains("20000.000"),
            "{bw}"
        );
        // Columns line up under names longer than the usual width.
        let long = ["a".to_owned(), "stock-ofi-tcp-ompi5".to_owned()];
        let t = table(&all, &long, "a", 1);
        let header = t.lines().find(|l| l.starts_with("test")).unwrap();
        let lat = t.lines().find(|l| l.starts_with("latency")).unwrap();
        let end = header.find("stock-ofi-tcp-ompi5").unwrap() + "stock-ofi-tcp-ompi5".len();
        assert_eq!(lat.find("  -      -").map(|i| i + 3), Some(end), "{t}");
        let w = winners(&all, &configs);
        assert!(
            w.contains("latency       8 best: b") && w.contains("bw           1M best: b"),
            "{w}"
        );
    }

    #[test]
    fn json_is_escaped_and_has_no_nan() {
        let all = summarise(&[sample("a\"b", "bw", 0, "MB/s", f64::NAN)]);
        let j = json(
            &[("mode", "quick".to_owned())],
            &[],
            &[sample("a\"b", "bw", 0, "MB/s", f64::NAN)],
            &all,
        );
        assert!(
            j.contains("\"a\\\"b\"") && j.contains("\"value\": null"),
            "{j}"
        );
    }
}
