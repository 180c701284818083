//! The receive side of a device-memory get (what `btl_get` does for a GPU buffer
//! once the IPC handshake enabled it): find or open the peer's allocation in the
//! core's [`RemoteCache`], queue an asynchronous copy on a dedicated stream, record
//! an event from the core's [`EventRing`], and report completions in issue order
//! from progress, releasing each mapping when its copy is done.
//!
//! Everything the driver does goes through the [`Gpu`] trait: [`cuda::Driver`]
//! implements it (the real path, loaded at run time), and the tests use a fake, since
//! this host has no GPU. The only `unsafe` is the asynchronous copy between raw
//! device addresses, whose contract the BTL (the caller of [`DeviceGets::start`])
//! upholds.

use std::fmt;

use rsmcuda_core::cache::{
    CacheConfig, CacheError, CacheStats, IpcDriver, IpcHandle, MappingId, OpenError, PeerId,
    RemoteCache,
};
use rsmcuda_core::copy::{Completion, EventQuery, EventRing, OutOfResource};

/// The driver operations the get path needs.
pub trait Gpu {
    type Event;
    type Stream;
    fn ipc_open(&self, handle: &IpcHandle) -> Result<u64, OpenError>;
    fn ipc_close(&self, mapped: u64);
    fn stream_create(&self) -> Result<Self::Stream, i32>;
    fn event_create(&self) -> Result<Self::Event, i32>;
    /// Queues a copy of `bytes` from `src` to `dst` on `stream`.
    ///
    /// # Safety
    /// Both ranges must be valid device (or unified) addresses for `bytes` until the
    /// copy completes, and `dst` must not be used by anyone else meanwhile.
    unsafe fn copy_async(
        &self,
        dst: u64,
        src: u64,
        bytes: usize,
        stream: &Self::Stream,
    ) -> Result<(), i32>;
    fn record(&self, event: &Self::Event, stream: &Self::Stream) -> Result<(), i32>;
    fn query(&self, event: &Self::Event) -> Result<bool, i32>;
    /// The device of the calling thread's current context (`cuCtxGetDevice`); an error
    /// while the application has not touched CUDA yet.
    fn current_device(&self) -> Result<i32, i32>;
    /// `cuDeviceCanAccessPeer(dev, peer)`.
    fn can_access_peer(&self, dev: i32, peer: i32) -> Result<bool, i32>;
    /// Whether `ptr` is device memory (host and unknown pointers: false).
    fn is_device_pointer(&self, ptr: u64) -> bool;
    /// The buffer id of the device allocation containing `ptr`
    /// (`CU_POINTER_ATTRIBUTE_BUFFER_ID`, with the memory type in one call): `Ok(None)`
    /// for host memory and addresses the driver does not know (freed).
    fn buffer_id(&self, ptr: u64) -> Result<Option<u64>, i32>;
    /// Base and size of the allocation containing `ptr` (`cuMemGetAddressRange`).
    fn address_range(&self, ptr: u64) -> Result<(u64, u64), i32>;
    /// `cuIpcGetMemHandle` of the allocation containing `ptr`.
    fn ipc_get_mem_handle(&self, ptr: u64) -> Result<IpcHandle, i32>;
    /// `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` on the allocation containing `ptr`.
    fn set_sync_memops(&self, ptr: u64) -> Result<(), i32>;
}

impl Gpu for cuda::Driver {
    type Event = cuda::Event;
    type Stream = cuda::Stream;
    fn ipc_open(&self, handle: &IpcHandle) -> Result<u64, OpenError> {
        self.ipc_open(&cuda::IpcMemHandle(handle.0))
            .map_err(|e| match e.code {
                cuda::ERROR_ALREADY_MAPPED => OpenError::AlreadyMapped,
                code => OpenError::Other(code),
            })
    }
    fn ipc_close(&self, mapped: u64) {
        // The cache forgets the mapping either way; a failed close only leaks a
        // mapping the driver drops at exit.
        let _ = cuda::Driver::ipc_close(self, mapped);
    }
    fn stream_create(&self) -> Result<cuda::Stream, i32> {
        cuda::Driver::stream_create(self).map_err(|e| e.code)
    }
    fn event_create(&self) -> Result<cuda::Event, i32> {
        cuda::Driver::event_create(self).map_err(|e| e.code)
    }
    unsafe fn copy_async(
        &self,
        dst: u64,
        src: u64,
        bytes: usize,
        stream: &cuda::Stream,
    ) -> Result<(), i32> {
        // SAFETY: forwarded contract (see the trait).
        unsafe { self.memcpy_async(dst, src, bytes, stream) }.map_err(|e| e.code)
    }
    fn record(&self, event: &cuda::Event, stream: &cuda::Stream) -> Result<(), i32> {
        self.event_record(event, stream).map_err(|e| e.code)
    }
    fn query(&self, event: &cuda::Event) -> Result<bool, i32> {
        self.event_query(event).map_err(|e| e.code)
    }
    fn current_device(&self) -> Result<i32, i32> {
        cuda::Driver::current_device(self).map_err(|e| e.code)
    }
    fn can_access_peer(&self, dev: i32, peer: i32) -> Result<bool, i32> {
        cuda::Driver::can_access_peer(self, dev, peer).map_err(|e| e.code)
    }
    fn is_device_pointer(&self, ptr: u64) -> bool {
        cuda::Driver::is_device_pointer(self, ptr)
    }
    fn buffer_id(&self, ptr: u64) -> Result<Option<u64>, i32> {
        cuda::Driver::buffer_id(self, ptr).map_err(|e| e.code)
    }
    fn address_range(&self, ptr: u64) -> Result<(u64, u64), i32> {
        cuda::Driver::address_range(self, ptr)
            .map(|(base, size)| (base, size as u64))
            .map_err(|e| e.code)
    }
    fn ipc_get_mem_handle(&self, ptr: u64) -> Result<IpcHandle, i32> {
        cuda::Driver::ipc_get_mem_handle(self, ptr)
            .map(|h| IpcHandle(h.0))
            .map_err(|e| e.code)
    }
    fn set_sync_memops(&self, ptr: u64) -> Result<(), i32> {
        cuda::Driver::set_sync_memops(self, ptr).map_err(|e| e.code)
    }
}

/// The core's IpcDriver over any [`Gpu`].
struct Opener<'g, G: Gpu>(&'g G);

impl<G: Gpu> IpcDriver for Opener<'_, G> {
    fn open_handle(&mut self, handle: &IpcHandle) -> Result<u64, OpenError> {
        self.0.ipc_open(handle)
    }
    fn close_handle(&mut self, mapped: u64) {
        self.0.ipc_close(mapped);
    }
}

/// The core's EventQuery over any [`Gpu`].
struct Querier<'g, G: Gpu>(&'g G);

impl<G: Gpu> EventQuery<G::Event> for Querier<'_, G> {
    type Error = i32;
    fn query(&mut self, event: &G::Event) -> Result<bool, i32> {
        self.0.query(event)
    }
}

/// A peer's registration as its `btl_register_mem` produced it (the 64-byte handle
/// and the whole allocation containing the buffer).
pub type RemoteRegion = rsmcuda_core::reg::DeviceRegion;

/// Why a get could not be started.
#[derive(Debug, PartialEq, Eq)]
pub enum GetError {
    /// Every event is in flight: retry after progress (OPAL_ERR_OUT_OF_RESOURCE).
    Busy,
    /// The remote range is not inside the registered allocation.
    OutOfRange,
    /// The mapping could not be opened.
    Cache(CacheError),
    /// A driver call failed: its name and CUresult.
    Driver { call: &'static str, code: i32 },
}

impl GetError {
    /// The driver call that failed and its CUresult, for the user's message.
    pub fn failed_call(&self) -> Option<(&'static str, i32)> {
        match self {
            Self::Driver { call, code } => Some((call, *code)),
            Self::Cache(CacheError::Open(OpenError::Other(code))) => {
                Some(("cuIpcOpenMemHandle", *code))
            }
            Self::Cache(CacheError::Open(OpenError::AlreadyMapped)) => {
                Some(("cuIpcOpenMemHandle", cuda::ERROR_ALREADY_MAPPED))
            }
            _ => None,
        }
    }
}

impl fmt::Display for GetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Busy => OutOfResource.fmt(f),
            Self::OutOfRange => f.write_str("remote range outside the registered allocation"),
            Self::Cache(e) => e.fmt(f),
            Self::Driver { call, code } => write!(f, "{call} failed with CUresult {code}"),
        }
    }
}

/// A finished get, oldest first.
#[derive(Debug, PartialEq, Eq)]
pub enum Done<T> {
    Ok(T),
    Failed(T, i32),
}

/// Device gets in flight for one BTL module (all peers).
pub struct DeviceGets<'g, G: Gpu, T> {
    gpu: &'g G,
    cache: RemoteCache<Opener<'g, G>>,
    ring: EventRing<G::Event, (MappingId, T)>,
    stream: G::Stream,
}

impl<'g, G: Gpu, T> DeviceGets<'g, G, T> {
    /// A stream and `events` events from the driver.
    pub fn new(gpu: &'g G, cache: CacheConfig, events: usize) -> Result<Self, i32> {
        let stream = gpu.stream_create()?;
        let events = (0..events.max(1))
            .map(|_| gpu.event_create())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(DeviceGets {
            gpu,
            cache: RemoteCache::new(Opener(gpu), cache),
            ring: EventRing::new(events),
            stream,
        })
    }

    /// Starts copying `len` bytes at the peer's `remote_addr` (inside `region`) to
    /// local device memory `dst`; `token` comes back from [`poll`](Self::poll).
    /// Returns whether the mapping was a cache hit.
    ///
    /// # Safety
    /// `dst` must be valid device memory for `len` bytes, untouched until the token
    /// comes back.
    pub unsafe fn start(
        &mut self,
        peer: PeerId,
        region: &RemoteRegion,
        remote_addr: u64,
        dst: u64,
        len: usize,
        token: T,
    ) -> Result<bool, GetError> {
        if !region.contains(remote_addr, len as u64) {
            return Err(GetError::OutOfRange);
        }
        let offset = remote_addr - region.base;
        let slot = self.ring.reserve().map_err(|_| GetError::Busy)?;
        let mapping = self
            .cache
            .lookup(peer, region.base, region.size, &region.handle)
            .map_err(GetError::Cache)?;
        let issued = (|| {
            // SAFETY: the source lies inside the peer's allocation, mapped (and kept
            // mapped by our reference) until the completion; `dst` is the caller's
            // contract.
            unsafe {
                self.gpu
                    .copy_async(dst, mapping.mapped_base + offset, len, &self.stream)
                    .map_err(|code| ("cuMemcpyAsync", code))?
            };
            self.gpu
                .record(slot.event(), &self.stream)
                .map_err(|code| ("cuEventRecord", code))
        })();
        match issued {
            Ok(()) => {
                slot.commit((mapping.id, token));
                Ok(mapping.hit)
            }
            Err((call, code)) => {
                let _ = self.cache.release(mapping.id);
                Err(GetError::Driver { call, code })
            }
        }
    }

    /// The oldest get, if its copy has finished; its mapping is released.
    pub fn poll(&mut self) -> Option<Done<T>> {
        let completion = self.ring.poll(&mut Querier(self.gpu))?;
        let ((id, token), failure) = match completion {
            Completion::Done(t) => (t, None),
            Completion::Failed(t, code) => (t, Some(code)),
        };
        let _ = self.cache.release(id);
        Some(match failure {
            None => Done::Ok(token),
            Some(code) => Done::Failed(token, code),
        })
    }

    /// Gets started and not yet reported.
    pub fn in_flight(&self) -> usize {
        self.ring.len()
    }

    /// `peer` freed the allocation it exported as `region` (its release notice): the
    /// mapping of that handle is closed, now if no get uses it, else when the last one
    /// completes. Returns whether a mapping was found.
    pub fn peer_released(&mut self, peer: PeerId, region: &RemoteRegion) -> bool {
        self.cache.peer_released(peer, region.base, &region.handle)
    }

    /// Cache counters (hits, misses, evictions, ...).
    pub fn stats(&self) -> &CacheStats {
        self.cache.stats()
    }
}

mod link;

pub use link::{ExportError, Exported, export, export_tracked, on_control, on_send, probe};

#[cfg(test)]
mod tests;
