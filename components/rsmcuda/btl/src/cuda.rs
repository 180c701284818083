//! The CUDA side, decided once at init. It is on only when (1) the user allows it
//! (btl_rsmcuda_use_cuda_ipc), (2) the running Open MPI lets BTLs use CUDA
//! (`mca::gpu`: 4.1 built with CUDA and not disabled; 5.0 with `cuda` as its selected
//! accelerator component, as 5.0's smcuda checks) — ob1 without CUDA aborts the job on
//! the ADD_CUDA_IPC error callback, so it must never be raised there — and (3) the CUDA
//! driver library loads at run time.
//!
//! This file only moves bytes between Open MPI and the logic in `rsmcuda-core` /
//! `rsmcuda-cuda`:
//! - the handshake: control messages on [`CTRL_TAG`] through our FIFOs (sent from
//!   progress, retried while no fragment is free), `IpcPeers` deciding, and
//!   ADD_CUDA_IPC raised for a peer once it is enabled;
//! - `btl_register_mem` of device memory for remote read: the 80-byte registration
//!   handle (IPC handle, allocation base and size); host buffers get an all-zero one
//!   and keep the CMA rules;
//! - `btl_get` from a device handle: `DeviceGets` (cache, async copy, event) and the
//!   completions, in order, from progress;
//! - release notices (`rsmcuda_core::release`): the device allocations this process
//!   exported are tracked (`Exports`), checked with the driver when a new one is
//!   exported and once in a while from idle progress, and a freed one is announced to
//!   the peers its handle went to, on [`CTRL_TAG`]; a notice received closes that
//!   mapping in the cache.
//!
//! With CUDA IPC off nothing here changes the module: registration handles stay 0
//! bytes, send/progress pay one atomic load, and a peer's request (if a peer has
//! CUDA on) is refused so it does not wait.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use mca::btl::{Btl, BtlModule, RdmaCompletion, RdmaOp, Registration};
use mca::output::Stream;
use mca::proc::Proc;
use mca::{Error, Result, sys, verbose};
use rsmcuda_core::cache::CacheConfig;
use rsmcuda_core::ipc::peers::{Envelope, IpcPeers, Output, PeersConfig};
use rsmcuda_core::reg::{
    self, DeviceRegion, HOST_HANDLE, REG_HANDLE_LEN, RemoteMemory, UNSHARED_DEVICE_HANDLE,
};
use rsmcuda_core::release::{self, Exports, ExportsConfig, ReleaseMsg};
use rsmcuda_cuda::{DeviceGets, Done, Exported, GetError};

use crate::node::Node;
use crate::{help, params, stats};

pub use rsmcuda_core::ipc::peers::CTRL_TAG;

/// A get's token: the local rank it reads from, its size, and ob1's completion.
type GetToken = (u32, usize, RdmaCompletion);
type Gets = DeviceGets<'static, cuda::Driver, GetToken>;

/// Present only while CUDA IPC is active.
struct Cuda {
    driver: &'static cuda::Driver,
    /// Created at the first device get: the stream and events belong to the
    /// application's context, which may not exist at init.
    gets: Mutex<Option<Gets>>,
    /// Registration handles handed out for device buffers (addresses of boxes).
    handles: Mutex<HashSet<usize>>,
}

/// The handshakes and who the peers are (both sides of the switch: a host without
/// CUDA refuses requests through it).
struct Control {
    peers: IpcPeers,
    procs: HashMap<u32, Proc>,
}

static CUDA: OnceLock<Cuda> = OnceLock::new();
/// Set at attach when every rank of the segment has CUDA IPC (`active`).
static ENABLED: AtomicBool = AtomicBool::new(false);
static CONTROL: Mutex<Option<Control>> = Mutex::new(None);
/// What progress may find to do here, one bit each (so that an idle pass asks one
/// load): each bit is set and cleared under the lock named at it, with an atomic
/// read-modify-write since the bits share the word.
static WORK: AtomicU8 = AtomicU8::new(0);
/// Outputs of the handshake are queued (under the CONTROL lock).
const CONTROL_WORK: u8 = 1;
/// Release notices are queued in EXPORTS (under its lock).
const RELEASE_WORK: u8 = 2;
/// Device gets are in flight (under the gets lock).
const GETS_WORK: u8 = 4;
/// EXPORTS tracks some allocation: idle progress checks one once in a while (under its
/// lock).
const EXPORTS_LIVE: u8 = 8;

#[inline]
fn work(bit: u8) -> bool {
    WORK.load(Ordering::Acquire) & bit != 0
}

/// Sets or clears `bit` of [`WORK`] (its lock held).
fn set_work(bit: u8, on: bool) {
    if work(bit) == on {
        return;
    }
    if on {
        WORK.fetch_or(bit, Ordering::AcqRel);
    } else {
        WORK.fetch_and(!bit, Ordering::AcqRel);
    }
}
/// Per local rank: the handshake reached a final state (enabled or refused), so sends
/// skip the CONTROL lock. Set under that lock, never cleared while the node lives.
static SETTLED: OnceLock<Vec<AtomicBool>> = OnceLock::new();
/// Device gets in flight (stored under the gets lock).
static GETS_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// The driver, when it loaded (kept for the life of the process: the driver must
/// not be unloaded).
static DRIVER: OnceLock<cuda::Driver> = OnceLock::new();
/// The handle of host buffers while CUDA IPC is active (ob1 copies
/// REG_HANDLE_LEN bytes of every handle).
static HOST: [u8; REG_HANDLE_LEN] = HOST_HANDLE;
/// The handle of device memory registered for its owner's own use.
static UNSHARED_DEVICE: [u8; REG_HANDLE_LEN] = UNSHARED_DEVICE_HANDLE;
/// This process started 4.1's PML CUDA support (ended at finalize).
static PML_CUDA_STARTED: AtomicBool = AtomicBool::new(false);
/// Why the PML's CUDA support could not start (CUDA IPC stays off then).
static PML_CUDA_FAILED: OnceLock<String> = OnceLock::new();
/// Device allocations exported to peers (with CUDA IPC active, from attach).
static EXPORTS: Mutex<Option<Exports>> = Mutex::new(None);
/// Idle progress passes counted while EXPORTS_LIVE (a plain load and store).
static IDLE_PASSES: AtomicU32 = AtomicU32::new(0);
/// (local rank, CUDA call) pairs already reported as failing: said once each.
static FAILURES_SAID: Mutex<Option<HashSet<(u32, &'static str)>>> = Mutex::new(None);

/// The CUDA state while CUDA IPC is in use.
fn cuda() -> Option<&'static Cuda> {
    CUDA.get().filter(|_| ENABLED.load(Ordering::Acquire))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// CUDA IPC is in use: probed here and active in every rank of the segment.
pub fn active() -> bool {
    ENABLED.load(Ordering::Acquire) && CUDA.get().is_some()
}

/// CUDA IPC could run in this process (published in the modex).
pub fn probed() -> bool {
    CUDA.get().is_some()
}

/// Why CUDA IPC is off, or None when it may run.
fn reason_off() -> Option<String> {
    if !params::get().use_cuda_ipc.enabled() {
        return Some("btl_rsmcuda_use_cuda_ipc is false".into());
    }
    if let Some(why) = PML_CUDA_FAILED.get() {
        return Some(why.clone());
    }
    mca::gpu::cuda_off_reason()
}

/// Lets ob1 tell device buffers from host ones (4.1: see `mca::gpu`), whatever
/// `btl_rsmcuda_use_cuda_ipc` says: without CUDA IPC device buffers still pass through
/// our host fragments, and ob1 must copy them with the driver, not `memcpy`.
pub fn start_pml_support(stream: &Stream) {
    match mca::gpu::start_pml_cuda_support() {
        Ok(started) => PML_CUDA_STARTED.store(started, Ordering::Release),
        Err(why) => {
            mca::help::show_help(help::HELP, "pml cuda support", true, &[&why]);
            verbose!(stream, 1, "btl:rsmcuda: {why}");
            let _ = PML_CUDA_FAILED.set(why);
        }
    }
}

/// Ends what [`start_pml_support`] started (also when init gives up after it).
pub fn end_pml_support() {
    if PML_CUDA_STARTED.swap(false, Ordering::AcqRel) {
        mca::gpu::end_pml_cuda_support();
    }
}

pub fn probe(stream: &Stream) {
    if let Some(why) = reason_off() {
        verbose!(
            stream,
            1,
            "btl:rsmcuda: CUDA IPC off: {why}; host path only"
        );
        return;
    }
    let driver = match cuda::Driver::open() {
        Ok(d) => d,
        Err(e) => {
            verbose!(stream, 1, "btl:rsmcuda: CUDA IPC off: {e}; host path only");
            return;
        }
    };
    let driver = DRIVER.get_or_init(|| driver);
    let p = params::get();
    verbose!(
        stream,
        1,
        "btl:rsmcuda: CUDA IPC on: driver {} with {} (same GPU {}, cache limit {} bytes, {} \
         events)",
        driver.version().unwrap_or(0),
        // cuInit is the application's to call (see cuda::Driver::open).
        driver.device_count().map_or_else(
            |_| "devices counted once the application initialises CUDA".to_owned(),
            |n| format!("{n} device(s)")
        ),
        p.use_cuda_ipc_same_gpu.enabled(),
        p.cuda_cache_limit.get(),
        p.cuda_event_max.get()
    );
    let _ = CUDA.set(Cuda {
        driver,
        gets: Mutex::new(None),
        handles: Mutex::new(HashSet::new()),
    });
}

/// The node is set up: start the handshakes, and with CUDA IPC active make room for
/// device handles in ob1's RGET header.
pub fn attach<M: BtlModule>(btl: &Btl<M>, node: &Node, everyone_has_cuda_ipc: bool) {
    if probed() && !everyone_has_cuda_ipc {
        verbose!(
            crate::params::stream(),
            1,
            "btl:rsmcuda: CUDA IPC off: a rank of this node has no CUDA IPC (registration \
             handles would not match); host path only"
        );
    }
    ENABLED.store(probed() && everyone_has_cuda_ipc, Ordering::Release);
    if active() {
        // SAFETY: our own module, during add_procs (setup): ob1 reads the size only
        // when it builds or reads an RGET header, after add_procs returned.
        unsafe { (*btl.as_raw()).btl_registration_handle_size = REG_HANDLE_LEN };
    }
    *lock(&CONTROL) = Some(Control {
        peers: IpcPeers::new(PeersConfig {
            my_rank: node.my_rank(),
            nranks: node.seg.nranks(),
            same_gpu_allowed: params::get().use_cuda_ipc_same_gpu.enabled(),
            host_cuda_aware: active(),
        }),
        procs: HashMap::new(),
    });
    if active() {
        *lock(&EXPORTS) = Some(Exports::new(ExportsConfig::new(
            node.my_rank(),
            node.seg.nranks(),
        )));
    }
    let _ = SETTLED.set(
        (0..node.seg.nranks())
            .map(|_| AtomicBool::new(false))
            .collect(),
    );
}

fn settled(peer: u32) -> Option<&'static AtomicBool> {
    SETTLED.get().and_then(|v| v.get(peer as usize))
}

/// A peer's process, for the ADD_CUDA_IPC callback.
pub fn remember(rank: u32, proc_: Proc) {
    if let Some(c) = lock(&CONTROL).as_mut() {
        c.procs.insert(rank, proc_);
    }
}

/// Before a send to local rank `peer`: ask for IPC while nothing is decided.
/// Inline: on hosts without CUDA IPC every small send passes here. `device`: the
/// message's data is GPU memory.
#[inline]
pub fn before_send(peer: u32, device: bool) {
    if !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    let Some(cuda) = cuda() else {
        return;
    };
    if settled(peer).is_some_and(|s| s.load(Ordering::Acquire)) {
        return;
    }
    if !device && NO_CONTEXT.load(Ordering::Relaxed) && !recheck_due() {
        return;
    }
    ask_for_ipc(cuda, peer);
}

/// While the driver says this process has no CUDA context (a CPU-only application on a
/// GPU node), no handshake can start; asking on every send cost 1.5-3.9 µs a message
/// on an H200 machine (8-byte latency, against 0.35-0.45 µs without the question).
/// The question is asked again on a send of GPU memory, or once in [`RECHECK_SENDS`].
static NO_CONTEXT: AtomicBool = AtomicBool::new(false);
static SENDS_SINCE_ASKED: AtomicU32 = AtomicU32::new(0);
const RECHECK_SENDS: u32 = 1024;

/// Counts a send without a context; true once in [`RECHECK_SENDS`]. A plain load and
/// store: concurrent senders may lose a count, which only delays the next question.
#[inline]
fn recheck_due() -> bool {
    let n = SENDS_SINCE_ASKED.load(Ordering::Relaxed).wrapping_add(1);
    SENDS_SINCE_ASKED.store(n, Ordering::Relaxed);
    n.is_multiple_of(RECHECK_SENDS)
}

#[cold]
fn ask_for_ipc(cuda: &Cuda, peer: u32) {
    let mut guard = lock(&CONTROL);
    if let Some(c) = guard.as_mut() {
        let has_context = rsmcuda_cuda::on_send(cuda.driver, &mut c.peers, peer);
        NO_CONTEXT.store(!has_context, Ordering::Relaxed);
        if c.peers.pending() > 0 {
            set_work(CONTROL_WORK, true);
        }
        mark_settled(&c.peers, peer);
    }
}

/// Records a final handshake state (called under the CONTROL lock).
fn mark_settled(peers: &IpcPeers, peer: u32) {
    let done = peers
        .peer(peer)
        .is_some_and(|p| p.ipc_enabled() || p.state() == rsmcuda_core::ipc::IpcState::Bad);
    if done && let Some(s) = settled(peer) {
        s.store(true, Ordering::Release);
    }
}

/// Whether `sendi` must refuse: device data (`device`, the convertor's device flag) to
/// a peer with CUDA IPC on goes through ob1's RGET path (registration + get) instead of
/// being packed into a fragment, as with smcuda.
#[inline]
pub fn refuse_sendi(peer: u32, device: bool) -> bool {
    device
        && active()
        && lock(&CONTROL)
            .as_ref()
            .is_some_and(|c| c.peers.ipc_enabled(peer))
}

/// A control message arrived (called from the receive path).
pub fn on_control(bytes: &[u8]) {
    if release::is_release(bytes) {
        on_release(bytes);
        return;
    }
    let mut guard = lock(&CONTROL);
    let Some(c) = guard.as_mut() else {
        return;
    };
    let result = match cuda() {
        Some(cuda) => rsmcuda_cuda::on_control(cuda.driver, &mut c.peers, bytes),
        None => c
            .peers
            .on_control(bytes, None, |_, _| Ok::<bool, ()>(false)),
    };
    match result {
        Ok(from) => {
            mark_settled(&c.peers, from);
            set_work(CONTROL_WORK, c.peers.pending() > 0);
        }
        Err(e) => mca::help::show_help(crate::help::HELP, "corrupt fifo", true, &[&e.to_string()]),
    }
}

/// A peer's release notice: it freed allocations it had exported to us; their
/// mappings are closed (now, or when the last get using one completes).
fn on_release(bytes: &[u8]) {
    let msg = match ReleaseMsg::decode(bytes) {
        Ok(m) => m,
        Err(e) => {
            mca::help::show_help(crate::help::HELP, "corrupt fifo", true, &[&e.to_string()]);
            return;
        }
    };
    let Some(cuda) = cuda() else {
        return;
    };
    let mut guard = lock(&cuda.gets);
    // No get yet: nothing mapped.
    if let Some(gets) = guard.as_mut() {
        for r in &msg.regions {
            gets.peer_released(msg.from, r);
        }
        publish(gets);
    }
}

/// No CUDA work for progress: no control message or release notice queued, no device
/// get in flight (the things [`progress`] looks at).
#[inline]
pub fn idle() -> bool {
    WORK.load(Ordering::Acquire) & (CONTROL_WORK | RELEASE_WORK | GETS_WORK) == 0
}

/// [`idle`], and no exported allocation tracked either (so [`idle_pass`] has nothing
/// to count): one load.
#[inline]
pub fn quiet() -> bool {
    WORK.load(Ordering::Acquire) == 0
}

/// A progress pass found nothing to do: with exported allocations tracked, one of them
/// is checked once in `release::IDLE_PASSES_PER_CHECK` such passes. Inline: without
/// exports one load.
#[inline]
pub fn idle_pass() {
    if !work(EXPORTS_LIVE) {
        return;
    }
    let n = IDLE_PASSES.load(Ordering::Relaxed).wrapping_add(1);
    IDLE_PASSES.store(n, Ordering::Relaxed);
    if release::idle_check_due(n) {
        idle_check();
    }
}

#[cold]
fn idle_check() {
    let Some(cuda) = cuda() else {
        return;
    };
    // Another thread exporting or flushing: the next due pass checks.
    let Ok(mut guard) = EXPORTS.try_lock() else {
        return;
    };
    if let Some(x) = guard.as_mut() {
        x.on_idle(|base| rsmcuda_cuda::probe(cuda.driver, base));
        exports_changed(x);
    }
}

/// After EXPORTS changed (under its lock): the flags progress reads, the pvar.
fn exports_changed(x: &Exports) {
    set_work(EXPORTS_LIVE, x.tracked() > 0);
    if x.pending() > 0 {
        set_work(RELEASE_WORK, true);
    }
    stats::RELEASE_NOTICES.store(x.stats().notices, Ordering::Relaxed);
}

/// An allocation was exported for `to`: tracked, and on a new one others checked.
fn track(cuda: &Cuda, to: RegisteredFor, e: &Exported) {
    let peer = match to {
        RegisteredFor::Peer(p) => Some(p),
        RegisteredFor::Unknown => None,
        // No IPC with processes of other jobs: they cannot map it.
        RegisteredFor::OtherJob => return,
    };
    let mut guard = lock(&EXPORTS);
    if let Some(x) = guard.as_mut() {
        x.exported(peer, e.region, e.buffer_id, |base| {
            rsmcuda_cuda::probe(cuda.driver, base)
        });
        exports_changed(x);
    }
}

/// Sends the queued release notices (batched per peer); what finds no free fragment
/// waits for the next pass.
fn flush_releases(node: &Node) -> usize {
    let mut guard = lock(&EXPORTS);
    let Some(x) = guard.as_mut() else {
        set_work(RELEASE_WORK, false);
        return 0;
    };
    let max = release::max_per_message(node.eager_capacity());
    let mut sent = 0;
    while let Some((to, regions)) = x.next_batch(max) {
        if max == 0 {
            // Eager fragments too small for one notice: the peer keeps its mapping
            // until its address comes back, its cache limit or finalize.
            continue;
        }
        let msg = ReleaseMsg {
            from: node.my_rank(),
            regions,
        };
        if !node.send_bytes(to, CTRL_TAG, &msg.encode()) {
            x.unsend(to, msg.regions);
            break;
        }
        sent += 1;
    }
    set_work(RELEASE_WORK, x.pending() > 0);
    sent
}

/// Progress: control messages out, ob1 told, device gets completed in order.
/// Inline: every progress pass calls it; mostly two loads.
#[inline]
pub fn progress<M: BtlModule>(btl: &Btl<M>, node: &Node) -> usize {
    let mut handled = 0;
    if work(CONTROL_WORK) {
        handled += flush_control(btl, node);
    }
    if work(RELEASE_WORK) {
        handled += flush_releases(node);
    }
    if GETS_IN_FLIGHT.load(Ordering::Acquire) > 0 {
        handled += complete_gets(btl);
    }
    handled
}

fn flush_control<M: BtlModule>(btl: &Btl<M>, node: &Node) -> usize {
    let mut told = Vec::new();
    let mut done = 0;
    {
        let mut guard = lock(&CONTROL);
        let Some(c) = guard.as_mut() else {
            return 0;
        };
        let me = node.my_rank();
        while let Some(out) = c.peers.pop() {
            match out {
                Output::Send { to, msg } => {
                    let bytes = Envelope { from: me, msg }.encode();
                    if !node.send_bytes(to, CTRL_TAG, &bytes) {
                        c.peers.requeue(out);
                        break;
                    }
                    done += 1;
                }
                Output::AddCudaIpc { peer } => told.push((peer, c.procs.get(&peer).copied())),
                Output::Bad { peer, reason } => match cuda() {
                    // This process moves device memory, so device messages to this
                    // peer take the slow path: the user hears of it (upstream smcuda
                    // says nothing, ompi#10871).
                    Some(cuda) => {
                        stats::bump(&stats::IPC_UNAVAILABLE);
                        let device = cuda
                            .driver
                            .current_device()
                            .map_or_else(|_| "unknown".to_owned(), |d| d.to_string());
                        mca::help::show_help(
                            crate::help::HELP,
                            "cuda ipc unavailable",
                            true,
                            &[
                                &me.to_string(),
                                &device,
                                &peer.to_string(),
                                &reason.to_string(),
                            ],
                        );
                    }
                    None => verbose!(
                        crate::params::stream(),
                        1,
                        "btl:rsmcuda: no CUDA IPC with local rank {peer}: {reason}"
                    ),
                },
            }
        }
        set_work(CONTROL_WORK, c.peers.pending() > 0);
    }
    // Outside the lock: ob1's handler may send.
    for (peer, proc_) in told {
        // IpcPeers emits AddCudaIpc only with CUDA IPC active, i.e. in a CUDA-aware
        // Open MPI; checked again because the other branch aborts the job.
        if !active() {
            continue;
        }
        let Some(proc_) = proc_ else {
            verbose!(
                crate::params::stream(),
                1,
                "btl:rsmcuda: CUDA IPC with local rank {peer} agreed, but it is not one of \
                 our endpoints; ob1 is not told"
            );
            continue;
        };
        verbose!(
            crate::params::stream(),
            1,
            "btl:rsmcuda: CUDA IPC with local rank {peer} on"
        );
        btl.report_add_cuda_ipc(proc_, crate::params::stream().id());
        stats::bump(&stats::IPC_PEERS);
        done += 1;
    }
    done
}

fn complete_gets<M: BtlModule>(btl: &Btl<M>) -> usize {
    let Some(cuda) = CUDA.get() else {
        return 0;
    };
    let finished: Vec<Done<GetToken>> = {
        let mut guard = lock(&cuda.gets);
        let Some(gets) = guard.as_mut() else {
            return 0;
        };
        let finished = std::iter::from_fn(|| gets.poll()).collect();
        publish(gets);
        finished
    };
    let n = finished.len();
    // Outside the lock: ob1's completion may start the next get.
    for d in finished {
        match d {
            Done::Ok((_, _, done)) => done.complete(btl, Ok(())),
            Done::Failed((peer, size, done), code) => {
                // The ring learns of a failed copy from its event.
                report_failure(cuda, peer, size, "cuEventQuery", code);
                done.complete(btl, Err(Error::ERROR));
            }
        }
    }
    n
}

/// Counters for MPI_T and progress (under the gets lock).
fn publish(gets: &Gets) {
    GETS_IN_FLIGHT.store(gets.in_flight(), Ordering::Release);
    set_work(GETS_WORK, gets.in_flight() > 0);
    let s = gets.stats();
    stats::CACHE_HITS.store(s.hits, Ordering::Relaxed);
    stats::CACHE_MISSES.store(s.misses, Ordering::Relaxed);
    stats::CACHE_EVICTIONS.store(s.evictions + s.stale, Ordering::Relaxed);
    stats::CACHE_RELEASED.store(s.peer_released, Ordering::Relaxed);
}

/// Whom a registration is for (the endpoint ob1 passes to `btl_register_mem`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisteredFor {
    /// A peer of the job's segment (its local rank).
    Peer(u32),
    /// No endpoint given: any peer may get it.
    Unknown,
    /// A process of another job (no CUDA IPC with it).
    OtherJob,
}

/// What `btl_register_mem` should do.
pub enum Reg {
    /// CUDA IPC off: the host rules as without this file.
    Inactive,
    /// Host memory with CUDA IPC active: the host rules, with [`host_registration`].
    Host,
    /// Device memory for this process's own use (a get's destination, a put's target):
    /// [`unshared_device_registration`].
    UnsharedDevice,
    /// A device buffer's handle.
    Device(Registration),
    /// Device memory that cannot be exported: decline.
    Decline,
}

pub fn register(base: *mut u8, size: usize, flags: u32, to: RegisteredFor) -> Reg {
    let Some(cuda) = cuda() else {
        return Reg::Inactive;
    };
    if flags & sys::MCA_BTL_REG_FLAG_REMOTE_READ == 0 {
        // The local side of a get needs nothing: the copy writes through its address.
        // A put's target in device memory must be refused by the peer's put.
        return if cuda.driver.is_device_pointer(base as u64) {
            Reg::UnsharedDevice
        } else {
            Reg::Host
        };
    }
    match rsmcuda_cuda::export_tracked(cuda.driver, base as u64, size as u64) {
        Ok(None) => Reg::Host,
        Ok(Some(exported)) => {
            track(cuda, to, &exported);
            let raw = Box::into_raw(Box::new(exported.region.encode()));
            lock(&cuda.handles).insert(raw as usize);
            Registration::from_raw(raw.cast()).map_or(Reg::Decline, Reg::Device)
        }
        Err(e) => {
            stats::bump(&stats::UNSHAREABLE);
            // Said once per process: an application with such buffers registers them
            // over and over.
            static SAID: AtomicBool = AtomicBool::new(false);
            if !SAID.swap(true, Ordering::Relaxed) {
                mca::help::show_help(
                    crate::help::HELP,
                    "cuda buffer not shareable",
                    true,
                    &[
                        &format!("{base:p}"),
                        &size.to_string(),
                        e.call,
                        &e.code.to_string(),
                        &cuda.driver.error_string(e.code),
                    ],
                );
            }
            Reg::Decline
        }
    }
}

/// The handle of a host buffer while CUDA IPC is active.
pub fn host_registration() -> Registration {
    Registration::from_raw((&raw const HOST).cast_mut().cast())
        .expect("a static has a non-NULL address")
}

/// The handle of device memory registered for this process's own use.
pub fn unshared_device_registration() -> Registration {
    Registration::from_raw((&raw const UNSHARED_DEVICE).cast_mut().cast())
        .expect("a static has a non-NULL address")
}

/// Whether a put must be refused because device memory is on either side: CMA cannot
/// write device memory, and CUDA IPC is for gets (ob1 then copies that part in and out).
pub fn put_touches_device(op: &RdmaOp) -> Result<bool> {
    let Some(cuda) = cuda() else {
        return Ok(false);
    };
    if cuda.driver.is_device_pointer(op.local as u64) {
        return Ok(true);
    }
    Ok(!matches!(
        remote_memory(op)?,
        None | Some(RemoteMemory::Host)
    ))
}

/// The peer's handle of a get or put, decoded (None: no handle).
fn remote_memory(op: &RdmaOp) -> Result<Option<RemoteMemory>> {
    let Some(handle) = op.remote_handle else {
        return Ok(None);
    };
    // SAFETY: with CUDA IPC active our registration_handle_size is REG_HANDLE_LEN, so
    // ob1 hands us a copy of that many bytes of the peer's handle (in its RGET header,
    // or its PUT request).
    let bytes = unsafe { &*handle.as_ptr().cast::<[u8; REG_HANDLE_LEN]>() };
    reg::decode(bytes).map(Some).map_err(|e| {
        verbose!(
            crate::params::stream(),
            1,
            "btl:rsmcuda: a peer's registration handle is bad: {e}"
        );
        Error::BAD_PARAM
    })
}

/// Releases a device handle from [`register`]; other handles are statics.
pub fn deregister(handle: Registration) {
    let Some(cuda) = CUDA.get() else {
        return;
    };
    let addr = handle.as_ptr() as usize;
    if lock(&cuda.handles).remove(&addr) {
        // SAFETY: the address came from Box::into_raw in `register` and was still in
        // the live set, so it is freed exactly once.
        drop(unsafe { Box::from_raw(addr as *mut [u8; REG_HANDLE_LEN]) });
    }
}

/// The device region behind a get's remote handle, or None for a host (CMA) get.
pub fn remote_device(op: &RdmaOp) -> Result<Option<DeviceRegion>> {
    if !active() {
        return Ok(None);
    }
    match remote_memory(op)? {
        None | Some(RemoteMemory::Host) => Ok(None),
        Some(RemoteMemory::Device(r)) => Ok(Some(r)),
        // Not registered for remote read: ob1 falls back to send/receive.
        Some(RemoteMemory::UnsharedDevice) => Err(Error::NOT_SUPPORTED),
    }
}

/// Starts the copy of a device get; completion comes from progress.
pub fn get(peer: u32, region: &DeviceRegion, op: RdmaOp, done: RdmaCompletion) -> Result<()> {
    let cuda = cuda().ok_or(Error::NOT_SUPPORTED)?;
    let mut guard = lock(&cuda.gets);
    if guard.is_none() {
        let p = params::get();
        // A mapping is kept once its allocation is read again, not after its first
        // use: a buffer sent once and freed is never held (rsmcuda_core::cache).
        let cfg = CacheConfig {
            size_limit: p.cuda_cache_limit.get() as u64,
            keep_released: true,
            keep_first_use: false,
        };
        match DeviceGets::new(cuda.driver, cfg, p.cuda_event_max.get().max(1) as usize) {
            Ok(g) => *guard = Some(g),
            Err(code) => {
                verbose!(
                    crate::params::stream(),
                    1,
                    "btl:rsmcuda: cannot create the CUDA IPC stream/events (CUresult {code})"
                );
                return Err(Error::ERROR);
            }
        }
    }
    let gets = guard.as_mut().expect("created above");
    let size = op.size;
    let token = (peer, size, done);
    // SAFETY: ob1 hands us its receive buffer (device memory registered by its CUDA
    // path) of op.size bytes for the duration of the get and does not touch it until
    // the completion, which runs from progress after the copy's event.
    let started = unsafe { gets.start(peer, region, op.remote, op.local as u64, size, token) };
    publish(gets);
    drop(guard);
    match started {
        Ok(_) => Ok(()),
        Err(GetError::Busy) => Err(Error::OUT_OF_RESOURCE),
        // ob1 answers any other error by asking the sender for this part through host
        // memory (pml_ob1_recvreq.c, get_frag_failed): nothing is lost.
        Err(e) => {
            match e.failed_call() {
                Some((call, code)) => report_failure(cuda, peer, size, call, code),
                None => verbose!(
                    crate::params::stream(),
                    1,
                    "btl:rsmcuda: CUDA IPC get failed: {e}"
                ),
            }
            Err(Error::ERROR)
        }
    }
}

/// A CUDA call of a device get failed: counted always, said once per peer and call.
fn report_failure(cuda: &Cuda, peer: u32, size: usize, call: &'static str, code: i32) {
    stats::bump(&stats::CUDA_FAILURES);
    let first = lock(&FAILURES_SAID)
        .get_or_insert_with(HashSet::new)
        .insert((peer, call));
    if first {
        mca::help::show_help(
            crate::help::HELP,
            "cuda call failed",
            true,
            &[
                &peer.to_string(),
                &size.to_string(),
                call,
                &code.to_string(),
                &cuda.driver.error_string(code),
            ],
        );
    }
}

/// At finalize: wait (bounded) for copies in flight, then close every mapping.
pub fn finalize<M: BtlModule>(btl: &Btl<M>) {
    let Some(cuda) = CUDA.get() else {
        *lock(&CONTROL) = None;
        end_pml_support();
        return;
    };
    let start = std::time::Instant::now();
    while lock(&cuda.gets).as_ref().is_some_and(|g| g.in_flight() > 0)
        && start.elapsed() < std::time::Duration::from_secs(2)
    {
        complete_gets(btl);
    }
    *lock(&cuda.gets) = None;
    *lock(&CONTROL) = None;
    // Notices still queued are moot: every peer closes its mappings at its finalize.
    *lock(&EXPORTS) = None;
    set_work(EXPORTS_LIVE, false);
    set_work(RELEASE_WORK, false);
    end_pml_support();
}
