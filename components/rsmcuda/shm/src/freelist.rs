//! Fragment pools: owner-only allocation, fragment return as the ACK.
//!
//! Each rank owns two pools of fixed-size fragments in its region (eager and max). A
//! fragment is `FragHeader` + payload. Only the owner allocates, fills and posts its
//! fragments; a receiver reads one and gives it back by pushing an ACK (the fragment's own
//! offset, type ACK) into the owner's FIFO; the owner's progress loop then frees it with
//! [`FragPool::complete`].
//!
//! Since only the owner ever allocates or frees, the free lists need no atomics and no
//! shared state at all: they live in the owner's process ([`FragPool`], a LIFO stack per
//! pool, so the most recently returned — cache-hot — fragment is reused first). Keeping
//! them out of the segment also means a peer can never corrupt them; the per-fragment
//! state (free / owned / in flight) catches duplicate or forged ACKs.
//!
//! Trust model for the payload bytes: a fragment's payload is written only by its owner
//! while it holds the [`Frag`] token, and read only by the receiver between the SEND and
//! its ACK. Rust-level exclusivity inside a process comes from the token (not `Clone`) and
//! from [`Received`](crate::Received) (a SEND is handed out once); across processes it
//! relies on the peers running this same protocol, as with any shared memory.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use crate::error::FragError;
use crate::layout::{FRAG_HEADER_BYTES, PoolKind};
use crate::repr::FragHeader;
use crate::shared::SegShared;
use crate::value::{FifoKind, FifoValue};

static NEXT_POOL_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    Owned,
    InFlight,
}

fn kind_idx(kind: PoolKind) -> usize {
    match kind {
        PoolKind::Eager => 0,
        PoolKind::Max => 1,
    }
}

/// An allocated fragment not yet posted: the owner's exclusive right to fill it. Not
/// `Clone`; consumed by [`FragPool::post`] or [`FragPool::free`]. Dropping it leaks the
/// fragment until the segment goes away.
pub struct Frag {
    pool_id: u64,
    offset: u64,
    kind: PoolKind,
    index: u32,
    capacity: u32,
}

impl Frag {
    /// Segment-relative offset of the fragment (its header).
    pub fn offset(&self) -> u64 {
        self.offset
    }
    /// Which pool.
    pub fn kind(&self) -> PoolKind {
        self.kind
    }
    /// Index inside the pool (dense: usable to index the glue's descriptor table).
    pub fn index(&self) -> u32 {
        self.index
    }
    /// Payload capacity in bytes.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }
}

impl fmt::Debug for Frag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Frag")
            .field("offset", &format_args!("{:#x}", self.offset))
            .field("kind", &self.kind)
            .field("index", &self.index)
            .finish()
    }
}

/// What came back with an ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckInfo {
    /// The fragment's offset.
    pub offset: u64,
    /// Its pool.
    pub kind: PoolKind,
    /// Its index in the pool.
    pub index: u32,
    /// False if the receiver set the status bit (it could not deliver the fragment).
    pub ok: bool,
}

/// A rank's own fragment pools (one per rank per segment, see `Segment::frag_pool`).
pub struct FragPool {
    seg: Arc<SegShared>,
    rank: u32,
    id: u64,
    free: [Vec<u32>; 2],
    state: [Vec<State>; 2],
    in_flight: u32,
}

impl fmt::Debug for FragPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FragPool")
            .field("rank", &self.rank)
            .field("free_eager", &self.free[0].len())
            .field("free_max", &self.free[1].len())
            .field("in_flight", &self.in_flight)
            .finish()
    }
}

impl FragPool {
    pub(crate) fn new(seg: Arc<SegShared>, rank: u32) -> Self {
        let count = |k| seg.layout.frag_count(k);
        let (ne, nm) = (count(PoolKind::Eager), count(PoolKind::Max));
        Self {
            rank,
            id: NEXT_POOL_ID.fetch_add(1, Relaxed),
            // Reversed so that index 0 is allocated first.
            free: [(0..ne).rev().collect(), (0..nm).rev().collect()],
            state: [
                vec![State::Free; ne as usize],
                vec![State::Free; nm as usize],
            ],
            in_flight: 0,
            seg,
        }
    }

    /// The owning rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// A fragment from the smallest pool that holds `len` bytes; `None` if `len` exceeds
    /// the max fragment size or that pool is exhausted (then progress and retry).
    pub fn alloc(&mut self, len: usize) -> Option<Frag> {
        self.alloc_kind(self.seg.layout.pool_for(len)?)
    }

    /// A fragment from pool `kind`, if one is free.
    pub fn alloc_kind(&mut self, kind: PoolKind) -> Option<Frag> {
        let k = kind_idx(kind);
        let index = self.free[k].pop()?;
        debug_assert_eq!(self.state[k][index as usize], State::Free);
        self.state[k][index as usize] = State::Owned;
        Some(Frag {
            pool_id: self.id,
            offset: self.seg.layout.frag_off(self.rank, kind, index),
            kind,
            index,
            capacity: self.seg.layout.frag_capacity(kind),
        })
    }

    fn check_token(&self, frag: &Frag) {
        assert!(
            frag.pool_id == self.id
                && self.state[kind_idx(frag.kind)][frag.index as usize] == State::Owned,
            "fragment token used with a pool that did not allocate it"
        );
    }

    /// The whole payload area of `frag` (its capacity) for the owner to fill.
    pub fn payload_mut<'f>(&'f self, frag: &'f mut Frag) -> &'f mut [u8] {
        self.check_token(frag);
        let len = frag.capacity as usize;
        let ptr = self.seg.map.bytes_ptr(frag.offset + FRAG_HEADER_BYTES, len);
        // SAFETY: the range is inside the mapping (bytes_ptr checks bounds), which lives as
        // long as `self` ('f). The fragment is Owned by this pool and `frag` is its only
        // token (tokens are not Clone, checked above to come from this pool), borrowed
        // mutably for 'f: no other reference to these bytes exists in this process, and
        // by the protocol no other process touches an unposted fragment.
        unsafe { std::slice::from_raw_parts_mut(ptr, len) }
    }

    /// Sets the header's free-for-the-glue word (read back with [`Incoming::user`]).
    pub fn set_user(&self, frag: &mut Frag, user: u64) {
        self.check_token(frag);
        self.header(frag.offset).user.store(user, Relaxed);
    }

    fn header(&self, off: u64) -> &FragHeader {
        self.seg.map.get::<FragHeader>(off)
    }

    /// Seals `frag` with `len` payload bytes and active-message `tag` and returns the SEND
    /// value to push into the receiver's FIFO. The fragment is in flight from now on (also
    /// while the value waits on a pending list because the FIFO was full) until its ACK is
    /// passed to [`complete`](Self::complete). If `len` exceeds the capacity the fragment
    /// is freed and an error returned.
    pub fn post(&mut self, frag: Frag, len: usize, tag: u8) -> Result<FifoValue, FragError> {
        self.check_token(&frag);
        if len > frag.capacity as usize {
            let err = FragError::BadLength {
                offset: frag.offset,
                len: len as u64,
                capacity: frag.capacity,
            };
            self.free(frag);
            return Err(err);
        }
        let h = self.header(frag.offset);
        // The identity words too, every time: nothing writes a header before its first
        // post (a new segment is left as zeros, so that unused fragments cost no memory),
        // and they share the cache line that len and tag dirty anyway.
        h.self_offset.store(frag.offset, Relaxed);
        h.owner.store(self.rank, Relaxed);
        h.len.store(len as u32, Relaxed);
        h.tag.store(u32::from(tag), Relaxed);
        // These Relaxed stores (and the payload) are published by the FIFO push's Release.
        self.state[kind_idx(frag.kind)][frag.index as usize] = State::InFlight;
        self.in_flight += 1;
        Ok(FifoValue::send(frag.offset))
    }

    /// Returns an unposted fragment to its pool.
    pub fn free(&mut self, frag: Frag) {
        self.check_token(&frag);
        let k = kind_idx(frag.kind);
        self.state[k][frag.index as usize] = State::Free;
        self.free[k].push(frag.index);
    }

    /// Takes back a fragment announced by an ACK popped from this rank's FIFO.
    pub fn complete(&mut self, ack: FifoValue) -> Result<AckInfo, FragError> {
        let info = self.acknowledged(ack)?;
        let k = kind_idx(info.kind);
        self.state[k][info.index as usize] = State::Free;
        self.free[k].push(info.index);
        Ok(info)
    }

    /// Like [`complete`](Self::complete), but the fragment stays allocated: the returned
    /// token is the owner's again (to `free` later, or to fill and `post` anew). For a
    /// glue whose upper layer keeps a descriptor bound to the fragment past its ACK.
    pub fn reclaim(&mut self, ack: FifoValue) -> Result<(Frag, AckInfo), FragError> {
        let info = self.acknowledged(ack)?;
        self.state[kind_idx(info.kind)][info.index as usize] = State::Owned;
        let frag = Frag {
            pool_id: self.id,
            offset: info.offset,
            kind: info.kind,
            index: info.index,
            capacity: self.seg.layout.frag_capacity(info.kind),
        };
        Ok((frag, info))
    }

    /// Validates an ACK for one of our in-flight fragments and ends its flight.
    fn acknowledged(&mut self, ack: FifoValue) -> Result<AckInfo, FragError> {
        if ack.kind() != FifoKind::Ack {
            return Err(FragError::NotAnAck(ack.raw()));
        }
        let offset = ack.offset();
        let loc = self
            .seg
            .layout
            .locate(offset)
            .ok_or(FragError::BadOffset(offset))?;
        if loc.owner != self.rank {
            return Err(FragError::NotMine {
                offset,
                owner: loc.owner,
            });
        }
        let k = kind_idx(loc.kind);
        let st = &mut self.state[k][loc.index as usize];
        if *st != State::InFlight {
            return Err(FragError::NotInFlight(offset));
        }
        // The caller sets the new state; until then it is neither free nor in flight.
        *st = State::Owned;
        self.in_flight -= 1;
        Ok(AckInfo {
            offset,
            kind: loc.kind,
            index: loc.index,
            ok: ack.ok(),
        })
    }

    /// Fragments posted and not yet acknowledged.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Free fragments in pool `kind`.
    pub fn available(&self, kind: PoolKind) -> usize {
        self.free[kind_idx(kind)].len()
    }
}

/// A received SEND: the peer's fragment, readable until [`into_ack`](Self::into_ack).
pub struct Incoming<'a> {
    seg: &'a SegShared,
    offset: u64,
    sender: u32,
    kind: PoolKind,
    len: u32,
    tag: u8,
    user: u64,
}

impl fmt::Debug for Incoming<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Incoming")
            .field("offset", &format_args!("{:#x}", self.offset))
            .field("sender", &self.sender)
            .field("len", &self.len)
            .field("tag", &self.tag)
            .finish()
    }
}

impl<'a> Incoming<'a> {
    pub(crate) fn validate(seg: &'a SegShared, v: FifoValue) -> Result<Self, FragError> {
        if v.kind() != FifoKind::Send {
            return Err(FragError::NotASend(v.raw()));
        }
        let offset = v.offset();
        let loc = seg
            .layout
            .locate(offset)
            .ok_or(FragError::BadOffset(offset))?;
        let h = seg.map.get::<FragHeader>(offset);
        if h.self_offset.load(Relaxed) != offset || h.owner.load(Relaxed) != loc.owner {
            return Err(FragError::CorruptHeader(offset));
        }
        let capacity = seg.layout.frag_capacity(loc.kind);
        let len = h.len.load(Relaxed);
        if len > capacity {
            return Err(FragError::BadLength {
                offset,
                len: u64::from(len),
                capacity,
            });
        }
        let tag =
            u8::try_from(h.tag.load(Relaxed)).map_err(|_| FragError::CorruptHeader(offset))?;
        Ok(Self {
            seg,
            offset,
            sender: loc.owner,
            kind: loc.kind,
            len,
            tag,
            user: h.user.load(Relaxed),
        })
    }

    /// The sending (owning) rank, derived from where the fragment is, checked against its
    /// header.
    pub fn sender(&self) -> u32 {
        self.sender
    }
    /// Active-message tag.
    pub fn tag(&self) -> u8 {
        self.tag
    }
    /// Payload length.
    pub fn len(&self) -> usize {
        self.len as usize
    }
    /// True if the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The glue's header word set with [`FragPool::set_user`].
    pub fn user(&self) -> u64 {
        self.user
    }
    /// The fragment's offset.
    pub fn offset(&self) -> u64 {
        self.offset
    }
    /// Its pool.
    pub fn kind(&self) -> PoolKind {
        self.kind
    }
    /// The payload.
    pub fn payload(&self) -> &[u8] {
        let ptr = self
            .seg
            .map
            .bytes_ptr(self.offset + FRAG_HEADER_BYTES, self.len as usize);
        // SAFETY: in bounds (bytes_ptr checks; len <= capacity was validated). The mapping
        // outlives 'a >= the borrow of self. The sender filled these bytes before its FIFO
        // push (Release) which our pop observed (Acquire), and by the protocol it does not
        // touch them again until the ACK, which can only be produced by consuming `self`
        // (`into_ack`), ending this borrow; this Incoming came from a `Received` taken by
        // value, so no second one for the same SEND exists in this process.
        unsafe { std::slice::from_raw_parts(ptr, self.len as usize) }
    }
    /// Ends the receive: returns the owner's rank and the ACK to push into its FIFO
    /// (`ok == false` sets the status bit: "could not deliver").
    pub fn into_ack(self, ok: bool) -> (u32, FifoValue) {
        (self.sender, FifoValue::ack(self.offset, ok))
    }
}
