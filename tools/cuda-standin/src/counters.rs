//! Call counters and derived counters, queried in process (`rmcaCudaStandinCount`) and
//! written to `<RMCA_CUDA_STANDIN_REPORT>/<pid>.counts` at exit.

use std::collections::BTreeMap;
use std::sync::Mutex;

static COUNTS: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

fn with<R>(f: impl FnOnce(&mut BTreeMap<String, u64>) -> R) -> R {
    let mut guard = COUNTS.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut guard)
}

/// Adds `n` to counter `name`.
pub fn add(name: &str, n: u64) {
    with(|m| {
        if let Some(v) = m.get_mut(name) {
            *v += n;
        } else {
            m.insert(name.to_owned(), n);
        }
    });
}

/// Counts one call of entry point `name` (`call.<name>`).
pub fn call(name: &str) {
    add(&format!("call.{name}"), 1);
}

/// The value of `name`, including the live gauges computed from the state.
pub fn get(name: &str) -> Option<u64> {
    snapshot().get(name).copied()
}

/// All counters plus the gauges `live.allocations` and `live.ipc_mappings`.
pub fn snapshot() -> BTreeMap<String, u64> {
    let mut m = with(|m| m.clone());
    let (allocs, maps) = crate::state::live_counts();
    m.insert("live.allocations".into(), allocs);
    m.insert("live.ipc_mappings".into(), maps);
    m
}

/// Writes the report file if asked for; called once at exit.
pub fn write_report() {
    let Some(dir) = crate::config::CONFIG.report_dir.as_deref() else {
        return;
    };
    let mut text = String::new();
    for (k, v) in snapshot() {
        text.push_str(&format!("{k} {v}\n"));
    }
    let path = format!("{dir}/{}.counts", std::process::id());
    let _ = std::fs::create_dir_all(dir);
    let tmp = format!("{path}.tmp");
    if std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .is_err()
    {
        crate::log!("could not write the report {path}");
    }
}
