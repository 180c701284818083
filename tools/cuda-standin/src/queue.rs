//! The work queue: by default work runs when it is enqueued; with
//! `RMCA_CUDA_STANDIN_ASYNC=1` each stream's work waits in its queue and runs in order
//! when a query (one operation per query) or a synchronize (all of it) advances it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::codes::*;
use crate::config::CONFIG;
use crate::state::State;
use crate::stream::{Event, Op, Stream, stream_key};

fn now_ns() -> u64 {
    static EPOCH: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);
    EPOCH.elapsed().as_nanos() as u64
}

/// What a step did.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    Ran,
    Empty,
    /// The head waits for an event that nothing in this process can complete.
    Blocked,
}

const WAIT_LIMIT: Duration = Duration::from_secs(30);

impl State {
    pub fn stream_mut(&mut self, s: usize) -> Result<&mut Stream, CuResult> {
        let k = stream_key(s);
        if k == 0 {
            return Ok(self.streams.entry(0).or_default());
        }
        self.streams.get_mut(&k).ok_or(INVALID_HANDLE)
    }

    /// Queues `op` on stream `s`; runs it (and anything before it) at once unless lazy.
    /// Legacy default-stream ordering: work on a blocking stream starts after what the
    /// legacy stream holds, and work on the legacy stream after what every blocking
    /// stream holds (run first here, which keeps that order).
    pub fn enqueue(&mut self, s: usize, op: Op) -> Result<(), CuResult> {
        let k = stream_key(s);
        let blocking = self.stream_mut(s)?.flags & STREAM_NON_BLOCKING == 0;
        if k == 0 {
            self.drain_all(true)?;
        } else if blocking {
            self.drain(0)?;
        }
        self.stream_mut(s)?.queue.push_back(op);
        if !CONFIG.lazy {
            self.drain(s)?;
        }
        Ok(())
    }

    /// Runs the head of stream `s`.
    pub fn step(&mut self, s: usize, depth: u32) -> Step {
        let k = stream_key(s);
        let Some(op) = self.streams.get_mut(&k).and_then(|st| st.queue.pop_front()) else {
            return Step::Empty;
        };
        match op {
            Op::Copy { dst, src, n } => self.execute_copy(dst, src, n),
            Op::Set { dst, value, n } => {
                if self.mem.check_device_side(dst, n).is_ok() {
                    // SAFETY: checked: inside one live mapping of ours (its shadow).
                    unsafe { std::ptr::write_bytes(self.mem.view(dst) as *mut u8, value, n) };
                } else {
                    crate::log!("queued memset to {dst:#x} skipped: the memory is gone");
                }
            }
            Op::Record { ev, number } => {
                ev.time_ns().store(now_ns(), Ordering::Release);
                ev.completed().fetch_max(number, Ordering::AcqRel);
            }
            Op::Wait { ev, number, stream } => {
                if ev.completed().load(Ordering::Acquire) < number {
                    let progressed = match stream {
                        Some(other) if stream_key(other) != k && depth < 8 => {
                            self.step(other, depth + 1) == Step::Ran
                        }
                        _ => false,
                    };
                    if let Some(st) = self.streams.get_mut(&k) {
                        st.queue.push_front(Op::Wait { ev, number, stream });
                    }
                    return if progressed { Step::Ran } else { Step::Blocked };
                }
            }
        }
        Step::Ran
    }

    /// Runs stream `s` to empty (waiting, within a limit, on other processes' events).
    pub fn drain(&mut self, s: usize) -> Result<(), CuResult> {
        let start = Instant::now();
        loop {
            match self.step(s, 0) {
                Step::Empty => return Ok(()),
                Step::Ran => {}
                Step::Blocked => {
                    if start.elapsed() > WAIT_LIMIT {
                        crate::log!("stream {s:#x} waited {WAIT_LIMIT:?} for an event; giving up");
                        return Err(TIMEOUT);
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        }
    }

    /// Runs every stream to empty (cuCtxSynchronize, cuMemFree); with `blocking_only`,
    /// only those the legacy default stream synchronizes with (synchronous copies).
    pub fn drain_all(&mut self, blocking_only: bool) -> Result<(), CuResult> {
        let keys: Vec<usize> = self
            .streams
            .iter()
            .filter(|(_, st)| !blocking_only || st.flags & STREAM_NON_BLOCKING == 0)
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            self.drain(k)?;
        }
        Ok(())
    }

    /// Validates a copy and counts it by kind; returns nothing else.
    pub fn check_copy(&self, dst: usize, src: usize, n: usize) -> Result<(), CuResult> {
        if n == 0 {
            return Ok(());
        }
        let d = self.mem.check_range(dst, n)?;
        let s = self.mem.check_range(src, n)?;
        let kind = match (s, d) {
            (false, true) => "htod",
            (true, false) => "dtoh",
            (true, true) => "dtod",
            (false, false) => "htoh",
        };
        crate::counters::add(&format!("copy.{kind}.count"), 1);
        crate::counters::add(&format!("copy.{kind}.bytes"), n as u64);
        Ok(())
    }

    fn execute_copy(&mut self, dst: usize, src: usize, n: usize) {
        if n == 0 {
            return;
        }
        if self.mem.check_range(dst, n).is_err() || self.mem.check_range(src, n).is_err() {
            crate::log!("queued copy {src:#x} -> {dst:#x} ({n} B) skipped: the memory is gone");
            return;
        }
        let (dst, src) = (self.mem.view(dst), self.mem.view(src));
        // SAFETY: both ranges were checked against the live mappings (device memory,
        // reached through its shadow) or are host memory the caller handed us for this
        // copy; `copy` allows overlap.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, n) };
    }

    /// A synchronous copy: waits for the legacy stream's work, then copies.
    pub fn copy_now(&mut self, dst: usize, src: usize, n: usize) -> Result<(), CuResult> {
        self.check_copy(dst, src, n)?;
        self.drain_all(true)?;
        self.execute_copy(dst, src, n);
        Ok(())
    }

    pub fn copy_async(
        &mut self,
        dst: usize,
        src: usize,
        n: usize,
        s: usize,
    ) -> Result<(), CuResult> {
        self.stream_mut(s)?;
        self.check_copy(dst, src, n)?;
        self.enqueue(s, Op::Copy { dst, src, n })
    }

    pub fn event(&self, e: usize) -> Result<&Event, CuResult> {
        self.events.get(&e).ok_or(INVALID_HANDLE)
    }

    pub fn record(&mut self, e: usize, s: usize) -> Result<(), CuResult> {
        self.stream_mut(s)?;
        let ev = self.events.get_mut(&e).ok_or(INVALID_HANDLE)?;
        ev.last_stream = Some(stream_key(s));
        let shared = ev.shared.clone();
        let number = shared.recorded().fetch_add(1, Ordering::AcqRel) + 1;
        self.enqueue(s, Op::Record { ev: shared, number })
    }

    pub fn wait_event(&mut self, s: usize, e: usize) -> Result<(), CuResult> {
        self.stream_mut(s)?;
        let ev = self.event(e)?;
        let number = ev.shared.recorded().load(Ordering::Acquire);
        let op = Op::Wait {
            ev: ev.shared.clone(),
            number,
            stream: ev.last_stream,
        };
        self.enqueue(s, op)
    }

    /// cuEventQuery: done, or advance the recording stream by one operation and say
    /// not ready.
    pub fn query_event(&mut self, e: usize) -> CuResult {
        let Ok(ev) = self.event(e) else {
            return INVALID_HANDLE;
        };
        if ev.shared.is_complete() {
            return SUCCESS;
        }
        if let Some(s) = ev.last_stream {
            self.step(s, 0);
        }
        NOT_READY
    }

    pub fn sync_event(&mut self, e: usize) -> Result<(), CuResult> {
        let ev = self.event(e)?;
        let shared = ev.shared.clone();
        let stream = ev.last_stream;
        let start = Instant::now();
        while !shared.is_complete() {
            let progressed = stream.is_some_and(|s| self.step(s, 0) == Step::Ran);
            if !progressed {
                if start.elapsed() > WAIT_LIMIT {
                    crate::log!("cuEventSynchronize waited {WAIT_LIMIT:?}; giving up");
                    return Err(TIMEOUT);
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        Ok(())
    }

    pub fn query_stream(&mut self, s: usize) -> CuResult {
        match self.stream_mut(s) {
            Err(e) => e,
            Ok(st) if st.queue.is_empty() => SUCCESS,
            Ok(_) => {
                self.step(s, 0);
                NOT_READY
            }
        }
    }
}
