//! The handshake and the registration as the BTL drives them: the core's [`IpcPeers`]
//! fed with what the driver says (current device, peer access), and the registration
//! handle of a buffer. Kept here, over the [`Gpu`] trait, so the BTL glue only moves
//! bytes and the logic runs against the fake GPU in `cargo test`.

use rsmcuda_core::ipc::peers::{ControlError, IpcPeers};
use rsmcuda_core::reg::DeviceRegion;
use rsmcuda_core::release::Probe;

use crate::Gpu;

/// A message is about to be sent to `peer`: ask for IPC if nothing is decided yet. The
/// driver is only asked for the current device when a request could go out, so sends
/// to established (or refused) peers cost one map lookup. False when the driver was
/// asked and this process has no CUDA context (no request could go out): the caller
/// should not ask again on every send.
pub fn on_send<G: Gpu>(gpu: &G, peers: &mut IpcPeers, peer: u32) -> bool {
    if !peers.wants_to_ask(peer) {
        return true;
    }
    let local = gpu.current_device().ok();
    peers.on_send(peer, local);
    local.is_some()
}

/// A control message arrived on the BTL's tag; returns its sender.
pub fn on_control<G: Gpu>(
    gpu: &G,
    peers: &mut IpcPeers,
    bytes: &[u8],
) -> Result<u32, ControlError> {
    let local = gpu.current_device().ok();
    peers.on_control(bytes, local, |dev, peer| gpu.can_access_peer(dev, peer))
}

/// Why a device buffer cannot be shared through CUDA IPC: the driver call that said no
/// and its CUresult.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportError {
    pub call: &'static str,
    pub code: i32,
}

/// The registration of `len` bytes at `ptr` for remote read: `Ok(None)` for host memory
/// (the CMA path), the allocation's IPC handle for device memory.
pub fn export<G: Gpu>(gpu: &G, ptr: u64, len: u64) -> Result<Option<DeviceRegion>, ExportError> {
    export_tracked(gpu, ptr, len).map(|e| e.map(|e| e.region))
}

/// A device buffer's registration and the buffer id of its allocation (what the owner
/// tracks to tell its peers when the allocation is freed, `rsmcuda_core::release`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exported {
    pub region: DeviceRegion,
    pub buffer_id: u64,
}

/// [`export`] with the allocation's buffer id, for the same driver calls: the memory
/// type and the buffer id come from one `cuPointerGetAttributes`.
pub fn export_tracked<G: Gpu>(
    gpu: &G,
    ptr: u64,
    len: u64,
) -> Result<Option<Exported>, ExportError> {
    let Ok(Some(buffer_id)) = gpu.buffer_id(ptr) else {
        return Ok(None);
    };
    let failed = |call| move |code| ExportError { call, code };
    let (base, size) = gpu
        .address_range(ptr)
        .map_err(failed("cuMemGetAddressRange"))?;
    let region = DeviceRegion {
        // Managed memory and memory of other allocators have no IPC handle.
        handle: gpu
            .ipc_get_mem_handle(ptr)
            .map_err(failed("cuIpcGetMemHandle"))?,
        base,
        size,
    };
    // The peer checks every get against the allocation; a buffer that does not fit in
    // the one containing its first byte cannot be read through one handle.
    if size == 0 || !region.contains(ptr, len) {
        return Err(ExportError {
            call: "cuMemGetAddressRange",
            code: ERROR_INVALID_VALUE,
        });
    }
    // The peer's copy runs on its own stream: with SYNC_MEMOPS the owner's
    // synchronous operations on the buffer are complete before it can read (what a
    // CUDA-aware Open MPI's registration does; no IPC event is needed then).
    gpu.set_sync_memops(ptr)
        .map_err(failed("cuPointerSetAttribute"))?;
    Ok(Some(Exported { region, buffer_id }))
}

/// What the driver says now of an exported allocation's base: its buffer id, gone
/// (host or unknown memory, or CUDA_ERROR_INVALID_VALUE), or unknown (any other error:
/// the allocation is kept, a notice for a live one would only cost the peer a reopen).
pub fn probe<G: Gpu>(gpu: &G, base: u64) -> Probe {
    match gpu.buffer_id(base) {
        Ok(Some(id)) => Probe::Id(id),
        Ok(None) | Err(ERROR_INVALID_VALUE) => Probe::Gone,
        Err(_) => Probe::Unknown,
    }
}

/// `CUDA_ERROR_INVALID_VALUE`, for a buffer that spans allocations.
pub const ERROR_INVALID_VALUE: i32 = 1;
