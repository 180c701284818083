//! Running the measurement programs and keeping what they print.

use std::fmt::Write as _;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mca_harness::{Job, McaConfig, program};

use crate::fi_pingpong::{self, Limit, Plan};
use crate::imb;
use crate::netpipe;
use crate::report::LIMITS;
use crate::results::{Sample, parse_result};

/// The runtime's own traffic on the loopback.
const OOB_ON_LOOPBACK: [&str; 3] = ["--mca", "oob_tcp_if_include", "lo"];

/// The mpirun options of a job of `config`: ranks bound to `binding` (`core`: two
/// ranks on two cores; `none` where there are more ranks than cores), and on the
/// system's Open MPI [`OOB_ON_LOOPBACK`]. Another installation (5.0) gets the binding
/// only: its runtime (PRRTE) refuses an OOB restricted to the loopback ("No network
/// interfaces were found for out-of-band communications"), and a one-node job's ranks
/// reach mpirun's PMIx server on the node anyway.
pub fn mpirun_args(config: &McaConfig, binding: &'static str) -> Vec<&'static str> {
    let mut args = vec!["--bind-to", binding];
    if config.prefix.is_none() {
        args.extend(OOB_ON_LOOPBACK);
    }
    args
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
        .mpirun_args(&mpirun_args(config, "core"))
        .timeout(timeout);
    result_lines(
        job,
        config,
        "mpibench",
        &format!("{}.{round}", config.name),
        round,
        out,
    )
}

/// Runs `job` (`program` under `config`); every RESULT line it prints becomes a sample,
/// and none at all is a failure.
fn result_lines(
    job: Job,
    config: &McaConfig,
    program: &str,
    label: &str,
    round: u32,
    out: &Path,
) -> Result<Vec<Sample>, String> {
    let stdout = run_job(job, label, out)?;
    let samples: Vec<Sample> = stdout
        .lines()
        .filter_map(|l| parse_result(l, &config.name, round))
        .collect();
    if samples.is_empty() {
        return Err(format!("{label}: {program} printed no RESULT line"));
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

/// Ranks of the collective runs (issue #19: 4-rank Allreduce and Alltoall latency).
pub const COLL_RANKS: u32 = 4;

/// mpicoll (MPI_Allreduce and MPI_Alltoall latency, 8 B and 64 KiB) at [`COLL_RANKS`]
/// ranks under `config`. Those are more ranks than this machine has cores: the ranks
/// are not bound (two share a core, and Open MPI yields when idle, as it does when
/// oversubscribed), for every configuration alike.
pub fn mpicoll(
    config: &McaConfig,
    quick: bool,
    round: u32,
    timeout: Duration,
    out: &Path,
) -> Result<Vec<Sample>, String> {
    let target = if quick { "20" } else { "100" };
    let args = ["--sizes", "8,64k", "--target-ms", target];
    let job = Job::new(config, COLL_RANKS, config.program("mpicoll"))
        .args(&args)
        .mpirun_args(&mpirun_args(config, "none"))
        .timeout(timeout);
    let label = format!("{}.coll.{round}", config.name);
    result_lines(job, config, "mpicoll", &label, round, out)
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

/// fi_pingpong's exit status is the errno of what failed (Linux numbers): the server
/// could not bind its port, the client found nothing listening on it (yet).
const EADDRINUSE: i32 = 98;
const ECONNREFUSED: i32 = 111;

/// Fresh ports tried when the server finds its port taken.
const PORT_TRIES: u32 = 3;

/// Client starts, 20 ms apart, while the server is not yet listening (2 s).
const CONNECT_TRIES: u32 = 100;

/// The longest one run of a pair may take, whatever `--timeout` allows.
const PAIR_TIMEOUT: Duration = Duration::from_secs(60);

/// One fi_pingpong process and the threads reading its output.
struct Running {
    command: String,
    child: Child,
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
}

/// How it ended: exit code (None: killed), stdout, stderr.
struct Ended {
    code: Option<i32>,
    timed_out: bool,
    stdout: String,
    stderr: String,
}

impl Ended {
    fn succeeded(&self) -> bool {
        self.code == Some(0) && !self.timed_out
    }

    /// `exit 111: <its last line on stderr>`, or `timed out`.
    fn why(&self) -> String {
        if self.timed_out {
            return "timed out".to_owned();
        }
        let last = self.stderr.lines().rev().find(|l| !l.trim().is_empty());
        match (self.code, last) {
            (Some(c), Some(l)) => format!("exit {c}: {}", l.trim()),
            (Some(c), None) => format!("exit {c}"),
            (None, _) => "killed".to_owned(),
        }
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// fi_pingpong with `args`, pinned to `cpu` when the plan pins.
fn start(plan: &Plan, limit: &Limit, args: &[String], cpu: u32) -> Result<Running, String> {
    let mut command = if plan.pin {
        let mut c = Command::new("taskset");
        c.args(["-c", &cpu.to_string()]).arg(&limit.binary);
        c
    } else {
        Command::new(&limit.binary)
    };
    let env: Vec<(&str, &str)> = limit
        .provider
        .env
        .iter()
        .copied()
        .chain(limit.lib.as_deref().map(|l| ("LD_LIBRARY_PATH", l)))
        .collect();
    command
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let shown = format!("{} {}", limit.binary.display(), args.join(" "));
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", limit.binary.display()))?;
    Ok(Running {
        command: format!(
            "{}{shown}",
            env.iter().map(|e| format!("{e} ")).collect::<String>()
        ),
        stdout: drain(child.stdout.take().expect("piped")),
        stderr: drain(child.stderr.take().expect("piped")),
        child,
    })
}

/// Waits for `run` until `deadline`, then kills it; a process that did not exit (killed
/// here or by anyone) gets the shm provider's regions it left removed, named after its
/// pid. Its output goes to `log`.
fn end(mut run: Running, deadline: Instant, log: &mut String) -> Ended {
    let mut timed_out = false;
    let status = loop {
        match run.child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => {
                timed_out = true;
                let _ = run.child.kill();
                let _ = run.child.wait();
                break None;
            }
        }
    };
    if status.is_none_or(|s| s.code().is_none()) {
        remove_shm_regions(run.child.id());
    }
    let ended = Ended {
        code: status.and_then(|s| s.code()),
        timed_out,
        stdout: run.stdout.join().unwrap_or_default(),
        stderr: run.stderr.join().unwrap_or_default(),
    };
    let _ = writeln!(
        log,
        "$ {}\n{}{}# {}\n",
        run.command,
        ended.stdout,
        ended.stderr,
        if ended.succeeded() {
            "exit 0".to_owned()
        } else {
            ended.why()
        }
    );
    ended
}

/// libfabric's shm provider names its regions `/dev/shm/<pid>:<n>:<n>` and removes
/// them when it exits; a killed process leaves them.
fn remove_shm_regions(pid: u32) {
    let prefix = format!("{pid}:");
    if let Ok(entries) = std::fs::read_dir("/dev/shm") {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// A port nothing listens on now (the server binds it with SO_REUSEADDR right after).
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind(("0.0.0.0", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// One fi_pingpong pair on the loopback, server (CPU 0) first, then the client (CPU 1)
/// until it connects; a taken port gets a fresh one. The client's stdout.
fn fi_pingpong_pair(
    plan: &Plan,
    limit: &Limit,
    size: u64,
    iterations: u64,
    timeout: Duration,
    log: &mut String,
) -> Result<String, String> {
    for _ in 0..PORT_TRIES {
        let port = free_port()?;
        let deadline = Instant::now() + timeout;
        let server_args = limit.provider.arguments(size, iterations, port, true);
        let mut server = start(plan, limit, &server_args, 0)?;
        let client_args = limit.provider.arguments(size, iterations, port, false);
        let mut client = None;
        for _ in 0..CONNECT_TRIES {
            std::thread::sleep(Duration::from_millis(20));
            if !matches!(server.child.try_wait(), Ok(None)) {
                break;
            }
            let ended = end(start(plan, limit, &client_args, 1)?, deadline, log);
            if ended.succeeded() {
                client = Some(ended.stdout);
                break;
            }
            if ended.code != Some(ECONNREFUSED) {
                let _ = server.child.kill();
                end(server, deadline, log);
                return Err(format!("client: {}", ended.why()));
            }
        }
        let Some(stdout) = client else {
            // The server ended before a client connected, or never listened.
            let listening = matches!(server.child.try_wait(), Ok(None));
            let _ = server.child.kill();
            let ended = end(server, deadline, log);
            if ended.code == Some(EADDRINUSE) {
                continue;
            }
            return Err(if listening {
                format!("no client could connect to the server's port {port} in 2 s")
            } else {
                format!("server: {}", ended.why())
            });
        };
        let ended = end(server, deadline, log);
        return if ended.succeeded() {
            Ok(stdout)
        } else {
            Err(format!("server: {}", ended.why()))
        };
    }
    Err(format!(
        "{PORT_TRIES} ports were taken before the server could bind them"
    ))
}

/// The elapsed microseconds of one fi_pingpong pair of `iterations` round trips.
fn fi_pingpong_elapsed(
    plan: &Plan,
    limit: &Limit,
    size: u64,
    iterations: u64,
    timeout: Duration,
    log: &mut String,
) -> Result<f64, String> {
    let stdout = fi_pingpong_pair(plan, limit, size, iterations, timeout, log)?;
    let row = fi_pingpong::parse(&stdout)?;
    if row.label != fi_pingpong::size_label(size) {
        return Err(format!("a row for {} bytes, not {size}", row.label));
    }
    if !row.all_acked {
        return Err("not every message was acknowledged".to_owned());
    }
    row.elapsed_us(size, iterations)
        .ok_or_else(|| "no elapsed time in its row".to_owned())
}

/// fi_pingpong of `limit` at every size of the plan: limit samples, half round
/// trips without the connection set-up (the probes' median taken off the timed run;
/// see fi_pingpong.rs). Every run's output is kept in
/// `runs/limits.<test>.<round>.out`; the first failure ends the provider's round (the
/// other sizes would fail alike, each perhaps after a timeout).
pub fn fi_pingpong(
    plan: &Plan,
    limit: &Limit,
    round: u32,
    timeout: Duration,
    out: &Path,
) -> Result<Vec<Sample>, String> {
    let label = format!("{LIMITS}.{}.{round}", limit.test);
    let timeout = timeout.min(PAIR_TIMEOUT);
    let mut log = String::new();
    let mut samples = Vec::new();
    let mut failure = None;
    for &size in &plan.sizes {
        let n = limit.provider.iterations(size, plan.target_ms);
        let mut elapsed =
            |iterations| fi_pingpong_elapsed(plan, limit, size, iterations, timeout, &mut log);
        let value = (0..fi_pingpong::PROBES)
            .map(|_| elapsed(1))
            .collect::<Result<Vec<f64>, String>>()
            .and_then(|mut probes| Ok((crate::results::median(&mut probes), elapsed(n)?)))
            .and_then(|(probe, timed)| fi_pingpong::half_round_trip(probe, timed, n));
        match value {
            Ok(value) => samples.push(Sample {
                config: LIMITS.to_owned(),
                round,
                test: limit.test.clone(),
                size,
                unit: "us".to_owned(),
                value,
            }),
            Err(e) => {
                failure = Some(format!("{label}: {size} B: {e}"));
                break;
            }
        }
    }
    keep(out, &label, &log, "");
    match failure {
        Some(e) => {
            let file = out.join("runs").join(format!("{label}.out"));
            Err(format!("{e} (see {})", file.display()))
        }
        None => Ok(samples),
    }
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
        .mpirun_args(&mpirun_args(config, "core"))
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
        .mpirun_args(&mpirun_args(config, "core"))
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
    words.extend(mpirun_args(config, "core").iter().map(|a| (*a).to_owned()));
    words.extend(config.mpirun_options());
    words.join(" ")
}

/// The first line of `ompi_info --version` (`tool`: the system's or a prefix's).
pub fn ompi_version(tool: &Path) -> String {
    Command::new(tool)
        .args(["--version"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_owned))
        .unwrap_or_default()
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
            mpirun_args(&on41, "core"),
            ["--bind-to", "core", "--mca", "oob_tcp_if_include", "lo"]
        );
        let on5 = on41.on_prefix_with(Path::new("/opt/ompi5"), Path::new("/b/mca"));
        assert_eq!(mpirun_args(&on5, "core"), ["--bind-to", "core"]);
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
