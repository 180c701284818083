//! Per-receiver FIFOs: many writers (any local rank, any thread), one reader (the owner).
//!
//! # Design
//!
//! Every rank owns one FIFO in its region of the segment. Peers push 64-bit values into it;
//! the owner pops them in its progress loop. A value is a segment-relative fragment offset
//! (fragments are 64-byte aligned, so the low 6 bits are free) plus a type in the low bits:
//!
//! ```text
//!  63                                             6 5   3  2      1 0
//! +------------------------------------------------+-----+------+----+
//! |        fragment offset (bits 63..6)            | 000 |STATUS|TYPE|
//! +------------------------------------------------+-----+------+----+
//!   TYPE 0 = SEND (a peer's fragment carrying a message for me)
//!   TYPE 1 = ACK  (my own fragment coming back: "fragment return as the ACK")
//!   TYPE 2,3 reserved; STATUS = 1 marks an ACK that reports an error
//! ```
//!
//! smcuda serializes writers on a per-FIFO spin lock (`head_lock`) and marks empty slots
//! with a sentinel. Here writers never lock: the ring is Dmitry Vyukov's bounded MPMC queue
//! specialised to one consumer. Each slot carries a sequence stamp next to its value:
//!
//! ```text
//!  FifoCtrl (2 cache lines)            Slot[i] (16 B), capacity N = 2^k, mask = N-1
//!  +--------------------------+        +---------+---------+
//!  | tail  (CAS by writers)   |        | seq u64 | value   |
//!  +--------------------------+        +---------+---------+
//!  | head, claimed (reader)   |        initially seq = 0 (zero-filled memory)
//!  +--------------------------+
//! ```
//!
//! For a position `p` (a 64-bit counter that never wraps), let `lap = p & !mask` (the
//! position of the lap's first slot; `p - lap` is the slot index). Slot `p & mask` is
//! - free for the writer of `p`        when `seq == lap`,
//! - full, readable at `p`             when `seq == lap + 1`,
//! - still holding position `p - N`    when `seq < lap` (the ring is full).
//!
//! Vyukov's queue stores the position itself (`seq == p` for free, `p + 1` for full) and
//! so starts with `seq = i` in slot `i`; the stamp here is that value minus the slot
//! index, which is the same in every comparison (both sides are shifted by the same `i`)
//! but is 0 in every slot of an empty ring. A new segment is therefore ready as the
//! kernel hands it out (zero pages), and its FIFO pages are only allocated when a value
//! first passes through them.
//!
//! **push(v)**: `p = tail`; read `seq` of slot `p & mask` (Acquire).
//! `seq == lap`: try `CAS tail p -> p+1` (Relaxed); the winner owns the slot exclusively,
//! stores `value` (Relaxed) then `seq = lap + 1` (Release). `seq < lap`: return `Full`
//! (the caller queues the fragment: backpressure, not failure). `seq > lap`: another
//! writer won `p`; reload `tail` and retry. Some writer always succeeds, so the ring is
//! lock-free; a writer never waits on another writer or on the reader.
//!
//! **pop()** (single reader, local `head`): read `seq` of slot `head & mask` (Acquire). If
//! `seq == lap(head) + 1`, load `value` (Relaxed), store `seq = lap(head) + N` (Release) to
//! hand the slot to the writer of position `head + N`, advance `head`. Otherwise the FIFO
//! is empty, or the writer of `head` has reserved but not yet published: report empty.
//!
//! ## Memory ordering
//! - Writer → reader: the writer's `value` store is sequenced before its Release store of
//!   `seq = lap + 1`; the reader's Acquire load that observes it synchronizes with it, so
//!   the reader's later `value` load sees the new value, and so do its reads of the
//!   fragment header and payload the writer filled before pushing. A slot whose `seq` has
//!   not reached `lap + 1` is never read, so a slow or preempted writer can delay the reader
//!   (head-of-line) but can never expose a half-written slot.
//! - Reader → next writer: the reader's `value` load is sequenced before its Release store
//!   of `seq = lap + N`; the writer of `head + N` reads that `seq` with Acquire before it
//!   stores, so the old value is consumed before it is overwritten.
//! - The tail CAS needs no ordering of its own: it only arbitrates which writer owns a
//!   position; all data hand-over happens through `seq`. A writer that loses the CAS or
//!   reads a stale `tail` only retries or returns a conservative `Full`.
//! - Exactly-once: each position is won by exactly one CAS and read by the single reader
//!   exactly once (it advances `head` past it), so every pushed value is delivered once.
//!   Per-writer order: one writer's pushes win increasing positions (its later CAS starts
//!   from a `tail` at least one past its earlier win), and the reader consumes positions in
//!   increasing order.
//!
//! ## Failure modes
//! A writer killed between its CAS and its publish leaves position `p` reserved forever and
//! wedges the FIFO behind it; a local peer dying is fatal to the job anyway (as in smcuda).
//! The reader is single by construction: `claimed` in the reader line is taken with a CAS
//! when a [`FifoReader`] is created and released when it drops, together with the saved
//! `head`.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::FragError;
use crate::freelist::Incoming;
use crate::repr::{FifoCtrl, Slot};
use crate::shared::SegShared;

pub use crate::value::{FifoKind, FifoValue, STATUS_BIT, TAG_MASK, TYPE_MASK};

/// A value popped from a FIFO: not `Copy`, so a SEND can be turned into an [`Incoming`]
/// only once. [`Received::value`] gives the plain value (e.g. an ACK for `FragPool::complete`).
#[derive(Debug, PartialEq, Eq)]
pub struct Received(FifoValue);

impl Received {
    /// The value.
    pub fn value(&self) -> FifoValue {
        self.0
    }
    /// Its type.
    pub fn kind(&self) -> FifoKind {
        self.0.kind()
    }
}

/// The FIFO had no free slot: queue the value and retry after progressing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

impl fmt::Display for Full {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiver FIFO full")
    }
}

impl std::error::Error for Full {}

/// The multi-writer push (see the module comment). `slots.len()` is a power of two.
pub(crate) fn push(ctrl: &FifoCtrl, slots: &[Slot], value: u64) -> Result<(), Full> {
    let mask = slots.len() as u64 - 1;
    let mut pos = ctrl.tail.0.load(Relaxed);
    loop {
        let slot = &slots[(pos & mask) as usize];
        let lap = pos & !mask;
        let seq = slot.seq.load(Acquire);
        let diff = seq.wrapping_sub(lap) as i64;
        if diff == 0 {
            match ctrl
                .tail
                .0
                .compare_exchange_weak(pos, pos + 1, Relaxed, Relaxed)
            {
                Ok(_) => {
                    slot.value.store(value, Relaxed);
                    slot.seq.store(lap + 1, Release);
                    return Ok(());
                }
                Err(now) => pos = now,
            }
        } else if diff < 0 {
            return Err(Full);
        } else {
            pos = ctrl.tail.0.load(Relaxed);
        }
    }
}

/// The single-reader pop at `*head` (see the module comment).
pub(crate) fn pop(slots: &[Slot], head: &mut u64) -> Option<u64> {
    let n = slots.len() as u64;
    let slot = &slots[(*head & (n - 1)) as usize];
    let lap = *head & !(n - 1);
    if slot.seq.load(Acquire) != lap + 1 {
        return None;
    }
    let v = slot.value.load(Relaxed);
    slot.seq.store(lap + n, Release);
    *head += 1;
    Some(v)
}

/// True if the value at position `head` is published (what `pop` would return).
pub(crate) fn ready(slots: &[Slot], head: u64) -> bool {
    let mask = slots.len() as u64 - 1;
    published(&slots[(head & mask) as usize], head, mask)
}

/// True if `slot` (the one at position `head` of a ring of `mask + 1` slots) holds the
/// value published for `head`.
#[inline]
fn published(slot: &Slot, head: u64, mask: u64) -> bool {
    slot.seq.load(Relaxed) == (head & !mask) + 1
}

/// A cheap arrival check on this rank's FIFO that any thread may use without the reader
/// (see [`crate::Segment::fifo_probe`]): one masked load per question.
pub struct FifoProbe {
    /// Keeps the mapping (and so `slots`) alive.
    _seg: Arc<SegShared>,
    slots: std::ptr::NonNull<Slot>,
    mask: u64,
    /// The position [`Self::watch`] was given, as the slot it falls in (always ≤ `mask`:
    /// only `watch` stores it) and the sequence a value published there carries, so
    /// that [`Self::watched_ready`] (every idle progress pass) computes nothing.
    watch_slot: AtomicU64,
    watch_seq: AtomicU64,
}

// SAFETY: `slots` points into a shared mapping that `_seg` keeps alive and is only read
// through atomics, which any thread may do.
unsafe impl Send for FifoProbe {}
// SAFETY: as for Send.
unsafe impl Sync for FifoProbe {}

impl FifoProbe {
    pub(crate) fn new(seg: Arc<SegShared>, slots_off: u64, count: u32) -> Self {
        // Bounds and alignment of every slot checked once, here.
        let slots =
            std::ptr::NonNull::from(seg.map.slice::<Slot>(slots_off, count as usize)).cast();
        Self {
            _seg: seg,
            slots,
            mask: u64::from(count) - 1,
            watch_slot: AtomicU64::new(0),
            watch_seq: AtomicU64::new(1),
        }
    }

    /// Makes [`Self::watched_ready`] ask about position `head` (from
    /// [`FifoReader::head`]).
    #[inline]
    pub fn watch(&self, head: u64) {
        self.watch_slot.store(head & self.mask, Relaxed);
        // Release: a thread that reads this sequence reads the slot stored before it.
        // A thread that reads the sequence before this store and the slot after it
        // compares a slot with the sequence of the lap before: it can differ only
        // across a lap, and then says "nothing yet" to one idle pass.
        self.watch_seq.store((head & !self.mask) + 1, Release);
    }

    /// [`Self::ready`] for the position last given to [`Self::watch`].
    #[inline]
    pub fn watched_ready(&self) -> bool {
        let seq = self.watch_seq.load(Acquire);
        let index = self.watch_slot.load(Relaxed);
        // SAFETY: `index` ≤ mask (only `watch` stores it, masked), inside the slots
        // checked in `new`; the mapping lives as long as `_seg`; shared memory is only
        // read through atomics.
        let slot = unsafe { self.slots.add(index as usize).as_ref() };
        slot.seq.load(Relaxed) == seq
    }

    /// True if a value is published at position `head` (from [`FifoReader::head`]); a
    /// stale `head` only gives a spurious true.
    #[inline]
    pub fn ready(&self, head: u64) -> bool {
        // SAFETY: the index is ≤ mask, inside the slots checked in `new`; the mapping lives
        // as long as `_seg`; shared memory is only read through atomics.
        let slot = unsafe { self.slots.add((head & self.mask) as usize).as_ref() };
        published(slot, head, self.mask)
    }
}

impl std::fmt::Debug for FifoProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FifoProbe")
            .field("slots", &(self.mask + 1))
            .finish()
    }
}

/// A handle for pushing into one receiver's FIFO. Cheap to clone; `Send + Sync`: any number
/// of threads and processes may push concurrently.
#[derive(Clone)]
pub struct FifoWriter {
    pub(crate) seg: Arc<SegShared>,
    pub(crate) receiver: u32,
}

impl FifoWriter {
    /// Pushes `value`; `Err(Full)` when the receiver is `fifo_size` values behind. On
    /// `Full`, queue the value and (to keep per-peer order) everything after it until the
    /// queue drains.
    pub fn push(&self, value: FifoValue) -> Result<(), Full> {
        let l = &self.seg.layout;
        let ctrl = self.seg.map.get::<FifoCtrl>(l.fifo_ctrl_off(self.receiver));
        let slots = self
            .seg
            .map
            .slice::<Slot>(l.fifo_slots_off(self.receiver), l.fifo_size() as usize);
        push(ctrl, slots, value.raw())
    }
    /// The receiving rank.
    pub fn receiver(&self) -> u32 {
        self.receiver
    }
}

impl fmt::Debug for FifoWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FifoWriter")
            .field("receiver", &self.receiver)
            .finish()
    }
}

/// The single reader of a rank's own FIFO (at most one per FIFO across all processes).
pub struct FifoReader {
    pub(crate) seg: Arc<SegShared>,
    pub(crate) rank: u32,
    pub(crate) head: u64,
}

impl FifoReader {
    /// Pops the oldest published value, if any.
    pub fn pop(&mut self) -> Option<Received> {
        let l = &self.seg.layout;
        let slots = self
            .seg
            .map
            .slice::<Slot>(l.fifo_slots_off(self.rank), l.fifo_size() as usize);
        pop(slots, &mut self.head).map(|v| Received(FifoValue::from_raw(v)))
    }

    /// Validates a SEND just popped and gives access to its fragment: sender, tag,
    /// payload; [`Incoming::into_ack`] then yields the ACK to push to the sender's FIFO.
    /// Fails (without touching the payload) on anything that is not a SEND of a real
    /// fragment with a consistent header. Taking the [`Received`] by value means a SEND is
    /// handed out once, so its payload cannot be read after it was acknowledged.
    pub fn incoming(&self, received: Received) -> Result<Incoming<'_>, FragError> {
        Incoming::validate(&self.seg, received.0)
    }

    /// The position of the next value to pop (for [`crate::Segment::fifo_ready`]).
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The rank whose FIFO this is.
    pub fn rank(&self) -> u32 {
        self.rank
    }
}

impl Drop for FifoReader {
    fn drop(&mut self) {
        let ctrl = self
            .seg
            .map
            .get::<FifoCtrl>(self.seg.layout.fifo_ctrl_off(self.rank));
        ctrl.reader.0.head.store(self.head, Relaxed);
        // Release: a later claimer (Acquire CAS) sees the saved head.
        ctrl.reader.0.claimed.store(0, Release);
    }
}

impl fmt::Debug for FifoReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FifoReader")
            .field("rank", &self.rank)
            .field("head", &self.head)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repr::{CacheLine, ReaderLine};
    use std::sync::atomic::{AtomicU32, AtomicU64};

    fn ring(n: usize) -> (Box<FifoCtrl>, Vec<Slot>) {
        let ctrl = Box::new(FifoCtrl {
            tail: CacheLine(AtomicU64::new(0)),
            reader: CacheLine(ReaderLine {
                head: AtomicU64::new(0),
                claimed: AtomicU32::new(0),
            }),
        });
        let slots: Vec<Slot> = (0..n)
            .map(|_| Slot {
                seq: AtomicU64::new(0),
                value: AtomicU64::new(0),
            })
            .collect();
        // All zero: an empty ring (see the module comment).
        (ctrl, slots)
    }

    #[test]
    fn value_encoding() {
        let s = FifoValue::send(0x1000);
        assert_eq!(s.kind(), FifoKind::Send);
        assert_eq!(s.offset(), 0x1000);
        assert!(s.ok());
        let a = FifoValue::ack(0x1040, true);
        assert_eq!(
            (a.kind(), a.offset(), a.ok()),
            (FifoKind::Ack, 0x1040, true)
        );
        let e = FifoValue::ack(0x1040, false);
        assert_eq!(
            (e.kind(), e.offset(), e.ok()),
            (FifoKind::Ack, 0x1040, false)
        );
        assert_eq!(FifoValue::from_raw(0x2002).kind(), FifoKind::Reserved(2));
        assert_eq!(FifoValue::from_raw(0x2003).kind(), FifoKind::Reserved(3));
        // Exhaustive over the tag bits: offset never leaks into the tags and vice versa.
        for t in 0..64u64 {
            let v = FifoValue::from_raw(0xdead_beef_0000_0000 | t);
            assert_eq!(v.offset(), 0xdead_beef_0000_0000);
            assert_eq!(v.ok(), t & 4 == 0);
        }
    }

    #[test]
    fn fill_drain_wraps_many_laps() {
        let (ctrl, slots) = ring(4);
        let mut head = 0;
        let mut next = 0u64;
        for lap in 0..50u64 {
            for i in 0..4 {
                push(&ctrl, &slots, lap * 10 + i).unwrap();
            }
            assert_eq!(push(&ctrl, &slots, 999), Err(Full));
            for i in 0..4 {
                assert_eq!(pop(&slots, &mut head), Some(lap * 10 + i));
                next += 1;
            }
            assert_eq!(pop(&slots, &mut head), None);
        }
        assert_eq!(head, next);
        assert_eq!(ctrl.tail.0.load(Relaxed), next);
    }

    #[test]
    fn reserved_but_unpublished_slot_is_not_read() {
        let (ctrl, slots) = ring(4);
        // Simulate a writer that won position 0 but has not published yet.
        ctrl.tail.0.store(1, Relaxed);
        push(&ctrl, &slots, 7).unwrap(); // position 1
        let mut head = 0;
        assert_eq!(
            pop(&slots, &mut head),
            None,
            "head-of-line: slot 0 not published"
        );
        slots[0].value.store(5, Relaxed);
        slots[0].seq.store(1, Release);
        assert_eq!(pop(&slots, &mut head), Some(5));
        assert_eq!(pop(&slots, &mut head), Some(7));
    }

    #[test]
    fn threads_heap_ring_exactly_once_in_order() {
        const W: u64 = 3;
        const N: u64 = 20_000;
        let (ctrl, slots) = ring(8);
        std::thread::scope(|s| {
            for w in 0..W {
                let (ctrl, slots) = (&ctrl, &slots);
                s.spawn(move || {
                    for i in 0..N {
                        while push(ctrl, slots, (w << 32) | i).is_err() {
                            std::thread::yield_now();
                        }
                    }
                });
            }
            let mut head = 0;
            let mut next = [0u64; W as usize];
            let mut got = 0;
            while got < W * N {
                match pop(&slots, &mut head) {
                    Some(v) => {
                        let (w, i) = ((v >> 32) as usize, v & 0xffff_ffff);
                        assert_eq!(i, next[w], "writer {w} out of order");
                        next[w] += 1;
                        got += 1;
                    }
                    None => std::thread::yield_now(),
                }
            }
        });
    }
}
