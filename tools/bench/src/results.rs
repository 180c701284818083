//! Measurements: the `RESULT` lines of mpibench / limits, and their medians over rounds.

use std::collections::BTreeMap;

/// The tests in display order (mpibench's, then limits' and fi_pingpong's, then IMB's).
pub const TEST_ORDER: &[&str] = &[
    "latency",
    "bw",
    "bibw",
    "rate",
    "memcpy",
    "udp_rtt",
    "udp_mmsg_rtt",
    "tcp_rtt",
    "fi_pingpong_tcp",
    "fi_pingpong_shm",
];

/// One measured value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub config: String,
    pub round: u32,
    pub test: String,
    pub size: u64,
    pub unit: String,
    pub value: f64,
}

/// Parses `RESULT test=<t> size=<bytes> iters=<n> value=<x> unit=<u>`; other lines are
/// not results (headers, tables on stderr) and give None.
pub fn parse_result(line: &str, config: &str, round: u32) -> Option<Sample> {
    let rest = line.trim().strip_prefix("RESULT ")?;
    let mut fields = BTreeMap::new();
    for word in rest.split_whitespace() {
        let (key, value) = word.split_once('=')?;
        fields.insert(key, value);
    }
    Some(Sample {
        config: config.to_owned(),
        round,
        test: (*fields.get("test")?).to_owned(),
        size: fields.get("size")?.parse().ok()?,
        unit: (*fields.get("unit")?).to_owned(),
        value: fields.get("value")?.parse().ok()?,
    })
}

/// Whether a larger value is better for this unit.
pub fn higher_is_better(unit: &str) -> bool {
    unit != "us"
}

/// A (test, size, unit) point of one configuration, summarised over rounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub config: String,
    pub test: String,
    pub size: u64,
    pub unit: String,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub rounds: usize,
}

/// Key of a point: (test position, test, size, unit).
pub type PointKey = (usize, String, u64, String);

pub fn point_key(test: &str, size: u64, unit: &str) -> PointKey {
    let position = TEST_ORDER
        .iter()
        .position(|t| *t == test)
        .unwrap_or(TEST_ORDER.len());
    (position, test.to_owned(), size, unit.to_owned())
}

/// Median of a non-empty list (the mean of the middle two for an even count).
pub fn median(values: &mut [f64]) -> f64 {
    assert!(!values.is_empty(), "median of nothing");
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// `config` / `reference` at each round that measured both at a point, in round order.
/// Ratios within a round share that round's machine noise, which the ratio of two
/// medians over all rounds does not cancel.
pub fn round_ratios(
    samples: &[Sample],
    config: &str,
    reference: &str,
    (test, size, unit): (&str, u64, &str),
) -> Vec<(u32, f64)> {
    let of = |c: &str| -> BTreeMap<u32, f64> {
        samples
            .iter()
            .filter(|s| s.config == c && s.test == test && s.size == size && s.unit == unit)
            .filter(|s| s.value.is_finite() && s.value > 0.0)
            .map(|s| (s.round, s.value))
            .collect()
    };
    let base = of(reference);
    of(config)
        .into_iter()
        .filter_map(|(round, v)| Some((round, v / base.get(&round)?)))
        .collect()
}

/// Medians (with min and max) per configuration and point.
pub fn summarise(samples: &[Sample]) -> BTreeMap<(String, PointKey), Summary> {
    let mut groups: BTreeMap<(String, PointKey), Vec<f64>> = BTreeMap::new();
    for s in samples {
        groups
            .entry((s.config.clone(), point_key(&s.test, s.size, &s.unit)))
            .or_default()
            .push(s.value);
    }
    groups
        .into_iter()
        .map(|((config, key), mut values)| {
            let min = values.iter().copied().fold(f64::INFINITY, f64::min);
            let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let summary = Summary {
                config: config.clone(),
                test: key.1.clone(),
                size: key.2,
                unit: key.3.clone(),
                median: median(&mut values),
                min,
                max,
                rounds: values.len(),
            };
            ((config, key), summary)
        })
        .collect()
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// The line of `table` that starts with `prefix` (a test fails naming the table).
    pub fn row(table: &str, prefix: &str) -> String {
        table
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no row {prefix} in\n{table}"))
            .to_owned()
    }

    /// A round-1 sample, for the tests of the modules that summarise and print.
    pub fn sample(config: &str, test: &str, size: u64, unit: &str, value: f64) -> Sample {
        Sample {
            config: config.to_owned(),
            round: 1,
            test: test.to_owned(),
            size,
            unit: unit.to_owned(),
            value,
        }
    }

    #[test]
    fn result_lines_parse_and_others_do_not() {
        let s = parse_result(
            "RESULT test=bw size=65536 iters=420 value=7796.0432 unit=MB/s",
            "stock-vader",
            2,
        )
        .unwrap();
        assert_eq!(
            (s.test.as_str(), s.size, s.unit.as_str()),
            ("bw", 65536, "MB/s")
        );
        assert_eq!(s.value, 7796.0432);
        assert_eq!(s.round, 2);
        assert!(parse_result("# mpibench: np=2 window=64", "c", 1).is_none());
        assert!(parse_result("RESULT test=bw size=x value=1 unit=us", "c", 1).is_none());
        assert!(parse_result("RESULT test=bw size=1 unit=us", "c", 1).is_none());
    }

    #[test]
    fn medians_resist_one_outlier() {
        assert_eq!(median(&mut [5.0, 1.0, 1000.0]), 5.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut [7.0]), 7.0);
    }

    #[test]
    fn summaries_group_by_config_and_point() {
        let mk = |config: &str, round, value| Sample {
            config: config.to_owned(),
            round,
            test: "latency".to_owned(),
            size: 8,
            unit: "us".to_owned(),
            value,
        };
        let samples = [
            mk("a", 1, 3.0),
            mk("a", 2, 1.0),
            mk("a", 3, 2.0),
            mk("b", 1, 9.0),
        ];
        let summary = summarise(&samples);
        let a = &summary[&("a".to_owned(), point_key("latency", 8, "us"))];
        assert_eq!((a.median, a.min, a.max, a.rounds), (2.0, 1.0, 3.0, 3));
        let b = &summary[&("b".to_owned(), point_key("latency", 8, "us"))];
        assert_eq!((b.median, b.rounds), (9.0, 1));
    }
}
