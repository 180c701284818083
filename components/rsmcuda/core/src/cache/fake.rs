//! A fake GPU address space for the cache tests: peers allocate and free device memory
//! (each allocation exporting a fresh handle), and this process opens and closes handles
//! like `cuIpcOpenMemHandle`/`cuIpcCloseMemHandle` would, including ALREADY_MAPPED when a
//! new mapping would overlap one still open from the same peer.
//!
//! Shared through `Rc<RefCell<..>>` so a test keeps a view of the GPU while the cache owns
//! the driver, and can check after the cache is dropped that nothing leaked.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use super::{IpcDriver, IpcHandle, OpenError};

/// CUDA_ERROR_INVALID_HANDLE-like code for handles of freed or unknown allocations.
pub const INVALID_HANDLE: i32 = 400;

#[derive(Clone, Copy, Debug)]
struct Alloc {
    handle: IpcHandle,
    peer: u32,
    base: u64,
    size: u64,
    live: bool,
}

#[derive(Debug, Default)]
struct Gpu {
    allocs: HashMap<IpcHandle, Alloc>,
    generation: u64,
    /// Open mappings in this process: local address → the allocation it maps.
    open: HashMap<u64, Alloc>,
    next_local: u64,
    opens: u64,
    closes: u64,
}

#[derive(Clone, Debug, Default)]
pub struct FakeGpu(Rc<RefCell<Gpu>>);

impl FakeGpu {
    /// The peer allocates `[base, base + size)`; returns the exported handle.
    pub fn alloc(&self, peer: u32, base: u64, size: u64) -> IpcHandle {
        let mut g = self.0.borrow_mut();
        let clash = g
            .allocs
            .values()
            .any(|a| a.live && a.peer == peer && a.base < base + size && base < a.base + a.size);
        assert!(
            !clash,
            "peer {peer} already has live memory overlapping {base:#x}"
        );
        g.generation += 1;
        let mut h = [0u8; 64];
        h[..8].copy_from_slice(&g.generation.to_le_bytes());
        h[8..12].copy_from_slice(&peer.to_le_bytes());
        h[16..24].copy_from_slice(&base.to_le_bytes());
        let handle = IpcHandle(h);
        g.allocs.insert(
            handle,
            Alloc {
                handle,
                peer,
                base,
                size,
                live: true,
            },
        );
        handle
    }

    /// The peer frees the allocation exported as `handle` (our mappings stay valid).
    pub fn free(&self, handle: &IpcHandle) {
        let mut g = self.0.borrow_mut();
        let a = g
            .allocs
            .get_mut(handle)
            .expect("freeing an unknown allocation");
        assert!(a.live, "double free");
        a.live = false;
    }

    pub fn open_count(&self) -> usize {
        self.0.borrow().open.len()
    }

    pub fn opens(&self) -> u64 {
        self.0.borrow().opens
    }

    pub fn closes(&self) -> u64 {
        self.0.borrow().closes
    }

    /// Open mappings whose allocation its owner has freed since (what only the mapping
    /// keeps alive).
    pub fn freed_held(&self) -> usize {
        let g = self.0.borrow();
        g.open
            .values()
            .filter(|o| !g.allocs.get(&o.handle).is_some_and(|a| a.live))
            .count()
    }

    pub fn is_open(&self, mapped: u64) -> bool {
        self.0.borrow().open.contains_key(&mapped)
    }
}

impl IpcDriver for FakeGpu {
    fn open_handle(&mut self, handle: &IpcHandle) -> Result<u64, OpenError> {
        let mut g = self.0.borrow_mut();
        let a = match g.allocs.get(handle) {
            Some(a) if a.live => *a,
            _ => return Err(OpenError::Other(INVALID_HANDLE)),
        };
        let overlap = g
            .open
            .values()
            .any(|o| o.peer == a.peer && o.base < a.base + a.size && a.base < o.base + o.size);
        if overlap {
            return Err(OpenError::AlreadyMapped);
        }
        // Local addresses never repeat, so a stale address can never alias a new mapping.
        let mapped = 0x7f00_0000_0000 + g.next_local;
        g.next_local += a.size.next_multiple_of(1 << 21);
        g.open.insert(mapped, a);
        g.opens += 1;
        Ok(mapped)
    }

    fn close_handle(&mut self, mapped: u64) {
        let mut g = self.0.borrow_mut();
        assert!(
            g.open.remove(&mapped).is_some(),
            "close of {mapped:#x}, which is not open (double close?)"
        );
        g.closes += 1;
    }
}
