//! IPC handles (64 bytes, as CUipcMemHandle / CUipcEventHandle).
//!
//! Memory handle: b"RMCAMEM1", owner pid (u32 LE), owner's physical device (i32 LE),
//! buffer id (u64 LE), size (u64 LE), zeros. The same allocation always gives the same
//! bytes; a reused address gives other bytes (new buffer id). Event handle: b"RMCAEVT1",
//! owner pid, zero, event id, zeros.

use std::sync::Arc;

use crate::codes::*;
use crate::memory::{Alloc, Kind, Origin};
use crate::state::State;
use crate::stream::{EvShared, Event, event_file};

pub const HANDLE_SIZE: usize = 64;
const MEM_MAGIC: &[u8; 8] = b"RMCAMEM1";
const EVT_MAGIC: &[u8; 8] = b"RMCAEVT1";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemHandle {
    pub pid: u32,
    pub physical: i32,
    pub buffer_id: u64,
    pub size: u64,
}

impl MemHandle {
    pub fn encode(&self) -> [u8; HANDLE_SIZE] {
        let mut b = [0u8; HANDLE_SIZE];
        b[..8].copy_from_slice(MEM_MAGIC);
        b[8..12].copy_from_slice(&self.pid.to_le_bytes());
        b[12..16].copy_from_slice(&self.physical.to_le_bytes());
        b[16..24].copy_from_slice(&self.buffer_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.size.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; HANDLE_SIZE]) -> Option<MemHandle> {
        if &b[..8] != MEM_MAGIC {
            return None;
        }
        let u32at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Some(MemHandle {
            pid: u32at(8),
            physical: u32at(12) as i32,
            buffer_id: u64at(16),
            size: u64at(24),
        })
    }
}

pub fn encode_event(pid: u32, id: u64) -> [u8; HANDLE_SIZE] {
    let mut b = [0u8; HANDLE_SIZE];
    b[..8].copy_from_slice(EVT_MAGIC);
    b[8..12].copy_from_slice(&pid.to_le_bytes());
    b[16..24].copy_from_slice(&id.to_le_bytes());
    b
}

pub fn decode_event(b: &[u8; HANDLE_SIZE]) -> Option<(u32, u64)> {
    if &b[..8] != EVT_MAGIC {
        return None;
    }
    Some((
        u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")),
        u64::from_le_bytes(b[16..24].try_into().expect("8 bytes")),
    ))
}

impl State {
    /// cuIpcGetMemHandle: only the base of an allocation of this process, not managed.
    pub fn ipc_get_mem(&self, p: usize) -> Result<[u8; HANDLE_SIZE], CuResult> {
        let Kind::Device(base) = self.mem.classify(p) else {
            return Err(INVALID_VALUE);
        };
        let a = &self.mem.allocs[&base];
        if a.managed {
            return Err(INVALID_VALUE);
        }
        let Origin::Own { .. } = a.origin else {
            // Re-exporting an IPC mapping is not supported by the driver either.
            return Err(INVALID_VALUE);
        };
        Ok(MemHandle {
            pid: std::process::id(),
            physical: a.physical,
            buffer_id: a.buffer_id,
            size: a.size as u64,
        }
        .encode())
    }

    /// cuIpcOpenMemHandle. Samples first what this process holds of freed
    /// allocations (`ipc.freed_held.max`, `ipc.freed_held.max_bytes`): a transport's
    /// cache that keeps them shows here while the job runs, not only at exit.
    pub fn ipc_open_mem(&mut self, bytes: &[u8; HANDLE_SIZE]) -> Result<usize, CuResult> {
        let (freed, freed_bytes) = self.mem.ipc_freed();
        crate::counters::max("ipc.freed_held.max", freed);
        crate::counters::max("ipc.freed_held.max_bytes", freed_bytes);
        let h = MemHandle::decode(bytes).ok_or(INVALID_VALUE)?;
        let ctx = self.current_ctx()?;
        if h.pid == std::process::id() {
            // The driver refuses to open a handle in the process that exported it.
            return Err(INVALID_CONTEXT);
        }
        let ordinal = self.ctx_ordinal(ctx)?;
        let mine = self.physical(ordinal)?;
        if !crate::config::CONFIG.peer_ok(mine, h.physical) {
            return Err(PEER_ACCESS_UNSUPPORTED);
        }
        if self.mem.opened.contains_key(&(h.pid, h.buffer_id)) {
            return Err(ALREADY_MAPPED);
        }
        let size = usize::try_from(h.size).map_err(|_| INVALID_VALUE)?;
        let a = Alloc {
            size,
            span: 0,
            buffer_id: 0,
            ctx,
            ordinal,
            physical: h.physical,
            managed: false,
            sync_memops: false,
            origin: Origin::Ipc {
                pid: h.pid,
                remote_id: h.buffer_id,
            },
        };
        self.mem.map_remote(h.pid, h.buffer_id, size, a)
    }

    /// cuIpcCloseMemHandle: `p` must be the base of an IPC mapping.
    pub fn ipc_close_mem(&mut self, p: usize) -> Result<(), CuResult> {
        match self.mem.allocs.get(&p) {
            Some(a) if matches!(a.origin, Origin::Ipc { .. }) => {}
            _ => return Err(INVALID_VALUE),
        }
        self.drain_all(false)?;
        self.mem.release(p);
        Ok(())
    }

    pub fn ipc_get_event(&self, e: usize) -> Result<[u8; HANDLE_SIZE], CuResult> {
        let ev = self.event(e)?;
        if ev.flags & EVENT_INTERPROCESS == 0 || ev.ipc_opened {
            return Err(INVALID_VALUE);
        }
        Ok(encode_event(std::process::id(), ev.id))
    }

    pub fn ipc_open_event(&mut self, bytes: &[u8; HANDLE_SIZE]) -> Result<usize, CuResult> {
        let (pid, id) = decode_event(bytes).ok_or(INVALID_VALUE)?;
        let ctx = self.current_ctx()?;
        if pid == std::process::id() {
            return Err(INVALID_CONTEXT);
        }
        let shared = EvShared::file(&event_file(pid, id), false)?;
        let h = self.new_handle();
        let id = self.mem.next_id();
        self.events.insert(
            h,
            Event {
                flags: EVENT_INTERPROCESS | 0x2,
                ctx,
                id,
                shared: Arc::new(shared),
                last_stream: None,
                ipc_opened: true,
            },
        );
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_round_trip() {
        let h = MemHandle {
            pid: 77,
            physical: 1,
            buffer_id: 9,
            size: 4096,
        };
        assert_eq!(MemHandle::decode(&h.encode()), Some(h));
        assert_eq!(MemHandle::decode(&[0; 64]), None);
        assert_eq!(decode_event(&encode_event(5, 6)), Some((5, 6)));
    }
}
