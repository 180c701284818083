//! Scenario tests and a randomized comparison against a naive reference model, all on a
//! fake GPU that refuses double closes and reports leaks.

use super::fake::{FakeGpu, INVALID_HANDLE};
use super::*;
use seeded_rng::Rng;

const MB: u64 = 1 << 20;

/// A cache that keeps mappings from their first use (the rules other than
/// `keep_first_use` are easier to see that way).
fn cache(gpu: &FakeGpu, size_limit: u64) -> RemoteCache<FakeGpu> {
    RemoteCache::new(
        gpu.clone(),
        CacheConfig {
            size_limit,
            keep_released: true,
            keep_first_use: true,
        },
    )
}

#[test]
fn hits_do_not_reopen() {
    let gpu = FakeGpu::default();
    let h = gpu.alloc(1, 0x1000_0000, MB);
    let mut c = cache(&gpu, 0);
    let m1 = c.lookup(1, 0x1000_0000, MB, &h).unwrap();
    assert!(!m1.hit);
    let m2 = c.lookup(1, 0x1000_0000, MB, &h).unwrap();
    assert!(m2.hit && m2.mapped_base == m1.mapped_base && m2.id == m1.id);
    c.release(m1.id).unwrap();
    c.release(m2.id).unwrap();
    assert_eq!(c.release(m2.id), Err(CacheError::NotInUse(m2.id)));
    let m3 = c.lookup(1, 0x1000_0000, MB, &h).unwrap();
    assert!(m3.hit);
    assert_eq!((gpu.opens(), c.stats().hits, c.stats().misses), (1, 2, 1));
    // Same base, other peer: a different allocation.
    let h2 = gpu.alloc(2, 0x1000_0000, MB);
    assert!(!c.lookup(2, 0x1000_0000, MB, &h2).unwrap().hit);
    drop(c);
    assert_eq!(gpu.open_count(), 0, "drop closes everything, in use or not");
}

#[test]
fn reallocation_at_the_same_base_is_detected_as_stale() {
    let gpu = FakeGpu::default();
    let mut c = cache(&gpu, 0);
    let old = gpu.alloc(0, 0x2000_0000, MB);
    let m = c.lookup(0, 0x2000_0000, MB, &old).unwrap();
    c.release(m.id).unwrap();
    gpu.free(&old);
    let new = gpu.alloc(0, 0x2000_0000, MB);
    let n = c.lookup(0, 0x2000_0000, MB, &new).unwrap();
    assert!(!n.hit && n.mapped_base != m.mapped_base);
    assert!(!gpu.is_open(m.mapped_base), "the stale mapping was closed");
    assert_eq!((c.stats().stale, gpu.open_count()), (1, 1));
    // The released id of the stale entry is gone.
    assert_eq!(c.release(m.id), Err(CacheError::UnknownMapping(m.id)));
    // Looking up with the freed handle now fails cleanly (and evicts the valid entry's
    // index slot only if unused: it is in use here).
    assert_eq!(
        c.lookup(0, 0x2000_0000, MB, &old),
        Err(CacheError::Open(OpenError::Other(INVALID_HANDLE)))
    );
    assert!(
        gpu.is_open(n.mapped_base),
        "an in-use mapping is never closed"
    );
    c.release(n.id).unwrap();
    assert_eq!(c.release(n.id), Err(CacheError::UnknownMapping(n.id)));
}

#[test]
fn stale_entry_in_use_is_closed_only_at_release() {
    let gpu = FakeGpu::default();
    let mut c = cache(&gpu, 0);
    let old = gpu.alloc(0, 0x3000_0000, MB);
    let m = c.lookup(0, 0x3000_0000, MB, &old).unwrap();
    gpu.free(&old);
    let new = gpu.alloc(0, 0x3000_0000, MB);
    // The old mapping still overlaps and cannot be evicted while in use.
    assert_eq!(
        c.lookup(0, 0x3000_0000, MB, &new),
        Err(CacheError::Open(OpenError::AlreadyMapped))
    );
    assert!(gpu.is_open(m.mapped_base));
    c.release(m.id).unwrap();
    assert!(
        !gpu.is_open(m.mapped_base),
        "detached stale entry closes at release"
    );
    assert!(!c.lookup(0, 0x3000_0000, MB, &new).unwrap().hit);
}

#[test]
fn eviction_is_least_recently_released_first() {
    let gpu = FakeGpu::default();
    let mut c = cache(&gpu, 3 * MB);
    let hs: Vec<IpcHandle> = (0..5).map(|i| gpu.alloc(0, i * 0x1000_0000, MB)).collect();
    let ms: Vec<Mapping> = (0..3)
        .map(|i| c.lookup(0, i as u64 * 0x1000_0000, MB, &hs[i]).unwrap())
        .collect();
    for i in [1, 0, 2] {
        c.release(ms[i].id).unwrap();
    }
    assert_eq!(c.lru_order(), [(0, 0x1000_0000), (0, 0), (0, 0x2000_0000)]);
    let m3 = c.lookup(0, 0x3000_0000, MB, &hs[3]).unwrap();
    assert!(
        !gpu.is_open(ms[1].mapped_base),
        "the least recently released goes first"
    );
    assert!(gpu.is_open(ms[0].mapped_base) && gpu.is_open(ms[2].mapped_base));
    // A hit takes entry 0 out of the list; releasing it makes it the most recent.
    let again = c.lookup(0, 0, MB, &hs[0]).unwrap();
    assert!(again.hit);
    c.release(again.id).unwrap();
    assert_eq!(c.lru_order(), [(0, 0x2000_0000), (0, 0)]);
    c.lookup(0, 0x4000_0000, MB, &hs[4]).unwrap();
    assert!(!gpu.is_open(ms[2].mapped_base));
    assert!(gpu.is_open(ms[0].mapped_base));
    assert_eq!(c.stats().evictions, 2);
    assert!(c.cached_bytes() <= 3 * MB);
    c.release(m3.id).unwrap();
}

#[test]
fn mappings_beyond_the_limit_are_opened_uncached() {
    let gpu = FakeGpu::default();
    let mut c = cache(&gpu, 2 * MB);
    let big = gpu.alloc(0, 0, 4 * MB);
    let a = gpu.alloc(0, 0x1000_0000, 2 * MB);
    let b = gpu.alloc(1, 0, MB);
    let ma = c.lookup(0, 0x1000_0000, 2 * MB, &a).unwrap();
    let mb = c.lookup(1, 0, MB, &b).unwrap(); // in-use a fills the budget
    assert_eq!((c.cached_bytes(), c.stats().uncached), (2 * MB, 1));
    let mbig = c.lookup(0, 0, 4 * MB, &big).unwrap();
    assert_eq!((c.cached_bytes(), c.stats().uncached), (2 * MB, 2));
    c.release(mb.id).unwrap();
    c.release(mbig.id).unwrap();
    assert!(!gpu.is_open(mb.mapped_base) && !gpu.is_open(mbig.mapped_base));
    c.release(ma.id).unwrap();
    assert!(
        gpu.is_open(ma.mapped_base),
        "cached entries survive release"
    );
    assert_eq!(c.lru_order(), [(0, 0x1000_0000)]);
}

#[test]
fn a_new_allocation_overlapping_a_mapping_at_another_base_makes_it_stale() {
    let gpu = FakeGpu::default();
    let mut c = cache(&gpu, 0);
    let x = gpu.alloc(0, 0x1000, 0x2000);
    let other = gpu.alloc(0, 0x10_0000, 0x1000);
    let mx = c.lookup(0, 0x1000, 0x2000, &x).unwrap();
    let mo = c.lookup(0, 0x10_0000, 0x1000, &other).unwrap();
    c.release(mo.id).unwrap();
    c.release(mx.id).unwrap();
    gpu.free(&x);
    // The peer reuses part of x's range at a different base: x was freed, so its
    // mapping is closed before the new one is opened (the driver is not asked to map
    // an overlapping range).
    let y = gpu.alloc(0, 0x2000, 0x2000);
    let my = c.lookup(0, 0x2000, 0x2000, &y).unwrap();
    assert!(!gpu.is_open(mx.mapped_base), "overlapping entry closed");
    assert!(gpu.is_open(mo.mapped_base), "unrelated released entry kept");
    assert_eq!((c.stats().stale, c.stats().already_mapped), (1, 0));
    // One starting below the new range and reaching into it, too.
    gpu.free(&y);
    let z = gpu.alloc(0, 0x3000, 0x1000);
    c.release(my.id).unwrap();
    let mz = c.lookup(0, 0x3000, 0x1000, &z).unwrap();
    assert!(!gpu.is_open(my.mapped_base));
    assert_eq!(c.stats().stale, 2);
    c.release(mz.id).unwrap();
    // Another peer's mappings are other allocations.
    let w = gpu.alloc(1, 0x3000, 0x1000);
    let mw = c.lookup(1, 0x3000, 0x1000, &w).unwrap();
    assert!(gpu.is_open(mz.mapped_base) && c.stats().stale == 2);
    c.release(mw.id).unwrap();
}

#[test]
fn already_mapped_by_a_stale_mapping_in_use_evicts_released_ones_then_fails() {
    let gpu = FakeGpu::default();
    let mut c = cache(&gpu, 0);
    let old = gpu.alloc(0, 0x1000, 0x2000);
    let unrelated = gpu.alloc(1, 0, 0x1000);
    let mo = c.lookup(0, 0x1000, 0x2000, &old).unwrap();
    let mu = c.lookup(1, 0, 0x1000, &unrelated).unwrap();
    c.release(mu.id).unwrap();
    gpu.free(&old);
    let new = gpu.alloc(0, 0x2000, 0x1000);
    // The old mapping is stale but in use: the driver refuses the overlapping range,
    // the cache closes released mappings one at a time, then gives up.
    assert_eq!(
        c.lookup(0, 0x2000, 0x1000, &new),
        Err(CacheError::Open(OpenError::AlreadyMapped))
    );
    assert!(!gpu.is_open(mu.mapped_base) && gpu.is_open(mo.mapped_base));
    assert_eq!((c.stats().already_mapped, c.stats().evictions), (2, 1));
    c.release(mo.id).unwrap();
    assert!(!c.lookup(0, 0x2000, 0x1000, &new).unwrap().hit);
}

#[test]
fn a_buffer_used_once_is_not_kept_and_one_used_again_is() {
    let gpu = FakeGpu::default();
    let mut c = RemoteCache::new(gpu.clone(), CacheConfig::default());
    // cudaMalloc, one transfer, cudaFree, at the same address each time (ompi#12971):
    // nothing of a freed buffer stays mapped.
    for _ in 0..5 {
        let h = gpu.alloc(0, 0x4000_0000, MB);
        let m = c.lookup(0, 0x4000_0000, MB, &h).unwrap();
        assert!(!m.hit);
        c.release(m.id).unwrap();
        assert_eq!(gpu.open_count(), 0, "closed once its transfer is done");
        gpu.free(&h);
    }
    assert_eq!(
        (
            c.stats().first_use_closed,
            c.stats().stale,
            c.cached_bytes()
        ),
        (5, 0, 0)
    );
    // A buffer sent again: the second transfer opens it once more and keeps it.
    let h = gpu.alloc(0, 0x4000_0000, MB);
    let m = c.lookup(0, 0x4000_0000, MB, &h).unwrap();
    c.release(m.id).unwrap();
    let again = c.lookup(0, 0x4000_0000, MB, &h).unwrap();
    assert!(!again.hit);
    c.release(again.id).unwrap();
    assert_eq!((gpu.open_count(), c.cached_bytes()), (1, MB));
    let third = c.lookup(0, 0x4000_0000, MB, &h).unwrap();
    assert!(third.hit);
    c.release(third.id).unwrap();
    assert_eq!(gpu.opens(), 7);
    // Used twice while open (two transfers in flight): kept at once.
    let h2 = gpu.alloc(1, 0, MB);
    let a = c.lookup(1, 0, MB, &h2).unwrap();
    let b = c.lookup(1, 0, MB, &h2).unwrap();
    assert!(b.hit);
    c.release(a.id).unwrap();
    c.release(b.id).unwrap();
    assert!(gpu.is_open(a.mapped_base));
    assert_eq!(c.cached_bytes(), 2 * MB);
    // What is remembered of a freed buffer does not keep its successor: a new handle
    // at the same base is a first use again.
    gpu.free(&h);
    let h3 = gpu.alloc(0, 0x4000_0000, MB);
    let m3 = c.lookup(0, 0x4000_0000, MB, &h3).unwrap();
    c.release(m3.id).unwrap();
    assert!(!gpu.is_open(m3.mapped_base) && !gpu.is_open(third.mapped_base));
}

#[test]
fn what_is_remembered_of_first_uses_is_bounded() {
    let gpu = FakeGpu::default();
    let mut c = RemoteCache::new(gpu.clone(), CacheConfig::default());
    let handles: Vec<IpcHandle> = (0..=SEEN_MAX as u64)
        .map(|i| gpu.alloc(0, i * MB, MB))
        .collect();
    for (i, h) in handles.iter().enumerate() {
        let m = c.lookup(0, i as u64 * MB, MB, h).unwrap();
        c.release(m.id).unwrap();
    }
    // The first one was forgotten: its second use is a first use again.
    let m = c.lookup(0, 0, MB, &handles[0]).unwrap();
    c.release(m.id).unwrap();
    assert_eq!(gpu.open_count(), 0);
    let last = SEEN_MAX as u64;
    let m = c.lookup(0, last * MB, MB, &handles[SEEN_MAX]).unwrap();
    c.release(m.id).unwrap();
    assert_eq!(gpu.open_count(), 1, "the newest is remembered");
}

#[test]
fn clear_and_forget_close_released_and_defer_in_use() {
    let gpu = FakeGpu::default();
    let mut c = cache(&gpu, 0);
    let h0 = gpu.alloc(0, 0, MB);
    let h1 = gpu.alloc(1, 0, MB);
    let h2 = gpu.alloc(1, 4 * MB, MB);
    let m0 = c.lookup(0, 0, MB, &h0).unwrap();
    let m1 = c.lookup(1, 0, MB, &h1).unwrap();
    let m2 = c.lookup(1, 4 * MB, MB, &h2).unwrap();
    c.release(m1.id).unwrap();
    c.forget_peer(1);
    assert!(!gpu.is_open(m1.mapped_base) && gpu.is_open(m2.mapped_base));
    c.release(m2.id).unwrap();
    assert!(!gpu.is_open(m2.mapped_base));
    c.clear();
    assert!(gpu.is_open(m0.mapped_base));
    c.release(m0.id).unwrap();
    assert_eq!(
        (gpu.open_count(), c.open_mappings(), c.cached_bytes()),
        (0, 0, 0)
    );
    assert_eq!(c.lookup(0, 0, 0, &h0), Err(CacheError::ZeroSize));
}

#[test]
fn keep_released_off_closes_at_release() {
    let gpu = FakeGpu::default();
    let mut c = RemoteCache::new(
        gpu.clone(),
        CacheConfig {
            size_limit: 0,
            keep_released: false,
            keep_first_use: false,
        },
    );
    let h = gpu.alloc(0, 0, MB);
    let m = c.lookup(0, 0, MB, &h).unwrap();
    assert!(
        c.lookup(0, 0, MB, &h).unwrap().hit,
        "concurrent users still share"
    );
    c.release(m.id).unwrap();
    c.release(m.id).unwrap();
    assert_eq!((gpu.open_count(), c.cached_bytes()), (0, 0));
}

/// Naive reference: a vector scanned linearly, written from the rules in the module docs.
#[derive(Clone, Debug)]
struct MEntry {
    peer: u32,
    base: u64,
    size: u64,
    handle: IpcHandle,
    refs: u32,
    cached: bool,
    first_use: bool,
    indexed: bool,
    stamp: Option<u64>,
    mapped: u64,
}

struct Model {
    cfg: CacheConfig,
    v: Vec<MEntry>,
    stamp: u64,
    /// Closed after one use, oldest first: (peer, base, size, handle).
    seen: Vec<(u32, u64, u64, IpcHandle)>,
}

#[derive(Debug, PartialEq)]
enum Predicted {
    Hit(u64),
    Miss,
    Err(CacheError),
}

impl Model {
    fn cached_bytes(&self) -> u64 {
        self.v.iter().filter(|e| e.cached).map(|e| e.size).sum()
    }

    fn fits(&self, size: u64) -> bool {
        self.cfg.size_limit == 0 || self.cached_bytes() + size <= self.cfg.size_limit
    }

    fn forget_seen(&mut self, peer: u32, base: u64) -> Option<(u64, IpcHandle)> {
        let i = self.seen.iter().position(|s| s.0 == peer && s.1 == base)?;
        let s = self.seen.remove(i);
        Some((s.2, s.3))
    }

    fn remove_oldest(&mut self) -> bool {
        let oldest = (0..self.v.len())
            .filter(|&i| self.v[i].stamp.is_some())
            .min_by_key(|&i| self.v[i].stamp);
        oldest.map(|i| self.v.remove(i)).is_some()
    }

    fn lookup(&mut self, peer: u32, base: u64, size: u64, h: &IpcHandle, live: bool) -> Predicted {
        if let Some(i) = self.v.iter().position(|e| {
            e.indexed && e.peer == peer && e.base == base && e.handle == *h && e.size == size
        }) {
            let fits = self.fits(size);
            let e = &mut self.v[i];
            e.refs += 1;
            e.stamp = None;
            if e.first_use {
                e.first_use = false;
                e.cached = fits;
            }
            return Predicted::Hit(e.mapped);
        }
        // Every indexed mapping of the peer that the allocation overlaps is stale.
        self.v.retain_mut(|e| {
            if e.indexed && e.peer == peer && e.base < base + size && base < e.base + e.size {
                e.indexed = false;
                return e.refs > 0;
            }
            true
        });
        let limit = self.cfg.size_limit;
        while limit > 0 && self.cached_bytes() + size > limit && self.remove_oldest() {}
        let mut first = true;
        loop {
            if !live {
                return Predicted::Err(CacheError::Open(OpenError::Other(INVALID_HANDLE)));
            }
            let overlaps =
                |e: &MEntry| e.peer == peer && e.base < base + size && base < e.base + e.size;
            if !self.v.iter().any(overlaps) {
                return Predicted::Miss;
            }
            let mut progressed = false;
            if first {
                first = false;
                let before = self.v.len();
                self.v.retain(|e| !(e.refs == 0 && overlaps(e)));
                progressed = self.v.len() < before;
            }
            if !progressed && !self.remove_oldest() {
                return Predicted::Err(CacheError::Open(OpenError::AlreadyMapped));
            }
        }
    }

    fn insert(&mut self, peer: u32, base: u64, size: u64, h: IpcHandle, mapped: u64) {
        let reused = self.forget_seen(peer, base) == Some((size, h));
        let keep = self.cfg.keep_released && (self.cfg.keep_first_use || reused);
        let cached = keep && self.fits(size);
        self.v.push(MEntry {
            peer,
            base,
            size,
            handle: h,
            refs: 1,
            cached,
            first_use: self.cfg.keep_released && !keep,
            indexed: true,
            stamp: None,
            mapped,
        });
    }

    fn release(&mut self, mapped: u64) {
        let i = self.v.iter().position(|e| e.mapped == mapped).unwrap();
        let e = &mut self.v[i];
        e.refs -= 1;
        if e.refs == 0 {
            if e.cached && e.indexed {
                e.stamp = Some(self.stamp);
                self.stamp += 1;
            } else {
                let e = self.v.remove(i);
                if e.first_use && e.indexed {
                    self.forget_seen(e.peer, e.base);
                    if self.seen.len() == SEEN_MAX {
                        self.seen.remove(0);
                    }
                    self.seen.push((e.peer, e.base, e.size, e.handle));
                }
            }
        }
    }

    fn detach_all(&mut self, peer: Option<u32>) {
        self.v.retain_mut(|e| {
            if peer.is_some_and(|p| p != e.peer) || !e.indexed {
                return true;
            }
            e.indexed = false;
            e.refs > 0
        });
    }
}

#[derive(Clone, Copy)]
struct Known {
    peer: u32,
    base: u64,
    size: u64,
    handle: IpcHandle,
    live: bool,
}

fn check(c: &RemoteCache<FakeGpu>, m: &Model, gpu: &FakeGpu, seed: u64, step: usize) {
    let ctx = format!("seed {seed} step {step}");
    assert_eq!(gpu.open_count(), m.v.len(), "{ctx}: open mappings");
    assert_eq!(c.open_mappings(), m.v.len(), "{ctx}");
    assert_eq!(c.cached_bytes(), m.cached_bytes(), "{ctx}: cached bytes");
    if m.cfg.size_limit > 0 {
        assert!(
            c.cached_bytes() <= m.cfg.size_limit,
            "{ctx}: over the limit"
        );
    }
    let mut released: Vec<&MEntry> = m.v.iter().filter(|e| e.stamp.is_some()).collect();
    released.sort_by_key(|e| e.stamp);
    let order: Vec<(u32, u64)> = released.iter().map(|e| (e.peer, e.base)).collect();
    assert_eq!(c.lru_order(), order, "{ctx}: LRU order");
    for e in m.v.iter().filter(|e| e.refs > 0) {
        assert!(gpu.is_open(e.mapped), "{ctx}: in-use mapping closed");
    }
    let s = c.stats();
    assert_eq!(s.opens - s.closes, m.v.len() as u64, "{ctx}: stats");
    assert_eq!(gpu.opens(), s.opens, "{ctx}: every open counted");
}

fn run_model(seed: u64) -> CacheStats {
    let mut rng = Rng::new(seed);
    let cfg = CacheConfig {
        size_limit: [0, 0x4000, 0x9000][rng.below(3) as usize],
        keep_released: rng.percent(85),
        keep_first_use: rng.percent(50),
    };
    let gpu = FakeGpu::default();
    let mut c = RemoteCache::new(gpu.clone(), cfg);
    let mut m = Model {
        cfg,
        v: Vec::new(),
        stamp: 0,
        seen: Vec::new(),
    };
    let mut known: Vec<Known> = Vec::new();
    let mut held: Vec<(MappingId, u64)> = Vec::new();
    for step in 0..300 {
        match rng.below(100) {
            0..=19 => {
                let peer = rng.below(3) as u32;
                let base = rng.below(8) * 0x1000;
                let size = (1 + rng.below(3)) * 0x1000;
                let clash = known.iter().any(|k| {
                    k.live && k.peer == peer && k.base < base + size && base < k.base + k.size
                });
                if !clash {
                    let handle = gpu.alloc(peer, base, size);
                    known.push(Known {
                        peer,
                        base,
                        size,
                        handle,
                        live: true,
                    });
                }
            }
            20..=29 => {
                let live: Vec<usize> = (0..known.len()).filter(|&i| known[i].live).collect();
                if !live.is_empty() {
                    let i = live[rng.below(live.len() as u64) as usize];
                    gpu.free(&known[i].handle);
                    known[i].live = false;
                }
            }
            30..=69 => {
                if known.is_empty() {
                    continue;
                }
                let k = known[rng.below(known.len() as u64) as usize];
                let want = m.lookup(k.peer, k.base, k.size, &k.handle, k.live);
                let got = c.lookup(k.peer, k.base, k.size, &k.handle);
                match (&want, got) {
                    (Predicted::Hit(addr), Ok(g)) => {
                        assert!(g.hit && g.mapped_base == *addr, "seed {seed} step {step}");
                        held.push((g.id, g.mapped_base));
                    }
                    (Predicted::Miss, Ok(g)) => {
                        assert!(!g.hit, "seed {seed} step {step}");
                        m.insert(k.peer, k.base, k.size, k.handle, g.mapped_base);
                        held.push((g.id, g.mapped_base));
                    }
                    (Predicted::Err(e), Err(g)) => assert_eq!(*e, g, "seed {seed} step {step}"),
                    (w, g) => panic!("seed {seed} step {step}: model {w:?}, cache {g:?}"),
                }
            }
            70..=96 => {
                if !held.is_empty() {
                    let (id, addr) = held.swap_remove(rng.below(held.len() as u64) as usize);
                    c.release(id).unwrap();
                    m.release(addr);
                }
            }
            97 => {
                c.clear();
                m.detach_all(None);
            }
            _ => {
                let p = rng.below(3) as u32;
                c.forget_peer(p);
                m.detach_all(Some(p));
            }
        }
        check(&c, &m, &gpu, seed, step);
    }
    let stats = *c.stats();
    let leftover = held.len();
    if rng.percent(50) {
        for (id, _) in held {
            c.release(id).unwrap();
        }
        c.clear();
        assert_eq!(
            gpu.open_count(),
            0,
            "seed {seed}: clear after releasing all"
        );
    }
    drop(c);
    assert_eq!(
        gpu.open_count(),
        0,
        "seed {seed}: leak after drop ({leftover} held)"
    );
    assert_eq!(gpu.opens(), gpu.closes());
    stats
}

#[test]
fn random_operations_agree_with_the_reference_model() {
    let mut total = CacheStats::default();
    for seed in 0..400 {
        let s = run_model(seed);
        total.hits += s.hits;
        total.stale += s.stale;
        total.evictions += s.evictions;
        total.already_mapped += s.already_mapped;
        total.uncached += s.uncached;
        total.first_use_closed += s.first_use_closed;
    }
    // Every recovery path must actually be exercised by the generator.
    let t = total;
    assert!(
        t.hits > 1000
            && t.stale > 100
            && t.evictions > 100
            && t.already_mapped > 100
            && t.uncached > 100
            && t.first_use_closed > 100,
        "{t:?}"
    );
}

/// A buffer read twice is kept; its owner's release notice closes it (now if unused, at
/// its last release if in use), and a notice naming an older handle at the same base
/// leaves the newer mapping alone.
#[test]
fn the_owners_release_notice_closes_the_mapping_of_that_handle_only() {
    let gpu = FakeGpu::default();
    let mut c = RemoteCache::new(gpu.clone(), CacheConfig::default());
    let base = 0x5000_0000;
    let h = gpu.alloc(0, base, MB);
    for _ in 0..2 {
        let m = c.lookup(0, base, MB, &h).unwrap();
        c.release(m.id).unwrap();
    }
    assert_eq!(gpu.open_count(), 1, "read twice: kept");
    gpu.free(&h);
    assert_eq!(gpu.freed_held(), 1);
    // Another peer's notice, or another handle at that base: nothing happens.
    assert!(!c.peer_released(1, base, &h));
    assert!(!c.peer_released(0, base, &IpcHandle([9; 64])));
    assert!(c.peer_released(0, base, &h));
    assert_eq!((gpu.open_count(), gpu.freed_held()), (0, 0));
    assert_eq!((c.stats().peer_released, c.cached_bytes()), (1, 0));
    assert!(
        !c.peer_released(0, base, &h),
        "a second notice finds nothing"
    );

    // In use when the notice comes: closed at its last release.
    let h2 = gpu.alloc(0, base, MB);
    let m1 = c.lookup(0, base, MB, &h2).unwrap();
    let m2 = c.lookup(0, base, MB, &h2).unwrap();
    assert!(c.peer_released(0, base, &h2));
    assert_eq!(gpu.open_count(), 1, "never closed while in use");
    c.release(m1.id).unwrap();
    assert_eq!(gpu.open_count(), 1);
    c.release(m2.id).unwrap();
    assert_eq!(gpu.open_count(), 0, "closed at the last release");
    gpu.free(&h2);

    // A late notice of the old handle after the peer reallocated at the same base.
    let old = gpu.alloc(0, base, MB);
    let m = c.lookup(0, base, MB, &old).unwrap();
    c.release(m.id).unwrap();
    gpu.free(&old);
    let new = gpu.alloc(0, base, MB);
    for _ in 0..2 {
        let m = c.lookup(0, base, MB, &new).unwrap();
        c.release(m.id).unwrap();
    }
    assert!(!c.peer_released(0, base, &old));
    assert_eq!(gpu.open_count(), 1, "the newer mapping stays");
    let hit = c.lookup(0, base, MB, &new).unwrap();
    assert!(hit.hit);
    c.release(hit.id).unwrap();
}

/// A notice for an allocation closed after its first use makes the cache forget it: the
/// next lookup of that handle (which cannot come: it was freed) would not count as a
/// second use.
#[test]
fn a_release_notice_forgets_an_allocation_used_once() {
    let gpu = FakeGpu::default();
    let mut c = RemoteCache::new(gpu.clone(), CacheConfig::default());
    let h = gpu.alloc(2, 0x6000_0000, MB);
    let m = c.lookup(2, 0x6000_0000, MB, &h).unwrap();
    c.release(m.id).unwrap();
    assert_eq!(gpu.open_count(), 0);
    assert!(!c.peer_released(2, 0x6000_0000, &h), "nothing open");
    // Looked up again anyway: a first use again (not kept), since the notice erased it.
    let m = c.lookup(2, 0x6000_0000, MB, &h).unwrap();
    c.release(m.id).unwrap();
    assert_eq!(gpu.open_count(), 0);
}
