//! Runs rofi_core's matching probe ([`rofi_core::provider::probe`]) on a loopback pair
//! of endpoints of one provider: the clock, the endpoints and the buffers the core's
//! script leaves to the glue.
//!
//! Each side of a pair has its own fabric and domain ([`Fabric::open`] per side: lnx
//! cannot open two domains on one fabric). Checks share a pair while they pass; after
//! a failed check the pair is closed and the next check gets a fresh one, so a
//! failure's leftovers cannot decide another check. Both endpoints are driven from this
//! thread (manual progress); every wait is bounded, so a completion that never comes
//! is a failed check, not a hang. Everything is closed before the memory handed to
//! libfabric is freed, and shm regions left in /dev/shm are removed.
//!
//! INVARIANT: the buffers and contexts handed to libfabric belong to an [`Arena`] that
//! outlives both endpoints it serves ([`Open`] drops its pair first); the probe reads
//! a slot's buffer only after that slot's completion, and the script posts a slot again
//! only after its completion (a check ends at its first failure).

use std::time::{Duration, Instant};

use fabric_sys as fi;
use rofi_core::provider::ProviderInfo;
use rofi_core::provider::probe::{
    Check, CheckRun, Completion, ErrKind, Kind, Observed, ProbeConfig, Step,
};

use super::context::{OpContext, Target};
use super::fabric::{ADDR_ANY, CqRead, EAGAIN, Fabric, InfoList, Shape, empty_entry};

/// How long a step may wait for a completion that must come: this long *and* this many
/// polls of both endpoints. Loopback in one process completes in microseconds
/// (milliseconds for tcp's first connection); the bound only matters when a provider
/// never completes (1.17's shm in `ignore_after_exact`). The poll count keeps a process
/// that hardly gets the CPU (ranks and other jobs on few cores: one such run failed
/// tcp;ofi_rxm's rendezvous truncation after 500 ms) from calling a slow completion
/// missing; a false failure would give one rank host matching and its peers not.
const WAIT: (Duration, u32) = (Duration::from_millis(500), 20_000);
/// How long what was sent is given to arrive before the receive is posted (a peek that
/// finds nothing yet settles again: `PEEK_RETRIES` in the core).
const SETTLE: (Duration, u32) = (Duration::from_millis(2), 200);
/// How long a receive that must not complete is watched.
const QUIET: (Duration, u32) = (Duration::from_millis(10), 1_000);
/// Receive slots the script uses (0..SLOTS).
const SLOTS: usize = 3;

/// What the probe found.
#[derive(Debug)]
pub enum Report {
    /// The result of every check that ran, and the checks not run after a failed
    /// matching check ([`Check::runs_given`]; the overflow checks, which run only after
    /// a failed truncation check, are not counted as skipped).
    Ran {
        results: Vec<(Check, Option<Result<(), String>>)>,
        skipped: Vec<Check>,
    },
    /// No loopback pair could be opened or connected: why.
    NoLoopback(String),
}

/// Heap memory handed to libfabric during one check; freed on drop.
struct Arena {
    /// Per slot: buffer, its size, context.
    slots: Vec<(*mut u8, usize, *mut OpContext)>,
    /// Sends posted with a completion: their bytes and contexts.
    sends: Vec<(*mut [u8], *mut OpContext)>,
}

impl Arena {
    fn new(room: usize) -> Arena {
        let slots = (0..SLOTS)
            .map(|_| {
                let buf = Box::into_raw(vec![0u8; room].into_boxed_slice()).cast::<u8>();
                let ctx = Box::into_raw(Box::new(OpContext::new(Target::Probe)));
                (buf, room, ctx)
            })
            .collect();
        Arena {
            slots,
            sends: Vec::new(),
        }
    }

    fn slot_of(&self, ctx: *mut OpContext) -> Option<u8> {
        self.slots
            .iter()
            .position(|&(_, _, c)| c == ctx)
            .map(|i| i as u8)
    }

    /// The first four bytes of slot `slot`'s buffer, whose receive has completed with
    /// `len` bytes.
    fn payload(&self, slot: Option<u8>, len: usize) -> Option<u32> {
        let &(buf, _, _) = self.slots.get(usize::from(slot?))?;
        if len < 4 {
            return None;
        }
        let mut b = [0u8; 4];
        // SAFETY: module invariant: the slot's receive completed, so the provider no
        // longer writes the buffer, which holds at least 4 bytes (`room` >= 4).
        unsafe { std::ptr::copy_nonoverlapping(buf, b.as_mut_ptr(), 4) };
        Some(u32::from_le_bytes(b))
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for &(buf, room, ctx) in &self.slots {
            // SAFETY: allocated in `new` with exactly this size, freed once; module
            // invariant: the endpoints are closed.
            unsafe {
                drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(buf, room)));
                drop(Box::from_raw(ctx));
            }
        }
        for &(bytes, ctx) in &self.sends {
            // SAFETY: as above, allocated by `Pair::send`.
            unsafe {
                drop(Box::from_raw(bytes));
                drop(Box::from_raw(ctx));
            }
        }
    }
}

/// Sender `a` and receiver `b`, each knowing the other.
struct Pair {
    a: Fabric,
    b: Fabric,
    b_addr: u64,
    inject_size: usize,
    names: [Vec<u8>; 2],
}

impl Pair {
    fn open(list: &InfoList, index: usize, inject_size: usize) -> Result<Pair, String> {
        let shape = Shape {
            cq_size: 0,
            av_count: 4,
            sep: None,
        };
        let a = Fabric::open(list, index, shape)?;
        let b = Fabric::open(list, index, shape)?;
        let (na, nb) = (a.name()?, b.name()?);
        let b_addr = a.av_insert(&nb, 1)?[0];
        b.av_insert(&na, 1)?;
        Ok(Pair {
            a,
            b,
            b_addr,
            inject_size,
            names: [na, nb],
        })
    }

    /// One poll of both CQs; a completion on `b` (the receiver) is returned.
    fn poll(&self, arena: &Arena) -> Option<Observed> {
        let mut e = [empty_entry()];
        // The sender's completions matter only as progress.
        let _ = self.a.cq_read(0, &mut e);
        match self.b.cq_read(0, &mut e) {
            CqRead::Empty => None,
            CqRead::Entries(_) => {
                let e = e[0];
                let slot = arena.slot_of(e.op_context.cast());
                Some(Observed::Completion(Completion {
                    slot,
                    tag: e.tag,
                    len: e.len,
                    data: (e.flags & fi::FI_REMOTE_CQ_DATA != 0).then_some(e.data),
                    payload: arena.payload(slot, e.len),
                    error: None,
                }))
            }
            CqRead::Error(err) => {
                let code = u64::from(err.err.unsigned_abs());
                let kind = if code == u64::from(fi::FI_ETRUNC) {
                    ErrKind::Truncated
                } else if code == fi::FI_ENOMSG {
                    ErrKind::NoMessage
                } else {
                    ErrKind::Other(err.err.abs())
                };
                Some(Observed::Completion(Completion {
                    slot: arena.slot_of(err.context),
                    tag: err.bits,
                    len: err.len,
                    data: Some(err.data),
                    payload: None,
                    error: Some((kind, err.olen)),
                }))
            }
            CqRead::Failed(why) => Some(Observed::PostFailed(why)),
        }
    }

    /// Polls until `b` completes something, or both `limit.0` has passed and `limit.1`
    /// polls were made.
    fn wait(&self, arena: &Arena, limit: (Duration, u32)) -> Observed {
        let end = Instant::now() + limit.0;
        let mut polls = 0u32;
        loop {
            if let Some(seen) = self.poll(arena) {
                return seen;
            }
            polls = polls.saturating_add(1);
            if polls >= limit.1 && Instant::now() >= end {
                return Observed::Quiet;
            }
        }
    }

    /// Retries a post while the provider says FI_EAGAIN, progressing both sides.
    fn post(&self, arena: &Arena, what: &str, mut call: impl FnMut() -> isize) -> Observed {
        let end = Instant::now() + WAIT.0;
        let mut tries = 0u32;
        loop {
            let rc = call();
            if rc == 0 {
                return Observed::Posted;
            }
            tries = tries.saturating_add(1);
            if rc != EAGAIN || (tries >= WAIT.1 && Instant::now() >= end) {
                return Observed::PostFailed(format!("{what}: {}", super::fabric::strerror(rc)));
            }
            // A completion read here would be lost to the script: keep it for nobody
            // (the next Expect then times out, failing the check, as it should).
            let _ = self.poll(arena);
        }
    }

    fn send(
        &self,
        arena: &mut Arena,
        tag: u64,
        payload: u32,
        len: usize,
        data: Option<u64>,
    ) -> Observed {
        let mut bytes = vec![0xabu8; len.max(4)];
        bytes[..4].copy_from_slice(&payload.to_le_bytes());
        if data.is_none() && bytes.len() <= self.inject_size {
            return self.post(arena, "fi_tinject", || {
                self.a.tinject(0, &bytes, self.b_addr, tag, None)
            });
        }
        let bytes = Box::into_raw(bytes.into_boxed_slice());
        let ctx = Box::into_raw(Box::new(OpContext::new(Target::Probe)));
        arena.sends.push((bytes, ctx));
        let (buf, n) = (bytes.cast::<u8>().cast_const(), bytes.len());
        self.post(arena, "fi_tsend", || {
            // SAFETY: module invariant: the bytes and the context are the arena's and
            // outlive the endpoint.
            unsafe { self.a.tsend(0, buf, n, self.b_addr, tag, data, ctx) }
        })
    }

    fn step(&self, arena: &mut Arena, step: Step) -> Observed {
        match step {
            Step::Send {
                tag,
                payload,
                len,
                data,
            } => self.send(arena, tag, payload, len, data),
            Step::Recv {
                slot,
                tag,
                ignore,
                len,
                flags,
            } => {
                let Some(&(buf, room, ctx)) = arena.slots.get(usize::from(slot)) else {
                    return Observed::PostFailed(format!("no slot {slot}"));
                };
                let buf = if len == 0 { std::ptr::null_mut() } else { buf };
                let len = len.min(room);
                let sink = if flags.sink {
                    match super::sink::Sink::get() {
                        Ok(s) => Some(s.iov()),
                        Err(why) => return Observed::PostFailed(why),
                    }
                } else {
                    None
                };
                let mut f = 0;
                if flags.peek {
                    f |= fi::FI_PEEK;
                }
                if flags.claim {
                    f |= fi::FI_CLAIM;
                }
                self.post(arena, "fi_trecvmsg", || {
                    // SAFETY: module invariant: the slot's buffer (at least `len`
                    // bytes) and context are the arena's and outlive the endpoint; the
                    // script posts a slot again only after its completion.
                    // The sink lives for the process (raw::sink).
                    unsafe {
                        self.b
                            .trecv_sink(0, (buf, len), sink, ADDR_ANY, (tag, ignore), ctx, f)
                    }
                })
            }
            Step::Settle => self.wait(arena, SETTLE),
            Step::Expect(rofi_core::provider::probe::Expect::Quiet) => self.wait(arena, QUIET),
            Step::Expect(_) => self.wait(arena, WAIT),
        }
    }
}

/// Removes the /dev/shm regions of shm endpoints named `names`, if closing them left
/// any (the job runs under a residue check; a region is named by its endpoint).
fn remove_shm_regions(info: &ProviderInfo, names: &[Vec<u8>]) {
    if info.core_name() != "shm" {
        return;
    }
    for name in names {
        if let Some(path) = rofi_core::provider::shm_region_path(name) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A pair with the memory its operations use. Fields drop in order: the endpoints are
/// closed before the arena is freed (module invariant).
struct Open {
    pair: Pair,
    arena: Arena,
}

/// Runs every check on entry `index` of `list` (`info` is its converted form).
///
/// Checks share a pair while they pass (a passing check leaves nothing posted or
/// unmatched; opening a tcp;ofi_rxm pair and connecting it costs 20 to 100 ms), and the
/// check after a failed one gets a fresh pair, so a failure's leftovers cannot fail
/// the next check too.
pub fn run(list: &InfoList, index: usize, info: &ProviderInfo, cfg: ProbeConfig) -> Report {
    let room = cfg.trunc_room.max(4);
    let mut results: Vec<(Check, Option<Result<(), String>>)> = Vec::new();
    let mut skipped = Vec::new();
    let mut open: Option<Open> = None;
    let close = |o: Open| {
        let names = o.pair.names.clone();
        drop(o);
        remove_shm_regions(info, &names);
    };
    for check in Check::ALL {
        if !check.runs_given(&results) {
            if check.kind() == Kind::Truncation {
                skipped.push(check);
            }
            continue;
        }
        let mut o = match open.take() {
            Some(o) => o,
            None => {
                let arena = Arena::new(room);
                match Pair::open(list, index, info.usable_inject_size()) {
                    Ok(pair) => Open { pair, arena },
                    Err(why) => return Report::NoLoopback(why),
                }
            }
        };
        let mut run = CheckRun::new(check, cfg);
        while let Some(step) = run.step() {
            let seen = o.pair.step(&mut o.arena, step);
            run.observe(&seen);
        }
        let result = run.result();
        if matches!(result, Some(Ok(()))) {
            open = Some(o);
        } else {
            close(o);
        }
        results.push((check, result));
    }
    if let Some(o) = open {
        close(o);
    }
    Report::Ran { results, skipped }
}
