//! Fast boxes: one single-writer single-reader byte ring per ordered pair of ranks, for
//! small messages copied inline (no fragment, no FIFO value, no return of a fragment).
//!
//! # Design
//!
//! A message through the FIFO costs a fragment allocation, a SEND value pushed with a CAS
//! on the receiver's shared tail, and the fragment's return (an ACK value pushed back into
//! the sender's FIFO and popped there): about six cache lines move between the two cores
//! per message. A fast box carries header and payload inline in a ring the receiver polls
//! directly, so a small message moves the one or two lines it occupies and nothing comes
//! back except, lazily, the reader's position.
//!
//! ```text
//!  FboxCtrl (1 line): read (reader's position, Release)   | ring: fbox_bytes
//!  record at position p (8-aligned):  header u64 | payload | tail (FBOX_TAIL bytes), padded to 8
//!  header = len (bits 0..32) | tag (32..40) | VALID (bit 40) | SKIP (bit 41)
//! ```
//!
//! **The tail**: the [`FBOX_TAIL`] bytes after a payload belong to its record, and the
//! receive callback may write them while it holds the payload. Open MPI 5.0's ob1 relies
//! on this ("all BTLs create a dummy segment"): a CID-only message (a 32-byte
//! `mca_pml_ob1_cid_hdr_t`, its answer to the first message on a communicator with an
//! extended CID, MPI_Comm_create_from_group) is handled by pointing a match header just
//! past the payload and storing its `hdr_ctx` (bytes 2..4 past the end) before seeing that
//! no match header follows. Without the tail those bytes were the next record's header:
//! its length became ~200 KB and the reader stopped ("invalid header 0x14100030012").
//!
//! Positions are byte counters that never wrap; offset = position % ring size (a power of
//! two, so a mask). The writer
//! keeps its position locally; the reader keeps its own and publishes it in `read`.
//!
//! **Write** (one writer at a time; the glue serialises threads): a record never straddles
//! the end of the ring; if it does not fit before the end, it goes to offset 0 of the next
//! lap and a SKIP header is left at the old position. Room needed: waste + record + 8 bytes
//! (see below) ≤ ring − (position − read) — `read` is re-read (Acquire) only when the
//! cached value says there is not enough room. Order of stores: the word just after the
//! record is set to 0, then the payload, then the header (Release); a SKIP header is
//! stored (Release) after the record it points to.
//!
//! **Read**: load the header at the reader's position (Acquire). 0: nothing (yet). SKIP:
//! jump to the next lap. Otherwise deliver `len` payload bytes in place, advance, and
//! publish `read` (Release) so that the writer may reuse those bytes.
//!
//! **Why the reader never mistakes old bytes for a header**: every position the reader
//! reaches was either zeroed by the writer before the previous record's header was
//! published (the "word after the record"), or is a record published before the SKIP that
//! led there; the Acquire load of that previous header makes the zero visible. The zero
//! word lies inside the room the writer checked, so it never overwrites unread data, and
//! the writer cannot reach a position of the next lap before the reader published a `read`
//! past it. A zero-filled ring (a new segment) is empty.
//!
//! ## Memory ordering
//! Writer → reader: payload and zero-word stores are sequenced before the Release store
//! of the header; the reader's Acquire load that sees the header sees them. Reader →
//! writer: the reader's reads of a payload are sequenced before its Release store of
//! `read`; the writer's Acquire load of `read` orders its overwrite after them.
//!
//! Raw module: the payload byte ranges are the one `unsafe` use here (see SAFETY notes).

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::repr::{FboxCtrl, FboxWord};
use crate::shared::SegShared;
use crate::trylock::{TryLock, TryLockGuard};

const VALID: u64 = 1 << 40;
const SKIP: u64 = 1 << 41;
const KNOWN_BITS: u64 = (1 << 42) - 1;

/// Bytes after each delivered payload that belong to its record: the receive callback may
/// write them (through a pointer into the mapping) until it returns. 4: Open MPI 5.0's
/// ob1 stores a match header's 2-byte `hdr_ctx` at bytes 2..4 past a CID-only message
/// (`mca_pml_ob1_recv_frag_callback_cid`) and touches nothing further. It was 16 (a whole
/// match header); every byte counts here: with 4, an 8-byte MPI message (24 bytes with
/// ob1's header) takes a 40-byte record instead of 48, so more of them share a cache line
/// (the receiver's misses per message; see the rsmcuda README's breakdown).
pub const FBOX_TAIL: usize = 4;

#[inline(always)]
fn record_bytes(len: usize) -> u64 {
    // 8 + (len + FBOX_TAIL) rounded up to a multiple of 8, without the branch that
    // `next_multiple_of` compiles to.
    8 + ((len as u64 + FBOX_TAIL as u64 + 7) & !7)
}

/// A fast box header that no writer produces (corruption or another version).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FboxCorrupt {
    /// The sending rank.
    pub sender: u32,
    /// The header word found.
    pub header: u64,
}

impl fmt::Display for FboxCorrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "fast box from rank {}: invalid header {:#x}",
            self.sender, self.header
        )
    }
}

impl std::error::Error for FboxCorrupt {}

/// Where the box from `sender` to `receiver` lies in the segment, its control line and
/// whole ring bounds- and alignment-checked once, for the two ends that then reach them
/// by pointer; None if the segment has no fast boxes.
struct BoxPlace {
    ctrl: NonNull<FboxCtrl>,
    ring: NonNull<u8>,
    ring_off: u64,
    size: u64,
    /// The reader's published position.
    pos: u64,
}

impl BoxPlace {
    fn find(seg: &SegShared, sender: u32, receiver: u32) -> Option<BoxPlace> {
        let size = u64::from(seg.layout.fbox_bytes());
        if size == 0 {
            return None;
        }
        let ctrl_off = seg.layout.fbox_off(sender, receiver);
        let ring_off = ctrl_off + size_of::<FboxCtrl>() as u64;
        let ctrl_ref = seg.map.get::<FboxCtrl>(ctrl_off);
        let pos = ctrl_ref.read.load(Acquire);
        let words = (size / size_of::<FboxWord>() as u64) as usize;
        Some(BoxPlace {
            ctrl: NonNull::from(ctrl_ref),
            ring: NonNull::from(seg.map.slice::<FboxWord>(ring_off, words)).cast::<u8>(),
            ring_off,
            size,
            pos,
        })
    }
}

/// The writing end of the fast box from this rank to one receiver.
pub struct FboxWriter {
    /// Keeps the mapping (and so `ctrl` and `ring`) alive.
    _seg: Arc<SegShared>,
    /// The box's control line; bounds and alignment checked once, in `new`.
    ctrl: NonNull<FboxCtrl>,
    /// The ring's first byte; the whole ring's bounds and alignment checked once, in
    /// `new`, so that a send indexes it with a mask and no further check.
    ring: NonNull<u8>,
    /// The ring's size less one (a power of two less one: positions mask to offsets).
    mask: u64,
    /// The ring's size (kept beside `mask`: the room test needs both).
    size: u64,
    /// [`Self::max_message`], computed once.
    max_message: usize,
    pos: u64,
    /// How far the writer may go: the reader's position when last read plus the ring's
    /// size (kept as the sum so that the room test is one comparison).
    limit: u64,
}

// SAFETY: `ctrl` and `ring` point into a shared mapping that `_seg` keeps alive; the ring
// bytes are written only through `&mut self` (one writer), the control line read through
// atomics. Moving the writer to another thread changes none of that.
unsafe impl Send for FboxWriter {}

impl fmt::Debug for FboxWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FboxWriter")
            .field("pos", &self.pos)
            .field("size", &self.size)
            .finish()
    }
}

impl FboxWriter {
    pub(crate) fn new(seg: Arc<SegShared>, sender: u32, receiver: u32) -> Option<Self> {
        // Start where the reader is (0 in a new segment).
        let BoxPlace {
            ctrl,
            ring,
            size,
            pos,
            ..
        } = BoxPlace::find(&seg, sender, receiver)?;
        Some(Self {
            ctrl,
            ring,
            mask: size - 1,
            size,
            max_message: (size / 4 - 8) as usize,
            pos,
            limit: pos + size,
            _seg: seg,
        })
    }

    /// The largest message (bytes) this box ever takes.
    #[inline]
    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// The reader's published position.
    #[inline]
    fn read(&self) -> u64 {
        // SAFETY: checked in `new`, alive as long as `_seg`; shared memory read atomically.
        unsafe { self.ctrl.as_ref() }.read.load(Acquire)
    }

    /// The ring word at position `pos` (8-aligned).
    #[inline]
    fn word(&self, pos: u64) -> &FboxWord {
        let off = (pos & self.mask) as usize;
        debug_assert_eq!(off % size_of::<FboxWord>(), 0);
        // SAFETY: `off` < ring size (mask), and positions are multiples of 8 (records
        // are padded to 8), so the word is inside the ring checked in `new` and aligned;
        // the mapping lives as long as `_seg`; the word is accessed atomically.
        unsafe { &*self.ring.as_ptr().add(off).cast::<FboxWord>() }
    }

    /// Writes one message of at most `len` bytes with active-message `tag`: `fill` gets
    /// the `len` bytes (in shared memory) and returns how many it wrote. False (nothing
    /// written, `fill` not called) when `len` exceeds [`Self::max_message`] or the
    /// receiver has not consumed enough yet.
    #[inline(always)]
    pub fn try_send(&mut self, tag: u8, len: usize, fill: impl FnOnce(&mut [u8]) -> usize) -> bool {
        let Some(mut reservation) = self.reserve(len) else {
            return false;
        };
        let written = fill(reservation.bytes());
        reservation.publish(tag, written);
        true
    }

    /// [`Self::try_send`] in two steps, for a caller that fills the bytes itself (no
    /// closure for the compiler to keep out of line): room for a message of at most
    /// `len` bytes, or None (as `try_send`'s false). Nothing is visible to the reader
    /// until the reservation is published; one dropped unpublished leaves the box as it
    /// was. It borrows the writer, so no other message can come between.
    #[inline(always)]
    pub fn reserve(&mut self, len: usize) -> Option<FboxReservation<'_>> {
        if len > self.max_message {
            return None;
        }
        let rec = record_bytes(len);
        let size = self.size;
        let off = self.pos & self.mask;
        let waste = if off + rec > size { size - off } else { 0 };
        // The record and the zeroed word after it (the reader's stop mark).
        let end = self.pos + waste + rec + 8;
        if end > self.limit {
            self.limit = self.read() + size;
            if end > self.limit {
                return None;
            }
        }
        Some(FboxReservation {
            at: self.pos,
            start: self.pos + waste,
            len,
            rec,
            writer: self,
        })
    }
}

/// A message reserved in a fast box and not yet published (see
/// [`FboxWriter::reserve`]).
pub struct FboxReservation<'a> {
    writer: &'a mut FboxWriter,
    /// The writer's position when reserved.
    at: u64,
    /// Where the record starts: the writer's position, or the ring's start when the
    /// record would not fit before its end (the bytes between are skipped).
    start: u64,
    /// Bytes reserved.
    len: usize,
    /// The record's bytes for `len`.
    rec: u64,
}

impl fmt::Debug for FboxReservation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FboxReservation")
            .field("start", &self.start)
            .field("len", &self.len)
            .finish()
    }
}

impl FboxReservation<'_> {
    /// The reserved bytes, in shared memory.
    #[inline(always)]
    pub fn bytes(&mut self) -> &mut [u8] {
        let data_off = (self.start & self.writer.mask) as usize + 8;
        // SAFETY: `data_off..data_off+len` is inside the writer's ring (checked in
        // `FboxWriter::new`): the record (8 + len + tail bytes, len ≤ size/4 − 8) starts
        // at `start`, which is the writer's offset when it fits before the ring's end,
        // else offset 0. Those bytes are free: `reserve`'s room check showed the reader
        // is done with them (Acquire on `read`), and the reader does not look at them
        // before `publish` stores the header. The writer is the box's only one (callers
        // serialise writers of a box), borrowed mutably by this reservation, which this
        // slice borrows mutably in turn.
        unsafe { std::slice::from_raw_parts_mut(self.writer.ring.as_ptr().add(data_off), self.len) }
    }

    /// Publishes the first `written` bytes (at most the reserved length) with
    /// active-message `tag`.
    #[inline(always)]
    pub fn publish(self, tag: u8, written: usize) {
        let written = written.min(self.len);
        let rec = if written == self.len {
            self.rec
        } else {
            record_bytes(written)
        };
        self.finish(tag, written, rec);
    }

    /// Publishes every reserved byte with active-message `tag`.
    #[inline(always)]
    pub fn publish_all(self, tag: u8) {
        let (len, rec) = (self.len, self.rec);
        self.finish(tag, len, rec);
    }

    #[inline(always)]
    fn finish(self, tag: u8, written: usize, rec: u64) {
        let w = self.writer;
        let (at, start) = (self.at, self.start);
        // Both words found before the first store: the compiler cannot tell that a
        // store into the ring leaves the writer's fields as they were.
        let (stop, head) = (w.word(start + rec), w.word(start));
        stop.0.store(0, Relaxed);
        head.0
            .store(written as u64 | (u64::from(tag) << 32) | VALID, Release);
        if start != at {
            w.word(at).0.store(VALID | SKIP, Release);
        }
        w.pos = start + rec;
    }
}

/// An [`FboxWriter`] that threads share: one writes at a time, the others are told the box
/// is busy (and take another path). Behind a [`TryLock`]: releasing it is a plain Release
/// store, and below `MPI_THREAD_MULTIPLE` the writer is used without it (see
/// [`crate::trylock`]).
pub struct SharedFboxWriter {
    max_message: usize,
    inner: TryLock<FboxWriter>,
}

impl fmt::Debug for SharedFboxWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedFboxWriter")
            .field("inner", &self.inner)
            .finish()
    }
}

impl SharedFboxWriter {
    /// Wraps a writer.
    pub fn new(writer: FboxWriter) -> Self {
        Self {
            max_message: writer.max_message(),
            inner: TryLock::new(writer),
        }
    }

    /// The largest message (bytes) this box ever takes.
    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// [`FboxWriter::try_send`] if no other thread is writing this box; None (nothing
    /// written, `fill` not called) if one is.
    pub fn try_send(
        &self,
        tag: u8,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> usize,
    ) -> Option<bool> {
        Some(self.try_writer()?.try_send(tag, len, fill))
    }

    /// The writer, if no other thread holds it (writes go through
    /// [`FboxWriter::try_send`]; the guard releases it when dropped).
    pub fn try_writer(&self) -> Option<TryLockGuard<'_, FboxWriter>> {
        self.inner.try_lock()
    }

    /// The writer, neither asking for nor taking the lock.
    ///
    /// # Safety
    /// As [`TryLock::get_serialized`]: no other thread uses this box's writer at an
    /// overlapping time, earlier users on other threads are done with it (happens-before),
    /// and nothing else reaches it while the reference lives.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn writer_serialized(&self) -> &mut FboxWriter {
        // SAFETY: the caller's promise.
        unsafe { self.inner.get_serialized() }
    }
}

/// The reading end of the fast box from one sender to this rank (one reader per box:
/// the glue keeps it under its reader lock).
pub struct FboxReader {
    /// Keeps the mapping (and so `ctrl` and `ring`) alive.
    seg: Arc<SegShared>,
    sender: u32,
    /// The box's control line; bounds and alignment checked once, in `new`.
    ctrl: NonNull<FboxCtrl>,
    /// The ring's first byte; the whole ring's bounds and alignment checked once, in
    /// `new`, so that a message is read with a mask and no further check of the mapping.
    ring: NonNull<u8>,
    ring_off: u64,
    size: u64,
    pos: u64,
}

// SAFETY: `ctrl` and `ring` point into a shared mapping that `seg` keeps alive; the ring
// is only read (words through atomics, payloads after their header's Acquire load) and
// the control line only stored through an atomic. Moving the reader to another thread
// changes none of that.
unsafe impl Send for FboxReader {}

impl fmt::Debug for FboxReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FboxReader")
            .field("sender", &self.sender)
            .field("pos", &self.pos)
            .finish()
    }
}

impl FboxReader {
    pub(crate) fn new(seg: Arc<SegShared>, sender: u32, receiver: u32) -> Option<Self> {
        let BoxPlace {
            ctrl,
            ring,
            ring_off,
            size,
            pos,
        } = BoxPlace::find(&seg, sender, receiver)?;
        Some(Self {
            ctrl,
            ring,
            ring_off,
            size,
            pos,
            sender,
            seg,
        })
    }

    /// The sending rank.
    pub fn sender(&self) -> u32 {
        self.sender
    }

    /// A probe for this box, usable without the reader.
    pub fn probe(&self) -> FboxProbe {
        FboxProbe::new(Arc::clone(&self.seg), self.ring_off, self.size)
    }

    /// The reader's position (for [`FboxProbe::ready`] from other threads).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The ring word at position `pos` (8-aligned).
    #[inline]
    fn word(&self, pos: u64) -> &FboxWord {
        let off = (pos & (self.size - 1)) as usize;
        // SAFETY: `off` < ring size (mask) and a multiple of 8 (positions advance by
        // whole records, padded to 8, or to the ring's start), so the word is inside the
        // ring checked in `new` and aligned; the mapping lives as long as `seg`; the word
        // is accessed atomically.
        unsafe { &*self.ring.as_ptr().add(off).cast::<FboxWord>() }
    }

    /// Delivers up to `max` messages, oldest first, to `deliver(tag, payload)` (the payload
    /// is read in place and reused by the writer after `deliver` returns; the
    /// [`FBOX_TAIL`] bytes after it are scratch that `deliver` may write). Returns how many;
    /// on an invalid header, stops and reports it (the box is then left as it is).
    pub fn poll(
        &mut self,
        max: usize,
        mut deliver: impl FnMut(u8, &[u8]),
    ) -> Result<usize, FboxCorrupt> {
        let mut done = 0;
        while done < max {
            let header = self.word(self.pos).0.load(Acquire);
            if header == 0 {
                break;
            }
            let off = self.pos & (self.size - 1);
            let corrupt = FboxCorrupt {
                sender: self.sender,
                header,
            };
            if header & !KNOWN_BITS != 0 || header & VALID == 0 {
                return Err(corrupt);
            }
            if header & SKIP != 0 {
                if header != VALID | SKIP || off == 0 {
                    return Err(corrupt);
                }
                self.pos += self.size - off;
                continue;
            }
            let len = (header & 0xffff_ffff) as usize;
            if off + record_bytes(len) > self.size {
                return Err(corrupt);
            }
            // SAFETY: `off + 8 + len` ≤ `off + record_bytes(len)` ≤ the ring's size
            // (checked above), inside the ring checked in `new`, which `seg` keeps mapped;
            // the writer published these bytes before the header seen with Acquire and
            // does not touch them again before `read` passes them (stored below, after
            // `deliver` returned and the slice is gone).
            let payload = unsafe {
                std::slice::from_raw_parts(self.ring.as_ptr().add(off as usize + 8), len)
            };
            deliver((header >> 32) as u8, payload);
            self.pos += record_bytes(len);
            // SAFETY: checked in `new`, alive as long as `seg`; stored atomically.
            unsafe { self.ctrl.as_ref() }.read.store(self.pos, Release);
            done += 1;
        }
        Ok(done)
    }
}

/// A cheap arrival check for one fast box that any thread may use without the reader.
/// Progress asks it on every pass, mostly to hear "nothing": the ring's place is checked
/// once here, so that asking is one masked load.
#[derive(Clone)]
pub struct FboxProbe {
    /// Keeps the mapping (and so `ring`) alive.
    _seg: Arc<SegShared>,
    ring: NonNull<u8>,
    /// Masks a position to the byte offset of its word: ring bytes − 1 (a power of two
    /// minus one) with the low bits of a word's offset cleared.
    offset_mask: u64,
}

// SAFETY: `ring` points into a shared mapping that `_seg` keeps alive; it is only read
// through `&FboxWord` (atomics), which any thread may do.
unsafe impl Send for FboxProbe {}
// SAFETY: as for Send: shared access is atomic loads only.
unsafe impl Sync for FboxProbe {}

impl fmt::Debug for FboxProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FboxProbe")
            .field(
                "words",
                &((self.offset_mask + 1) / size_of::<FboxWord>() as u64 + 1),
            )
            .finish()
    }
}

impl FboxProbe {
    fn new(seg: Arc<SegShared>, ring_off: u64, size: u64) -> Self {
        let words = size / size_of::<FboxWord>() as u64;
        // Bounds and alignment of the whole ring checked once, here.
        let ring = NonNull::from(seg.map.slice::<FboxWord>(ring_off, words as usize)).cast();
        debug_assert!(size.is_power_of_two() && size >= size_of::<FboxWord>() as u64);
        Self {
            _seg: seg,
            ring,
            offset_mask: (size - 1) & !(size_of::<FboxWord>() as u64 - 1),
        }
    }

    /// True if the box may hold a message at reader position `pos` (from
    /// [`FboxReader::position`]); a stale `pos` only gives a spurious true.
    #[inline]
    pub fn ready(&self, pos: u64) -> bool {
        let off = pos & self.offset_mask;
        // SAFETY: `off` < ring bytes and word-aligned (the mask), so the word is inside the ring
        // checked (bounds and alignment) in `new`; the mapping lives as long as `_seg`;
        // shared memory is only read through atomics.
        let word = unsafe { &*self.ring.as_ptr().add(off as usize).cast::<FboxWord>() };
        word.0.load(Relaxed) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::LayoutParams;
    use crate::name::SegmentName;
    use crate::segment::{Retry, Segment};

    fn pair(tag: &str, fbox_bytes: u32) -> (Segment, Segment) {
        let name =
            SegmentName::new(&format!("/rsmcuda-unit-{}-{tag}", std::process::id())).unwrap();
        let params = LayoutParams {
            nranks: 2,
            fifo_size: 2,
            eager_size: 64,
            eager_count: 1,
            max_size: 64,
            max_count: 0,
            fbox_bytes,
        };
        let seg = Segment::create(&name, &params, 0).unwrap();
        // The last of the two attaches unlinks the name.
        let peer = Segment::attach(&name, 1, &Retry::default()).unwrap();
        (seg, peer)
    }

    /// What Open MPI 5.0's ob1 does with a CID-only message (a 32-byte
    /// `mca_pml_ob1_cid_hdr_t`): it stores a match header's `hdr_ctx` 2..4 bytes past the
    /// payload, and a receive callback may use the whole tail. Each message of every length,
    /// at every ring offset, is followed by an 18-byte one (a match header with 2 bytes)
    /// that must arrive intact. Before the tail existed, a payload whose length is a
    /// multiple of 8 ended where the next header began: that header then read
    /// 0x14100030012 (tag 0x41, 196626 bytes) and the box was reported corrupt.
    #[test]
    fn receive_callback_may_write_the_tail() {
        let (seg, peer) = pair("tail", 256);
        let mut r = seg.fbox_reader(1).unwrap();
        let mut w = peer.fbox_writer(0).unwrap();
        let shared = Arc::clone(&r.seg);
        let base = shared.map.bytes_ptr(0, 1) as usize;
        let next = [
            0x41u8, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 9, 0, 0, 0, 0xee, 0xdd,
        ];
        for round in 0..6u8 {
            for len in 0..=w.max_message() - 24 {
                let fill = |k: usize| (k as u8).wrapping_mul(13) ^ round ^ len as u8;
                assert!(w.try_send(0x4a, len, |b| {
                    for (k, x) in b.iter_mut().enumerate() {
                        *x = fill(k);
                    }
                    len
                }));
                assert!(w.try_send(0x41, next.len(), |b| {
                    b.copy_from_slice(&next);
                    next.len()
                }));
                let mut seen = Vec::new();
                let n = r
                    .poll(8, |tag, p| {
                        seen.push((tag, p.to_vec()));
                        if tag == 0x4a {
                            let end = p.as_ptr() as usize + p.len() - base;
                            let tail = shared.map.bytes_ptr(end as u64, FBOX_TAIL);
                            // SAFETY: the tail of the record being delivered: inside the
                            // mapping (checked) and the ring, and ours until we return.
                            unsafe {
                                tail.add(2).cast::<u16>().write_unaligned(3);
                                tail.add(4).write_bytes(0xa5, FBOX_TAIL - 4);
                            }
                        }
                    })
                    .unwrap_or_else(|e| panic!("round {round} length {len}: {e}"));
                assert_eq!(n, 2, "round {round} length {len}");
                let want: Vec<u8> = (0..len).map(fill).collect();
                assert_eq!(seen[0], (0x4a, want), "round {round} length {len}");
                assert_eq!(seen[1], (0x41, next.to_vec()), "round {round} length {len}");
            }
        }
        assert!(seg.is_unlinked());
    }

    #[test]
    fn records_keep_the_tail_and_stay_aligned() {
        for len in 0..200 {
            let rec = record_bytes(len);
            assert_eq!(rec % 8, 0);
            assert!(rec >= 8 + (len + FBOX_TAIL) as u64, "{len}");
            assert!(rec < 8 + (len + FBOX_TAIL) as u64 + 8, "{len}");
        }
        // The largest message still fits a quarter of the smallest ring, tail included.
        let max = u64::from(crate::layout::MIN_FBOX_BYTES) / 4 - 8;
        assert!(record_bytes(max as usize) + 8 <= u64::from(crate::layout::MIN_FBOX_BYTES));
    }
}
