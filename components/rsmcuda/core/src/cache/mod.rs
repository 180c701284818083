//! Cache of remote GPU allocations opened through CUDA IPC.
//!
//! Opening a peer's IPC handle costs tens of microseconds, so the receiver of an RGET
//! keeps mappings open. Entries are keyed by (peer, allocation base) and remember the
//! 64-byte handle they were opened with. A kept mapping also keeps the peer's memory
//! alive after the peer frees it (the driver frees device memory once nothing maps
//! it), and no driver call tells the receiver about that free: what the cache keeps of
//! freed allocations is bounded by the rules below, not by the peer.
//!
//! Rules (each tested against a fake GPU in `tests.rs`):
//! - A lookup with the same handle is a hit and takes a reference; no driver call.
//! - A lookup for an allocation `[base, base + size)` that any other mapping of the same
//!   peer overlaps (a *different* handle at the same base, or another base in the
//!   range) means the peer freed that memory and allocated this: every such mapping is
//!   stale; it is closed now if unused, or as soon as its last user releases it, and the
//!   new handle is opened. (Two live allocations of one process never overlap.)
//! - A mapping is kept after its release only once its allocation proved reused
//!   (`keep_first_use` off, the default): the first lookup of a handle opens a mapping
//!   that is closed when released, and the cache remembers the allocation (the last
//!   [`SEEN_MAX`] of them); a second lookup, while the first is in use or after it was
//!   closed, keeps it. A buffer sent once and then freed (cudaMalloc, send, cudaFree,
//!   over and over: Open MPI issue #12971) is never held after its transfer.
//! - The peer's release notice (it freed an allocation it exported,
//!   [`RemoteCache::peer_released`]) closes the mapping of that handle, now if unused or
//!   at its last release; this is what keeps a buffer read twice or more from being held
//!   after its owner frees it.
//! - A mapping in use (references > 0) is never closed.
//! - Released mappings stay open and are evicted in true least-recently-released order
//!   when the byte limit needs room (the C rgpusm prepends released entries and evicts the
//!   first one, i.e. the *most* recently released).
//! - `cached_bytes() <= size_limit` at all times (0 = unlimited). A mapping that cannot fit
//!   even after evicting every released one (the in-use ones fill the budget, or it is
//!   larger than the limit) is still opened, so the transfer proceeds, but it is
//!   *uncached*: it does not count against the limit and is closed when released.
//! - ALREADY_MAPPED from the driver: close the released mappings of that peer overlapping
//!   the new range and retry; then close least-recently-released mappings one at a time,
//!   retrying after each; fail when none is left.
//! - Dropping the cache closes everything it opened.

mod driver;
mod stats;

#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod tests;

pub use driver::{IpcDriver, IpcHandle, OpenError};
pub use stats::CacheStats;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;

/// Identifies the peer process (its local rank).
pub type PeerId = u32;

/// Allocations used once that the cache remembers, so that a second use keeps them.
pub const SEEN_MAX: usize = 256;

/// A reference taken by [`RemoteCache::lookup`]; give it back with [`RemoteCache::release`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MappingId(u64);

/// Result of a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub id: MappingId,
    /// Local address of the remote allocation's base: the copy source for remote address
    /// `a` is `mapped_base + (a - base)`.
    pub mapped_base: u64,
    /// Served without opening.
    pub hit: bool,
}

/// Cache settings (`rcache_rgpusm_*`-like MCA parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// Bytes of released-and-kept plus in-use mappings; 0 = unlimited.
    pub size_limit: u64,
    /// Keep mappings open after release (`leave_pinned`); false closes at release.
    pub keep_released: bool,
    /// With `keep_released`: keep a mapping after its first use too (the C rgpusm's
    /// way), instead of only once its allocation is looked up again.
    pub keep_first_use: bool,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            size_limit: 0,
            keep_released: true,
            keep_first_use: false,
        }
    }
}

/// Errors of the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheError {
    /// The driver could not open the handle (after the ALREADY_MAPPED recovery).
    Open(OpenError),
    /// A zero-length allocation cannot be mapped.
    ZeroSize,
    /// The id is not a mapping of this cache (or was fully released and closed).
    UnknownMapping(MappingId),
    /// Released more often than looked up.
    NotInUse(MappingId),
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::Open(e) => write!(f, "cannot open remote GPU memory: {e}"),
            CacheError::ZeroSize => f.write_str("remote GPU allocation of size 0"),
            CacheError::UnknownMapping(id) => write!(f, "unknown mapping {id:?}"),
            CacheError::NotInUse(id) => write!(f, "mapping {id:?} released more than taken"),
        }
    }
}

impl std::error::Error for CacheError {}

#[derive(Clone, Debug)]
struct Entry {
    peer: PeerId,
    base: u64,
    size: u64,
    handle: IpcHandle,
    mapped: u64,
    refs: u32,
    /// Counts against the limit and survives release.
    cached: bool,
    /// Used once so far (and not kept): remembered in `seen` when closed at release,
    /// kept if looked up again while open.
    first_use: bool,
    /// Still reachable through the index (false once stale or cleared while in use).
    indexed: bool,
    /// Position in the LRU list while released.
    stamp: Option<u64>,
}

/// The remote memory-handle cache of one BTL module (all peers).
#[derive(Debug)]
pub struct RemoteCache<D: IpcDriver> {
    driver: D,
    cfg: CacheConfig,
    entries: HashMap<u64, Entry>,
    // INVARIANT: index maps (peer, base) to an entry with indexed == true and that key;
    // every indexed entry appears exactly once.
    index: BTreeMap<(PeerId, u64), u64>,
    // INVARIANT: lru holds exactly the entries with refs == 0 (all cached and indexed),
    // keyed by their release stamp, oldest first.
    lru: BTreeMap<u64, u64>,
    // INVARIANT: cached_bytes == sum of size over cached entries <= cfg.size_limit when
    // the limit is non-zero.
    cached_bytes: u64,
    next_id: u64,
    next_stamp: u64,
    stats: CacheStats,
    /// Allocations closed after one use, oldest first: (peer, base, size, handle); at
    /// most one per (peer, base), at most SEEN_MAX in all.
    seen: VecDeque<(PeerId, u64, u64, IpcHandle)>,
}

impl<D: IpcDriver> RemoteCache<D> {
    #[must_use]
    pub fn new(driver: D, cfg: CacheConfig) -> Self {
        RemoteCache {
            driver,
            cfg,
            entries: HashMap::new(),
            index: BTreeMap::new(),
            lru: BTreeMap::new(),
            cached_bytes: 0,
            next_id: 0,
            next_stamp: 0,
            stats: CacheStats::default(),
            seen: VecDeque::new(),
        }
    }

    /// Map the peer's allocation `[base, base + size)` exported as `handle`, taking a
    /// reference. `base`/`size` are the exporter's `cuMemGetAddressRange` of the buffer.
    pub fn lookup(
        &mut self,
        peer: PeerId,
        base: u64,
        size: u64,
        handle: &IpcHandle,
    ) -> Result<Mapping, CacheError> {
        if size == 0 {
            return Err(CacheError::ZeroSize);
        }
        if let Some(&id) = self.index.get(&(peer, base)) {
            let e = &self.entries[&id];
            if e.handle == *handle && e.size == size {
                return Ok(self.take(id));
            }
        }
        // Whatever of this peer the new allocation overlaps was freed.
        for id in self.overlapping(peer, base, size) {
            self.stats.stale += 1;
            self.detach(id);
        }
        self.stats.misses += 1;
        if self.cfg.size_limit > 0 {
            while self.cached_bytes + size > self.cfg.size_limit && self.evict_oldest() {}
        }
        let mapped = self.open(peer, base, size, handle)?;
        let reused = self.forget_seen(peer, base) == Some((size, *handle));
        let keep = self.cfg.keep_released && (self.cfg.keep_first_use || reused);
        let cached = keep && self.fits(size);
        if cached {
            self.cached_bytes += size;
        } else if keep || !self.cfg.keep_released {
            self.stats.uncached += 1;
        }
        let first_use = self.cfg.keep_released && !keep;
        let id = self.next_id;
        self.next_id += 1;
        self.entries.insert(
            id,
            Entry {
                peer,
                base,
                size,
                handle: *handle,
                mapped,
                refs: 1,
                cached,
                first_use,
                indexed: true,
                stamp: None,
            },
        );
        self.index.insert((peer, base), id);
        Ok(Mapping {
            id: MappingId(id),
            mapped_base: mapped,
            hit: false,
        })
    }

    /// Give back a reference. The mapping stays open for later hits unless it is stale,
    /// uncached, or the cache does not keep released mappings.
    pub fn release(&mut self, id: MappingId) -> Result<(), CacheError> {
        let e = self
            .entries
            .get_mut(&id.0)
            .ok_or(CacheError::UnknownMapping(id))?;
        if e.refs == 0 {
            return Err(CacheError::NotInUse(id));
        }
        e.refs -= 1;
        if e.refs > 0 {
            return Ok(());
        }
        if e.cached && e.indexed {
            let stamp = self.next_stamp;
            self.next_stamp += 1;
            e.stamp = Some(stamp);
            self.lru.insert(stamp, id.0);
        } else {
            if e.first_use && e.indexed {
                self.stats.first_use_closed += 1;
                let seen = (e.peer, e.base, e.size, e.handle);
                self.remember(seen);
            }
            self.close(id.0);
        }
        Ok(())
    }

    /// The peer freed the allocation it exported at `base` with `handle` (its release
    /// notice, [`crate::release`]): the mapping of that handle, if any, is closed now
    /// if unused, or at its last release, and the allocation is forgotten by the
    /// first-use memory. A mapping of the same base with another handle (the peer's
    /// newer allocation there) is left alone. Returns whether a mapping was found.
    pub fn peer_released(&mut self, peer: PeerId, base: u64, handle: &IpcHandle) -> bool {
        if let Some(at) = self
            .seen
            .iter()
            .position(|s| (s.0, s.1) == (peer, base) && s.3 == *handle)
        {
            self.seen.remove(at);
        }
        let Some(&id) = self.index.get(&(peer, base)) else {
            return false;
        };
        if self.entries[&id].handle != *handle {
            return false;
        }
        self.stats.peer_released += 1;
        self.detach(id);
        true
    }

    /// Close every released mapping; mappings in use are detached and close on release.
    pub fn clear(&mut self) {
        let ids: Vec<u64> = self.index.values().copied().collect();
        for id in ids {
            self.detach(id);
        }
    }

    /// Like [`RemoteCache::clear`] for one peer (it left the job).
    pub fn forget_peer(&mut self, peer: PeerId) {
        let ids: Vec<u64> = self
            .index
            .range((peer, 0)..=(peer, u64::MAX))
            .map(|(_, &id)| id)
            .collect();
        for id in ids {
            self.detach(id);
        }
    }

    #[must_use]
    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }

    /// Bytes counted against the limit.
    #[must_use]
    pub fn cached_bytes(&self) -> u64 {
        self.cached_bytes
    }

    /// Mappings currently open (cached, uncached, stale-in-use).
    #[must_use]
    pub fn open_mappings(&self) -> usize {
        self.entries.len()
    }

    /// Released mappings, least recently released first, as (peer, base).
    #[must_use]
    pub fn lru_order(&self) -> Vec<(PeerId, u64)> {
        self.lru
            .values()
            .map(|id| {
                let e = &self.entries[id];
                (e.peer, e.base)
            })
            .collect()
    }

    #[must_use]
    pub fn driver(&self) -> &D {
        &self.driver
    }

    fn take(&mut self, id: u64) -> Mapping {
        self.stats.hits += 1;
        let size = self.entries[&id].size;
        let fits = self.fits(size);
        let e = self.entries.get_mut(&id).expect("indexed entry exists");
        if let Some(stamp) = e.stamp.take() {
            self.lru.remove(&stamp);
        }
        if e.first_use {
            // Used again while open: kept from now on (if it fits under the limit).
            e.first_use = false;
            e.cached = fits;
            if fits {
                self.cached_bytes += size;
            } else {
                self.stats.uncached += 1;
            }
        }
        e.refs += 1;
        Mapping {
            id: MappingId(id),
            mapped_base: e.mapped,
            hit: true,
        }
    }

    /// Whether `size` more bytes stay within the limit.
    fn fits(&self, size: u64) -> bool {
        self.cfg.size_limit == 0 || self.cached_bytes + size <= self.cfg.size_limit
    }

    /// The indexed entries of `peer` overlapping `[base, base + size)`. Indexed entries
    /// of one peer never overlap each other (a new one detaches those it overlaps), so
    /// they are the last one starting below `base` if it reaches past it, and those
    /// starting inside the range.
    fn overlapping(&self, peer: PeerId, base: u64, size: u64) -> Vec<u64> {
        let end = base.saturating_add(size);
        let below = self
            .index
            .range((peer, 0)..(peer, base))
            .next_back()
            .filter(|(_, id)| {
                let e = &self.entries[*id];
                e.base.saturating_add(e.size) > base
            });
        below
            .into_iter()
            .chain(self.index.range((peer, base)..(peer, end)))
            .map(|(_, &id)| id)
            .collect()
    }

    /// Remembers an allocation closed after one use (replacing what was remembered at
    /// its (peer, base); the oldest goes beyond SEEN_MAX).
    fn remember(&mut self, seen: (PeerId, u64, u64, IpcHandle)) {
        self.forget_seen(seen.0, seen.1);
        if self.seen.len() == SEEN_MAX {
            self.seen.pop_front();
        }
        self.seen.push_back(seen);
    }

    /// Forgets what was remembered at (peer, base); returns its size and handle.
    fn forget_seen(&mut self, peer: PeerId, base: u64) -> Option<(u64, IpcHandle)> {
        let at = self.seen.iter().position(|s| (s.0, s.1) == (peer, base))?;
        self.seen.remove(at).map(|s| (s.2, s.3))
    }

    /// Remove from the index; close now if unused, else at the last release.
    fn detach(&mut self, id: u64) {
        let e = self.entries.get_mut(&id).expect("detached entry exists");
        self.index.remove(&(e.peer, e.base));
        e.indexed = false;
        if e.refs == 0 {
            self.close(id);
        }
    }

    fn evict_oldest(&mut self) -> bool {
        let Some((_, id)) = self.lru.pop_first() else {
            return false;
        };
        self.stats.evictions += 1;
        self.close(id);
        true
    }

    fn close(&mut self, id: u64) {
        let e = self.entries.remove(&id).expect("closed entry exists");
        debug_assert_eq!(e.refs, 0, "never close a mapping in use");
        if let Some(stamp) = e.stamp {
            self.lru.remove(&stamp);
        }
        if e.indexed {
            self.index.remove(&(e.peer, e.base));
        }
        if e.cached {
            self.cached_bytes -= e.size;
        }
        self.stats.closes += 1;
        self.driver.close_handle(e.mapped);
    }

    fn open(
        &mut self,
        peer: PeerId,
        base: u64,
        size: u64,
        handle: &IpcHandle,
    ) -> Result<u64, CacheError> {
        let mut tried_overlap = false;
        loop {
            match self.driver.open_handle(handle) {
                Ok(mapped) => {
                    self.stats.opens += 1;
                    return Ok(mapped);
                }
                Err(OpenError::Other(c)) => return Err(CacheError::Open(OpenError::Other(c))),
                Err(OpenError::AlreadyMapped) => {
                    self.stats.already_mapped += 1;
                    let progressed = if tried_overlap {
                        self.evict_oldest()
                    } else {
                        tried_overlap = true;
                        self.evict_overlapping(peer, base, size) || self.evict_oldest()
                    };
                    if !progressed {
                        return Err(CacheError::Open(OpenError::AlreadyMapped));
                    }
                }
            }
        }
    }

    /// Close the released mappings of `peer` overlapping `[base, base + size)`.
    fn evict_overlapping(&mut self, peer: PeerId, base: u64, size: u64) -> bool {
        let end = base.saturating_add(size);
        let victims: Vec<u64> = self
            .index
            .range((peer, 0)..(peer, end))
            .map(|(_, &id)| id)
            .filter(|id| {
                let e = &self.entries[id];
                e.refs == 0 && e.base.saturating_add(e.size) > base
            })
            .collect();
        for &id in &victims {
            self.stats.evictions += 1;
            self.close(id);
        }
        !victims.is_empty()
    }
}

impl<D: IpcDriver> Drop for RemoteCache<D> {
    /// Close everything, in use or not: after the cache is gone no reference can be
    /// released, and the driver must not keep the peer's memory alive (the glue drops the
    /// cache only once no copy is in flight).
    fn drop(&mut self) {
        let mut mapped: Vec<u64> = self.entries.values().map(|e| e.mapped).collect();
        mapped.sort_unstable();
        self.entries.clear();
        for m in mapped {
            self.stats.closes += 1;
            self.driver.close_handle(m);
        }
    }
}
