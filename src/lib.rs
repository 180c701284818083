//! mca-harness: runs real `mpirun` jobs against MCA configurations and reports
//! what happened, for the integration tests in `tests/`.
//!
//! A job gets our components through `OMPI_MCA_mca_base_component_path`
//! (`build/mca` first, then the system component directory so stock components
//! stay visible), runs in its own process group, and is killed as a whole when
//! its timeout passes; a timeout is reported as a failure with the output so far.
//!
//! A configuration can instead run on another Open MPI installation
//! ([`McaConfig::on_prefix`], e.g. the static build of [`static_ompi`]): its own
//! `mpirun`, test programs compiled by its own `mpicc`, and only the components
//! that installation has (no `build/mca`).

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub mod conformance;
pub mod cuda;
pub mod mpi4py;
pub mod ompi5;
pub mod shm;
pub mod static_ompi;

/// Where the ranks of a job run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// All ranks on this machine (the default).
    Local,
    /// Spread over `hosts` network-namespace "hosts" joined by veth links
    /// (tests/hosts/run-across-hosts): peers on other hosts cannot share memory.
    AcrossHosts { hosts: u32 },
}

/// A named set of MCA parameters selecting a transport, e.g. `stock-tcp`, and how
/// its jobs are launched (placement, injected packet loss, environment).
#[derive(Debug, Clone)]
pub struct McaConfig {
    /// Short name used in test names, reports and benchmark tables.
    pub name: String,
    /// `--mca key value` pairs.
    pub params: Vec<(String, String)>,
    /// Environment variables for mpirun, exported to the ranks.
    pub env: Vec<(String, String)>,
    /// Where the ranks run.
    pub placement: Placement,
    /// Arguments for tests/loss/with-loss (without `--`), if packets are dropped.
    pub loss: Option<Vec<String>>,
    /// Another Open MPI installation to run on (its `bin/mpirun`, its components
    /// only); `None`: the system Open MPI with `build/mca` first in the path.
    pub prefix: Option<PathBuf>,
    /// With `prefix`: a directory of our components built for that installation
    /// (`make components-ompi5`), searched before the installation's own.
    pub components: Option<PathBuf>,
    /// Jobs of this configuration never overlap another such job (see `one_at_a_time`).
    pub one_at_a_time: bool,
}

impl McaConfig {
    /// A configuration from `(key, value)` pairs.
    pub fn new(name: &str, params: &[(&str, &str)]) -> McaConfig {
        McaConfig {
            name: name.to_owned(),
            params: params
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            env: Vec::new(),
            placement: Placement::Local,
            loss: None,
            prefix: None,
            components: None,
            one_at_a_time: false,
        }
    }

    /// The same configuration on the Open MPI installed in `prefix`: its `mpirun`,
    /// its components (static members included) and nothing from `build/mca`; the
    /// test programs are compiled with its `mpicc` ([`McaConfig::program`]).
    pub fn on_prefix(mut self, prefix: &Path) -> McaConfig {
        self.prefix = Some(prefix.to_owned());
        self
    }

    /// The same configuration on the Open MPI installed in `prefix` with our components
    /// from `components` (built against that installation) in its component path.
    pub fn on_prefix_with(mut self, prefix: &Path, components: &Path) -> McaConfig {
        self.prefix = Some(prefix.to_owned());
        self.components = Some(components.to_owned());
        // Open MPI 5's PMIx scans the same component path and reports every file of
        // ours in it as "bad prefix": not an error, only noise in every job's output.
        self.with_env("PMIX_MCA_mca_base_component_show_load_errors", "0")
    }

    /// The `mpirun` this configuration launches with.
    pub fn mpirun(&self) -> PathBuf {
        self.prefix.as_ref().map_or_else(
            || PathBuf::from(env!("RMCA_MPIRUN")),
            |p| p.join("bin/mpirun"),
        )
    }

    /// A test program (tests/programs, tests/fixtures) built for this configuration's
    /// Open MPI: the one build.rs compiled, or for [`McaConfig::on_prefix`] one
    /// compiled on first use with that installation's `mpicc`.
    pub fn program(&self, name: &str) -> PathBuf {
        match &self.prefix {
            None => program(name),
            Some(prefix) => static_ompi::program_for(prefix, name),
        }
    }

    /// False (after printing why) when this configuration runs on an installation
    /// that does not exist; see [`static_ompi::available`].
    pub fn available(&self) -> bool {
        match (&self.prefix, &self.components) {
            (None, _) => true,
            (Some(prefix), Some(components)) => ompi5::available_at(prefix, components),
            (Some(prefix), None) => static_ompi::prefix_available(prefix),
        }
    }

    /// The same configuration with one more parameter (replacing an earlier value).
    pub fn with(mut self, key: &str, value: &str) -> McaConfig {
        self.params.retain(|(k, _)| k != key);
        self.params.push((key.to_owned(), value.to_owned()));
        self
    }

    /// The same configuration with an environment variable for mpirun and the ranks.
    pub fn with_env(mut self, key: &str, value: &str) -> McaConfig {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// The mpirun options this configuration stands for: `--mca K V` for every
    /// parameter and `-x K=V` for every variable (the benchmark prints them too).
    pub fn mpirun_options(&self) -> Vec<String> {
        let mut options = Vec::new();
        for (key, value) in &self.params {
            options.extend(["--mca".to_owned(), key.clone(), value.clone()]);
        }
        for (key, value) in &self.env {
            options.extend(["-x".to_owned(), format!("{key}={value}")]);
        }
        options
    }

    /// The same configuration, each of its jobs alone (no other job of the test binary
    /// beside it): for transports that break when starved of CPU (with libfabric's
    /// `udp;ofi_rxd`, rofi jobs hung in about a third of concurrent pairs and never alone
    /// in 18 runs; `mprobe_threads` on 5.0.7 hung once beside another test's job).
    pub fn one_at_a_time(mut self) -> McaConfig {
        self.one_at_a_time = true;
        self
    }

    /// The same configuration under another name.
    pub fn named(mut self, name: &str) -> McaConfig {
        self.name = name.to_owned();
        self
    }

    /// The same configuration with its ranks spread over `hosts` namespace hosts.
    pub fn across_hosts(mut self, hosts: u32) -> McaConfig {
        assert!(hosts >= 1, "at least one host");
        self.placement = Placement::AcrossHosts { hosts };
        self.name = format!("{}-{hosts}hosts", self.name);
        self
    }

    /// The same configuration while tests/loss/with-loss drops packets, e.g.
    /// `&["--percent", "5", "--proto", "tcp", "--ports", "31000-31015"]`.
    pub fn with_loss(mut self, with_loss_args: &[&str]) -> McaConfig {
        self.loss = Some(with_loss_args.iter().map(|a| (*a).to_owned()).collect());
        let percent = with_loss_args
            .iter()
            .position(|a| *a == "--percent")
            .and_then(|i| with_loss_args.get(i + 1))
            .copied()
            .unwrap_or("?");
        self.name = format!("{}-loss{percent}", self.name);
        self
    }

    /// Stock ob1 over the TCP BTL with its listening ports in `first..first+count`,
    /// so that loss injection can target exactly its traffic.
    pub fn stock_tcp_on_ports(first: u16, count: u16) -> McaConfig {
        McaConfig::stock_tcp()
            .with("btl_tcp_port_min_v4", &first.to_string())
            .with("btl_tcp_port_range_v4", &count.to_string())
    }

    /// Stock ob1 over the TCP BTL.
    pub fn stock_tcp() -> McaConfig {
        McaConfig::new("stock-tcp", &[("pml", "ob1"), ("btl", "self,tcp")])
    }

    /// Stock ob1 over vader shared memory.
    pub fn stock_vader() -> McaConfig {
        McaConfig::new("stock-vader", &[("pml", "ob1"), ("btl", "self,vader")])
    }

    /// Stock cm + OFI MTL on libfabric's tcp;ofi_rxm (excluded by its default list).
    pub fn stock_ofi_tcp() -> McaConfig {
        McaConfig::new(
            "stock-ofi-tcp",
            &[
                ("pml", "cm"),
                ("mtl", "ofi"),
                ("mtl_ofi_provider_include", "tcp;ofi_rxm"),
            ],
        )
    }

    /// The configurations every conformance program must pass on.
    pub fn stock() -> Vec<McaConfig> {
        vec![
            McaConfig::stock_tcp(),
            McaConfig::stock_vader(),
            McaConfig::stock_ofi_tcp(),
        ]
    }
}

/// Whether the whole test matrix is asked for (`RMCA_MATRIX=full`, set by
/// `make check-all`): `make check` and `.ci/run` run the subset the README's "What runs
/// where" names, in which every component, provider, tag layout and rank count still
/// meets every series at least once.
pub fn full_matrix() -> bool {
    std::env::var("RMCA_MATRIX").is_ok_and(|v| v == "full")
}

/// For what the README's "What runs where" leaves to `make check-all`: whether it runs
/// in this matrix. When not, prints `SKIPPED (make check-all runs it): <what>`, and the
/// caller returns without running anything.
pub fn runs_in_this_matrix(what: &str) -> bool {
    let runs = full_matrix();
    if !runs {
        println!("SKIPPED (make check-all runs it): {what}");
    }
    runs
}

/// The repository root (where `build/mca` lives).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where `make` puts our components and their help files.
pub fn component_build_dir() -> PathBuf {
    std::env::var_os("RMCA_COMPONENT_DIR")
        .map_or_else(|| repo_root().join("build/mca"), PathBuf::from)
}

/// Open MPI's own component directory (`ompi_info --path pkglibdir`).
pub fn system_component_dir() -> &'static str {
    env!("RMCA_SYSTEM_COMPONENT_DIR")
}

/// The component search path: ours first, then the system's.
pub fn component_path() -> String {
    let ours = component_build_dir();
    // A missing directory in the path breaks mpirun's own option parsing.
    let _ = std::fs::create_dir_all(&ours);
    format!("{}:{}", ours.display(), env!("RMCA_SYSTEM_COMPONENT_DIR"))
}

/// A compiled test program from tests/programs or tests/fixtures.
pub fn program(name: &str) -> PathBuf {
    let path = Path::new(env!("RMCA_PROGRAMS_DIR")).join(name);
    assert!(
        path.is_file(),
        "test program {name} was not built (looked at {})",
        path.display()
    );
    path
}

/// What a finished (or killed) job left behind.
#[derive(Debug)]
pub struct JobOutput {
    /// The command line, for reports.
    pub command: String,
    /// Exit code, `None` if killed by a signal or the timeout.
    pub code: Option<i32>,
    /// True if the harness killed the job at its timeout.
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl JobOutput {
    /// Success: exit code 0 and no timeout.
    pub fn succeeded(&self) -> bool {
        self.code == Some(0) && !self.timed_out
    }

    /// Counts from a final `N passed, M failed` line, if the program printed one.
    pub fn counts(&self) -> Option<(u64, u64)> {
        self.stdout.lines().rev().find_map(parse_counts)
    }

    /// A readable account of the job for assertion messages.
    pub fn report(&self) -> String {
        format!(
            "$ {}\nexit: {:?}{} after {:.1?}\n--- stdout (tail) ---\n{}\n--- stderr (tail) ---\n{}",
            self.command,
            self.code,
            if self.timed_out {
                " (killed at timeout)"
            } else {
                ""
            },
            self.elapsed,
            tail(&self.stdout, 40),
            tail(&self.stderr, 40)
        )
    }

    /// Panics with the report unless the job failed on its own (no timeout, no
    /// process ended by a segmentation fault) and its output gives every one of
    /// `reasons`.
    pub fn assert_refused_with(&self, reasons: &[&str]) {
        assert!(!self.succeeded() && !self.timed_out, "{}", self.report());
        let log = format!("{}{}", self.stdout, self.stderr);
        assert!(
            !log.contains("Segmentation fault"),
            "refused with a crash\n{}",
            self.report()
        );
        let missing: Vec<&str> = reasons
            .iter()
            .copied()
            .filter(|reason| !log.contains(reason))
            .collect();
        assert!(
            missing.is_empty(),
            "the refusal does not give {missing:?}\n{}",
            self.report()
        );
    }

    /// Panics with the report unless the job succeeded with zero failed checks.
    pub fn assert_passed(&self) {
        let counts = self.counts();
        assert!(
            self.succeeded() && counts.is_some_and(|(_, failed)| failed == 0),
            "job failed (counts {counts:?})\n{}",
            self.report()
        );
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Parses `N passed, M failed` (optionally preceded by one `word:`).
pub fn parse_counts(line: &str) -> Option<(u64, u64)> {
    let line = line.trim();
    let line = match line.split_once(": ") {
        Some((word, rest)) if !word.contains(' ') => rest,
        _ => line,
    };
    let mut parts = line.split(", ");
    let passed = parts.next()?.strip_suffix(" passed")?.parse().ok()?;
    let failed = parts.next()?.split(' ').next()?.parse().ok()?;
    parts
        .next()
        .is_none_or(|p| p.ends_with(" skipped"))
        .then_some((passed, failed))
}

/// One mpirun invocation.
#[derive(Debug, Clone)]
pub struct Job {
    config: McaConfig,
    ranks: u32,
    program: PathBuf,
    args: Vec<String>,
    timeout: Duration,
    env: Vec<(String, String)>,
    mpirun_args: Vec<String>,
    launcher: Vec<String>,
    keep_residue: bool,
}

impl Job {
    /// `ranks` copies of `program` under `config`, with a 120 s timeout.
    pub fn new(config: &McaConfig, ranks: u32, program: impl Into<PathBuf>) -> Job {
        Job {
            config: config.clone(),
            ranks,
            program: program.into(),
            args: Vec::new(),
            timeout: Duration::from_secs(120),
            env: Vec::new(),
            mpirun_args: Vec::new(),
            launcher: Vec::new(),
            keep_residue: false,
        }
    }

    /// Leaves what a failed job left in /dev/shm for the caller to inspect (by default
    /// stock vader's abandoned segments of a failed job are removed: see [`shm`]).
    pub fn keep_residue(mut self) -> Job {
        self.keep_residue = true;
        self
    }

    /// Arguments for the program.
    pub fn args(mut self, args: &[&str]) -> Job {
        self.args.extend(args.iter().map(|a| (*a).to_owned()));
        self
    }

    /// Kills the whole job after `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Job {
        self.timeout = timeout;
        self
    }

    /// An environment variable for mpirun (exported to the ranks with `-x`).
    pub fn env(mut self, key: &str, value: &str) -> Job {
        self.env.push((key.to_owned(), value.to_owned()));
        self.mpirun_args.extend(["-x".to_owned(), key.to_owned()]);
        self
    }

    /// Extra mpirun options (hostfiles, binding, ...).
    pub fn mpirun_args(mut self, args: &[&str]) -> Job {
        self.mpirun_args
            .extend(args.iter().map(|a| (*a).to_owned()));
        self
    }

    /// Runs mpirun under a wrapper command (e.g. the cross-host or packet-loss scripts).
    pub fn launcher(mut self, wrapper: &[&str]) -> Job {
        self.launcher = wrapper.iter().map(|a| (*a).to_owned()).collect();
        self
    }

    fn command_line(&self) -> Vec<String> {
        let mut mpirun_options = self.config.mpirun_options();
        mpirun_options.extend(self.mpirun_args.iter().cloned());
        mpirun_options.push(self.program.display().to_string());
        mpirun_options.extend(self.args.iter().cloned());

        let mut line = self.launcher.clone();
        match self.config.placement {
            Placement::Local => {
                if let Some(loss) = &self.config.loss {
                    line.push(
                        repo_root()
                            .join("tests/loss/with-loss")
                            .display()
                            .to_string(),
                    );
                    line.extend(loss.iter().cloned());
                    line.push("--".to_owned());
                }
                line.push(self.config.mpirun().display().to_string());
                line.extend(["--allow-run-as-root", "--oversubscribe"].map(str::to_owned));
            }
            Placement::AcrossHosts { hosts } => {
                // The script brings the hosts up, runs mpirun inside host 1 with the
                // rsh agent and a host list, and always tears the hosts down again.
                let script = repo_root().join("tests/hosts/run-across-hosts");
                line.push(script.display().to_string());
                if self.config.prefix.is_some() {
                    line.push("--mpirun".to_owned());
                    line.push(self.config.mpirun().display().to_string());
                }
                if let Some(loss) = &self.config.loss {
                    line.extend(["--loss".to_owned(), loss.join(" ")]);
                }
                line.push(hosts.to_string());
                line.push(self.ranks.div_ceil(hosts).to_string());
                line.push("--".to_owned());
            }
        }
        line.extend(["-np".to_owned(), self.ranks.to_string()]);
        line.extend(mpirun_options);
        line
    }

    /// Runs the job to completion or timeout and captures its output.
    pub fn run(&self) -> JobOutput {
        // Loss tables of concurrent tests would stack on the same ports (two 5 % drops
        // are a 9.75 % drop): jobs with injected loss run one at a time. A job of a
        // configuration marked one_at_a_time runs alone: no other job of this test
        // binary runs beside it (every other job holds the lock shared).
        static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
        static ALONE: std::sync::RwLock<()> = std::sync::RwLock::new(());
        let (_alone, _shared) = if self.config.one_at_a_time {
            (Some(ALONE.write().unwrap_or_else(|e| e.into_inner())), None)
        } else {
            (None, Some(ALONE.read().unwrap_or_else(|e| e.into_inner())))
        };
        let _serial = self
            .config
            .loss
            .is_some()
            .then(|| SERIAL.lock().unwrap_or_else(|e| e.into_inner()));
        let line = self.command_line();
        let shm_before = (!self.keep_residue).then(shm::entries);
        let mut command = Command::new(&line[0]);
        command.args(&line[1..]);
        // Another installation uses its own component directory: a DSO of ours from
        // build/mca must not stand in for the component compiled into it.
        let component_path_env = match &self.config.prefix {
            None => {
                command.env("OMPI_MCA_mca_base_component_path", component_path());
                format!("OMPI_MCA_mca_base_component_path={} ", component_path())
            }
            Some(prefix) => match &self.config.components {
                Some(ours) => {
                    let path = format!(
                        "{}:{}",
                        ours.display(),
                        prefix.join("lib/openmpi").display()
                    );
                    command.env("OMPI_MCA_mca_base_component_path", &path);
                    format!("OMPI_MCA_mca_base_component_path={path} ")
                }
                None => {
                    command.env_remove("OMPI_MCA_mca_base_component_path");
                    String::new()
                }
            },
        };
        // Open MPI 4.1's mpirun creates /tmp/ompi.<host>.<uid> and removes it when empty
        // at its end: two jobs at once race there ("mkdir ... File exists", orte_init
        // failed; seen twice in a day of make check). Each 4.1 job gets its own.
        let own_tmpdir = (self.config.prefix.is_none()
            && !self.env.iter().any(|(k, _)| k == ORTE_TMPDIR)
            && !self.config.env.iter().any(|(k, _)| k == ORTE_TMPDIR))
        .then(job_tmpdir);
        if let Some(dir) = &own_tmpdir {
            command.env(ORTE_TMPDIR, dir);
        }
        command
            .envs(self.config.env.iter().map(|(k, v)| (k, v)))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let started = Instant::now();
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", line[0]));
        let stdout = drain(child.stdout.take().expect("piped"));
        let stderr = drain(child.stderr.take().expect("piped"));
        let mut timed_out = false;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for mpirun") {
                break status;
            }
            if started.elapsed() > self.timeout {
                timed_out = true;
                break stop_group(&mut child);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // Daemons or ranks can outlive mpirun after a failure: take the group down.
        kill_group(child.id());
        if let Some(dir) = &own_tmpdir {
            let _ = std::fs::remove_dir_all(dir);
        }
        if let Some(before) = shm_before.filter(|_| timed_out || !status.success()) {
            shm::remove_abandoned_vader_segments(&before, Duration::from_secs(2));
        }
        let elapsed = started.elapsed();
        record_job_time(
            elapsed,
            self.ranks,
            &self.config.name,
            &self
                .program
                .file_name()
                .unwrap_or_default()
                .to_string_lossy(),
            timed_out,
        );
        JobOutput {
            command: format!("{component_path_env}{}", line.join(" ")),
            code: status.code(),
            timed_out,
            stdout: stdout.join().unwrap_or_default(),
            stderr: stderr.join().unwrap_or_default(),
            elapsed,
        }
    }
}

/// Open MPI 4.1's parameter for where mpirun puts its per-job temporary tree.
const ORTE_TMPDIR: &str = "OMPI_MCA_orte_tmpdir_base";

/// A new empty directory of this test process under the system's temporary directory.
fn job_tmpdir() -> PathBuf {
    static JOBS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = JOBS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("rmca-job-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// With `RMCA_JOB_TIMES=FILE`, one line per job appended to FILE: seconds, the test
/// binary, the test (its thread's name), ranks, configuration and program,
/// tab-separated. This is how `.ci/run` splits its time per test file and per test
/// (docs/ci.md).
pub(crate) fn record_job_time(
    elapsed: Duration,
    ranks: u32,
    config: &str,
    program: &str,
    timed_out: bool,
) {
    let Some(file) = std::env::var_os("RMCA_JOB_TIMES") else {
        return;
    };
    let thread = std::thread::current();
    // cargo names a test binary `<file>-<16 hex digits>`.
    let exe = std::env::current_exe().unwrap_or_default();
    let binary = exe.file_name().unwrap_or_default().to_string_lossy();
    let binary = match binary.rsplit_once('-') {
        Some((file, hash)) if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) => {
            file
        }
        _ => &*binary,
    };
    let line = format!(
        "{:.2}\t{binary}\t{}\t{ranks}\t{config}\t{program}{}\n",
        elapsed.as_secs_f64(),
        thread.name().unwrap_or("-"),
        if timed_out { "\ttimed out" } else { "" }
    );
    // One write per line on an O_APPEND file: concurrent tests do not interleave.
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = appended {
        eprintln!(
            "RMCA_JOB_TIMES: cannot append to {}: {e}",
            file.to_string_lossy()
        );
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

fn kill_group(pid: u32) {
    signal_group(pid, "-KILL");
}

fn signal_group(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([signal, "--", &format!("-{pid}")])
        .stderr(Stdio::null())
        .status();
}

/// Ends a job past its timeout: SIGTERM first, so that wrappers clean up what they made
/// (run-across-hosts removes its network namespaces, with-loss its nftables tables),
/// then SIGKILL for whatever is left after 10 s.
fn stop_group(child: &mut std::process::Child) -> std::process::ExitStatus {
    signal_group(child.id(), "-TERM");
    let asked = Instant::now();
    while asked.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    kill_group(child.id());
    child.wait().expect("reap mpirun")
}

/// `ompi_info --param <framework> <component> --level 9` with our components visible.
pub fn ompi_info_params(framework: &str, component: &str) -> String {
    let out = Command::new("ompi_info")
        .args(["--param", framework, component, "--level", "9"])
        .env("OMPI_MCA_mca_base_component_path", component_path())
        .output()
        .expect("run ompi_info");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts that every MCA parameter named `<prefix>...` in `ompi_info_params` output has
/// a help line, and returns how many there are.
pub fn assert_every_parameter_has_help(ompi_info: &str, prefix: &str) -> usize {
    let marker = format!("parameter \"{prefix}");
    let blocks: Vec<&str> = ompi_info.split(&marker).skip(1).collect();
    for block in &blocks {
        let name = block.split('"').next().unwrap_or("?");
        assert!(
            block.lines().nth(1).is_some_and(|l| l.trim().len() > 10),
            "{prefix}{name} has no help text:\n{ompi_info}"
        );
    }
    blocks.len()
}

/// One bad value of a parameter and what its report must say: `ompi_info` run with
/// `OMPI_MCA_<parameter>=<value>` must print the component's one "cannot use"
/// message, and it must contain `expect` (the parameter, the value and what is allowed).
#[derive(Debug, Clone)]
pub struct BadValue {
    pub parameter: String,
    pub value: String,
    pub expect: String,
}

/// A [`BadValue`] row whose report contains `expect`.
pub fn bad(parameter: &str, value: &str, expect: &str) -> BadValue {
    BadValue {
        parameter: parameter.to_owned(),
        value: value.to_owned(),
        expect: expect.to_owned(),
    }
}

/// A number outside its range, e.g. `out_of_range("btl_x_verbose", "101", "0 and 100")`.
pub fn out_of_range(parameter: &str, value: &str, between: &str) -> BadValue {
    let expect = format!("{parameter} = {value} is out of range: it must be between {between}");
    bad(parameter, value, &expect)
}

/// Text where a number is needed (or one beyond 64 bits: `why` = "too large").
pub fn not_a_number(parameter: &str, value: &str, why: &str, between: &str) -> BadValue {
    let expect = format!("{parameter} = \"{value}\" is {why}: it must be between {between}");
    bad(parameter, value, &expect)
}

/// A boolean parameter given something else.
pub fn not_a_boolean(parameter: &str, value: &str) -> BadValue {
    let expect = format!("{parameter} = \"{value}\" is not a boolean: it must be one of 1, 0");
    bad(parameter, value, &expect)
}

/// An enumerated parameter given a word it does not list (`listed`: "none, cma").
pub fn not_one_of(parameter: &str, value: &str, listed: &str) -> BadValue {
    let expect = format!("{parameter} = \"{value}\" is not one of: {listed}");
    bad(parameter, value, &expect)
}

/// Checks every row with its own `ompi_info --param <framework> <component>` (register
/// runs there as in a job; a few rows at a time) and panics listing every row whose
/// report is missing, repeated or says something else.
pub fn assert_bad_values_reported(framework: &str, component: &str, rows: &[BadValue]) {
    let headline = format!("The {framework}_{component} component was given MCA parameter values");
    let check = |row: &BadValue| -> Option<String> {
        let out = Command::new("ompi_info")
            .args(["--param", framework, component, "--level", "9"])
            .env("OMPI_MCA_mca_base_component_path", component_path())
            .env(format!("OMPI_MCA_{}", row.parameter), &row.value)
            .output()
            .expect("run ompi_info");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        let reports = all.matches(&headline).count();
        (reports != 1 || !all.contains(&row.expect)).then(|| {
            let ours = all.split(&headline).nth(1).unwrap_or("").lines().take(8);
            format!(
                "{}={}: {reports} reports, expected one containing {:?}; got:\n{}",
                row.parameter,
                row.value,
                row.expect,
                ours.collect::<Vec<_>>().join("\n")
            )
        })
    };
    let failures: Vec<String> = std::thread::scope(|scope| {
        rows.chunks(rows.len().div_ceil(4).max(1))
            .map(|chunk| scope.spawn(move || chunk.iter().filter_map(check).collect::<Vec<_>>()))
            .collect::<Vec<_>>()
            .into_iter()
            .flat_map(|h| h.join().expect("ompi_info runner"))
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// What `tool args` prints about a built component in build/mca.
fn component_tool_output(file: &str, tool: &str, args: &[&str]) -> String {
    let so = component_build_dir().join(file);
    assert!(
        so.is_file(),
        "run `make components` first: {}",
        so.display()
    );
    let out = Command::new(tool)
        .args(args)
        .arg(&so)
        .output()
        .unwrap_or_else(|e| panic!("run {tool}: {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The dynamic symbols a built component in build/mca defines (`nm -D --defined-only`).
pub fn exported_symbols(file: &str) -> Vec<String> {
    component_tool_output(file, "nm", &["-D", "--defined-only"])
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_owned))
        .collect()
}

/// The shared libraries a built component in build/mca names as needed (`readelf -d`).
pub fn needed_libraries(file: &str) -> Vec<String> {
    component_tool_output(file, "readelf", &["-d"])
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| Some(l.split_once('[')?.1.trim_end_matches(']').to_owned()))
        .collect()
}

/// Asserts a built component does not name libfabric as needed: it loads it when it
/// first calls it (ffi/fabric-sys/shim/load.c).
pub fn assert_libfabric_not_needed(file: &str) {
    let needed = needed_libraries(file);
    assert!(
        !needed.is_empty(),
        "readelf found no NEEDED entry in {file}"
    );
    assert!(
        !needed.iter().any(|l| l.starts_with("libfabric")),
        "{file}: {needed:?}"
    );
}

/// Asserts a BTL opens a module (its init succeeds in both ranks of a 2-rank ob1 job)
/// only when the `btl` list names it (`named_list`, e.g. `self,rusnic`) or its
/// `btl_<component>_auto_select` is set; with no list or an exclude list it opens none.
pub fn assert_btl_opens_only_when_named(component: &str, named_list: &str) {
    let auto_select = format!("btl_{component}_auto_select");
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, bool);
    let cases: [Case; 4] = [
        ("default", vec![("pml", "ob1")], false),
        ("exclude-list", vec![("pml", "ob1"), ("btl", "^tcp")], false),
        ("opted-in", vec![("pml", "ob1"), (&auto_select, "1")], true),
        ("named", vec![("pml", "ob1"), ("btl", named_list)], true),
    ];
    for (name, params, opens) in cases {
        let config = McaConfig::new(name, &params).with("btl_base_verbose", "100");
        let out = Job::new(&config, 2, program("p2p_sizes"))
            .args(&["--quick"])
            .timeout(Duration::from_secs(120))
            .run();
        out.assert_passed();
        let log = format!("{}{}", out.stdout, out.stderr);
        let expected = if opens { "success" } else { "failure" };
        let inits = log
            .matches(&format!(
                "init of component {component} returned {expected}"
            ))
            .count();
        assert_eq!(inits, 2, "{name}: {}", out.report());
    }
}

#[cfg(test)]
mod tests {
    use super::{JobOutput, parse_counts};
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::time::Duration;

    fn job(code: Option<i32>, timed_out: bool, stdout: &str, stderr: &str) -> JobOutput {
        JobOutput {
            command: "mpirun x".into(),
            code,
            timed_out,
            stdout: stdout.into(),
            stderr: stderr.into(),
            elapsed: Duration::ZERO,
        }
    }

    fn refused(out: &JobOutput, reasons: &[&str]) -> bool {
        catch_unwind(AssertUnwindSafe(|| out.assert_refused_with(reasons))).is_ok()
    }

    #[test]
    fn a_refusal_ends_on_its_own_cleanly_with_every_reason() {
        let out = job(Some(1), false, "rank 0: no peer", "x is not a power of two");
        assert!(refused(&out, &["no peer", "not a power of two"]));
        assert!(refused(&out, &[]));
        assert!(!refused(&out, &["no peer", "something else"]));
        assert!(!refused(&job(Some(0), false, "", "no peer"), &["no peer"]));
        assert!(!refused(&job(None, true, "", "no peer"), &["no peer"]));
        let crashed = job(None, false, "", "no peer\nSegmentation fault (11)");
        assert!(!refused(&crashed, &["no peer"]));
    }

    #[test]
    fn counts_lines_are_parsed_strictly() {
        assert_eq!(parse_counts("12 passed, 0 failed"), Some((12, 0)));
        assert_eq!(
            parse_counts("mpi4py: 3 passed, 1 failed, 2 skipped"),
            Some((3, 1))
        );
        assert_eq!(parse_counts("passed, failed"), None);
        assert_eq!(parse_counts("12 passed"), None);
    }
}
