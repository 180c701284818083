//! The BTL's CUDA logic end to end against the fake GPU, two processes in one test:
//! the handshake over envelopes (including a peer without a CUDA context yet), the
//! sender's registration handle as bytes, the receiver's get from it through the
//! cache, and a freed and reallocated buffer.

use rsmcuda_core::ipc::peers::{Envelope, IpcPeers, Output, PeersConfig};
use rsmcuda_core::ipc::{BadReason, CtrlMsg, Denial};
use rsmcuda_core::reg::{self, RemoteMemory};

use super::*;

/// One process's view of the shared fake: its own current device.
struct Side<'a> {
    gpu: &'a Fake,
    device: Option<i32>,
}

impl Gpu for Side<'_> {
    type Event = u32;
    type Stream = ();
    fn ipc_open(&self, h: &IpcHandle) -> Result<u64, OpenError> {
        self.gpu.ipc_open(h)
    }
    fn ipc_close(&self, m: u64) {
        self.gpu.ipc_close(m);
    }
    fn stream_create(&self) -> Result<(), i32> {
        self.gpu.stream_create()
    }
    fn event_create(&self) -> Result<u32, i32> {
        self.gpu.event_create()
    }
    unsafe fn copy_async(&self, dst: u64, src: u64, n: usize, s: &()) -> Result<(), i32> {
        // SAFETY: forwarded to the fake, whose memory is a map.
        unsafe { self.gpu.copy_async(dst, src, n, s) }
    }
    fn record(&self, e: &u32, s: &()) -> Result<(), i32> {
        self.gpu.record(e, s)
    }
    fn query(&self, e: &u32) -> Result<bool, i32> {
        self.gpu.query(e)
    }
    fn current_device(&self) -> Result<i32, i32> {
        self.device.ok_or(201)
    }
    fn can_access_peer(&self, d: i32, p: i32) -> Result<bool, i32> {
        self.gpu.can_access_peer(d, p)
    }
    fn is_device_pointer(&self, p: u64) -> bool {
        self.gpu.is_device_pointer(p)
    }
    fn buffer_id(&self, p: u64) -> Result<Option<u64>, i32> {
        self.gpu.buffer_id(p)
    }
    fn address_range(&self, p: u64) -> Result<(u64, u64), i32> {
        self.gpu.address_range(p)
    }
    fn ipc_get_mem_handle(&self, p: u64) -> Result<IpcHandle, i32> {
        self.gpu.ipc_get_mem_handle(p)
    }
    fn set_sync_memops(&self, p: u64) -> Result<(), i32> {
        self.gpu.set_sync_memops(p)
    }
}

fn peers(my_rank: u32) -> IpcPeers {
    IpcPeers::new(PeersConfig {
        my_rank,
        nranks: 2,
        same_gpu_allowed: true,
        host_cuda_aware: true,
    })
}

/// Carries out `from`'s outputs: envelopes onto the wire, ob1 notifications collected.
fn outputs(from: u32, p: &mut IpcPeers, wire: &mut Vec<Vec<u8>>, told: &mut Vec<Output>) {
    while let Some(o) = p.pop() {
        match o {
            Output::Send { msg, .. } => wire.push(Envelope { from, msg }.encode().to_vec()),
            other => told.push(other),
        }
    }
}

#[test]
fn handshake_with_a_late_context_then_register_get_and_cache() {
    let gpu = Fake::default();
    let a = Side {
        gpu: &gpu,
        device: Some(0),
    };
    let b = Side {
        gpu: &gpu,
        device: None,
    };
    let (mut pa, mut pb) = (peers(0), peers(1));
    let (mut to_a, mut to_b, mut told_a, mut told_b) = (vec![], vec![], vec![], vec![]);

    // A sends first; B has no context yet and answers NOTREADY.
    on_send(&a, &mut pa, 1);
    outputs(0, &mut pa, &mut to_b, &mut told_a);
    assert_eq!(to_b.len(), 1);
    for m in to_b.drain(..) {
        on_control(&b, &mut pb, &m).unwrap();
    }
    outputs(1, &mut pb, &mut to_a, &mut told_b);
    assert_eq!(
        Envelope::decode(&to_a[0]).unwrap().msg,
        CtrlMsg::NotReady,
        "no context on B yet"
    );
    for m in to_a.drain(..) {
        on_control(&a, &mut pa, &m).unwrap();
    }
    assert!(!pa.ipc_enabled(1) && !pb.ipc_enabled(0));

    // B's context appears on another device; A's next send asks again, B accepts.
    let b = Side {
        gpu: &gpu,
        device: Some(1),
    };
    on_send(&a, &mut pa, 1);
    outputs(0, &mut pa, &mut to_b, &mut told_a);
    for m in to_b.drain(..) {
        on_control(&b, &mut pb, &m).unwrap();
    }
    outputs(1, &mut pb, &mut to_a, &mut told_b);
    for m in to_a.drain(..) {
        on_control(&a, &mut pa, &m).unwrap();
    }
    outputs(0, &mut pa, &mut to_b, &mut told_a);
    assert_eq!(told_a, [Output::AddCudaIpc { peer: 1 }]);
    assert_eq!(told_b, [Output::AddCudaIpc { peer: 0 }]);
    assert_eq!(pa.peer(1).unwrap().tries(), 2, "one retry after NOTREADY");

    // A registers a device buffer; the 80 bytes travel in ob1's RGET header.
    let data: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    gpu.alloc(7, 0x10_0000, &data);
    let region = export(&a, 0x10_0000 + 512, 1024)
        .unwrap()
        .expect("device memory");
    assert_eq!((region.base, region.size), (0x10_0000, 4096));
    assert_eq!(
        gpu.0.borrow().sync_memops,
        [0x10_0000],
        "the exported allocation is made SYNC_MEMOPS"
    );
    let bytes = region.encode();
    assert_eq!(
        export(&a, 0x5000, 10),
        Ok(None),
        "host memory takes the CMA path"
    );
    assert_eq!(
        export(&a, 0x10_0000 + 4000, 200),
        Err(link::ExportError {
            call: "cuMemGetAddressRange",
            code: link::ERROR_INVALID_VALUE
        }),
        "a buffer running past its allocation"
    );

    // B gets it twice: the second get is served from the cache.
    let RemoteMemory::Device(remote) = reg::decode(&bytes).unwrap() else {
        panic!("a device handle")
    };
    let mut gets = DeviceGets::new(&b, CacheConfig::default(), 8).unwrap();
    // SAFETY: the fake's memory is a map.
    unsafe {
        assert!(
            !gets
                .start(0, &remote, 0x10_0000 + 512, 0xA000, 1024, 1)
                .unwrap()
        );
        assert!(gets.start(0, &remote, 0x10_0000, 0xB000, 512, 2).unwrap());
    }
    assert_eq!(drain(&mut gets), vec![Done::Ok(1), Done::Ok(2)]);
    assert_eq!(gpu.read(0xA000, 1024), data[512..1536]);
    assert_eq!(gpu.read(0xB000, 512), data[..512]);
    assert_eq!(gpu.0.borrow().opens, 1, "opened once");

    // A frees and reallocates at the same address: a new handle, a stale mapping.
    gpu.free(7);
    let fresh = vec![0x5a; 4096];
    gpu.alloc(8, 0x10_0000, &fresh);
    let again = export(&a, 0x10_0000, 64).unwrap().unwrap();
    assert_ne!(again.handle, region.handle);
    // SAFETY: fake memory.
    assert!(!unsafe { gets.start(0, &again, 0x10_0000, 0xC000, 64, 3) }.unwrap());
    assert_eq!(drain(&mut gets), vec![Done::Ok(3)]);
    assert_eq!(gpu.read(0xC000, 64), vec![0x5a; 64]);
    assert_eq!(gets.stats().stale, 1);
}

#[test]
fn gpus_without_peer_access_never_reach_ob1() {
    let gpu = Fake::default();
    gpu.0.borrow_mut().no_peer_access = true;
    let a = Side {
        gpu: &gpu,
        device: Some(0),
    };
    let b = Side {
        gpu: &gpu,
        device: Some(1),
    };
    let (mut pa, mut pb) = (peers(0), peers(1));
    let (mut to_a, mut to_b, mut told_a, mut told_b) = (vec![], vec![], vec![], vec![]);
    on_send(&a, &mut pa, 1);
    on_send(&b, &mut pb, 0);
    outputs(0, &mut pa, &mut to_b, &mut told_a);
    outputs(1, &mut pb, &mut to_a, &mut told_b);
    // Both asked at once: B (higher) answers, A sets B's request aside.
    while !(to_a.is_empty() && to_b.is_empty()) {
        for m in std::mem::take(&mut to_b) {
            on_control(&b, &mut pb, &m).unwrap();
        }
        outputs(1, &mut pb, &mut to_a, &mut told_b);
        for m in std::mem::take(&mut to_a) {
            on_control(&a, &mut pa, &m).unwrap();
        }
        outputs(0, &mut pa, &mut to_b, &mut told_a);
    }
    assert_eq!(
        told_b,
        [Output::Bad {
            peer: 0,
            reason: BadReason::Denied(Denial::NoPeerAccess)
        }]
    );
    assert_eq!(
        told_a,
        [Output::Bad {
            peer: 1,
            reason: BadReason::PeerRefused
        }]
    );
    on_send(&a, &mut pa, 1);
    assert_eq!(pa.pending(), 0, "refused for good: no more requests");
}

/// A send while this process has no CUDA context asks the driver and says so (the BTL
/// then stops asking on every send); with a context the request goes out; a decided
/// peer needs no question at all.
#[test]
fn a_send_without_a_context_says_so() {
    let gpu = Fake::default();
    let none = Side {
        gpu: &gpu,
        device: None,
    };
    let mut p = peers(0);
    assert!(!on_send(&none, &mut p, 1), "no context: reported");
    assert_eq!(p.pending(), 0, "nothing can go out without a context");
    let some = Side {
        gpu: &gpu,
        device: Some(0),
    };
    assert!(on_send(&some, &mut p, 1), "a context: the request goes out");
    assert!(p.pending() > 0);
    assert!(
        on_send(&none, &mut p, 1),
        "already asked: no question, nothing to report"
    );
}

/// The owner's release notice end to end: A exports a buffer B reads twice (B keeps
/// the mapping), A frees it, A's idle check finds it gone through the driver and owes B
/// a notice, whose bytes close B's mapping. No driver check at A's repeated exports.
#[test]
fn a_freed_buffer_read_twice_is_closed_by_its_owners_notice() {
    use rsmcuda_core::release::{Exports, ExportsConfig, Probe, ReleaseMsg};
    let gpu = Fake::default();
    let a = Side {
        gpu: &gpu,
        device: Some(0),
    };
    let b = Side {
        gpu: &gpu,
        device: Some(0),
    };
    let data = vec![0x33; 4096];
    gpu.alloc(9, 0x20_0000, &data);
    let mut exports = Exports::new(ExportsConfig::new(0, 2));
    let mut gets = DeviceGets::new(&b, CacheConfig::default(), 8).unwrap();
    for (i, dst) in [0xA000u64, 0xB000].into_iter().enumerate() {
        let e = export_tracked(&a, 0x20_0000, 4096).unwrap().unwrap();
        assert_eq!(e.buffer_id, 9);
        let checks = exports.exported(Some(1), e.region, e.buffer_id, |_| {
            panic!("nothing else to check")
        });
        assert_eq!(checks, 0);
        // SAFETY: fake memory.
        unsafe { gets.start(0, &e.region, 0x20_0000, dst, 4096, i) }.unwrap();
        assert_eq!(drain(&mut gets), vec![Done::Ok(i)]);
    }
    assert_eq!(gpu.0.borrow().open.len(), 1, "read twice: kept");
    assert_eq!(probe(&a, 0x20_0000), Probe::Id(9));
    exports.on_idle(|base| probe(&a, base));
    assert_eq!(exports.pending(), 0, "alive: nothing owed");

    gpu.free(9);
    assert_eq!(probe(&a, 0x20_0000), Probe::Gone);
    // Backed off to every 2nd idle call after one check found it alive.
    for _ in 0..2 {
        exports.on_idle(|base| probe(&a, base));
    }
    let (to, regions) = exports.next_batch(16).expect("a notice for B");
    assert_eq!(to, 1);
    let msg = ReleaseMsg::decode(&ReleaseMsg { from: 0, regions }.encode()).unwrap();
    for r in &msg.regions {
        assert!(gets.peer_released(msg.from, r));
    }
    assert_eq!(gpu.0.borrow().open.len(), 0, "B's mapping is closed");
    assert_eq!(gets.stats().peer_released, 1);
}
