//! /dev/shm bookkeeping: which objects a job created, and whether anyone still uses them.
//!
//! Stock vader leaves its `vader_segment.*` files behind when its job dies abnormally
//! (a rank crashing in one of the known-defect tests, or the harness killing a job
//! that ran past its timeout): nobody is left to unlink them. `make check` fails on
//! anything left in /dev/shm (tools/residue/no-residue), so the harness removes the
//! segments of a *failed* job once no live process holds them; ours are never removed
//! here: a component of ours must clean up after itself, and the tests check that.

use std::collections::BTreeSet;

/// The names in /dev/shm.
pub fn entries() -> BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a live process has /dev/shm/`name` mapped or open (then it belongs to a job
/// still running, e.g. another test's, not to one that is over).
pub fn in_use(name: &str) -> bool {
    let path = format!("/dev/shm/{name}");
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs.filter_map(Result::ok).any(|p| {
        let dir = p.path();
        let mapped = std::fs::read_to_string(dir.join("maps"))
            .is_ok_and(|maps| maps.lines().any(|l| l.ends_with(&path)));
        mapped
            || std::fs::read_dir(dir.join("fd")).is_ok_and(|fds| {
                fds.filter_map(Result::ok).any(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|t| t.to_string_lossy().starts_with(&path))
                })
            })
    })
}

/// Whether `name` is a segment of stock vader (`vader_segment.<host>.<job>.<rank>`)
/// or of Open MPI 5's `sm`, its successor (`sm_segment.*`).
pub fn is_vader_segment(name: &str) -> bool {
    name.starts_with("vader_segment.") || name.starts_with("sm_segment.")
}

/// Removes the vader segments that appeared since `before` and that no live process
/// holds; returns their names.
/// The ranks of a killed job can take a moment to exit after mpirun: segments still
/// held are looked at again for up to `grace`.
pub fn remove_abandoned_vader_segments(
    before: &BTreeSet<String>,
    grace: std::time::Duration,
) -> Vec<String> {
    let deadline = std::time::Instant::now() + grace;
    let (abandoned, _still_held) = loop {
        let new: Vec<String> = entries()
            .difference(before)
            .filter(|n| is_vader_segment(n))
            .cloned()
            .collect();
        let split: (Vec<String>, Vec<String>) = new.into_iter().partition(|n| !in_use(n));
        if split.1.is_empty() || std::time::Instant::now() >= deadline {
            break split;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    for name in &abandoned {
        let _ = std::fs::remove_file(format!("/dev/shm/{name}"));
    }
    abandoned
}

/// The segments an rsmcuda job says it created (its `btl_rsmcuda_verbose` lines
/// "created segment NAME ..."), in the order they appear.
pub fn rsmcuda_segments_created(out: &crate::JobOutput) -> Vec<String> {
    out.stderr
        .lines()
        .chain(out.stdout.lines())
        .filter_map(|l| l.split("created segment ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// Panics with the job's report unless it created exactly `expected` rsmcuda segments
/// and none of them is left in /dev/shm.
pub fn assert_no_rsmcuda_segment_left(out: &crate::JobOutput, expected: usize) {
    let names = rsmcuda_segments_created(out);
    assert_eq!(
        names.len(),
        expected,
        "segments created: {names:?}\n{}",
        out.report()
    );
    for name in names {
        let path = std::path::Path::new("/dev/shm").join(name.trim_start_matches('/'));
        assert!(
            !path.exists(),
            "{} left behind\n{}",
            path.display(),
            out.report()
        );
    }
}

/// Runs shm_fifo_stress with 3 ranks under `config` (rsmcuda, verbose) with
/// `--kill-after-warmup`: rank 1 SIGKILLs itself mid-traffic. Panics unless the job died
/// with it and the one segment the job created is gone from /dev/shm.
pub fn assert_rsmcuda_segment_gone_after_kill_9(
    config: &crate::McaConfig,
    timeout: std::time::Duration,
) {
    let out = crate::Job::new(config, 3, config.program("shm_fifo_stress"))
        .args(&["--kill-after-warmup"])
        .timeout(timeout)
        .run();
    assert!(
        !out.succeeded() && out.stdout.contains("rank 1 kills itself"),
        "the job should have died with its rank\n{}",
        out.report()
    );
    assert_no_rsmcuda_segment_left(&out, 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_abandoned_new_vader_segments_are_removed() {
        let tag = format!("{}", std::process::id());
        let old = format!("vader_segment.rmca-shm-test.{tag}.old");
        let held = format!("vader_segment.rmca-shm-test.{tag}.held");
        let gone = format!("vader_segment.rmca-shm-test.{tag}.gone");
        let ours = format!("rsmcuda-rmca-shm-test-{tag}");
        let path = |n: &str| format!("/dev/shm/{n}");
        std::fs::write(path(&old), b"x").unwrap();
        let before = entries();
        std::fs::write(path(&held), b"x").unwrap();
        std::fs::write(path(&gone), b"x").unwrap();
        std::fs::write(path(&ours), b"x").unwrap();
        let holder = std::fs::File::open(path(&held)).unwrap();
        let removed = remove_abandoned_vader_segments(&before, std::time::Duration::ZERO);
        assert_eq!(removed, vec![gone.clone()]);
        let now = entries();
        assert!(now.contains(&old) && now.contains(&held) && now.contains(&ours));
        assert!(!now.contains(&gone));
        drop(holder);
        for n in [&old, &held, &ours] {
            std::fs::remove_file(path(n)).unwrap();
        }
    }
}
