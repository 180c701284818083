//! Helpers shared by the integration tests: unique names and child processes.
//!
//! A child process is this same test binary re-run with `--exact child_entry` and the
//! environment variable `RSMCUDA_SHM_CHILD` naming its role; each test binary has a
//! `child_entry` test that dispatches on it (and does nothing in a normal run). Children
//! report to the parent with stdout lines starting with "@@ ".

// Each test binary uses a different subset of these helpers; `expect` would fail in
// the binaries that do use them all.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use rsmcuda_shm::SegmentName;

pub const ROLE_VAR: &str = "RSMCUDA_SHM_CHILD";

/// A segment name unique to this process and call.
pub fn unique_name(tag: &str) -> SegmentName {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    SegmentName::new(&format!("/rsmcuda-test-{}-{n}-{tag}", std::process::id())).unwrap()
}

/// The role of this process, if it is a child.
pub fn child_role() -> Option<String> {
    std::env::var(ROLE_VAR).ok()
}

/// A required variable of a child's environment.
pub fn var(k: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| panic!("child needs {k}"))
}

/// A child process in `role` with extra environment `env`.
pub struct ChildProc {
    pub child: Child,
    out: BufReader<ChildStdout>,
}

pub fn spawn(role: &str, env: &[(&str, String)]) -> ChildProc {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "child_entry",
        "--exact",
        "--nocapture",
        "--test-threads=1",
        "-q",
    ])
    .env(ROLE_VAR, role)
    .stdout(Stdio::piped())
    .stdin(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn child test process");
    let out = BufReader::new(child.stdout.take().unwrap());
    ChildProc { child, out }
}

impl ChildProc {
    /// The next "@@ " line from the child (without the prefix); panics at EOF.
    pub fn expect_line(&mut self) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.out.read_line(&mut line).unwrap();
            assert!(n > 0, "child exited without reporting");
            if let Some(rest) = line.strip_prefix("@@ ") {
                return rest.trim_end().to_owned();
            }
        }
    }

    /// Waits for the child and asserts success.
    pub fn wait_ok(mut self) {
        drop(self.child.stdin.take());
        let st = self.child.wait().unwrap();
        assert!(st.success(), "child failed: {st}");
    }

    /// SIGKILL and reap.
    pub fn kill9(mut self) {
        self.child.kill().unwrap(); // std's kill sends SIGKILL on Unix
        let _ = self.child.wait();
    }
}

/// Child side: report a line to the parent.
pub fn report(s: &str) {
    println!("@@ {s}");
}

/// Child side: block until the parent closes our stdin (or kills us).
pub fn wait_for_parent() {
    let mut s = String::new();
    let _ = std::io::stdin().read_line(&mut s);
}
