//! Intel MPI Benchmarks, when an `IMB-MPI1` binary is on PATH (never vendored): its
//! PingPong, Sendrecv, Exchange and Allreduce times for the same configurations.

use std::path::PathBuf;

use crate::results::Sample;

/// The IMB benchmarks run, in IMB's own names.
pub const BENCHMARKS: &[&str] = &["PingPong", "Sendrecv", "Exchange", "Allreduce"];

/// `IMB-MPI1` from PATH.
pub fn find() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("IMB-MPI1"))
        .find(|candidate| candidate.is_file())
}

/// IMB-MPI1 arguments: the benchmarks, at most `max_bytes` (IMB's -msglog takes a
/// power of two), two processes.
pub fn arguments(max_bytes: u64) -> Vec<String> {
    let log = 64 - max_bytes.max(1).leading_zeros() - 1;
    let mut args = vec![
        "-msglog".to_owned(),
        format!("0:{log}"),
        "-npmin".to_owned(),
        "2".to_owned(),
    ];
    args.extend(BENCHMARKS.iter().map(|b| (*b).to_owned()));
    args
}

/// The time per call (PingPong's `t[usec]`, the others' `t_avg[usec]`) of every row,
/// as tests named `imb-<benchmark>` in microseconds.
pub fn parse(output: &str, config: &str, round: u32) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut benchmark: Option<String> = None;
    let mut column: Option<usize> = None;
    for line in output.lines() {
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix("# Benchmarking ") {
            benchmark = Some(name.trim().to_ascii_lowercase());
            column = None;
            continue;
        }
        if trimmed.starts_with("#bytes") {
            column = trimmed
                .split_whitespace()
                .position(|h| h == "t[usec]" || h == "t_avg[usec]");
            continue;
        }
        let (Some(name), Some(col)) = (&benchmark, column) else {
            continue;
        };
        let words: Vec<&str> = trimmed.split_whitespace().collect();
        let (Some(size), Some(value)) = (
            words.first().and_then(|w| w.parse::<u64>().ok()),
            words.get(col).and_then(|w| w.parse::<f64>().ok()),
        ) else {
            continue;
        };
        samples.push(Sample {
            config: config.to_owned(),
            round,
            test: format!("imb-{name}"),
            size,
            unit: "us".to_owned(),
            value,
        });
    }
    samples
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "\
#---------------------------------------------------
# Benchmarking PingPong
# #processes = 2
#---------------------------------------------------
       #bytes #repetitions      t[usec]   Mbytes/sec
            0         1000         0.52         0.00
         1024         1000         1.10       930.91

#-----------------------------------------------------------------------------
# Benchmarking Allreduce
# #processes = 2
#-----------------------------------------------------------------------------
       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]
            0         1000         0.03         0.04         0.035
            8         1000         1.00         1.40         1.200
# All processes entering MPI_Finalize
";

    #[test]
    fn rows_of_each_benchmark_give_their_time_column() {
        let s = parse(OUTPUT, "stock-vader", 1);
        let got: Vec<(&str, u64, f64)> = s
            .iter()
            .map(|s| (s.test.as_str(), s.size, s.value))
            .collect();
        assert_eq!(
            got,
            vec![
                ("imb-pingpong", 0, 0.52),
                ("imb-pingpong", 1024, 1.10),
                ("imb-allreduce", 0, 0.035),
                ("imb-allreduce", 8, 1.2),
            ]
        );
    }

    #[test]
    fn msglog_covers_the_largest_size() {
        assert_eq!(arguments(1 << 22)[1], "0:22");
        assert_eq!(arguments(1000)[1], "0:9");
    }
}
