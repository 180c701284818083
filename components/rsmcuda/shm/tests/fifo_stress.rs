//! FIFO under contention: writer threads and writer processes against one reader, over a
//! small FIFO so that `Full` is hit often. Every value must arrive exactly once and each
//! writer's values in order.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{ChildProc, child_role, report, spawn, unique_name, var};
use rsmcuda_shm::{FifoReader, FifoValue, FifoWriter, LayoutParams, Retry, Segment, SegmentName};

fn params(nranks: u32, fifo_size: u32) -> LayoutParams {
    LayoutParams {
        nranks,
        fifo_size,
        eager_size: 64,
        eager_count: 1,
        max_size: 64,
        max_count: 0,
        fbox_bytes: 0,
    }
}

/// Pushes `n` values `(writer << 32) | i`, retrying on Full; returns how often it was full.
fn write_all(w: &FifoWriter, writer: u64, n: u64) -> u64 {
    let mut fulls = 0;
    for i in 0..n {
        let v = FifoValue::from_raw((writer << 32) | i);
        while w.push(v).is_err() {
            fulls += 1;
            std::thread::yield_now();
        }
    }
    fulls
}

/// Pops `writers * n` values and checks exactly-once and per-writer order.
fn read_all(r: &mut FifoReader, writers: usize, n: u64) {
    let mut next = vec![0u64; writers];
    let mut got = 0u64;
    let mut idle = 0u64;
    while got < writers as u64 * n {
        match r.pop() {
            Some(v) => {
                let raw = v.value().raw();
                let (w, i) = ((raw >> 32) as usize, raw & 0xffff_ffff);
                assert!(w < writers, "value from unknown writer: {raw:#x}");
                assert_eq!(i, next[w], "writer {w}: expected {} got {i}", next[w]);
                next[w] += 1;
                got += 1;
                idle = 0;
            }
            None => {
                idle += 1;
                assert!(
                    idle < 50_000_000,
                    "reader starved at {got} values: {next:?}"
                );
                std::thread::yield_now();
            }
        }
    }
    assert!(r.pop().is_none(), "extra value after all expected ones");
    assert!(next.iter().all(|&c| c == n));
}

#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    assert_eq!(role, "writer");
    let name = SegmentName::new(&var("SEG")).unwrap();
    let rank: u32 = var("RANK").parse().unwrap();
    let n: u64 = var("N").parse().unwrap();
    let seg = Segment::attach(&name, rank, &Retry::default()).unwrap();
    let w = seg.fifo_writer(0).unwrap();
    // Wait until every writer is attached so they really contend.
    while !seg.all_attached() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let fulls = write_all(&w, u64::from(rank - 1), n);
    report(&format!("done fulls={fulls}"));
}

#[test]
fn threads_4x200k_over_a_64_slot_fifo() {
    const W: u64 = 4;
    const N: u64 = 200_000;
    let name = unique_name("threads");
    let seg = Segment::create(&name, &params(1, 64), 0).unwrap();
    let mut reader = seg.fifo_reader().unwrap();
    let fulls = AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..W {
            let writer = seg.fifo_writer(0).unwrap();
            let fulls = &fulls;
            s.spawn(move || {
                fulls.fetch_add(write_all(&writer, w, N), Ordering::Relaxed);
            });
        }
        read_all(&mut reader, W as usize, N);
    });
    eprintln!("threads: Full hit {} times", fulls.load(Ordering::Relaxed));
}

#[test]
fn processes_3x100k_over_a_64_slot_fifo() {
    const W: u32 = 3;
    const N: u64 = 100_000;
    let name = unique_name("procs");
    let seg = Segment::create(&name, &params(W + 1, 64), 0).unwrap();
    let mut reader = seg.fifo_reader().unwrap();
    let kids: Vec<ChildProc> = (1..=W)
        .map(|r| {
            spawn(
                "writer",
                &[
                    ("SEG", name.as_str().to_owned()),
                    ("RANK", r.to_string()),
                    ("N", N.to_string()),
                ],
            )
        })
        .collect();
    read_all(&mut reader, W as usize, N);
    assert!(!name.dev_shm_path().exists());
    for mut k in kids {
        let line = k.expect_line();
        eprintln!("child: {line}");
        k.wait_ok();
    }
}

#[test]
fn reader_is_single_and_resumes() {
    let name = unique_name("reader");
    let seg = Segment::create(&name, &params(1, 8), 0).unwrap();
    let w = seg.fifo_writer(0).unwrap();
    let mut r = seg.fifo_reader().unwrap();
    assert!(seg.fifo_reader().is_err(), "second reader must be refused");
    for i in 0..8 {
        w.push(FifoValue::from_raw(i)).unwrap();
    }
    assert!(w.push(FifoValue::from_raw(99)).is_err());
    assert_eq!(r.pop().unwrap().value().raw(), 0);
    drop(r);
    let mut r = seg.fifo_reader().unwrap();
    for i in 1..8 {
        assert_eq!(r.pop().unwrap().value().raw(), i);
    }
    assert!(r.pop().is_none());
    assert!(seg.fifo_writer(1).is_err());
}

/// The probes progress asks on every pass agree with `pop` over several laps of the ring
/// (a probe that disagrees either hides a value until something else arrives, or makes
/// every pass take the reader).
#[test]
fn probes_see_exactly_what_pop_would_return_over_several_laps() {
    let name = unique_name("probe");
    let seg = Segment::create(&name, &params(1, 8), 0).unwrap();
    let w = seg.fifo_writer(0).unwrap();
    let mut r = seg.fifo_reader().unwrap();
    let probe = seg.fifo_probe();
    for i in 0..40u64 {
        let head = r.head();
        assert!(!probe.ready(head), "value {i}: ready before the push");
        assert!(!seg.fifo_ready(head));
        w.push(FifoValue::from_raw(i)).unwrap();
        assert!(probe.ready(head), "value {i}: not ready after the push");
        assert!(seg.fifo_ready(head));
        assert_eq!(r.pop().unwrap().value().raw(), i);
        assert!(!probe.ready(r.head()), "value {i}: next position ready");
    }
}
