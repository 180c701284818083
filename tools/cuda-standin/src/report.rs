//! What the stand-in reports: the counters plus the live gauges computed from the
//! state, queried in process (`rmcaCudaStandinCount`) and written to
//! `<RMCA_CUDA_STANDIN_REPORT>/<pid>.counts` by the exit hook, which then unlinks every
//! /dev/shm file this process still owns.

use std::collections::BTreeMap;

use crate::config::CONFIG;
use crate::{counters, state};

/// The value of `name`, including the live gauges computed from the state.
pub fn get(name: &str) -> Option<u64> {
    snapshot().get(name).copied()
}

/// All counters plus the gauges: `live.allocations`, `live.ipc_mappings` and
/// `live.ipc_mapped_bytes`, and `live.ipc_mappings_freed` / `live.ipc_freed_bytes`
/// (mappings whose owner has freed the allocation since, or exited).
pub fn snapshot() -> BTreeMap<String, u64> {
    let mut m = counters::values();
    let (allocs, maps) = state::live_counts();
    let (freed, freed_bytes, mapped_bytes) = state::ipc_held();
    m.insert("live.allocations".into(), allocs);
    m.insert("live.ipc_mappings".into(), maps);
    m.insert("live.ipc_mapped_bytes".into(), mapped_bytes);
    m.insert("live.ipc_mappings_freed".into(), freed);
    m.insert("live.ipc_freed_bytes".into(), freed_bytes);
    m
}

/// Writes the report file if asked for; called once at exit.
fn write_report() {
    let Some(dir) = CONFIG.report_dir.as_deref() else {
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

/// At exit (and at dlclose, which `-z nodelete` turns into exit): write the report,
/// then unlink every file this process still owns.
extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        write_report();
        state::unlink_all_at_exit();
    });
}

#[used]
#[unsafe(link_section = ".fini_array")]
static AT_EXIT: extern "C" fn() = at_exit;
