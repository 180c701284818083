//! Counters of the remote handle cache (exported as MPI_T pvars by the glue).

/// Plain counters; the cache is used under the BTL's lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups served by an open mapping.
    pub hits: u64,
    /// Lookups that had to open the handle.
    pub misses: u64,
    /// Mappings found stale at a lookup: the peer's new allocation overlaps them
    /// (freed and reallocated, at the same base or not).
    pub stale: u64,
    /// Released mappings closed to make room or to resolve ALREADY_MAPPED.
    pub evictions: u64,
    /// Successful `open_handle` calls.
    pub opens: u64,
    /// `close_handle` calls.
    pub closes: u64,
    /// `open_handle` answers ALREADY_MAPPED.
    pub already_mapped: u64,
    /// Mappings opened outside the size limit (closed as soon as released).
    pub uncached: u64,
    /// Mappings closed at release after their allocation's first use (not kept: see
    /// `CacheConfig::keep_first_use`).
    pub first_use_closed: u64,
    /// Mappings closed (or detached, to close at their last release) because their
    /// owner said it freed the allocation ([`super::RemoteCache::peer_released`]).
    pub peer_released: u64,
}
