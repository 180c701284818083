//! Failure injection: `RMCA_CUDA_STANDIN_FAIL=<entry>:<n>[+][:<code>][,...]`.
//!
//! The n-th call (1-based) of `<entry>` (its plain name: `cuMemAlloc` covers
//! `cuMemAlloc_v2` too) fails with `<code>` (default 999, CUDA_ERROR_UNKNOWN) without
//! doing anything; with `+`, every call from the n-th on. `cuMemcpyAsync@ipc` counts only
//! the `cuMemcpyAsync` calls that read from a mapping of another process's IPC handle
//! (a transport's get), so a test can fail those and not the MPI library's own copies.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use crate::codes::{CuResult, UNKNOWN};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub entry: String,
    pub nth: u64,
    pub and_after: bool,
    pub code: CuResult,
}

/// Parses the specification; malformed items are reported and skipped.
pub fn parse(spec: &str) -> Vec<Rule> {
    let mut rules = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match parse_one(item) {
            Some(r) => rules.push(r),
            None => crate::log!("RMCA_CUDA_STANDIN_FAIL: ignoring malformed item '{item}'"),
        }
    }
    rules
}

fn parse_one(item: &str) -> Option<Rule> {
    let mut parts = item.split(':');
    let entry = parts.next()?.trim();
    let n = parts.next()?.trim();
    let code = match parts.next() {
        Some(c) => c.trim().parse().ok()?,
        None => UNKNOWN,
    };
    if parts.next().is_some() || entry.is_empty() {
        return None;
    }
    let (n, and_after) = match n.strip_suffix('+') {
        Some(n) => (n, true),
        None => (n, false),
    };
    let nth: u64 = n.parse().ok().filter(|&n| n >= 1)?;
    let entry = entry.strip_suffix("_v2").unwrap_or(entry).to_owned();
    Some(Rule {
        entry,
        nth,
        and_after,
        code,
    })
}

struct Injector {
    rules: Vec<Rule>,
    calls: HashMap<&'static str, u64>,
}

static INJECTOR: LazyLock<Mutex<Injector>> = LazyLock::new(|| {
    Mutex::new(Injector {
        rules: parse(&crate::config::CONFIG.fail),
        calls: HashMap::new(),
    })
});

/// Whether any failure is to be injected at all (read once), so that callers can skip
/// work that only a rule could need.
pub fn armed() -> bool {
    !crate::config::CONFIG.fail.trim().is_empty()
}

/// Called on every entry with its plain name; `Some(code)` when this call must fail.
pub fn check(entry: &'static str) -> Option<CuResult> {
    let mut inj = INJECTOR.lock().unwrap_or_else(|p| p.into_inner());
    if inj.rules.is_empty() {
        return None;
    }
    let n = {
        let c = inj.calls.entry(entry).or_insert(0);
        *c += 1;
        *c
    };
    let hit = inj
        .rules
        .iter()
        .find(|r| r.entry == entry && (n == r.nth || (r.and_after && n > r.nth)))
        .map(|r| r.code)?;
    drop(inj);
    crate::counters::add("inject.failures", 1);
    crate::counters::add(&format!("inject.{entry}"), 1);
    crate::log!(
        "injected failure: call {n} of {entry} returns {hit} ({})",
        crate::codes::label(hit)
    );
    Some(hit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_items() {
        let r = parse("cuIpcOpenMemHandle_v2:2, cuEventQuery:3+:600,bad, x:0");
        assert_eq!(
            r,
            vec![
                Rule {
                    entry: "cuIpcOpenMemHandle".into(),
                    nth: 2,
                    and_after: false,
                    code: 999
                },
                Rule {
                    entry: "cuEventQuery".into(),
                    nth: 3,
                    and_after: true,
                    code: 600
                },
            ]
        );
    }
}
