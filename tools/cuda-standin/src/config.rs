//! The environment, read once per process.

use std::sync::LazyLock;

/// What the environment asks for.
#[derive(Debug, Clone)]
pub struct Config {
    /// `RMCA_CUDA_STANDIN=1`: without it `cuInit` refuses (no device).
    pub enabled: bool,
    /// Physical devices (`RMCA_CUDA_STANDIN_DEVICES`, default 1).
    pub physical: i32,
    /// Visible devices in ordinal order, as physical indices (`CUDA_VISIBLE_DEVICES`).
    pub visible: Vec<i32>,
    /// Pairs of physical devices without peer access (`RMCA_CUDA_STANDIN_NO_PEER`).
    pub no_peer: Vec<(i32, i32)>,
    /// `RMCA_CUDA_STANDIN_NO_PEER=all`.
    pub no_peer_all: bool,
    /// `RMCA_CUDA_STANDIN_ASYNC=1`: stream work runs lazily.
    pub lazy: bool,
    /// `RMCA_CUDA_STANDIN_REPORT=<dir>`.
    pub report_dir: Option<String>,
    /// `RMCA_CUDA_STANDIN_FAIL` (parsed by `inject`).
    pub fail: String,
}

pub static CONFIG: LazyLock<Config> = LazyLock::new(Config::from_env);

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl Config {
    fn from_env() -> Config {
        let physical = var("RMCA_CUDA_STANDIN_DEVICES")
            .and_then(|s| s.trim().parse::<i32>().ok())
            .filter(|n| (0..=64).contains(n))
            .unwrap_or(1);
        let visible = match var("CUDA_VISIBLE_DEVICES") {
            None => (0..physical).collect(),
            Some(list) => parse_visible(&list, physical),
        };
        let no_peer_spec = var("RMCA_CUDA_STANDIN_NO_PEER").unwrap_or_default();
        let no_peer_all = no_peer_spec.trim() == "all";
        let no_peer = no_peer_spec
            .split(',')
            .filter_map(|p| {
                let (a, b) = p.trim().split_once('-')?;
                Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
            })
            .collect();
        Config {
            enabled: var("RMCA_CUDA_STANDIN").is_some_and(|v| v.trim() == "1"),
            physical,
            visible,
            no_peer,
            no_peer_all,
            lazy: var("RMCA_CUDA_STANDIN_ASYNC").is_some_and(|v| v.trim() == "1"),
            report_dir: var("RMCA_CUDA_STANDIN_REPORT").filter(|d| !d.is_empty()),
            fail: var("RMCA_CUDA_STANDIN_FAIL").unwrap_or_default(),
        }
    }

    /// Whether ordinal `a` (physical) may access memory of physical device `b`.
    pub fn peer_ok(&self, a: i32, b: i32) -> bool {
        if a == b {
            return true;
        }
        if self.no_peer_all {
            return false;
        }
        !self
            .no_peer
            .iter()
            .any(|&(x, y)| (x, y) == (a, b) || (x, y) == (b, a))
    }
}

/// Like the driver: a comma-separated list of ordinals, read up to the first invalid or
/// repeated entry; nothing valid means no device.
fn parse_visible(list: &str, physical: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for item in list.split(',') {
        match item.trim().parse::<i32>() {
            Ok(n) if (0..physical).contains(&n) && !out.contains(&n) => out.push(n),
            _ => break,
        }
    }
    out
}

/// One line on stderr, prefixed so tests and people can tell where it came from.
pub fn log(msg: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let line = format!("[rmca-cuda-standin {}] {msg}\n", std::process::id());
    let _ = std::io::stderr().write_all(line.as_bytes());
}

#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => { $crate::config::log(format_args!($($arg)*)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visible_list_stops_at_the_first_bad_entry() {
        assert_eq!(parse_visible("1,0", 2), vec![1, 0]);
        assert_eq!(parse_visible("1,x,0", 2), vec![1]);
        assert_eq!(parse_visible("", 2), Vec::<i32>::new());
        assert_eq!(parse_visible("5", 2), Vec::<i32>::new());
        assert_eq!(parse_visible("0,0", 2), vec![0]);
    }
}
