//! The node's shared segment as this rank uses it: its fragment pool and descriptor
//! table, its FIFO reader, writers into every peer's FIFO, and per-peer pending
//! queues that keep values whose FIFO was full (backpressure, in order).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use mca::btl::{Btl, Descriptor, SendStatus};
use mca::convertor::Convertor;
use mca::{Error, Result};
use rsmcuda_shm::{
    FboxProbe, FboxReader, FboxWriter, FifoKind, FifoProbe, FifoReader, FifoValue, FifoWriter,
    FragPool, PoolKind, Segment, SharedFboxWriter, TryLock,
};

use crate::desc::{Table, kind_index};
use crate::stats;

/// The owner-only side of the fragment pool: the pool and the tokens of fragments
/// handed to ob1 (allocated, not yet sent; or acknowledged but kept by ob1).
struct SendSide {
    pool: FragPool,
    tokens: [Vec<Option<rsmcuda_shm::Frag>>; 2],
}

impl SendSide {
    fn take(&mut self, kind: PoolKind, index: u32) -> Option<rsmcuda_shm::Frag> {
        self.tokens[kind_index(kind)]
            .get_mut(index as usize)
            .and_then(Option::take)
    }
    fn keep(&mut self, frag: rsmcuda_shm::Frag) {
        let (k, i) = (kind_index(frag.kind()), frag.index() as usize);
        self.tokens[k][i] = Some(frag);
    }
}

/// Values for one peer's FIFO that found it full, oldest first.
#[derive(Default)]
struct Pending {
    queue: Mutex<VecDeque<FifoValue>>,
    waiting: AtomicBool,
}

/// The sending side's state for one peer.
struct PeerOut {
    /// Fragments sent through the FIFO and not returned yet. A fast box is used only
    /// while it is 0, so that a message never overtakes an earlier one to the same peer
    /// (per-peer order as with the FIFO alone).
    fifo_out: AtomicUsize,
    /// The fast box to the peer (None for this rank or without fast boxes); a thread that
    /// finds it busy takes the FIFO path.
    fbox: Option<SharedFboxWriter>,
}

/// What only one thread at a time reads: this rank's FIFO and the fast boxes into it.
struct Reader {
    fifo: FifoReader,
    boxes: Vec<FboxReader>,
}

/// In `Node::peers_waiting`: the leader still waits for peers to attach.
const ATTACH_PENDING: usize = 1 << (usize::BITS - 1);

/// A fast box reader's position hint meaning "this box is not polled any more".
const DEAD_BOX: u64 = u64::MAX;

pub struct Node {
    pub seg: Segment,
    /// This node's index in the module's `Nodes` (its descriptors carry it).
    index: u32,
    send: Mutex<SendSide>,
    reader: TryLock<Reader>,
    /// Watches where the reader stands (updated under the reader lock), so that
    /// progress can see "nothing arrived" with a few loads and no lock or
    /// read-modify-write.
    fifo_probe: FifoProbe,
    /// Per fast box in `Reader::boxes` (same order): its probe and the reader position.
    box_hints: Vec<(FboxProbe, AtomicU64)>,
    /// Per peer: what the send paths ask on every message, in one place (one bounds
    /// check per send).
    out: Vec<PeerOut>,
    writers: Vec<FifoWriter>,
    pending: Vec<Pending>,
    /// Peers with values waiting for a full FIFO, plus [`ATTACH_PENDING`] while the
    /// leader still waits for peers to attach: 0 means neither (one load for idle
    /// progress).
    peers_waiting: AtomicUsize,
    /// Per rank: the address of the endpoint ob1 holds for it (0 while none), which
    /// 5.0's receive descriptor names the sender by.
    endpoints: Vec<AtomicUsize>,
    table: Table,
    poll_batch: usize,
    /// While the leader still waits for peers to attach: when it started waiting.
    attach_wait: Option<(Instant, std::time::Duration)>,
}

/// One message into a fast box (header and payload inline; `total` their sum); false
/// if there is no room.
#[inline(always)]
fn write_inline(
    w: &mut FboxWriter,
    header: &[u8],
    convertor: &mut Convertor,
    payload_size: usize,
    total: usize,
    tag: u8,
) -> bool {
    let Some(mut reservation) = w.reserve(total) else {
        return false;
    };
    let written = fill_inline(reservation.bytes(), header, convertor, payload_size);
    if written == total {
        reservation.publish_all(tag);
    } else {
        reservation.publish(tag, written);
    }
    true
}

/// Writes ob1's `header` and `payload_size` bytes of the message into `buf` (room for
/// both); returns the bytes written. Contiguous host data is copied straight from the
/// user's buffer; anything else goes through the convertor.
#[inline(always)]
fn fill_inline(
    buf: &mut [u8],
    header: &[u8],
    convertor: &mut Convertor,
    payload_size: usize,
) -> usize {
    let (head, rest) = buf.split_at_mut(header.len());
    copy_short(head, header);
    let payload = &mut rest[..payload_size];
    let packed = if payload_size == 0 {
        0
    } else if let Some(bytes) = convertor.contiguous(payload_size) {
        copy_short(payload, bytes);
        payload_size
    } else {
        convertor.pack(payload)
    };
    header.len() + packed
}

/// `dst.copy_from_slice(src)` for the sizes of a small send's pieces (ob1's 14- to
/// 24-byte headers, short payloads) as two overlapping moves of 8 or 16 bytes inline:
/// a `memcpy` call costs more than the copy at these sizes, and saving registers
/// across it costs the caller too.
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if dst.len() != n {
        dst.copy_from_slice(src); // panics with the lengths, as a mismatch should
        return;
    }
    if (8..=16).contains(&n) {
        let first: [u8; 8] = src[..8].try_into().unwrap_or_default();
        let last: [u8; 8] = src[n - 8..].try_into().unwrap_or_default();
        dst[..8].copy_from_slice(&first);
        dst[n - 8..].copy_from_slice(&last);
    } else if (17..=32).contains(&n) {
        let first: [u8; 16] = src[..16].try_into().unwrap_or_default();
        let last: [u8; 16] = src[n - 16..].try_into().unwrap_or_default();
        dst[..16].copy_from_slice(&first);
        dst[n - 16..].copy_from_slice(&last);
    } else {
        dst.copy_from_slice(src);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks is already reported by the guard;
    // the data (free lists, queues) stays consistent between statements.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Node {
    pub fn new(
        seg: Segment,
        index: u32,
        poll_batch: usize,
        attach_timeout: std::time::Duration,
    ) -> std::result::Result<Node, rsmcuda_shm::ShmError> {
        let mut pool = seg.frag_pool()?;
        let reader = seg.fifo_reader()?;
        let fifo_probe = seg.fifo_probe();
        fifo_probe.watch(reader.head());
        let writers = (0..seg.nranks())
            .map(|r| seg.fifo_writer(r))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let table = Table::build(&mut pool, index);
        let counts = [PoolKind::Eager, PoolKind::Max].map(|k| seg.layout().frag_count(k) as usize);
        let tokens = counts.map(|n| (0..n).map(|_| None).collect());
        let pending = (0..seg.nranks()).map(|_| Pending::default()).collect();
        let attach_wait = seg.is_leader().then(|| (Instant::now(), attach_timeout));
        let boxes: Vec<FboxReader> = (0..seg.nranks())
            .filter_map(|r| seg.fbox_reader(r))
            .collect();
        let box_hints = boxes
            .iter()
            .map(|b| (b.probe(), AtomicU64::new(b.position())))
            .collect();
        let out: Vec<PeerOut> = (0..seg.nranks())
            .map(|r| PeerOut {
                fifo_out: AtomicUsize::new(0),
                fbox: seg.fbox_writer(r).map(SharedFboxWriter::new),
            })
            .collect();
        Ok(Node {
            send: Mutex::new(SendSide { pool, tokens }),
            fifo_probe,
            reader: TryLock::new(Reader {
                fifo: reader,
                boxes,
            }),
            box_hints,
            out,
            writers,
            pending,
            peers_waiting: AtomicUsize::new(if attach_wait.is_some() {
                ATTACH_PENDING
            } else {
                0
            }),
            endpoints: (0..seg.nranks()).map(|_| AtomicUsize::new(0)).collect(),
            table,
            poll_batch,
            attach_wait,
            seg,
            index,
        })
    }

    pub fn my_rank(&self) -> u32 {
        self.seg.local_rank()
    }

    /// Payload bytes of an eager fragment.
    pub fn eager_capacity(&self) -> usize {
        self.seg.layout().frag_capacity(PoolKind::Eager) as usize
    }

    /// Payload bytes of a max fragment.
    pub fn max_capacity(&self) -> usize {
        self.seg.layout().frag_capacity(PoolKind::Max) as usize
    }

    /// A descriptor for `len` bytes (from the smallest pool that has a free fragment
    /// large enough), or None when out of fragments (ob1 retries later).
    pub fn alloc(&self, len: usize, flags: u32, order: u8) -> Option<Descriptor> {
        let mut side = lock(&self.send);
        let frag = side.pool.alloc(len).or_else(|| {
            (len <= self.max_capacity())
                .then(|| side.pool.alloc_kind(PoolKind::Max))
                .flatten()
        })?;
        let des = self.table.get(frag.kind(), frag.index())?;
        side.keep(frag);
        drop(side);
        self.table.prepare(des, len, flags, order);
        Some(des)
    }

    /// Where a descriptor's bytes live (ob1 or prepare_src fills them).
    pub fn payload(&self, des: Descriptor) -> *mut u8 {
        self.table.payload(des)
    }

    /// Sets the length of a descriptor's (only) segment.
    pub fn set_len(&self, des: Descriptor, len: usize) {
        self.table.set_len(des, len);
    }

    /// ob1 gives back a descriptor it did not send (or kept after completion).
    pub fn free(&self, des: Descriptor) -> Result<()> {
        let extra = self.table.extra(des);
        let mut side = lock(&self.send);
        let frag = side.take(extra.kind, extra.index).ok_or(Error::BAD_PARAM)?;
        side.pool.free(frag);
        Ok(())
    }

    /// Sends a descriptor's fragment to local rank `peer`.
    pub fn send(&self, des: Descriptor, peer: u32, tag: u8) -> Result<SendStatus> {
        let extra = self.table.extra(des);
        if extra.node != self.index {
            // Allocated for a peer of another segment: its fragment is not in this one.
            return Err(Error::BAD_PARAM);
        }
        // SAFETY: the descriptor is live and ours; ob1 set its segment length.
        let len = unsafe { (*(*des.as_ptr()).des_segments).seg_len } as usize;
        let value = {
            let mut side = lock(&self.send);
            let frag = side.take(extra.kind, extra.index).ok_or(Error::BAD_PARAM)?;
            side.pool
                .post(frag, len, tag)
                .map_err(|_| Error::BAD_PARAM)?
        };
        let silent = des.btl_owned() && !des.always_callback();
        // Stored before the push: the ACK may be handled by another thread at once.
        extra.silent.store(silent, Ordering::Release);
        extra.peer.store(peer, Ordering::Relaxed);
        self.out[peer as usize]
            .fifo_out
            .fetch_add(1, Ordering::AcqRel);
        stats::bump(&stats::SENDS);
        let pushed = self.push_or_queue(peer, value, || {
            // Queued: report completion through the callback, like smcuda, so ob1
            // does not count on a fragment that is still in our hands.
            extra.silent.store(false, Ordering::Release);
        });
        Ok(if pushed && silent {
            SendStatus::CompletedInline
        } else {
            SendStatus::Queued
        })
    }

    /// The immediate-send fast path: header and payload copied inline into the fast box
    /// to the peer, else into an eager fragment sent through the FIFO; false (nothing
    /// sent) if it does not fit or none is free.
    #[inline(always)]
    pub fn sendi(
        &self,
        peer: u32,
        header: &[u8],
        convertor: &mut Convertor,
        payload_size: usize,
        tag: u8,
    ) -> bool {
        // The box's own size check (`reserve`) is the only one: a second here cost
        // every small send two instructions to save a large one a few.
        let Some(total) = header.len().checked_add(payload_size) else {
            return false;
        };
        if let Some(out) = self.out.get(peer as usize)
            && let Some(fbox) = &out.fbox
            && out.fifo_out.load(Ordering::Acquire) == 0
        {
            let concurrent = mca::threads::concurrent();
            // Counted before the ring stores: a locked increment after them would wait
            // for them to drain (taken back below if nothing was sent).
            stats::add_as(&stats::SENDIS, 1, concurrent);
            let mut guard = if concurrent { fbox.try_writer() } else { None };
            let writer = match guard.as_deref_mut() {
                Some(w) => Some(w),
                // SAFETY: below MPI_THREAD_MULTIPLE, sends (from MPI calls only) never
                // overlap between threads, and this is the only place that writes a
                // fast box: nothing below calls back into the BTL while the writer is
                // held. Open MPI's own BTLs skip their locks then too.
                None if !concurrent => Some(unsafe { fbox.writer_serialized() }),
                None => None,
            };
            if let Some(w) = writer
                && write_inline(w, header, convertor, payload_size, total, tag)
            {
                return true;
            }
            stats::add_as(&stats::SENDIS, 1u64.wrapping_neg(), concurrent);
        }
        self.sendi_fifo(peer, header, convertor, payload_size, tag)
    }

    /// [`Self::sendi`] through an eager fragment and the FIFO.
    #[inline(never)]
    fn sendi_fifo(
        &self,
        peer: u32,
        header: &[u8],
        convertor: &mut Convertor,
        payload_size: usize,
        tag: u8,
    ) -> bool {
        let total = header.len() + payload_size;
        let sent = self.send_eager(peer, tag, total, |buf| {
            fill_inline(buf, header, convertor, payload_size)
        });
        if sent {
            stats::bump(&stats::SENDIS);
        }
        sent
    }

    /// Sends the BTL's own message `bytes` (a CUDA IPC control message) with `tag`
    /// through the FIFO; false when no eager fragment is free (try again later).
    pub fn send_bytes(&self, peer: u32, tag: u8, bytes: &[u8]) -> bool {
        self.send_eager(peer, tag, bytes.len(), |buf| {
            buf[..bytes.len()].copy_from_slice(bytes);
            bytes.len()
        })
    }

    /// Fills an eager fragment with `fill` (given room for `total` bytes, returning the
    /// bytes written) and sends it with no completion owed.
    fn send_eager(
        &self,
        peer: u32,
        tag: u8,
        total: usize,
        fill: impl FnOnce(&mut [u8]) -> usize,
    ) -> bool {
        if total > self.eager_capacity() {
            return false;
        }
        let value = {
            let mut side = lock(&self.send);
            let Some(mut frag) = side.pool.alloc_kind(PoolKind::Eager) else {
                return false;
            };
            let buf = side.pool.payload_mut(&mut frag);
            let len = fill(&mut buf[..total]);
            let Some(des) = self.table.get(frag.kind(), frag.index()) else {
                side.pool.free(frag);
                return false;
            };
            let extra = self.table.extra(des);
            extra.silent.store(true, Ordering::Release);
            extra.peer.store(peer, Ordering::Relaxed);
            match side.pool.post(frag, len, tag) {
                Ok(v) => v,
                Err(_) => return false,
            }
        };
        self.out[peer as usize]
            .fifo_out
            .fetch_add(1, Ordering::AcqRel);
        self.push_or_queue(peer, value, || {});
        true
    }

    /// Pushes into `peer`'s FIFO, or appends to its pending queue (calling
    /// `on_queued` under the queue lock, before anyone can push the value).
    /// Returns true if the value is in the FIFO.
    fn push_or_queue(&self, peer: u32, value: FifoValue, on_queued: impl FnOnce()) -> bool {
        let pending = &self.pending[peer as usize];
        if !pending.waiting.load(Ordering::Acquire)
            && self.writers[peer as usize].push(value).is_ok()
        {
            return true;
        }
        let mut queue = lock(&pending.queue);
        // Another thread may have drained the queue meanwhile: try once more so a
        // lone value does not wait for the next progress call.
        if queue.is_empty() && self.writers[peer as usize].push(value).is_ok() {
            return true;
        }
        stats::bump(&stats::FIFO_FULL);
        on_queued();
        queue.push_back(value);
        stats::PENDING_HWM.fetch_max(queue.len() as u64, Ordering::Relaxed);
        if !pending.waiting.swap(true, Ordering::AcqRel) {
            self.peers_waiting.fetch_add(1, Ordering::AcqRel);
        }
        false
    }

    /// Moves pending values into FIFOs that have room again, oldest first.
    #[inline]
    fn drain_pending(&self) -> usize {
        if !self.any_waiting() {
            return 0;
        }
        self.drain_waiting_queues()
    }

    /// Some value waits for a full FIFO.
    #[inline]
    fn any_waiting(&self) -> bool {
        self.peers_waiting.load(Ordering::Acquire) & !ATTACH_PENDING > 0
    }

    #[cold]
    fn drain_waiting_queues(&self) -> usize {
        let mut moved = 0;
        for (peer, pending) in self.pending.iter().enumerate() {
            if !pending.waiting.load(Ordering::Acquire) {
                continue;
            }
            let Ok(mut queue) = pending.queue.try_lock() else {
                continue;
            };
            while let Some(&value) = queue.front() {
                if self.writers[peer].push(value).is_err() {
                    break;
                }
                queue.pop_front();
                moved += 1;
            }
            if queue.is_empty() && pending.waiting.swap(false, Ordering::AcqRel) {
                self.peers_waiting.fetch_sub(1, Ordering::AcqRel);
            }
        }
        moved
    }

    /// At finalize: keeps pushing values that still wait for a full FIFO (the peer may
    /// still be reading), for at most `limit`. Nothing is delivered any more: ob1 is
    /// already finalized. Returns how many were still waiting when it gave up.
    pub fn drain_before_exit(&self, limit: std::time::Duration) -> usize {
        let start = Instant::now();
        while self.any_waiting() && start.elapsed() < limit {
            if self.drain_pending() == 0 {
                std::thread::yield_now();
            }
        }
        self.pending.iter().map(|p| lock(&p.queue).len()).sum()
    }

    /// Nothing for [`progress`](Self::progress) to do, by the same tests it makes
    /// first: attach settled, no value queued for a full FIFO, nothing arrived.
    #[inline]
    pub fn idle(&self) -> bool {
        self.peers_waiting.load(Ordering::Acquire) == 0 && !self.anything_arrived()
    }

    /// Whether the FIFO or a fast box may hold something: plain loads, no lock.
    #[inline]
    fn anything_arrived(&self) -> bool {
        self.fifo_probe.watched_ready() || self.any_box_ready()
    }

    /// Whether a fast box may hold something.
    #[inline]
    fn any_box_ready(&self) -> bool {
        let box_ready = |(probe, pos): &(FboxProbe, AtomicU64)| {
            let pos = pos.load(Ordering::Relaxed);
            pos != DEAD_BOX && probe.ready(pos)
        };
        // Two ranks (one box) without the loop.
        match self.box_hints.as_slice() {
            [one] => box_ready(one),
            boxes => boxes.iter().any(box_ready),
        }
    }

    /// Remembers the endpoint ob1 holds for `rank` in this segment.
    pub fn set_endpoint(&self, rank: u32, endpoint: *mut mca::sys::mca_btl_base_endpoint_t) {
        if let Some(slot) = self.endpoints.get(rank as usize) {
            slot.store(endpoint as usize, Ordering::Release);
        }
    }

    /// Forgets `endpoint` for `rank` (unless another one replaced it meanwhile).
    pub fn clear_endpoint(&self, rank: u32, endpoint: *mut mca::sys::mca_btl_base_endpoint_t) {
        if let Some(slot) = self.endpoints.get(rank as usize) {
            let _ =
                slot.compare_exchange(endpoint as usize, 0, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// The endpoint ob1 holds for `rank`, or NULL while it holds none: a peer in the
    /// segment can send before this process added it (5.0 adds peers on first use), and
    /// del_procs removes them.
    pub fn endpoint(&self, rank: u32) -> *mut mca::sys::mca_btl_base_endpoint_t {
        self.endpoints
            .get(rank as usize)
            .map_or(0, |slot| slot.load(Ordering::Acquire)) as *mut _
    }

    /// One progress pass: pending values, then up to `poll_batch` messages from each
    /// fast box and up to `poll_batch` FIFO entries, each message handed to `deliver`
    /// (sending rank, tag, payload in shared memory); `btl` completes returned fragments.
    pub fn progress<M: mca::btl::BtlModule>(
        &self,
        btl: &Btl<M>,
        mut deliver: impl FnMut(u32, u8, &[u8]),
    ) -> usize {
        let mut handled = 0;
        // One load for both: no attach to watch and nothing queued for a full FIFO.
        if self.peers_waiting.load(Ordering::Acquire) != 0 {
            self.check_attach();
            handled = self.drain_pending();
        }
        // Asked once: a pass that found only fast-box messages (a ping-pong's) skips the
        // FIFO's pop, and a stale "nothing" is seen again by the next pass.
        let fifo_ready = self.fifo_probe.watched_ready();
        if !fifo_ready && !self.any_box_ready() {
            return handled;
        }
        // One reader at a time; a thread that finds it busy (or a re-entrant call
        // from inside a receive callback) simply has nothing to do.
        let guard = if mca::threads::concurrent() {
            self.reader.try_lock()
        } else {
            // SAFETY: below MPI_THREAD_MULTIPLE, MPI calls (and so progress, which runs
            // inside them) never overlap between threads; Open MPI's own BTLs skip their
            // locks then too.
            unsafe { self.reader.try_lock_serialized() }
        };
        let Some(mut guard) = guard else {
            return handled;
        };
        let Reader {
            fifo: reader,
            boxes,
        } = &mut *guard;
        // Hints and boxes are built together, one each, in the same order.
        for (b, (probe, hint)) in boxes.iter_mut().zip(self.box_hints.iter()) {
            let pos = hint.load(Ordering::Relaxed);
            // Read only a box with a record at its position (a dead box's hint is never
            // a position): most boxes of a busy pass with many peers hold nothing.
            if pos == DEAD_BOX || !probe.ready(pos) {
                continue;
            }
            // RECEIVES is counted once per box and pass, not per message.
            let sender = b.sender();
            match b.poll(self.poll_batch, |tag, payload| {
                deliver(sender, tag, payload)
            }) {
                Ok(n) => {
                    stats::add(&stats::RECEIVES, n as u64);
                    handled += n;
                    hint.store(b.position(), Ordering::Relaxed);
                }
                Err(e) => {
                    hint.store(DEAD_BOX, Ordering::Relaxed);
                    corrupt(&format!("{e}; that fast box is no longer read"));
                }
            }
        }
        if !fifo_ready {
            return handled;
        }
        handled + self.progress_fifo(btl, reader, &mut deliver)
    }

    /// Up to `poll_batch` FIFO values: messages in fragments (delivered, then returned
    /// to their owner) and fragments of ours coming back. Out of line: a ping-pong's
    /// passes find fast-box messages only, and without this part inlined their frame
    /// is smaller.
    #[inline(never)]
    fn progress_fifo<M: mca::btl::BtlModule>(
        &self,
        btl: &Btl<M>,
        reader: &mut FifoReader,
        deliver: &mut impl FnMut(u32, u8, &[u8]),
    ) -> usize {
        let mut handled = 0;
        for _ in 0..self.poll_batch {
            let Some(received) = reader.pop() else {
                break;
            };
            handled += 1;
            match received.kind() {
                FifoKind::Send => match reader.incoming(received) {
                    Ok(incoming) => {
                        deliver(incoming.sender(), incoming.tag(), incoming.payload());
                        stats::bump(&stats::RECEIVES);
                        let (owner, ack) = incoming.into_ack(true);
                        self.push_or_queue(owner, ack, || {});
                    }
                    Err(e) => corrupt(&format!("a SEND value that is not a valid fragment: {e}")),
                },
                FifoKind::Ack => {
                    let value = received.value();
                    if let Err(e) = self.acknowledged(btl, value) {
                        corrupt(&format!("an ACK for {value:?} that is not ours: {e}"));
                    }
                }
                _ => corrupt(&format!("a value of unknown type: {:?}", received.value())),
            }
        }
        self.fifo_probe.watch(reader.head());
        handled
    }

    /// A fragment came back: free it, or complete its descriptor first.
    fn acknowledged<M: mca::btl::BtlModule>(
        &self,
        btl: &Btl<M>,
        ack: FifoValue,
    ) -> std::result::Result<(), String> {
        let loc = self
            .seg
            .layout()
            .locate(ack.offset())
            .filter(|l| l.owner == self.my_rank())
            .ok_or("not one of this rank's fragments")?;
        let des = self.table.get(loc.kind, loc.index).ok_or("no descriptor")?;
        let extra = self.table.extra(des);
        if let Some(out) = self
            .out
            .get(extra.peer.load(Ordering::Relaxed) as usize)
            .map(|o| &o.fifo_out)
        {
            // Release: a sender that sees the count drop (Acquire) may use the fast box,
            // the receiver having delivered this fragment before returning it.
            out.fetch_sub(1, Ordering::AcqRel);
        }
        let status = if ack.ok() { 0 } else { mca::sys::OPAL_ERROR };
        // A callback is told where the fragment went: a caller that sends the same
        // descriptor again from it (the BTL base's active-message RDMA, which osc/rdma
        // uses on 5.0, queues its next packet with this endpoint) needs it.
        let endpoint = || self.endpoint(extra.peer.load(Ordering::Relaxed));
        if extra.silent.load(Ordering::Acquire) {
            lock(&self.send)
                .pool
                .complete(ack)
                .map_err(|e| e.to_string())?;
        } else if des.btl_owned() {
            // SAFETY: the descriptor is live and BTL-owned; ob1 does not free it.
            unsafe { btl.complete(endpoint(), des, status) };
            lock(&self.send)
                .pool
                .complete(ack)
                .map_err(|e| e.to_string())?;
        } else {
            // ob1 keeps the descriptor and frees it later: the fragment stays its.
            {
                let mut side = lock(&self.send);
                let (frag, _) = side.pool.reclaim(ack).map_err(|e| e.to_string())?;
                side.keep(frag);
            }
            // SAFETY: live descriptor owned by ob1, which may free it in the callback.
            unsafe { btl.complete(endpoint(), des, status) };
        }
        Ok(())
    }

    /// The leader's side of "unlinked as soon as every peer attached": a peer that
    /// has not attached within the timeout never will; close the door and unlink.
    #[inline]
    fn check_attach(&self) {
        if self.attach_settled() {
            return;
        }
        self.check_attach_slow();
    }

    /// No attach to watch: this rank did not create the segment, or everyone attached
    /// (or the leader gave up waiting).
    #[inline]
    fn attach_settled(&self) -> bool {
        self.peers_waiting.load(Ordering::Relaxed) & ATTACH_PENDING == 0
    }

    /// The leader stops waiting for peers to attach.
    fn attach_done(&self) {
        self.peers_waiting
            .fetch_and(!ATTACH_PENDING, Ordering::AcqRel);
    }

    #[cold]
    fn check_attach_slow(&self) {
        let Some((since, timeout)) = self.attach_wait else {
            return;
        };
        if self.seg.all_attached() {
            self.attach_done();
            // The creator's descriptor, through which peers found the segment, closes.
            let _ = self.seg.settle();
            return;
        }
        if since.elapsed() < timeout {
            return;
        }
        self.attach_done();
        crate::help::abandon(&self.seg);
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.seg.is_leader() && !self.seg.is_unlinked() {
            crate::help::abandon(&self.seg);
        }
    }
}

/// Something in our FIFO that the protocol never produces: a peer is broken or
/// another program writes into the segment. Reported once per occurrence; the
/// value is dropped (returning it could free a fragment twice).
fn corrupt(what: &str) {
    mca::help::show_help(crate::help::HELP, "corrupt fifo", true, &[what]);
}
