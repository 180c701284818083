//! The two CUDA driver calls the cache needs, as a trait so tests can fake the GPU.

use std::fmt;

/// A `CUipcMemHandle`: 64 opaque bytes naming one allocation of one process.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpcHandle(pub [u8; 64]);

impl fmt::Debug for IpcHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The first bytes are enough to tell handles apart in a log line.
        write!(f, "IpcHandle(")?;
        for b in &self.0[..8] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..)")
    }
}

/// Why `cuIpcOpenMemHandle` failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// CUDA_ERROR_ALREADY_MAPPED: an open mapping overlaps this allocation.
    AlreadyMapped,
    /// Any other CUresult (e.g. the exporter freed the allocation).
    Other(i32),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::AlreadyMapped => f.write_str("cuIpcOpenMemHandle: already mapped"),
            OpenError::Other(c) => write!(f, "cuIpcOpenMemHandle failed with CUresult {c}"),
        }
    }
}

/// Opening and closing remote allocations (`cuIpcOpenMemHandle` with
/// CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS / `cuIpcCloseMemHandle`).
pub trait IpcDriver {
    /// Map the allocation named by `handle`; returns the local address of its base.
    fn open_handle(&mut self, handle: &IpcHandle) -> Result<u64, OpenError>;
    /// Unmap an address returned by `open_handle`. Failures are the glue's to log: the
    /// cache forgets the mapping either way.
    fn close_handle(&mut self, mapped: u64);
}
