//! Call counters and derived counters: the lowest layer, which every other module may
//! count into. `report` adds the live gauges and answers queries and the exit report.

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

/// Raises counter `name` to `v` if it is below (a high-water mark; created at the first
/// sample, even when `v` is 0).
pub fn max(name: &str, v: u64) {
    with(|m| {
        let slot = m.entry(name.to_owned()).or_insert(v);
        *slot = (*slot).max(v);
    });
}

/// Counts one call of entry point `name` (`call.<name>`).
pub fn call(name: &str) {
    add(&format!("call.{name}"), 1);
}

/// Every counter as it stands (without the live gauges: `report` adds those).
pub fn values() -> BTreeMap<String, u64> {
    with(|m| m.clone())
}
