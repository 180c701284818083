//! libfabric's own ping-pong, `fi_pingpong` (Debian's libfabric-bin; 1.17 has no
//! `fi_rdm_tagged_pingpong`), as the limit of the provider an OFI MTL runs on: the
//! latency that rofi (and the stock ofi MTL) cannot beat on `tcp;ofi_rxm` or `shm`.
//!
//! Each round, for every provider a measured configuration runs on (its
//! `mtl_rofi_provider_include` or `mtl_ofi_provider_include`), and every size of
//! mpibench's sweep: a server and a client on the loopback, `-e rdm -m tagged` (the
//! MTLs use tagged messages: `fi_tsend`, `fi_tinject`), pinned to CPU 0 and CPU 1 like
//! the two ranks of `--bind-to core`. The values are limit samples
//! (`limits,fi_pingpong_tcp,8,us,...`): half a round trip, in microseconds.
//!
//! **Same definition as mpibench's latency.** mpibench's `latency` is
//! `t / (2 · iterations)` (tests/bench/mpibench.c, `value_of`), half a round trip;
//! fi_pingpong's `usec/xfer` is its elapsed time over iterations × 2 transfers, also half
//! a round trip (the same unit as NetPIPE's latency, and unlike `udp_rtt` / `tcp_rtt`,
//! which are whole round trips).
//!
//! **Without the connection set-up.** fi_pingpong times its iterations from the first,
//! and rxm connects on the first message: with `-I 1` that one round trip took 19-36 ms
//! here at 8 bytes, about what 2000 round trips of 8 bytes take on an idle machine:
//! counted in, it would double such a run's value. mpibench's warm-up leaves it out of the
//! MPI numbers, so each size also runs with 1 iteration, [`PROBES`] times, and the limit
//! is (elapsed(n) − median of elapsed(1)) / (2 (n − 1)): the set-up cancels, up to its
//! jitter. To shrink that, tcp;ofi_rxm runs with `FI_OFI_RXM_CM_PROGRESS_INTERVAL=1000`
//! (µs between rxm's connection progress calls; default 10 000): the 8-byte set-up then
//! took 2.7-6.9 ms; five interleaved pairs of 20 000-round-trip runs showed no
//! difference in the steady half round trip between 1000 and the default (10.3-15.8 us
//! either way, a loaded machine). From the inject size (64 B) up, the first message still
//! took 38-53 ms (22-27 ms even at 100 µs), and one probe of a quick run 681 ms: hence
//! the median of the probes, and at least [`MIN_TARGET_MS`] of round trips per size
//! (mpibench's own default), whatever mpibench's `--target-ms`, so that a few ms of
//! jitter stay a few percent at most. `FI_TCP_IFACE=lo`, as the stock ofi
//! configurations have.

use std::fmt::Write as _;
use std::path::PathBuf;

use mca_harness::McaConfig;

use crate::report::LIMITS;
use crate::results::{self, Sample};

/// The program, looked for on PATH.
pub const BINARY: &str = "fi_pingpong";

/// The size of the targets: rofi's 8-byte latency against fi_pingpong's
/// ([`Provider::target`]).
pub const TARGET_BYTES: u64 = 8;

/// The sizes the printed comparison shows, when measured (mpibench's `--quick` sizes;
/// every size is in samples.csv and summary.csv).
pub const SHOWN: &[u64] = &[0, 8, 1 << 10, 64 << 10, 1 << 20];

/// 1-iteration runs per size, whose median elapsed time is the set-up (and one round
/// trip) taken off the timed run.
pub const PROBES: usize = 3;

/// The least time per size of the timed run (mpibench's default `--target-ms`).
pub const MIN_TARGET_MS: f64 = 200.0;

/// The fewest and most iterations of a timed run.
const MIN_ITERATIONS: u64 = 20;
const MAX_ITERATIONS: u64 = 1_000_000;

/// A libfabric provider measured by fi_pingpong.
#[derive(Debug, PartialEq)]
pub struct Provider {
    /// The limit's test name in the samples.
    pub test: &'static str,
    /// fi_pingpong's `-p`, as the MTLs' `provider_include` names it.
    pub name: &'static str,
    /// Environment of both processes.
    pub env: &'static [(&'static str, &'static str)],
    /// rofi's 8-byte latency at most this many times fi_pingpong's: within 10 % on
    /// tcp;ofi_rxm (issue #19), 1.3x on shm (issue #36).
    pub target: f64,
    /// The issue that set the target.
    pub issue: u32,
    /// A rough half round trip (`base_us` + size / `bytes_per_us`) that sizes the
    /// iteration count to mpibench's time per size; only the run time depends on it.
    base_us: f64,
    bytes_per_us: f64,
}

pub const PROVIDERS: &[Provider] = &[
    Provider {
        test: "fi_pingpong_tcp",
        name: "tcp;ofi_rxm",
        env: &[
            ("FI_TCP_IFACE", "lo"),
            ("FI_OFI_RXM_CM_PROGRESS_INTERVAL", "1000"),
        ],
        target: 1.10,
        issue: 19,
        base_us: 5.0,
        bytes_per_us: 1500.0,
    },
    Provider {
        test: "fi_pingpong_shm",
        name: "shm",
        env: &[],
        target: 1.30,
        issue: 36,
        base_us: 0.5,
        bytes_per_us: 4000.0,
    },
];

impl Provider {
    /// Iterations of the timed run of `size` bytes: about `target_ms`.
    pub fn iterations(&self, size: u64, target_ms: f64) -> u64 {
        let half_rtt_us = self.base_us + size as f64 / self.bytes_per_us;
        let n = (target_ms * 1e3 / (2.0 * half_rtt_us)).round();
        (n as u64).clamp(MIN_ITERATIONS, MAX_ITERATIONS)
    }

    /// fi_pingpong's arguments: the server's without `server`, the client's with it.
    pub fn arguments(&self, size: u64, iterations: u64, port: u16, server: bool) -> Vec<String> {
        let mut args: Vec<String> = ["-e", "rdm", "-m", "tagged", "-p", self.name]
            .map(str::to_owned)
            .to_vec();
        args.extend([
            "-S".to_owned(),
            size.to_string(),
            "-I".to_owned(),
            iterations.to_string(),
        ]);
        if server {
            args.extend(["-B".to_owned(), port.to_string()]);
        } else {
            args.extend(["-P".to_owned(), port.to_string(), "127.0.0.1".to_owned()]);
        }
        args
    }
}

/// The provider a configuration reaches through an OFI MTL (ours or the stock one),
/// if fi_pingpong measures it, and whether the MTL is rofi.
pub fn provider_of(config: &McaConfig) -> Option<(&'static Provider, bool)> {
    let param = |key: &str| {
        config
            .params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let (name, rofi) = match param("mtl")? {
        "rofi" => (param("mtl_rofi_provider_include")?, true),
        "ofi" => (param("mtl_ofi_provider_include")?, false),
        _ => return None,
    };
    PROVIDERS.iter().find(|p| p.name == name).map(|p| (p, rofi))
}

/// One fi_pingpong to run each round: a provider on a libfabric, the system's (the
/// binary on PATH) or the one a configuration brings with LD_LIBRARY_PATH (as
/// `make bench-libfabric2`'s do: that prefix's own `bin/fi_pingpong`).
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    pub provider: &'static Provider,
    /// The samples' test name ([`limit_test`]).
    pub test: String,
    pub binary: PathBuf,
    /// LD_LIBRARY_PATH of both processes; `None` for the system's libfabric.
    pub lib: Option<String>,
}

/// The library directory a configuration brings (its LD_LIBRARY_PATH), if any.
fn lib_of(config: &McaConfig) -> Option<&str> {
    config
        .env
        .iter()
        .find(|(k, _)| k == "LD_LIBRARY_PATH")
        .map(|(_, v)| v.as_str())
}

/// The limit's test name: the provider's on the system's libfabric, with
/// `@<version>` (from the library's pkg-config file, else its directory) on another.
pub fn limit_test(provider: &Provider, lib: Option<&str>) -> String {
    let Some(lib) = lib else {
        return provider.test.to_owned();
    };
    let pc = std::path::Path::new(lib).join("pkgconfig/libfabric.pc");
    let version = std::fs::read_to_string(pc).ok().and_then(|text| {
        text.lines()
            .find_map(|l| l.strip_prefix("Version:"))
            .map(|v| v.trim().to_owned())
    });
    format!("{}@{}", provider.test, version.as_deref().unwrap_or(lib))
}

/// What the rounds run: the limits, mpibench's sizes, the time per size (mpibench's,
/// at least [`MIN_TARGET_MS`]).
#[derive(Debug)]
pub struct Plan {
    pub limits: Vec<Limit>,
    pub sizes: Vec<u64>,
    pub target_ms: f64,
    /// Server on CPU 0, client on CPU 1 (`taskset` on PATH and two CPUs at least).
    pub pin: bool,
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The plan for a run measuring `configs` with mpibench arguments `bench_args`: None
/// when no configuration runs on a provider of [`PROVIDERS`] or mpibench measures no
/// latency; a limit whose fi_pingpong is missing is left out with one line on stderr.
pub fn plan<'a>(
    configs: impl IntoIterator<Item = &'a McaConfig>,
    bench_args: &[String],
    quick: bool,
) -> Option<Plan> {
    let sweep = Sweep::of(bench_args, quick);
    let mut wanted: Vec<(&'static Provider, Option<String>)> = Vec::new();
    for c in configs {
        if let Some((p, _)) = provider_of(c) {
            let key = (p, lib_of(c).map(str::to_owned));
            if !wanted.contains(&key) {
                wanted.push(key);
            }
        }
    }
    // The providers' order, the system's library first.
    wanted.sort_by_key(|(p, lib)| {
        (
            PROVIDERS.iter().position(|q| q == *p),
            lib.is_some(),
            lib.clone(),
        )
    });
    if wanted.is_empty() || !sweep.latency || sweep.sizes.is_empty() {
        return None;
    }
    let mut limits = Vec::new();
    let mut missing = Vec::new();
    for (provider, lib) in wanted {
        let binary = match &lib {
            None => on_path(BINARY),
            Some(dir) => std::path::Path::new(dir)
                .parent()
                .map(|prefix| prefix.join("bin").join(BINARY))
                .filter(|b| b.is_file()),
        };
        let test = limit_test(provider, lib.as_deref());
        match binary {
            Some(binary) => limits.push(Limit {
                provider,
                test,
                binary,
                lib,
            }),
            None => missing.push(test),
        }
    }
    if !missing.is_empty() {
        eprintln!(
            "rmca-bench: no {BINARY} (on PATH, Debian's libfabric-bin, or in the bin/ beside \
             a configuration's LD_LIBRARY_PATH): the provider limits ({}) are not measured",
            missing.join(", ")
        );
    }
    if limits.is_empty() {
        return None;
    }
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    Some(Plan {
        limits,
        sizes: sweep.sizes,
        target_ms: sweep.target_ms.max(MIN_TARGET_MS),
        pin: cpus >= 2 && on_path("taskset").is_some(),
    })
}

/// mpibench's sizes, time per size and whether it measures latency, from its
/// arguments as mpibench reads them (tests/bench/mpibench.c, `parse_args`).
#[derive(Debug, PartialEq)]
pub struct Sweep {
    pub sizes: Vec<u64>,
    pub target_ms: f64,
    pub latency: bool,
}

/// `8`, `4k`, `1m`, `1g` (mpibench's suffixes).
fn parse_size(text: &str) -> Option<u64> {
    let (digits, shift) = match text.as_bytes().last()? {
        b'k' | b'K' => (&text[..text.len() - 1], 10),
        b'm' | b'M' => (&text[..text.len() - 1], 20),
        b'g' | b'G' => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

impl Sweep {
    pub fn of(bench_args: &[String], quick: bool) -> Sweep {
        let (mut lo, mut hi) = (0u64, 16u64 << 20);
        let (mut explicit, mut range, mut quick) = (None, false, quick);
        let mut target_ms = None;
        let mut latency = true;
        let mut it = bench_args.iter();
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--quick" => quick = true,
                "--sizes" => {
                    explicit = it
                        .next()
                        .map(|v| v.split(',').filter_map(parse_size).collect::<Vec<_>>());
                }
                "--min" | "--max" => {
                    if let Some(v) = it.next().and_then(|v| parse_size(v)) {
                        *(if arg == "--min" { &mut lo } else { &mut hi }) = v;
                        range = true;
                    }
                }
                "--target-ms" => target_ms = it.next().and_then(|v| v.parse::<f64>().ok()),
                "--test" => {
                    latency = it
                        .next()
                        .is_some_and(|v| v.split(',').any(|t| t == "latency" || t == "all"));
                }
                _ => {}
            }
        }
        let sizes = match explicit {
            Some(list) => list,
            None if quick && !range => vec![0, 8, 1 << 10, 64 << 10, 1 << 20],
            None => {
                let mut sizes: Vec<u64> = (lo == 0).then_some(0).into_iter().collect();
                sizes.extend((0..63).map(|k| 1u64 << k).filter(|s| (lo..=hi).contains(s)));
                sizes
            }
        };
        Sweep {
            // fi_pingpong's -S takes an int.
            sizes: sizes
                .into_iter()
                .filter(|s| *s <= i32::MAX as u64)
                .collect(),
            target_ms: target_ms
                .filter(|t| *t > 0.0)
                .unwrap_or(if quick { 20.0 } else { 200.0 }),
            latency,
        }
    }
}

/// How fi_pingpong prints a size (its `size_str`): `8`, `1000`, `1k`, `1.5k`, `2.8m`;
/// a single digit before the suffix gets one truncated decimal.
pub fn size_label(bytes: u64) -> String {
    let (base, suffix) = match bytes {
        b if b >= 1 << 30 => (1u64 << 30, "g"),
        b if b >= 1 << 20 => (1 << 20, "m"),
        b if b >= 1 << 10 => (1 << 10, "k"),
        _ => (1, ""),
    };
    let whole = bytes / base;
    let tenth = if whole < 10 {
        bytes % base * 10 / base
    } else {
        0
    };
    if tenth > 0 {
        format!("{whole}.{tenth}{suffix}")
    } else {
        format!("{whole}{suffix}")
    }
}

/// fi_pingpong's result row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `bytes`, as [`size_label`] writes it.
    pub label: String,
    /// `#ack` was `=`: every message sent was received.
    pub all_acked: bool,
    pub mb_per_s: f64,
    pub usec_per_xfer: f64,
    pub mxfers_per_s: f64,
}

const HEADER: [&str; 8] = [
    "bytes",
    "#sent",
    "#ack",
    "total",
    "time",
    "MB/sec",
    "usec/xfer",
    "Mxfers/sec",
];

/// The one row of a run of one size (`-S`), below the header.
pub fn parse(stdout: &str) -> Result<Row, String> {
    let mut lines = stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>());
    lines
        .by_ref()
        .find(|words| words[..] == HEADER[..])
        .ok_or("no result table (its header line is missing)")?;
    let rows: Vec<Vec<&str>> = lines.filter(|w| !w.is_empty()).collect();
    let [row] = rows.as_slice() else {
        return Err(format!("{} result rows, expected one", rows.len()));
    };
    if row.len() != HEADER.len() {
        return Err(format!("result row '{}' has not 8 columns", row.join(" ")));
    }
    let number = |i: usize| {
        row[i]
            .parse::<f64>()
            .map_err(|_| format!("{} '{}' is not a number", HEADER[i], row[i]))
    };
    Ok(Row {
        label: row[0].to_owned(),
        all_acked: row[2].starts_with('='),
        mb_per_s: number(5)?,
        usec_per_xfer: number(6)?,
        mxfers_per_s: number(7)?,
    })
}

impl Row {
    /// The timed run's elapsed microseconds, for `iterations` round trips of `size`
    /// bytes. The three rate columns say the same at two decimals; the largest number
    /// has the most significant digits (8 B on shm: 0.29 us/xfer, 27.80 MB/s).
    pub fn elapsed_us(&self, size: u64, iterations: u64) -> Option<f64> {
        let xfers = 2.0 * iterations as f64;
        [
            (self.usec_per_xfer, self.usec_per_xfer * xfers),
            (self.mxfers_per_s, xfers / self.mxfers_per_s),
            (self.mb_per_s, xfers * size as f64 / self.mb_per_s),
        ]
        .into_iter()
        .filter(|(shown, _)| *shown > 0.0)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, elapsed)| elapsed)
        .filter(|e| e.is_finite() && *e > 0.0)
    }
}

/// Half a round trip without the connection set-up: the timed run of `iterations`
/// (elapsed `timed_us`) less the 1-iteration probe (`probe_us`), per transfer.
pub fn half_round_trip(probe_us: f64, timed_us: f64, iterations: u64) -> Result<f64, String> {
    if iterations < 2 || timed_us <= probe_us {
        return Err(format!(
            "{iterations} round trips took {timed_us:.0} us, the 1-round-trip probe \
             {probe_us:.0} us: no time left for the round trips"
        ));
    }
    Ok((timed_us - probe_us) / (2.0 * (iterations - 1) as f64))
}

/// The configurations the comparison shows: every one through an OFI MTL on a
/// provider of [`PROVIDERS`], each against fi_pingpong on the libfabric it runs on
/// (the system's, or the one its LD_LIBRARY_PATH brings): its name, the provider, the
/// limit's test name and whether it is rofi.
pub fn compared<'a>(
    configs: impl IntoIterator<Item = &'a McaConfig>,
) -> Vec<(String, &'static Provider, String, bool)> {
    configs
        .into_iter()
        .filter_map(|c| {
            provider_of(c).map(|(p, rofi)| (c.name.clone(), p, limit_test(p, lib_of(c)), rofi))
        })
        .collect()
}

/// `config`'s latency over the limit at `size`, round by round: (median of the
/// configuration, median of the limit, median of the per-round ratios). Ratios within
/// a round share that round's machine noise.
pub fn ratio(
    samples: &[Sample],
    config: &str,
    limit_test: &str,
    size: u64,
) -> Option<(f64, f64, f64)> {
    let of = |c: &str, test: &str| -> Vec<(u32, f64)> {
        samples
            .iter()
            .filter(|s| s.config == c && s.test == test && s.size == size && s.unit == "us")
            .filter(|s| s.value.is_finite() && s.value > 0.0)
            .map(|s| (s.round, s.value))
            .collect()
    };
    let ours = of(config, "latency");
    let limit = of(LIMITS, limit_test);
    let mut ratios: Vec<f64> = ours
        .iter()
        .filter_map(|(r, v)| Some(v / limit.iter().find(|(lr, _)| lr == r)?.1))
        .collect();
    if ratios.is_empty() {
        return None;
    }
    let median =
        |v: &[(u32, f64)]| results::median(&mut v.iter().map(|(_, x)| *x).collect::<Vec<_>>());
    Some((median(&ours), median(&limit), results::median(&mut ratios)))
}

/// The printed comparison: for each configuration of [`compared`] and each size of
/// [`SHOWN`] measured by both, its latency, the limit's and their ratio, with the
/// target's verdict for rofi at 8 bytes. Empty when there is nothing to compare.
pub fn table(samples: &[Sample], compared: &[(String, &'static Provider, String, bool)]) -> String {
    let mut rows = String::new();
    for (config, provider, limit_test, rofi) in compared {
        for &size in SHOWN {
            let Some((ours, limit, r)) = ratio(samples, config, limit_test, size) else {
                continue;
            };
            let verdict = match (*rofi, size == TARGET_BYTES) {
                (true, true) if r <= provider.target => format!("met (<= {:.2})", provider.target),
                (true, true) => format!(
                    "MISSED: +{:.0} % (<= {:.2})",
                    (r - 1.0) * 100.0,
                    provider.target
                ),
                _ => "-".to_owned(),
            };
            let _ = writeln!(
                rows,
                "{config:<19} {limit_test:<22} {:>7} {ours:>10.3} {limit:>10.3} {r:>7.2}  {verdict}",
                crate::pairs::size_label(size)
            );
        }
    }
    if rows.is_empty() {
        return rows;
    }
    let targets: Vec<String> = PROVIDERS
        .iter()
        .map(|p| format!("{} <= {:.2} (issue #{})", p.name, p.target, p.issue))
        .collect();
    format!(
        "# provider limits: latency (half round trip, us) against libfabric's own fi_pingpong \
         on the same provider and library (-e rdm -m tagged, connection set-up excluded; \
         name@version: the library a configuration brings with LD_LIBRARY_PATH); ratio: the \
         median of the per-round ratios\n\
         # targets: rofi's {TARGET_BYTES}-byte latency over fi_pingpong's: {}\n\
         {:<19} {:<22} {:>7} {:>10} {:>10} {:>7}  target\n{rows}",
        targets.join(", "),
        "configuration",
        "limit",
        "size",
        "config",
        "limit",
        "ratio"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::tests::sample;

    // Real output of fi_pingpong 1.17 (the client's stdout) on this machine,
    // `-e rdm -m tagged -p <provider> -S <size> -I <iterations>`.
    const TCP_8: &str = "\
bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec
8       10k     =10k     156k        0.24s      0.67      11.98       0.08
";
    const SHM_8: &str = "\
bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec
8       100k    =100k    1.5m        0.06s     27.80       0.29       3.47
";
    const TCP_8_PROBE: &str = "\
bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec
8       1       =1       16          0.02s      0.00   10553.50       0.00
";
    const SHM_0: &str = "\
bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec
0       100     =100     0           0.00s      0.00       1.07       0.94
";
    const TCP_1536: &str = "\
bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec
1.5k    100     =100     300k        0.05s      6.17     248.75       0.00
";

    #[test]
    fn rows_of_real_runs_parse() {
        let row = parse(TCP_8).unwrap();
        assert_eq!(
            row,
            Row {
                label: "8".to_owned(),
                all_acked: true,
                mb_per_s: 0.67,
                usec_per_xfer: 11.98,
                mxfers_per_s: 0.08,
            }
        );
        assert_eq!(parse(TCP_1536).unwrap().label, "1.5k");
        assert_eq!(parse(SHM_0).unwrap().usec_per_xfer, 1.07);
        // A row whose #ack is not `=`: messages went missing.
        assert!(!parse(&TCP_8.replace("=10k", "+1  ")).unwrap().all_acked);
    }

    #[test]
    fn failures_and_other_output_do_not_parse() {
        // A client that found no server prints only this (stderr), nothing on stdout.
        let refused = "[error] util/pingpong.c:408 : failed to connect: Connection refused\n";
        assert!(parse(refused).unwrap_err().contains("header"));
        assert!(parse("").is_err());
        let header = TCP_8.lines().next().unwrap();
        assert!(parse(header).unwrap_err().contains("0 result rows"));
        let two = format!("{TCP_8}{}", TCP_8.lines().nth(1).unwrap());
        assert!(parse(&two).unwrap_err().contains("2 result rows"));
        assert!(parse(&TCP_8.replace("11.98", "x")).is_err());
        assert!(parse(&TCP_8.replace(" 0.08", "")).is_err());
    }

    #[test]
    fn size_labels_are_fi_pingpongs() {
        // Each pair seen in real output (1100 B prints as 1k, 3 000 000 B as 2.8m).
        for (bytes, label) in [
            (0, "0"),
            (8, "8"),
            (1000, "1000"),
            (1024, "1k"),
            (1100, "1k"),
            (1536, "1.5k"),
            (65536, "64k"),
            (1 << 20, "1m"),
            (3_000_000, "2.8m"),
            (16 << 20, "16m"),
        ] {
            assert_eq!(size_label(bytes), label, "{bytes}");
        }
    }

    #[test]
    fn elapsed_time_comes_from_the_most_precise_column() {
        // 10 000 round trips of 8 B at 11.98 us a transfer: 239 600 us (time: 0.24s).
        let tcp = parse(TCP_8).unwrap().elapsed_us(8, 10_000).unwrap();
        assert!((tcp - 239_600.0).abs() < 1e-6, "{tcp}");
        // shm: MB/s has four digits where us/xfer has two: 1.6 MB / 27.80 MB/s.
        let shm = parse(SHM_8).unwrap().elapsed_us(8, 100_000).unwrap();
        assert!((shm - 1.6e6 / 27.80).abs() < 1e-6, "{shm}");
        // 0 B: MB/s is 0, us/xfer (1.07) beats Mxfers/s (0.94).
        let zero = parse(SHM_0).unwrap().elapsed_us(0, 100).unwrap();
        assert!((zero - 214.0).abs() < 1e-9, "{zero}");
        let probe = parse(TCP_8_PROBE).unwrap().elapsed_us(8, 1).unwrap();
        assert_eq!(probe, 21_107.0);
    }

    #[test]
    fn the_connection_set_up_cancels() {
        // 21.1 ms of set-up in both runs, then 5 us a transfer.
        let set_up = 21_100.0;
        let probe = set_up + 2.0 * 5.0;
        let timed = set_up + 2.0 * 5.0 * 2000.0;
        assert!((half_round_trip(probe, timed, 2000).unwrap() - 5.0).abs() < 1e-9);
        assert!(half_round_trip(30_000.0, 25_000.0, 2000).is_err());
        assert!(half_round_trip(10.0, 20.0, 1).is_err());
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn sizes_and_time_follow_mpibench() {
        let full = Sweep::of(&[], false);
        assert_eq!(full.sizes.len(), 26);
        assert_eq!((full.sizes[0], full.sizes[1]), (0, 1));
        assert_eq!(*full.sizes.last().unwrap(), 16 << 20);
        assert_eq!(full.target_ms, 200.0);
        assert!(full.latency);
        let quick = Sweep::of(&args(&["--quick"]), false);
        assert_eq!(quick.sizes, [0, 8, 1024, 65536, 1 << 20]);
        assert_eq!(quick.target_ms, 20.0);
        assert_eq!(Sweep::of(&[], true), quick);
        let listed = Sweep::of(
            &args(&[
                "--test",
                "latency,bw",
                "--sizes",
                "8,4k,2m",
                "--target-ms",
                "50",
            ]),
            true,
        );
        assert_eq!(listed.sizes, [8, 4096, 2 << 20]);
        assert_eq!(listed.target_ms, 50.0);
        let range = Sweep::of(&args(&["--min", "4", "--max", "64", "--quick"]), false);
        assert_eq!(range.sizes, [4, 8, 16, 32, 64]);
        assert!(!Sweep::of(&args(&["--test", "bw,rate"]), false).latency);
        assert!(Sweep::of(&args(&["--test", "all"]), false).latency);
        // fi_pingpong's -S is an int.
        assert_eq!(Sweep::of(&args(&["--sizes", "8,3g"]), false).sizes, [8]);
    }

    #[test]
    fn iterations_fill_the_time_per_size() {
        let (tcp, shm) = (&PROVIDERS[0], &PROVIDERS[1]);
        assert_eq!(tcp.iterations(8, 20.0), 1998);
        assert_eq!(shm.iterations(8, 20.0), 19_920);
        assert_eq!(tcp.iterations(16 << 20, 20.0), MIN_ITERATIONS);
        assert_eq!(shm.iterations(0, 1e6), MAX_ITERATIONS);
        assert_eq!(
            tcp.arguments(8, 1998, 40_000, false).join(" "),
            "-e rdm -m tagged -p tcp;ofi_rxm -S 8 -I 1998 -P 40000 127.0.0.1"
        );
        assert_eq!(
            shm.arguments(0, 1, 40_000, true).join(" "),
            "-e rdm -m tagged -p shm -S 0 -I 1 -B 40000"
        );
    }

    #[test]
    fn configurations_on_a_measured_provider_are_found() {
        let rofi_tcp = crate::configs::resolve("rofi-tcp").unwrap().config;
        let rofi_shm = crate::configs::resolve("rofi-shm-ompi5").unwrap().config;
        let stock = crate::configs::resolve("stock-ofi-tcp").unwrap().config;
        let rxd = crate::configs::resolve("rofi-rxd").unwrap().config;
        let vader = crate::configs::resolve("stock-vader").unwrap().config;
        assert_eq!(provider_of(&rofi_tcp), Some((&PROVIDERS[0], true)));
        assert_eq!(provider_of(&rofi_shm), Some((&PROVIDERS[1], true)));
        assert_eq!(provider_of(&stock), Some((&PROVIDERS[0], false)));
        assert_eq!(provider_of(&rxd), None);
        assert_eq!(provider_of(&vader), None);
        let lf2 = rofi_tcp
            .clone()
            .named("rofi-tcp-lf2")
            .with_env("LD_LIBRARY_PATH", "/x/lib");
        let shown = compared([&rofi_tcp, &stock, &vader, &lf2]);
        let names: Vec<(&str, &str)> = shown
            .iter()
            .map(|(n, _, limit, _)| (n.as_str(), limit.as_str()))
            .collect();
        // A configuration bringing its own libfabric is compared with that library's
        // fi_pingpong (named by its directory when it has no pkg-config file).
        assert_eq!(
            names,
            [
                ("rofi-tcp", "fi_pingpong_tcp"),
                ("stock-ofi-tcp", "fi_pingpong_tcp"),
                ("rofi-tcp-lf2", "fi_pingpong_tcp@/x/lib")
            ]
        );
        // Its fi_pingpong is looked for beside the library, not on PATH: none there.
        if let Some(p) = plan([&lf2], &[], true) {
            panic!("{p:?}");
        }
        // No latency measured: nothing to run (and no line about a missing binary).
        assert!(plan([&rofi_tcp], &args(&["--test", "bw"]), true).is_none());
        assert!(plan([&vader], &[], true).is_none());
    }

    fn in_round(config: &str, test: &str, round: u32, value: f64) -> Sample {
        Sample {
            round,
            ..sample(config, test, 8, "us", value)
        }
    }

    #[test]
    fn ratios_pair_rounds_and_judge_the_target() {
        let samples = [
            in_round("rofi-tcp", "latency", 1, 5.5),
            in_round(LIMITS, "fi_pingpong_tcp", 1, 5.0),
            in_round("rofi-tcp", "latency", 2, 11.0),
            in_round(LIMITS, "fi_pingpong_tcp", 2, 10.0),
            in_round("rofi-tcp", "latency", 3, 7.0),
            in_round("stock-ofi-tcp", "latency", 1, 6.0),
            in_round("rofi-shm", "latency", 1, 0.9),
            in_round(LIMITS, "fi_pingpong_shm", 1, 0.6),
        ];
        // Round 3 has no limit: 1.10 and 1.10, whatever the medians of the values.
        let (ours, limit, r) = ratio(&samples, "rofi-tcp", "fi_pingpong_tcp", 8).unwrap();
        assert_eq!((ours, limit), (7.0, 7.5));
        assert!((r - 1.1).abs() < 1e-12, "{r}");
        assert!(ratio(&samples, "rofi-rxd", "fi_pingpong_tcp", 8).is_none());
        assert!(ratio(&samples, "rofi-tcp", "fi_pingpong_tcp", 1024).is_none());

        let shown = vec![
            (
                "rofi-tcp".to_owned(),
                &PROVIDERS[0],
                "fi_pingpong_tcp".to_owned(),
                true,
            ),
            (
                "stock-ofi-tcp".to_owned(),
                &PROVIDERS[0],
                "fi_pingpong_tcp".to_owned(),
                false,
            ),
            (
                "rofi-shm".to_owned(),
                &PROVIDERS[1],
                "fi_pingpong_shm".to_owned(),
                true,
            ),
        ];
        let t = table(&samples, &shown);
        let line = |start: &str| t.lines().find(|l| l.starts_with(start)).unwrap();
        assert!(line("rofi-tcp ").contains("fi_pingpong_tcp"), "{t}");
        assert!(line("rofi-tcp ").ends_with("1.10  met (<= 1.10)"), "{t}");
        assert!(line("stock-ofi-tcp ").ends_with("1.20  -"), "{t}");
        assert!(
            line("rofi-shm ").ends_with("1.50  MISSED: +50 % (<= 1.30)"),
            "{t}"
        );
        assert!(line("configuration").ends_with("ratio  target"), "{t}");
        assert!(
            t.contains("tcp;ofi_rxm <= 1.10 (issue #19), shm <= 1.30 (issue #36)"),
            "{t}"
        );
        assert_eq!(table(&samples[..1], &shown), "");
    }
}
