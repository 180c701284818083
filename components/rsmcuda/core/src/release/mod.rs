//! Release notices: the owner of a device allocation it exported through CUDA IPC tells
//! the peers that received its handle once it has freed it, so that they close their
//! mapping (sans-IO).
//!
//! A peer's mapping keeps the owner's device memory alive after the owner frees it (the
//! driver frees device memory once nothing maps it), and no driver call tells the peer
//! about the free. The owner can find out: `CU_POINTER_ATTRIBUTE_BUFFER_ID` of the
//! allocation's base fails (or reads as host memory) once it is freed, and reads a new id
//! once the address is allocated again. [`Exports`] keeps, per allocation exported (its
//! base), the buffer id it had and the peers its handle was given to, and decides when
//! to look again, so that the steady state costs no driver call:
//!
//! - exporting an allocation already known (same base, same buffer id): no check;
//! - exporting a new allocation: every known allocation it overlaps is freed (two live
//!   allocations never overlap), and up to [`CHECKS_PER_EXPORT`] other known ones are
//!   checked, round robin;
//! - progress with nothing to do calls [`Exports::on_idle`] once in
//!   [`IDLE_PASSES_PER_CHECK`] passes ([`idle_check_due`]): one allocation checked, at
//!   first on every such call, then, while checks find everything alive, on every 2nd,
//!   4th, ... up to every [`MAX_IDLE_BACKOFF`]th (a ping-pong of long-lived buffers
//!   settles there); a new allocation exported, or one found freed, starts over.
//!
//! Each freed allocation becomes one notice per peer its handle went to, carried in
//! [`ReleaseMsg`]s (up to [`MAX_PER_MESSAGE`] regions each) on the handshake's
//! control tag; the receiver's cache closes the mapping of exactly that handle
//! (`RemoteCache::peer_released`), now if unused or at its last release. A notice for
//! an allocation still alive (an error of the check, or the table over
//! [`MAX_EXPORTS`]) only costs the peer one IPC open at its next use.
//!
//! Wire format of a [`ReleaseMsg`] (little endian): the sender's local rank (4 bytes),
//! the kind [`RELEASE_KIND`] (4 bytes, where a handshake envelope has its message kind,
//! 10..=13), the count (4 bytes), then `count` registration handles of 80 bytes
//! ([`crate::reg`]: IPC handle, base, size) as the owner exported them.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::ops::Bound::{Excluded, Unbounded};

use crate::reg::{self, DeviceRegion, REG_HANDLE_LEN, RemoteMemory};

#[cfg(test)]
mod tests;

/// The kind word of a release message (bytes 4..8, as a handshake envelope's kind).
pub const RELEASE_KIND: u32 = 14;
/// Sender, kind, count.
pub const HEADER_LEN: usize = 12;
/// Bytes per released region.
pub const ENTRY_LEN: usize = REG_HANDLE_LEN;
/// Regions in one message at most (1292 bytes: within any eager fragment rsmcuda
/// accepts; fewer when the fragment is smaller, see [`max_per_message`]).
pub const MAX_PER_MESSAGE: usize = 16;
/// Known allocations checked when a new one is exported.
pub const CHECKS_PER_EXPORT: usize = 8;
/// Idle progress passes between two checks of one known allocation.
pub const IDLE_PASSES_PER_CHECK: u32 = 2048;
/// The most idle calls between two idle checks once everything checked was alive.
pub const MAX_IDLE_BACKOFF: u32 = 64;
/// Allocations tracked at most; beyond, the oldest is announced as released (its
/// peers close their mapping if unused, and reopen it at their next use).
pub const MAX_EXPORTS: usize = 4096;

/// Whether idle pass number `pass` (counted by the glue) is due a check.
#[must_use]
pub fn idle_check_due(pass: u32) -> bool {
    pass.is_multiple_of(IDLE_PASSES_PER_CHECK)
}

/// How many regions fit in a message of at most `capacity` bytes.
#[must_use]
pub fn max_per_message(capacity: usize) -> usize {
    (capacity.saturating_sub(HEADER_LEN) / ENTRY_LEN).min(MAX_PER_MESSAGE)
}

/// Whether control bytes are a release message (not a handshake envelope).
#[must_use]
pub fn is_release(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[4..8] == RELEASE_KIND.to_le_bytes()
}

/// "I freed these allocations I exported to you."
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReleaseMsg {
    /// The owner's local rank.
    pub from: u32,
    pub regions: Vec<DeviceRegion>,
}

/// Bytes that are not a release message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseDecodeError {
    /// Not the release kind, or shorter than the header.
    NotRelease,
    /// The length does not match the count (or the count is 0).
    Length { count: u32, len: usize },
    /// A region that is not a device allocation.
    Region(usize),
}

impl fmt::Display for ReleaseDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotRelease => f.write_str("not a CUDA IPC release message"),
            Self::Length { count, len } => write!(
                f,
                "CUDA IPC release message of {len} bytes for {count} region(s)"
            ),
            Self::Region(i) => write!(
                f,
                "CUDA IPC release message: region {i} is not a device allocation"
            ),
        }
    }
}

impl std::error::Error for ReleaseDecodeError {}

impl ReleaseMsg {
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEADER_LEN + self.regions.len() * ENTRY_LEN);
        b.extend_from_slice(&self.from.to_le_bytes());
        b.extend_from_slice(&RELEASE_KIND.to_le_bytes());
        b.extend_from_slice(&(self.regions.len() as u32).to_le_bytes());
        for r in &self.regions {
            b.extend_from_slice(&r.encode());
        }
        b
    }

    pub fn decode(bytes: &[u8]) -> Result<ReleaseMsg, ReleaseDecodeError> {
        if bytes.len() < HEADER_LEN || !is_release(bytes) {
            return Err(ReleaseDecodeError::NotRelease);
        }
        let word = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        let (from, count) = (word(0), word(8));
        let body = &bytes[HEADER_LEN..];
        if count == 0 || body.len() != count as usize * ENTRY_LEN {
            return Err(ReleaseDecodeError::Length {
                count,
                len: bytes.len(),
            });
        }
        let regions = body
            .chunks_exact(ENTRY_LEN)
            .enumerate()
            .map(
                |(i, c)| match reg::decode(c.try_into().expect("ENTRY_LEN bytes")) {
                    Ok(RemoteMemory::Device(r)) => Ok(r),
                    _ => Err(ReleaseDecodeError::Region(i)),
                },
            )
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ReleaseMsg { from, regions })
    }
}

/// What a check of an allocation's base found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Device memory with this buffer id.
    Id(u64),
    /// Not device memory any more (freed; the driver does not know the address).
    Gone,
    /// The driver could not say (an error other than an unknown address): keep it.
    Unknown,
}

/// Settings fixed at init.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportsConfig {
    /// This process's local rank.
    pub my_rank: u32,
    /// Ranks on the node.
    pub nranks: u32,
    pub checks_per_export: usize,
    pub max_exports: usize,
}

impl ExportsConfig {
    /// The defaults above for `my_rank` among `nranks`.
    #[must_use]
    pub fn new(my_rank: u32, nranks: u32) -> ExportsConfig {
        ExportsConfig {
            my_rank,
            nranks,
            checks_per_export: CHECKS_PER_EXPORT,
            max_exports: MAX_EXPORTS,
        }
    }
}

/// Counters (for MPI_T and the tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Allocations started being tracked (exported with a new buffer id).
    pub tracked: u64,
    /// Exports of an allocation already tracked (no check).
    pub known: u64,
    /// Driver checks of a tracked allocation.
    pub checks: u64,
    /// Allocations found freed (by a check, or overlapped by a new export).
    pub freed: u64,
    /// Allocations announced as released while maybe alive (the table was full).
    pub overflow: u64,
    /// Regions queued to peers (one per freed allocation and peer).
    pub notices: u64,
}

#[derive(Clone, Debug)]
struct Export {
    id: u64,
    region: DeviceRegion,
    /// Local ranks its handle went to.
    peers: BTreeSet<u32>,
    /// The handle went to a peer the glue could not name: announce to every rank.
    everyone: bool,
    /// Order of tracking (the oldest goes first beyond `max_exports`).
    seq: u64,
}

/// The allocations this process exported and the notices owed to peers.
#[derive(Debug)]
pub struct Exports {
    cfg: ExportsConfig,
    /// By base.
    entries: BTreeMap<u64, Export>,
    /// Base of the last allocation checked (the round robin goes on after it).
    cursor: u64,
    next_seq: u64,
    /// Regions to announce, per peer, oldest first.
    out: BTreeMap<u32, VecDeque<DeviceRegion>>,
    queued: usize,
    /// Idle calls to let pass before the next idle check, and how many passed.
    idle_every: u32,
    idle_calls: u32,
    stats: ExportStats,
}

impl Exports {
    #[must_use]
    pub fn new(cfg: ExportsConfig) -> Exports {
        Exports {
            cfg,
            entries: BTreeMap::new(),
            cursor: 0,
            next_seq: 0,
            out: BTreeMap::new(),
            queued: 0,
            idle_every: 1,
            idle_calls: 0,
            stats: ExportStats::default(),
        }
    }

    /// `region` (buffer id `id`) was exported for `peer` (None: a peer the glue could
    /// not name). Checks other allocations only when this one is new, through `probe`
    /// (called with an allocation's base); returns the checks made.
    pub fn exported(
        &mut self,
        peer: Option<u32>,
        region: DeviceRegion,
        id: u64,
        mut probe: impl FnMut(u64) -> Probe,
    ) -> usize {
        if let Some(e) = self.entries.get_mut(&region.base)
            && e.id == id
            && e.region == region
        {
            Self::add_peer(e, peer);
            self.stats.known += 1;
            return 0;
        }
        // A new allocation: whatever it overlaps was freed.
        for base in self.overlapping(region.base, region.size) {
            self.free(base);
        }
        let mut e = Export {
            id,
            region,
            peers: BTreeSet::new(),
            everyone: false,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        Self::add_peer(&mut e, peer);
        self.entries.insert(region.base, e);
        self.stats.tracked += 1;
        self.idle_every = 1;
        while self.entries.len() > self.cfg.max_exports.max(1) {
            let oldest = self
                .entries
                .iter()
                .filter(|(b, _)| **b != region.base)
                .min_by_key(|(_, e)| e.seq)
                .map(|(b, _)| *b)
                .expect("more than one entry");
            self.stats.overflow += 1;
            self.free(oldest);
        }
        self.check(self.cfg.checks_per_export, Some(region.base), &mut probe)
    }

    /// Progress had nothing to do (and [`idle_check_due`]): one allocation checked,
    /// or none while backing off (see the module's rules); returns the checks made.
    pub fn on_idle(&mut self, mut probe: impl FnMut(u64) -> Probe) -> usize {
        self.idle_calls += 1;
        if self.idle_calls < self.idle_every {
            return 0;
        }
        self.idle_calls = 0;
        let freed = self.stats.freed;
        let n = self.check(1, None, &mut probe);
        self.idle_every = if self.stats.freed > freed {
            1
        } else {
            (self.idle_every * 2).min(MAX_IDLE_BACKOFF)
        };
        n
    }

    /// The next notices for one peer, at most `max` regions (None: nothing owed).
    pub fn next_batch(&mut self, max: usize) -> Option<(u32, Vec<DeviceRegion>)> {
        let max = max.max(1);
        let (&peer, q) = self.out.iter_mut().find(|(_, q)| !q.is_empty())?;
        let n = q.len().min(max);
        let regions: Vec<DeviceRegion> = q.drain(..n).collect();
        self.queued -= n;
        if q.is_empty() {
            self.out.remove(&peer);
        }
        Some((peer, regions))
    }

    /// A batch from [`next_batch`](Self::next_batch) could not be sent: it goes first
    /// again.
    pub fn unsend(&mut self, peer: u32, regions: Vec<DeviceRegion>) {
        self.queued += regions.len();
        let q = self.out.entry(peer).or_default();
        for r in regions.into_iter().rev() {
            q.push_front(r);
        }
    }

    /// Regions queued to peers.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.queued
    }

    /// Allocations tracked.
    #[must_use]
    pub fn tracked(&self) -> usize {
        self.entries.len()
    }

    #[must_use]
    pub fn stats(&self) -> &ExportStats {
        &self.stats
    }

    fn add_peer(e: &mut Export, peer: Option<u32>) {
        match peer {
            Some(p) => {
                e.peers.insert(p);
            }
            None => e.everyone = true,
        }
    }

    /// Tracked allocations overlapping `[base, base + size)`: the last one starting
    /// below `base` if it reaches into the range, and those starting inside it
    /// (tracked ones never overlap each other).
    fn overlapping(&self, base: u64, size: u64) -> Vec<u64> {
        let end = base.saturating_add(size);
        let below = self
            .entries
            .range(..base)
            .next_back()
            .filter(|(_, e)| e.region.base.saturating_add(e.region.size) > base)
            .map(|(b, _)| *b);
        below
            .into_iter()
            .chain(self.entries.range(base..end).map(|(b, _)| *b))
            .collect()
    }

    /// Checks up to `n` tracked allocations other than `skip`, round robin.
    fn check(
        &mut self,
        n: usize,
        skip: Option<u64>,
        probe: &mut impl FnMut(u64) -> Probe,
    ) -> usize {
        // Every tracked allocation once, starting after the last one checked.
        let bases: Vec<u64> = self
            .entries
            .range((Excluded(self.cursor), Unbounded))
            .chain(self.entries.range(..=self.cursor))
            .map(|(b, _)| *b)
            .filter(|b| Some(*b) != skip)
            .take(n)
            .collect();
        if let Some(&last) = bases.last() {
            self.cursor = last;
        }
        for &b in &bases {
            self.stats.checks += 1;
            let id = self.entries[&b].id;
            match probe(b) {
                Probe::Id(now) if now == id => {}
                Probe::Unknown => {}
                Probe::Id(_) | Probe::Gone => self.free(b),
            }
        }
        bases.len()
    }

    /// The allocation at `base` is gone: a notice to each peer its handle went to.
    fn free(&mut self, base: u64) {
        let Some(e) = self.entries.remove(&base) else {
            return;
        };
        self.stats.freed += 1;
        let me = self.cfg.my_rank;
        let to: Vec<u32> = if e.everyone {
            (0..self.cfg.nranks).filter(|&r| r != me).collect()
        } else {
            e.peers.iter().copied().filter(|&r| r != me).collect()
        };
        for peer in to {
            self.out.entry(peer).or_default().push_back(e.region);
            self.queued += 1;
            self.stats.notices += 1;
        }
    }
}
