//! Each of ours against the stock component it stands in for, in the same Open MPI
//! series: the pairs of `make demo`, and the ratio view of a run that measured them
//! (for both series side by side, with how 5.0's ratio compares with 4.1's).

use std::fmt::Write as _;

use std::collections::BTreeMap;

use crate::configs::Series;
use crate::report::Summaries;
use crate::results::{self, Sample, higher_is_better, point_key};

/// Ours and the stock configuration a user would otherwise run (4.1 names), and how
/// to call the pair on 4.1 and on 5.0.
const PAIRS: &[(&str, &str, &str, &str)] = &[
    (
        "rusnic",
        "stock-tcp",
        "UDP datagrams (BTL) vs ob1/tcp",
        "UDP datagrams (BTL) vs ob1/tcp",
    ),
    (
        "rofi-tcp",
        "stock-ofi-tcp",
        "libfabric tcp;ofi_rxm (MTL) vs ofi",
        "libfabric tcp;ofi_rxm (MTL) vs ofi",
    ),
    (
        "rsmcuda",
        "stock-vader",
        "shared memory (BTL) vs vader",
        "shared memory (BTL) vs sm",
    ),
];

/// One of ours beside its stock counterpart in one series.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    pub series: Series,
    pub ours: String,
    pub stock: String,
    pub about: &'static str,
}

impl Pair {
    /// Both configurations of the pair are among `measured`.
    pub fn measured_in(&self, measured: &[String]) -> bool {
        measured.contains(&self.ours) && measured.contains(&self.stock)
    }
}

/// The pair of `PAIRS` entry `entry` in `series`, if both have a counterpart there.
fn pair_of(entry: &(&str, &str, &'static str, &'static str), series: Series) -> Option<Pair> {
    let (ours, stock, about41, about50) = *entry;
    Some(Pair {
        series,
        ours: series.name(ours)?,
        stock: series.name(stock)?,
        about: match series {
            Series::Ompi41 => about41,
            Series::Ompi50 => about50,
        },
    })
}

/// The pairs of one series, in display order.
pub fn pairs(series: Series) -> Vec<Pair> {
    PAIRS.iter().filter_map(|e| pair_of(e, series)).collect()
}

/// The stock counterpart of `config` if it is one of ours in a pair of either series
/// (`rusnic` -> `stock-tcp`, `rsmcuda-ompi5` -> `stock-sm-ompi5`).
pub fn stock_of(config: &str) -> Option<String> {
    [Series::Ompi41, Series::Ompi50]
        .into_iter()
        .flat_map(pairs)
        .find(|p| p.ours == config)
        .map(|p| p.stock)
}

/// The points of the ratio view: small-message latency, large-message bandwidth, the
/// 8-byte message rate and the 4-rank collectives (issue #19's targets); a point a
/// run did not measure shows `-`.
pub const POINTS: &[(&str, u64, &str)] = &[
    ("latency", 8, "us"),
    ("latency", 1 << 10, "us"),
    ("bw", 64 << 10, "MB/s"),
    ("bw", 1 << 20, "MB/s"),
    ("bw", 4 << 20, "MB/s"),
    ("rate", 8, "Mmsg/s"),
    ("allreduce", 8, "us"),
    ("allreduce", 64 << 10, "us"),
    ("alltoall", 8, "us"),
    ("alltoall", 64 << 10, "us"),
];

/// A size as `8 B`, `64 KiB`, `1 MiB`.
pub fn size_label(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The median of `config` at a point, when it is a positive number.
pub fn median(all: &Summaries, config: &str, test: &str, size: u64, unit: &str) -> Option<f64> {
    all.get(&(config.to_owned(), point_key(test, size, unit)))
        .map(|s| s.median)
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// ours / stock at each round that measured both at a point, in round order (latency:
/// below 1 is better; bandwidth: above 1).
pub fn round_ratios(
    samples: &[Sample],
    pair: &Pair,
    test: &str,
    size: u64,
    unit: &str,
) -> Vec<(u32, f64)> {
    results::round_ratios(samples, &pair.ours, &pair.stock, (test, size, unit))
}

/// The median of per-round ratios (a pair's ratio at a point), if there are any.
fn median_ratio(per_round: &[(u32, f64)]) -> Option<f64> {
    let mut values: Vec<f64> = per_round.iter().map(|(_, r)| *r).collect();
    (!values.is_empty()).then(|| results::median(&mut values))
}

/// How much better (+) or worse (-) ratio `later` is than `earlier`, as a percentage
/// of the speed-up over stock: for latency a smaller ratio is the better one.
pub fn change_percent(earlier: f64, later: f64, unit: &str) -> f64 {
    let speedup = |r: f64| if higher_is_better(unit) { r } else { 1.0 / r };
    (speedup(later) / speedup(earlier) - 1.0) * 100.0
}

/// 5.0's ratio against 4.1's, round by round: in how many of the rounds that measured
/// both pairs 5.0's was the better one, and whether that count is beyond chance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoundVotes {
    pub better: usize,
    pub rounds: usize,
}

impl RoundVotes {
    pub fn count(r41: &[(u32, f64)], r50: &[(u32, f64)], unit: &str) -> Self {
        let r41: BTreeMap<u32, f64> = r41.iter().copied().collect();
        let mut votes = RoundVotes {
            better: 0,
            rounds: 0,
        };
        for (round, later) in r50 {
            let Some(earlier) = r41.get(round) else {
                continue;
            };
            votes.rounds += 1;
            if change_percent(*earlier, *later, unit) > 0.0 {
                votes.better += 1;
            }
        }
        votes
    }

    /// Two-sided sign test: the chance of a split at least this uneven when neither
    /// series is better (each round a fair coin).
    pub fn p_value(&self) -> f64 {
        let n = self.rounds;
        if n == 0 {
            return 1.0;
        }
        let extreme = self.better.min(n - self.better);
        let tail: f64 = (0..=extreme).map(|k| binomial(n, k)).sum::<f64>() / 2f64.powi(n as i32);
        (2.0 * tail).min(1.0)
    }

    /// "+" when 5.0 was better in significantly many rounds, "-" when worse, "=" when
    /// this run cannot tell them apart (p >= 0.05).
    pub fn verdict(&self) -> &'static str {
        if self.p_value() >= 0.05 {
            "="
        } else if 2 * self.better > self.rounds {
            "+"
        } else {
            "-"
        }
    }
}

fn binomial(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

fn column(test: &str, size: u64) -> String {
    let test = match test {
        "bw" => "bw",
        "rate" => "rate",
        "allreduce" => "ared",
        "alltoall" => "a2a",
        _ => "lat",
    };
    format!(
        "{test} {}",
        size_label(size).replace("iB", "").replace(' ', "")
    )
}

/// The ratio view: for every pair measured, ours / stock at [`POINTS`] in each series
/// (the median of the per-round ratios); where a pair was measured in both series, how
/// 5.0's ratio compares with 4.1's and in how many rounds 5.0's was the better one,
/// with the sign test's verdict. Empty when no pair was measured.
pub fn table(samples: &[Sample], measured: &[String]) -> String {
    let mut out = String::new();
    for entry in PAIRS {
        let mut ratios: Vec<Vec<Vec<(u32, f64)>>> = Vec::new();
        for series in [Series::Ompi41, Series::Ompi50] {
            let Some(pair) = pair_of(entry, series).filter(|p| p.measured_in(measured)) else {
                continue;
            };
            let per_point: Vec<Vec<(u32, f64)>> = POINTS
                .iter()
                .map(|(test, size, unit)| round_ratios(samples, &pair, test, *size, unit))
                .collect();
            let title = format!("{} / {}", pair.ours, pair.stock);
            let mut row = format!("{title:<36} {:<10}", series.label());
            for per_round in &per_point {
                let _ = match median_ratio(per_round) {
                    Some(r) => write!(row, " {r:>8.2}"),
                    None => write!(row, " {:>8}", "-"),
                };
            }
            let _ = writeln!(out, "{row}");
            ratios.push(per_point);
        }
        if let [r41, r50] = ratios.as_slice() {
            let mut change = format!("{:<36} {:<10}", "", "5.0 vs 4.1");
            let mut rounds = format!("{:<36} {:<10}", "", "5.0 better");
            for ((a, b), (_, _, unit)) in r41.iter().zip(r50).zip(POINTS) {
                let _ = match (median_ratio(a), median_ratio(b)) {
                    (Some(a), Some(b)) => write!(change, " {:>+7.0}%", change_percent(a, b, unit)),
                    _ => write!(change, " {:>8}", "-"),
                };
                let votes = RoundVotes::count(a, b, unit);
                let _ = if votes.rounds == 0 {
                    write!(rounds, " {:>8}", "-")
                } else {
                    let cell = format!("{}/{} {}", votes.better, votes.rounds, votes.verdict());
                    write!(rounds, " {cell:>8}")
                };
            }
            let _ = writeln!(out, "{change}\n{rounds}");
        }
    }
    if out.is_empty() {
        return out;
    }
    let mut header = format!("{:<36} {:<10}", "pair", "series");
    for (test, size, _) in POINTS {
        let _ = write!(header, " {:>8}", column(test, *size));
    }
    format!(
        "# pairs: ours / stock of the same Open MPI series, the median of the per-round ratios \
         (lat, ared, a2a: below 1.00 is better; bw, rate: above 1.00 is better; ared, a2a: \
         MPI_Allreduce, MPI_Alltoall latency at 4 ranks)\n\
         # 5.0 vs 4.1: how much better (+) or worse (-) 5.0's ratio is than 4.1's\n\
         # 5.0 better: in how many rounds 5.0's ratio beat 4.1's of the same round; sign test: \
         + better, - worse (p < 0.05), = this run cannot tell\n{header}\n{out}"
    )
}

/// The same as CSV:
/// `series,ours,stock,test,size,unit,ours_median,stock_median,ratio,rounds,ratio_min,ratio_max`
/// (ratio: the median of the per-round ratios).
pub fn csv(all: &Summaries, samples: &[Sample], measured: &[String]) -> String {
    let mut out = String::from(
        "series,ours,stock,test,size,unit,ours_median,stock_median,ratio,rounds,ratio_min,ratio_max\n",
    );
    for series in [Series::Ompi41, Series::Ompi50] {
        for pair in pairs(series).iter().filter(|p| p.measured_in(measured)) {
            for (test, size, unit) in POINTS {
                let per_round = round_ratios(samples, pair, test, *size, unit);
                let (Some(o), Some(s), Some(r)) = (
                    median(all, &pair.ours, test, *size, unit),
                    median(all, &pair.stock, test, *size, unit),
                    median_ratio(&per_round),
                ) else {
                    continue;
                };
                let lo = per_round
                    .iter()
                    .map(|(_, r)| *r)
                    .fold(f64::INFINITY, f64::min);
                let hi = per_round
                    .iter()
                    .map(|(_, r)| *r)
                    .fold(f64::NEG_INFINITY, f64::max);
                let _ = writeln!(
                    out,
                    "{},{},{},{test},{size},{unit},{o},{s},{r},{},{lo},{hi}",
                    series.label(),
                    pair.ours,
                    pair.stock,
                    per_round.len()
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::summarise;
    use crate::results::tests::sample;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn each_series_pairs_ours_with_its_own_stock() {
        let p41 = pairs(Series::Ompi41);
        let p50 = pairs(Series::Ompi50);
        assert_eq!(p41.len(), 3);
        assert_eq!(p50.len(), 3);
        assert_eq!(
            (p41[2].ours.as_str(), p41[2].stock.as_str()),
            ("rsmcuda", "stock-vader")
        );
        assert_eq!(
            (p50[2].ours.as_str(), p50[2].stock.as_str()),
            ("rsmcuda-ompi5", "stock-sm-ompi5")
        );
        assert_eq!(p50[1].stock, "stock-ofi-tcp-ompi5");
        assert!(p50[2].about.ends_with("vs sm"));
        assert!(p50.iter().all(|p| p.series == Series::Ompi50));
    }

    #[test]
    fn ours_know_their_stock_counterpart() {
        assert_eq!(stock_of("rusnic").as_deref(), Some("stock-tcp"));
        assert_eq!(stock_of("rofi-tcp").as_deref(), Some("stock-ofi-tcp"));
        assert_eq!(stock_of("rsmcuda-ompi5").as_deref(), Some("stock-sm-ompi5"));
        assert_eq!(stock_of("stock-tcp"), None);
        assert_eq!(stock_of("rusnic-noput"), None);
    }

    #[test]
    fn changes_count_a_smaller_latency_ratio_as_better() {
        // Latency ratio 0.80 -> 0.40: twice the speed-up over stock.
        assert!((change_percent(0.8, 0.4, "us") - 100.0).abs() < 1e-9);
        // Bandwidth ratio 1.25 -> 1.00: a fifth less.
        assert!((change_percent(1.25, 1.0, "MB/s") + 20.0).abs() < 1e-9);
    }

    #[test]
    fn table_shows_both_series_and_how_5_0_compares() {
        let samples = [
            sample("rusnic", "latency", 8, "us", 3.0),
            sample("stock-tcp", "latency", 8, "us", 4.0),
            sample("rusnic", "bw", 4 << 20, "MB/s", 6000.0),
            sample("stock-tcp", "bw", 4 << 20, "MB/s", 4000.0),
            sample("rusnic-ompi5", "latency", 8, "us", 2.0),
            sample("stock-tcp-ompi5", "latency", 8, "us", 4.0),
            sample("rusnic-ompi5", "bw", 4 << 20, "MB/s", 5400.0),
            sample("stock-tcp-ompi5", "bw", 4 << 20, "MB/s", 4000.0),
            sample("rsmcuda-ompi5", "bw", 1 << 20, "MB/s", 9000.0),
            sample("stock-sm-ompi5", "bw", 1 << 20, "MB/s", 10000.0),
        ];
        let measured = names(&[
            "stock-tcp",
            "rusnic",
            "stock-tcp-ompi5",
            "rusnic-ompi5",
            "stock-sm-ompi5",
            "rsmcuda-ompi5",
        ]);
        let t = table(&samples, &measured);
        let header = t.lines().find(|l| l.starts_with("pair")).unwrap();
        assert!(
            header.ends_with(
                "lat 8B   lat 1K   bw 64K    bw 1M    bw 4M  rate 8B  ared 8B ared 64K   a2a 8B  \
                 a2a 64K"
            ),
            "{t}"
        );
        let r41 = t
            .lines()
            .find(|l| l.starts_with("rusnic / stock-tcp "))
            .unwrap();
        assert!(
            r41.contains(" 4.1 ") && r41.contains("0.75") && r41.contains(" 1.50 "),
            "{t}"
        );
        let r50 = t
            .lines()
            .find(|l| l.starts_with("rusnic-ompi5 / stock-tcp-ompi5"))
            .unwrap();
        assert!(r50.contains("0.50") && r50.contains(" 1.35 "), "{t}");
        // 0.75 -> 0.50 latency: +50 %; 1.50 -> 1.35 bandwidth: -10 %.
        let cmp = t.lines().find(|l| l.contains("5.0 vs 4.1  ")).unwrap();
        let words: Vec<&str> = cmp.split_whitespace().collect();
        assert_eq!(
            words,
            [
                "5.0", "vs", "4.1", "+50%", "-", "-", "-", "-10%", "-", "-", "-", "-", "-"
            ],
            "{t}"
        );
        // One round: 5.0 better at 8 B, worse at 4 MiB, and one round tells nothing.
        let votes = t.lines().find(|l| l.contains("5.0 better  ")).unwrap();
        let words: Vec<&str> = votes.split_whitespace().collect();
        assert_eq!(
            words,
            [
                "5.0", "better", "1/1", "=", "-", "-", "-", "0/1", "=", "-", "-", "-", "-", "-"
            ],
            "{t}"
        );
        // rsmcuda only on 5.0: its row, no comparison row; rofi not measured: no row.
        let shm = t.lines().find(|l| l.starts_with("rsmcuda-ompi5")).unwrap();
        assert!(shm.contains("0.90"), "{t}");
        assert_eq!(t.matches("5.0 vs 4.1  ").count(), 1, "{t}");
        assert!(!t.contains("rofi"), "{t}");

        let csv = csv(&summarise(&samples), &samples, &measured);
        assert!(
            csv.starts_with("series,ours,stock,test,size,unit,"),
            "{csv}"
        );
        assert!(
            csv.contains("\n5.0,rusnic-ompi5,stock-tcp-ompi5,latency,8,us,2,4,0.5,1,0.5,0.5\n"),
            "{csv}"
        );
        assert_eq!(csv.lines().count(), 1 + 2 + 2 + 1, "{csv}");
    }

    fn in_round(config: &str, round: u32, value: f64) -> Sample {
        Sample {
            round,
            ..sample(config, "latency", 8, "us", value)
        }
    }

    #[test]
    fn ratios_pair_values_of_the_same_round() {
        // Round 2 was slow for both: its ratio is the same as round 1's, whereas the
        // medians over rounds (3.0 / 4.0 with two rounds, 5.0 / 6.0 ...) would not be.
        let samples = [
            in_round("rusnic", 1, 2.0),
            in_round("stock-tcp", 1, 4.0),
            in_round("rusnic", 2, 8.0),
            in_round("stock-tcp", 2, 16.0),
            in_round("rusnic", 3, 9.0),
        ];
        let pair = &pairs(Series::Ompi41)[0];
        assert_eq!(
            round_ratios(&samples, pair, "latency", 8, "us"),
            [(1, 0.5), (2, 0.5)]
        );
        let ratio = |test, unit| median_ratio(&round_ratios(&samples, pair, test, 8, unit));
        assert_eq!(ratio("latency", "us"), Some(0.5));
        assert_eq!(ratio("bw", "MB/s"), None);
    }

    #[test]
    fn sign_test_needs_a_lopsided_count_of_rounds() {
        let votes = |better, rounds| RoundVotes { better, rounds };
        // 15 rounds: 12 of 15 is p = 0.035, 11 of 15 is p = 0.118.
        assert!((votes(12, 15).p_value() - 0.0352).abs() < 1e-3);
        assert_eq!(votes(12, 15).verdict(), "+");
        assert_eq!(votes(3, 15).verdict(), "-");
        assert_eq!(votes(11, 15).verdict(), "=");
        assert_eq!(votes(4, 7).verdict(), "=");
        assert_eq!(votes(0, 0).verdict(), "=");
        // 5 of 5 is p = 0.0625: five rounds can never show a difference.
        assert_eq!(votes(5, 5).verdict(), "=");
        assert_eq!(votes(6, 6).verdict(), "+");

        // A latency ratio that fell is a better one; rounds only 4.1 measured do not count.
        let r41 = [(1, 1.0), (2, 1.0), (3, 1.0)];
        let r50 = [(1, 0.9), (2, 1.1), (4, 0.5)];
        assert_eq!(RoundVotes::count(&r41, &r50, "us"), votes(1, 2));
        assert_eq!(RoundVotes::count(&r41, &r50, "MB/s"), votes(1, 2));
    }

    #[test]
    fn no_pair_measured_means_no_table() {
        let samples = [sample("stock-tcp", "latency", 8, "us", 4.0)];
        assert_eq!(table(&samples, &names(&["stock-tcp", "stock-vader"])), "");
    }
}
