//! Running the measurement programs and keeping what they print.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mca_harness::{Job, McaConfig, program};

use crate::imb;
use crate::netpipe;
use crate::report::LIMITS;
use crate::results::{Sample, parse_result};

/// Two ranks on two cores, runtime traffic on the loopback.
const MPIRUN_ARGS: &[&str] = &["--bind-to", "core", "--mca", "oob_tcp_if_include", "lo"];

/// The mpirun options of every job of `config`: [`MPIRUN_ARGS`] on the system's Open
/// MPI. Another installation (5.0) gets the binding only: its runtime (PRRTE) refuses
/// an OOB restricted to the loopback ("No network interfaces were found for
/// out-of-band communications"), and a one-node job's ranks reach mpirun's PMIx server
/// on the node anyway.
fn mpirun_args(config: &McaConfig) -> &'static [&'static str] {
    match config.prefix {
        None => MPIRUN_ARGS,
        Some(_) => &MPIRUN_ARGS[..2],
    }
}

fn keep(out: &Path, name: &str, stdout: &str, stderr: &str) {
    let _ = std::fs::write(out.join("runs").join(format!("{name}.out")), stdout);
    let _ = std::fs::write(out.join("runs").join(format!("{name}.err")), stderr);
}

fn run_job(job: Job, label: &str, out: &Path) -> Result<String, String> {
    let result = job.run();
    keep(out, label, &result.stdout, &result.stderr);
    if result.succeeded() {
        Ok(result.stdout)
    } else {
        let why = if result.timed_out {
            "timed out".to_owned()
        } else {
            format!("exit {:?}", result.code)
        };
        Err(format!(
            "{label}: {why} (see {})",
            out.join("runs").join(format!("{label}.err")).display()
        ))
    }
}

/// mpibench under `config`; every RESULT line becomes a sample.
pub fn mpibench(
    config: &McaConfig,
    bench_args: &[String],
    round: u32,
    timeout: Duration,
    out: &Path,
) -> Result<Vec<Sample>, String> {
    let args: Vec<&str> = bench_args.iter().map(String::as_str).collect();
    // On another installation (5.0), mpibench compiled by that installation's mpicc.
    let job = Job::new(config, 2, config.program("mpibench"))
        .args(&args)
        .mpirun_args(mpirun_args(config))
        .timeout(timeout);
    let label = format!("{}.{round}", config.name);
    let stdout = run_job(job, &label, out)?;
    let samples: Vec<Sample> = stdout
        .lines()
        .filter_map(|l| parse_result(l, &config.name, round))
        .collect();
    if samples.is_empty() {
        return Err(format!("{label}: mpibench printed no RESULT line"));
    }
    Ok(samples)
}

/// The arguments of mpibench that limits understands too (the size sweep).
fn limits_args(quick: bool, bench_args: &[String]) -> Vec<String> {
    let mut args = Vec::new();
    let mut it = bench_args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => args.push(a.clone()),
            "--sizes" | "--min" | "--max" => {
                args.push(a.clone());
                args.extend(it.next().cloned());
            }
            _ => {}
        }
    }
    if quick && !args.iter().any(|a| a == "--quick") {
        args.push("--quick".to_owned());
    }
    args
}

/// The machine's limits (memcpy bandwidth by size, raw UDP and TCP round trips).
pub fn limits(
    quick: bool,
    bench_args: &[String],
    round: u32,
    out: &Path,
) -> Result<Vec<Sample>, String> {
    let label = format!("{LIMITS}.{round}");
    let result = Command::new(program("limits"))
        .args(limits_args(quick, bench_args))
        .output()
        .map_err(|e| format!("{label}: cannot run limits: {e}"))?;
    let stdout = String::from_utf8_lossy(&result.stdout).into_owned();
    keep(
        out,
        &label,
        &stdout,
        &String::from_utf8_lossy(&result.stderr),
    );
    if !result.status.success() {
        return Err(format!("{label}: {}", result.status));
    }
    Ok(stdout
        .lines()
        .filter_map(|l| parse_result(l, LIMITS, round))
        .collect())
}

/// IMB-MPI1 under `config`.
pub fn imb(
    config: &McaConfig,
    binary: &Path,
    round: u32,
    timeout: Duration,
    out: &Path,
) -> Result<Vec<Sample>, String> {
    let args = imb::arguments(16 << 20);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let job = Job::new(config, 2, binary)
        .args(&args)
        .mpirun_args(mpirun_args(config))
        .timeout(timeout);
    let label = format!("{}.imb.{round}", config.name);
    let stdout = run_job(job, &label, out)?;
    Ok(imb::parse(&stdout, &config.name, round))
}

/// NetPIPE's MPI module under `config`, once: its np.out goes to
/// `runs/<config>.netpipe.np.out` and becomes the configuration's curve.
pub fn netpipe(
    config: &McaConfig,
    binary: &Path,
    timeout: Duration,
    out: &Path,
) -> Result<netpipe::Curve, String> {
    let label = format!("{}.netpipe", config.name);
    let np_out = out.join("runs").join(format!("{label}.np.out"));
    let _ = std::fs::remove_file(&np_out);
    let args = netpipe::arguments(&np_out);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let job = Job::new(config, 2, binary)
        .args(&args)
        .mpirun_args(mpirun_args(config))
        .timeout(timeout);
    run_job(job, &label, out)?;
    let text = std::fs::read_to_string(&np_out)
        .map_err(|e| format!("{label}: {}: {e}", np_out.display()))?;
    let points = netpipe::parse(&text).map_err(|e| format!("{label}: {e}"))?;
    Ok(netpipe::Curve {
        config: config.name.clone(),
        points,
    })
}

/// The mpirun arguments of a configuration, for the JSON file (after the `mpirun` of
/// another installation and the component path, when it runs on one).
pub fn describe(config: &McaConfig) -> String {
    let mut words: Vec<String> = Vec::new();
    if let Some(prefix) = &config.prefix {
        if let Some(ours) = &config.components {
            words.push(format!(
                "OMPI_MCA_mca_base_component_path={}:{}",
                ours.display(),
                prefix.join("lib/openmpi").display()
            ));
        }
        words.push(config.mpirun().display().to_string());
    }
    words.extend(mpirun_args(config).iter().map(|a| (*a).to_owned()));
    words.extend(config.mpirun_options());
    words.join(" ")
}

/// The current UTC time as `YYYYMMDD-HHMMSS`.
pub fn utc_stamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_from_day_counts() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_414), (2025, 11, 22));
    }

    #[test]
    fn jobs_on_another_installation_keep_the_binding_and_leave_the_oob_alone() {
        let on41 = McaConfig::new("a", &[("pml", "ob1")]);
        assert_eq!(
            mpirun_args(&on41),
            ["--bind-to", "core", "--mca", "oob_tcp_if_include", "lo"]
        );
        let on5 = on41.on_prefix_with(Path::new("/opt/ompi5"), Path::new("/b/mca"));
        assert_eq!(mpirun_args(&on5), ["--bind-to", "core"]);
        assert_eq!(
            describe(&on5),
            "OMPI_MCA_mca_base_component_path=/b/mca:/opt/ompi5/lib/openmpi \
             /opt/ompi5/bin/mpirun --bind-to core --mca pml ob1 \
             -x PMIX_MCA_mca_base_component_show_load_errors=0"
        );
    }

    #[test]
    fn limits_get_the_size_sweep_and_quick_only() {
        let args: Vec<String> = ["--test", "latency", "--sizes", "0,8", "--quick"]
            .map(str::to_owned)
            .to_vec();
        assert_eq!(limits_args(false, &args), vec!["--sizes", "0,8", "--quick"]);
        assert_eq!(limits_args(true, &[]), vec!["--quick"]);
    }
}
