//! The core's counters (`rofi_core::stats`) as process-wide atomics, readable as MPI_T
//! pvars while the job runs and summarised at finalize.

use std::sync::atomic::{AtomicU64, Ordering};

use rofi_core::stats::{PVARS, Stats};

/// One per field of [`Stats`], in its declaration order.
#[derive(Debug, Clone, Copy)]
pub enum Counter {
    Sends,
    Injects,
    Recvs,
    Probes,
    AcksSent,
    AcksReceived,
    CqReads,
    EagainRetries,
    Errors,
}

const COUNT: usize = 9;
static COUNTERS: [AtomicU64; COUNT] = [const { AtomicU64::new(0) }; COUNT];

pub fn bump(c: Counter) {
    COUNTERS[c as usize].fetch_add(1, Ordering::Relaxed);
}

fn value(c: Counter) -> u64 {
    COUNTERS[c as usize].load(Ordering::Relaxed)
}

/// Zeroes the counters when an engine starts (each MPI Session's summary and pvars
/// count its own).
pub fn reset() {
    for counter in &COUNTERS {
        counter.store(0, Ordering::Relaxed);
    }
}

/// The counters as the core's `Stats`, by field name (not by position).
pub fn snapshot() -> Stats {
    Stats {
        sends: value(Counter::Sends),
        injects: value(Counter::Injects),
        recvs: value(Counter::Recvs),
        probes: value(Counter::Probes),
        ssend_acks_sent: value(Counter::AcksSent),
        ssend_acks_received: value(Counter::AcksReceived),
        cq_reads: value(Counter::CqReads),
        eagain_retries: value(Counter::EagainRetries),
        errors: value(Counter::Errors),
    }
}

/// Registers one pvar per core counter. The atomic behind each is found by reading a
/// snapshot in which only that counter is set, so a reordered core cannot mislabel one.
pub fn register() {
    for pvar in PVARS {
        let Some(index) = (0..COUNT).find(|&i| (pvar.read)(&single(i)) == 1) else {
            continue;
        };
        let short = pvar.name.trim_start_matches("mtl_rofi_");
        crate::raw::pvar::counter(short, pvar.description, &COUNTERS[index]);
    }
}

/// A `Stats` with only counter `index` (in `Counter` order) set to 1.
fn single(index: usize) -> Stats {
    let mut s = Stats::default();
    let field = match index {
        0 => &mut s.sends,
        1 => &mut s.injects,
        2 => &mut s.recvs,
        3 => &mut s.probes,
        4 => &mut s.ssend_acks_sent,
        5 => &mut s.ssend_acks_received,
        6 => &mut s.cq_reads,
        7 => &mut s.eagain_retries,
        _ => &mut s.errors,
    };
    *field = 1;
    s
}
