//! The get path against a fake GPU: copies happen when their event is first seen
//! complete (asynchronously), mappings alias peer memory at another address.

use std::cell::RefCell;
use std::collections::HashMap;

use super::*;

const ALIAS: u64 = 1 << 40;

/// A queued copy: (dst, src, len).
type Copy = (u64, u64, usize);

#[derive(Default)]
struct Inner {
    mem: HashMap<u64, u8>,
    /// handle tag → (base, size, live)
    allocs: HashMap<u8, (u64, u64, bool)>,
    open: HashMap<u64, u8>,
    opens: u32,
    closes: u32,
    /// event id → pending copies (dst, src, len) and whether it was queried once
    events: HashMap<u32, (Vec<Copy>, bool)>,
    queued: Vec<Copy>,
    next_event: u32,
    fail_queries: bool,
    /// cuMemcpyAsync fails with this CUresult.
    fail_copies: Option<i32>,
    /// The device of the current context (None: the application has not touched CUDA).
    device: Option<i32>,
    /// What cuDeviceCanAccessPeer answers across devices.
    no_peer_access: bool,
    /// Allocations (by base) with SYNC_MEMOPS set.
    sync_memops: Vec<u64>,
}

#[derive(Default)]
struct Fake(RefCell<Inner>);

impl Fake {
    fn alloc(&self, tag: u8, base: u64, data: &[u8]) -> RemoteRegion {
        let mut g = self.0.borrow_mut();
        for (i, b) in data.iter().enumerate() {
            g.mem.insert(base + i as u64, *b);
        }
        g.allocs.insert(tag, (base, data.len() as u64, true));
        let mut h = [0u8; 64];
        h[0] = tag;
        RemoteRegion {
            handle: IpcHandle(h),
            base,
            size: data.len() as u64,
        }
    }
    fn free(&self, tag: u8) {
        self.0.borrow_mut().allocs.get_mut(&tag).unwrap().2 = false;
    }
    fn read(&self, at: u64, len: usize) -> Vec<u8> {
        let g = self.0.borrow();
        (0..len as u64)
            .map(|i| g.mem.get(&(at + i)).copied().unwrap_or(0))
            .collect()
    }
}

impl Gpu for Fake {
    type Event = u32;
    type Stream = ();
    fn ipc_open(&self, handle: &IpcHandle) -> Result<u64, OpenError> {
        let mut g = self.0.borrow_mut();
        let (base, _, live) = *g.allocs.get(&handle.0[0]).ok_or(OpenError::Other(400))?;
        if !live {
            return Err(OpenError::Other(400));
        }
        if g.open.contains_key(&(base + ALIAS)) {
            return Err(OpenError::AlreadyMapped);
        }
        g.open.insert(base + ALIAS, handle.0[0]);
        g.opens += 1;
        Ok(base + ALIAS)
    }
    fn ipc_close(&self, mapped: u64) {
        let mut g = self.0.borrow_mut();
        assert!(g.open.remove(&mapped).is_some(), "double close");
        g.closes += 1;
    }
    fn stream_create(&self) -> Result<(), i32> {
        Ok(())
    }
    fn event_create(&self) -> Result<u32, i32> {
        let mut g = self.0.borrow_mut();
        g.next_event += 1;
        Ok(g.next_event)
    }
    unsafe fn copy_async(&self, dst: u64, src: u64, bytes: usize, _: &()) -> Result<(), i32> {
        let mut g = self.0.borrow_mut();
        if let Some(code) = g.fail_copies {
            return Err(code);
        }
        assert!(
            g.open.keys().any(|m| src >= *m),
            "copy from an address that is not mapped"
        );
        g.queued.push((dst, src - ALIAS, bytes));
        Ok(())
    }
    fn record(&self, event: &u32, _: &()) -> Result<(), i32> {
        let mut g = self.0.borrow_mut();
        let work = std::mem::take(&mut g.queued);
        g.events.insert(*event, (work, false));
        Ok(())
    }
    fn current_device(&self) -> Result<i32, i32> {
        self.0.borrow().device.ok_or(201)
    }
    fn can_access_peer(&self, dev: i32, peer: i32) -> Result<bool, i32> {
        assert_ne!(dev, peer, "only asked across devices");
        Ok(!self.0.borrow().no_peer_access)
    }
    fn is_device_pointer(&self, ptr: u64) -> bool {
        self.address_range(ptr).is_ok()
    }
    fn buffer_id(&self, ptr: u64) -> Result<Option<u64>, i32> {
        let g = self.0.borrow();
        Ok(g.allocs
            .iter()
            .find(|(_, (base, size, live))| *live && ptr >= *base && ptr < base + size)
            .map(|(tag, _)| u64::from(*tag)))
    }
    fn address_range(&self, ptr: u64) -> Result<(u64, u64), i32> {
        let g = self.0.borrow();
        g.allocs
            .values()
            .find(|(base, size, live)| *live && ptr >= *base && ptr < base + size)
            .map(|(base, size, _)| (*base, *size))
            .ok_or(1)
    }
    fn ipc_get_mem_handle(&self, ptr: u64) -> Result<IpcHandle, i32> {
        let g = self.0.borrow();
        let (tag, _) = g
            .allocs
            .iter()
            .find(|(_, (base, size, live))| *live && ptr >= *base && ptr < base + size)
            .ok_or(1)?;
        let mut h = [0u8; 64];
        h[0] = *tag;
        Ok(IpcHandle(h))
    }
    fn set_sync_memops(&self, ptr: u64) -> Result<(), i32> {
        let (base, _) = self.address_range(ptr)?;
        self.0.borrow_mut().sync_memops.push(base);
        Ok(())
    }
    fn query(&self, event: &u32) -> Result<bool, i32> {
        let mut g = self.0.borrow_mut();
        if g.fail_queries {
            return Err(999);
        }
        let (work, seen) = g.events.get_mut(event).expect("recorded");
        if !*seen {
            *seen = true;
            return Ok(false);
        }
        let work = std::mem::take(work);
        for (dst, src, len) in work {
            for i in 0..len as u64 {
                let b = g.mem.get(&(src + i)).copied().unwrap_or(0);
                g.mem.insert(dst + i, b);
            }
        }
        Ok(true)
    }
}

fn drain<G: Gpu, T>(gets: &mut DeviceGets<'_, G, T>) -> Vec<Done<T>> {
    let mut out = Vec::new();
    for _ in 0..100 {
        while let Some(d) = gets.poll() {
            out.push(d);
        }
        if gets.in_flight() == 0 {
            break;
        }
    }
    out
}

#[test]
fn copies_arrive_in_order_and_a_second_get_hits_the_cache() {
    let gpu = Fake::default();
    let data: Vec<u8> = (0..200u8).collect();
    let region = gpu.alloc(1, 0x1000, &data);
    let mut gets = DeviceGets::new(&gpu, CacheConfig::default(), 4).unwrap();
    // SAFETY: the fake's memory is a map; any address is valid.
    let hit = unsafe { gets.start(7, &region, 0x1000 + 10, 0x9000, 50, "a") }.unwrap();
    assert!(!hit);
    // SAFETY: as above.
    let hit = unsafe { gets.start(7, &region, 0x1000 + 100, 0x9100, 100, "b") }.unwrap();
    assert!(hit, "same allocation, same handle: served from the cache");
    assert_eq!(gets.poll(), None, "the copy is still running");
    assert_eq!(drain(&mut gets), vec![Done::Ok("a"), Done::Ok("b")]);
    assert_eq!(gpu.read(0x9000, 50), data[10..60]);
    assert_eq!(gpu.read(0x9100, 100), data[100..200]);
    assert_eq!(gets.stats().hits, 1);
    assert_eq!(gets.stats().misses, 1);
    assert_eq!(gpu.0.borrow().opens, 1);
    drop(gets);
    assert_eq!(
        gpu.0.borrow().closes,
        1,
        "the cache closes its mappings on drop"
    );
}

#[test]
fn a_reallocated_buffer_at_the_same_address_is_reopened() {
    let gpu = Fake::default();
    let old = gpu.alloc(1, 0x1000, &[1; 64]);
    let mut gets = DeviceGets::new(&gpu, CacheConfig::default(), 4).unwrap();
    // SAFETY: fake memory.
    unsafe { gets.start(3, &old, 0x1000, 0x8000, 64, 1) }.unwrap();
    drain(&mut gets);
    let counts = |gpu: &Fake| (gpu.0.borrow().opens, gpu.0.borrow().closes);
    assert_eq!(counts(&gpu), (1, 1), "read once: closed after its copy");
    // Read again: opened again and kept.
    // SAFETY: fake memory.
    unsafe { gets.start(3, &old, 0x1000, 0x8000, 64, 1) }.unwrap();
    drain(&mut gets);
    assert_eq!(counts(&gpu), (2, 1));
    gpu.free(1);
    let new = gpu.alloc(2, 0x1000, &[2; 64]);
    // SAFETY: fake memory.
    let hit = unsafe { gets.start(3, &new, 0x1000, 0x8000, 64, 2) }.unwrap();
    assert!(!hit, "a new handle at the same base is not a hit");
    drain(&mut gets);
    assert_eq!(
        gpu.read(0x8000, 64),
        vec![2; 64],
        "no stale mapping was used"
    );
    assert_eq!(gets.stats().stale, 1);
    assert_eq!(
        counts(&gpu),
        (3, 3),
        "the stale mapping closed, and the new one after its first use"
    );
}

#[test]
fn out_of_events_is_busy_and_bad_ranges_are_refused() {
    let gpu = Fake::default();
    let region = gpu.alloc(1, 0x1000, &[5; 100]);
    let mut gets = DeviceGets::new(&gpu, CacheConfig::default(), 1).unwrap();
    // SAFETY: fake memory.
    unsafe {
        assert_eq!(
            gets.start(1, &region, 0x1000 + 90, 0x8000, 20, 0),
            Err(GetError::OutOfRange)
        );
        assert_eq!(
            gets.start(1, &region, 0x0fff, 0x8000, 1, 0),
            Err(GetError::OutOfRange)
        );
        gets.start(1, &region, 0x1000, 0x8000, 100, 1).unwrap();
        assert_eq!(
            gets.start(1, &region, 0x1000, 0x8100, 1, 2),
            Err(GetError::Busy)
        );
    }
    assert_eq!(drain(&mut gets), vec![Done::Ok(1)]);
    // SAFETY: fake memory.
    unsafe { gets.start(1, &region, 0x1000, 0x8100, 1, 2) }.unwrap();
}

#[test]
fn a_failed_event_query_reports_the_get_as_failed() {
    let gpu = Fake::default();
    let region = gpu.alloc(1, 0x1000, &[5; 10]);
    let mut gets = DeviceGets::new(&gpu, CacheConfig::default(), 2).unwrap();
    // SAFETY: fake memory.
    unsafe { gets.start(1, &region, 0x1000, 0x8000, 10, "x") }.unwrap();
    gpu.0.borrow_mut().fail_queries = true;
    assert_eq!(gets.poll(), Some(Done::Failed("x", 999)));
    assert_eq!(gets.in_flight(), 0);
}

/// A failed copy or open names the CUDA call, releases the mapping and the event,
/// and the next get works.
#[test]
fn a_failed_copy_or_open_names_the_call_and_leaks_nothing() {
    let gpu = Fake::default();
    let region = gpu.alloc(1, 0x1000, &[5; 10]);
    let mut gets = DeviceGets::new(&gpu, CacheConfig::default(), 1).unwrap();
    gpu.0.borrow_mut().fail_copies = Some(700);
    // SAFETY: fake memory.
    let failed = unsafe { gets.start(1, &region, 0x1000, 0x8000, 10, "a") }.unwrap_err();
    assert_eq!(failed.failed_call(), Some(("cuMemcpyAsync", 700)));
    assert_eq!(failed.to_string(), "cuMemcpyAsync failed with CUresult 700");
    assert_eq!(gets.in_flight(), 0);
    gpu.0.borrow_mut().fail_copies = None;
    // SAFETY: fake memory.
    unsafe { gets.start(1, &region, 0x1000, 0x8000, 10, "b") }.unwrap();
    assert_eq!(drain(&mut gets), vec![Done::Ok("b")]);

    gpu.free(1);
    let stale = gpu.alloc(2, 0x1000, &[6; 10]);
    let mut closed = stale;
    closed.handle.0[0] = 9; // a handle the driver does not know
    // SAFETY: fake memory.
    let failed = unsafe { gets.start(1, &closed, 0x1000, 0x8000, 10, "c") }.unwrap_err();
    assert_eq!(failed.failed_call(), Some(("cuIpcOpenMemHandle", 400)));
    assert_eq!(gets.in_flight(), 0);
    // SAFETY: fake memory.
    unsafe { gets.start(1, &stale, 0x1000, 0x8000, 10, "d") }.unwrap();
    assert_eq!(drain(&mut gets), vec![Done::Ok("d")]);
    assert_eq!(gpu.read(0x8000, 10), vec![6; 10]);
}

#[test]
fn the_real_driver_is_absent_here_or_builds_a_get_path() {
    match cuda::Driver::load() {
        Err(e) => assert!(e.to_string().contains("libcuda.so.1"), "{e}"),
        Ok(driver) => {
            if driver.device_count().unwrap_or(0) > 0 && driver.use_primary_context(0).is_ok() {
                let gets = DeviceGets::<_, ()>::new(&driver, CacheConfig::default(), 8);
                assert!(gets.is_ok());
            }
        }
    }
}

mod link_tests;
