//! The BTL module: ob1's calls mapped onto the engine.
//!
//! Sends share the fragment's buffer with the core (which keeps it until acknowledged),
//! so a descriptor is complete as soon as the core accepted it: `send` returns 1 when the
//! contract allows (BTL-owned, no ALWAYS_CALLBACK), otherwise the callback runs from
//! the next progress call. Deliveries and callbacks never run under the engine lock,
//! because ob1 sends again from inside them. Emulated PUT and registration: [`rdma`].

mod rdma;

use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fast_hash::FastMap;
use mca::btl::{
    Btl, BtlModule, Descriptor, RdmaCompletion, RdmaOp, Registration, SendStatus, SendiRefused,
};
use mca::convertor::Convertor;
use mca::proc::Proc;
use mca::{Error, Result, sys, verbose};
use rusnic_core::{Event, Instant, SendError, Shared};

use crate::engine::Engine;
use crate::help::{self, stream};
use crate::iface;
use crate::modex::Contact;
use crate::params::{self, PayloadCrc};
use crate::put::Puts;
use crate::raw::IfAddr;
use crate::raw_ob1::{self, LiveModule, Upcalls, new_frag};
use crate::raw_put::{self, RegionWriter};
use crate::regions::Regions;
use crate::stats;

/// The live module, for component progress (`with_live`).
static LIVE: LiveModule<Rusnic> = LiveModule::new();

/// Runs `f` with the live module (between add_procs and finalize), if there is one.
pub fn with_live<R>(f: impl FnOnce(&Btl<Rusnic>) -> R) -> Option<R> {
    LIVE.with(f)
}

/// What ob1 holds per reachable peer.
pub struct PeerEndpoint {
    id: u64,
}

/// What one progress pass collects, kept between passes so a pass allocates nothing.
#[derive(Default)]
struct PassBuffers {
    events: Vec<(u64, Event)>,
    /// Receive buffers to repost, per peer (a handful of peers per pass: a list).
    reposts: Vec<(u64, u32)>,
    /// Delivered fragments' buffers, back to the core for reuse.
    spent: Vec<(u64, Vec<u8>)>,
}

impl PassBuffers {
    fn repost(&mut self, peer: u64) {
        match self.reposts.iter_mut().find(|(p, _)| *p == peer) {
            Some((_, n)) => *n += 1,
            None => self.reposts.push((peer, 1)),
        }
    }
}

pub struct Rusnic {
    engine: Mutex<Engine>,
    /// Held by the one thread running progress (others skip instead of waiting), with
    /// the buffers a pass reuses.
    progress: Mutex<PassBuffers>,
    /// Descriptors whose callback is due (endpoint address, descriptor).
    completions: Mutex<VecDeque<(usize, Descriptor)>>,
    /// Sent descriptors whose callback waits for the peer's acknowledgement, by the
    /// engine's send id: (peer, endpoint address, descriptor).
    awaiting_ack: Mutex<FastMap<u64, (u64, usize, Descriptor)>>,
    peers: Mutex<FastMap<u64, Proc>>,
    /// Each peer's endpoint as ob1 knows it (its address), from when add_procs placed it
    /// until del_procs: 5.0's receive descriptor names the sender by it.
    endpoints: Mutex<FastMap<u64, usize>>,
    /// Emulated PUTs in progress (this process's side of ob1's RDMA protocol).
    puts: Mutex<Puts>,
    /// Buffers ob1 registered: the only memory arriving PUT data may land in. Locked
    /// inside the engine lock, never the other way round.
    regions: Mutex<Regions>,
    isn: u16,
    rank: u32,
    ifaddrs: Vec<IfAddr>,
    contact: Contact,
    epoch: std::time::Instant,
    /// When counters were last published and the stats line last printed.
    last_stats: Mutex<(u64, u64)>,
    /// Set by finalize: Open MPI closes the PML (and unloads ob1) before the BTLs, so
    /// from here on nothing may call into it: no delivery, completion callback or
    /// error report. Progress still moves datagrams (the peers get their data and
    /// acknowledgements); descriptors are freed without their callbacks.
    finalizing: AtomicBool,
}

impl Rusnic {
    pub fn new(engine: Engine, ifaddrs: Vec<IfAddr>, contact: Contact, local_id: u64) -> Rusnic {
        Rusnic {
            engine: Mutex::new(engine),
            progress: Mutex::new(PassBuffers::default()),
            completions: Mutex::new(VecDeque::new()),
            awaiting_ack: Mutex::new(FastMap::default()),
            peers: Mutex::new(FastMap::default()),
            endpoints: Mutex::new(FastMap::default()),
            puts: Mutex::new(Puts::default()),
            regions: Mutex::new(Regions::default()),
            isn: contact.isn,
            rank: local_id as u32,
            ifaddrs,
            contact,
            epoch: std::time::Instant::now(),
            last_stats: Mutex::new((0, 0)),
            finalizing: AtomicBool::new(false),
        }
    }

    fn now(&self) -> Instant {
        Instant(self.epoch.elapsed().as_nanos() as u64)
    }

    fn engine(&self) -> std::sync::MutexGuard<'_, Engine> {
        self.engine.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The endpoint ob1 holds for `peer`, or NULL while it holds none: a datagram can
    /// come from a peer this process has not added (yet), or whose endpoint add_procs
    /// created but has not placed yet, or that del_procs already removed.
    fn endpoint_of(&self, peer: u64) -> *mut sys::mca_btl_base_endpoint_t {
        self.endpoints
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer)
            .map_or(std::ptr::null_mut(), |&a| a as *mut _)
    }

    fn puts(&self) -> std::sync::MutexGuard<'_, Puts> {
        self.puts.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn regions(&self) -> std::sync::MutexGuard<'_, Regions> {
        self.regions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Component progress: datagrams in, timers, datagrams out, then deliveries and
    /// completions outside the lock. Returns the number of events handled.
    pub fn progress(btl: &Btl<Rusnic>) -> usize {
        let this: &Rusnic = btl;
        // A panic inside a delivery poisons the lock; progress must go on regardless
        // (the guard already reported the panic), or every later wait would hang.
        let mut pass = match this.progress.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return 0,
        };
        let mut handled = this.run_completions(btl);
        // Taken out of the guard for the pass and put back (emptied) at its end, so their
        // capacity stays; a panic in between only costs that capacity.
        let mut events = std::mem::take(&mut pass.events);
        let now = this.now();
        let received;
        let strangers;
        {
            let mut eng = this.engine();
            let regions = this.regions();
            received = eng.pump_rx(now, 4, &mut RegionWriter::new(&regions));
            drop(regions);
            handled += received;
            if received == 0 {
                // Nothing arrived since the last call, which delivered everything and
                // gave ob1 (and the application behind it) its chance to answer with a
                // data segment carrying the ACK: acknowledge the rest now rather than at
                // the delayed-ACK deadline, which a progress loop that yields the CPU may
                // overshoot by a whole scheduler slice and trip the peer's RTO. Flushing
                // right after the deliveries instead would put a standalone ACK (a
                // sendmmsg) between every ping-pong message and its reply.
                eng.flush_delayed_acks();
            }
            eng.pump_timers(now);
            eng.pump_tx(now);
            eng.drain_events(&mut events);
            strangers = eng.take_new_early_senders();
        }
        // Where ob1 adds the whole job at once (see `module_flags` in lib.rs) it adds
        // such senders itself; otherwise rusnic does.
        if !strangers.is_empty() && btl.flags() & sys::MCA_BTL_FLAGS_SINGLE_ADD_PROCS == 0 {
            for id in strangers {
                this.add_unknown_sender(btl, id);
            }
        }
        handled += events.len();
        for (peer, event) in events.drain(..) {
            match event {
                Event::Deliver { tag, data } => {
                    if this.upcalls() {
                        let from = this.endpoint_of(peer);
                        // SAFETY: NULL or an endpoint placed and not leaving (the map
                        // holds exactly those); data lives until after the call.
                        unsafe { btl.deliver(from, tag, &[&data]) };
                    }
                    pass.repost(peer);
                    pass.spent.push((peer, data));
                }
                Event::Put { .. } => {
                    // Only datagrams handled without a PutTarget make these, and pump_rx
                    // always passes one; still free its buffer.
                    pass.repost(peer);
                }
                Event::SendComplete { id } => this.acked(btl, id, sys::OPAL_SUCCESS),
                Event::SendFailed { id } => this.acked(btl, id, sys::OPAL_ERR_UNREACH),
                Event::PathVerified => {
                    verbose!(stream(), 10, "btl:rusnic: path to peer {peer:#x} verified");
                }
                Event::Error(e) if this.upcalls() => {
                    this.peer_failed(btl, peer, &e.to_string());
                }
                Event::Error(e) => {
                    verbose!(stream(), 1, "btl:rusnic: at finalize, peer {peer:#x}: {e}");
                }
            }
        }
        pass.events = events;
        if !pass.reposts.is_empty() || received > 0 {
            let mut eng = this.engine();
            for (peer, n) in pass.reposts.drain(..) {
                eng.repost(peer, n);
            }
            for (peer, buf) in pass.spent.drain(..) {
                eng.recycle(peer, buf);
            }
            // Reposts may reopen a window the peer waits for (an immediate ACK).
            eng.pump_tx(this.now());
        }
        handled += this.finish_puts(btl);
        this.maybe_stats(now);
        handled
    }

    /// The send `id` was acknowledged (or failed): run its descriptor's callback if it
    /// waits for that.
    fn acked(&self, btl: &Btl<Rusnic>, id: u64, status: i32) {
        let waiting = self
            .awaiting_ack
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        match waiting {
            Some((_, endpoint, des)) => raw_ob1::complete(btl, endpoint, des, status),
            None => {
                let status = Error::from_code(status).map_or(Ok(()), Err);
                self.puts().piece_ended(id, status);
            }
        }
    }

    /// Fails every send still waiting for an acknowledgement from a peer in `peers`
    /// (all of them when None): the connection is gone.
    fn abandon_awaiting(&self, btl: &Btl<Rusnic>, peers: Option<&[u64]>) {
        let gone: Vec<(usize, Descriptor)> = {
            let mut map = self.awaiting_ack.lock().unwrap_or_else(|e| e.into_inner());
            let ids: Vec<u64> = map
                .iter()
                .filter(|(_, (p, _, _))| peers.is_none_or(|ps| ps.contains(p)))
                .map(|(id, _)| *id)
                .collect();
            ids.into_iter()
                .filter_map(|id| map.remove(&id))
                .map(|(_, ep, des)| (ep, des))
                .collect()
        };
        for (endpoint, des) in gone {
            raw_ob1::complete(btl, endpoint, des, sys::OPAL_ERR_UNREACH);
        }
    }

    fn run_completions(&self, btl: &Btl<Rusnic>) -> usize {
        let due: Vec<(usize, Descriptor)> = {
            let mut q = self.completions.lock().unwrap_or_else(|e| e.into_inner());
            q.drain(..).collect()
        };
        let n = due.len();
        for (ep, des) in due {
            raw_ob1::complete(btl, ep, des, sys::OPAL_SUCCESS);
        }
        n
    }

    fn peer_failed(&self, btl: &Btl<Rusnic>, peer: u64, why: &str) {
        let proc_ = self
            .peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer)
            .copied();
        let (jobid, vpid) = ((peer >> 32) as u32, peer as u32);
        help::show(
            "peer unreachable",
            &[
                &format!("{}", self.rank),
                &format!("{vpid} (job {jobid:#x})"),
                why,
            ],
        );
        btl.report_error(sys::MCA_BTL_ERROR_FLAGS_FATAL as i32, proc_, why);
    }

    fn maybe_stats(&self, now: Instant) {
        const PUBLISH_NS: u64 = 10_000_000;
        let mut last = self.last_stats.lock().unwrap_or_else(|e| e.into_inner());
        if now.0.saturating_sub(last.0) < PUBLISH_NS {
            return;
        }
        last.0 = now.0;
        let s = self.engine().stats();
        stats::publish(&s);
        let every = u64::try_from(params::get().stats.get()).unwrap_or(0) * 1_000_000_000;
        if every > 0 && now.0.saturating_sub(last.1) >= every {
            last.1 = now.0;
            mca::output::emit_always(&stats::line(self.rank, &s));
        }
    }

    /// Drives progress until nothing is unacknowledged and every put completed, or
    /// `limit` passes.
    fn drain(btl: &Btl<Rusnic>, limit: Duration) -> bool {
        let start = std::time::Instant::now();
        loop {
            Rusnic::progress(btl);
            if btl.engine().idle() && btl.puts().is_empty() {
                return true;
            }
            if start.elapsed() >= limit {
                return false;
            }
            std::thread::yield_now();
        }
    }

    /// A process of this job sent before ob1 added it: ob1 adds a peer when a
    /// communicator first sends to it, and a rank that only receives from it never
    /// would, while its datagrams wait unacknowledged. Added here from its modex contact
    /// (what it sent is replayed); ob1's add_procs finds it added. Processes of other
    /// jobs are left to ob1, which adds them when the jobs connect.
    fn add_unknown_sender(&self, btl: &Btl<Rusnic>, id: u64) {
        if id >> 32 != mca::proc::my_name_hash() >> 32 {
            return;
        }
        let added = mca::proc::Proc::for_name_hash(id).and_then(|p| self.connect(btl, &p));
        verbose!(
            stream(),
            10,
            "btl:rusnic: rank {} sent before it was added: {}",
            id as u32,
            if added.is_some() {
                "added from its contact"
            } else {
                "its contact is not usable; kept waiting"
            }
        );
    }

    fn connect(&self, btl: &Btl<Rusnic>, p: &Proc) -> Option<PeerEndpoint> {
        if p.is_me() {
            return None;
        }
        let id = p.name_hash();
        if self.engine().has_peer(id) {
            return Some(PeerEndpoint { id });
        }
        let (_, vpid) = p.jobid_vpid();
        // SAFETY: our exported component structure (the module's `btl_component`).
        let blob = match unsafe { p.modex_recv(btl.component()) } {
            Ok(b) => b,
            Err(_) => {
                verbose!(stream(), 10, "btl:rusnic: rank {vpid} published no contact");
                return None;
            }
        };
        let contact = match Contact::decode(&blob) {
            Ok(c) => c,
            Err(e) => {
                help::show("bad contact", &[&format!("{vpid}"), &e]);
                return None;
            }
        };
        let ours = &self.contact;
        let mismatch = [
            (
                "backend",
                u32::from(ours.backend),
                u32::from(contact.backend),
            ),
            ("mtu", u32::from(ours.mtu_data), u32::from(contact.mtu_data)),
            (
                "priority_limit",
                u32::from(ours.mtu_priority),
                u32::from(contact.mtu_priority),
            ),
            (
                "max_send_size/eager_limit",
                ours.max_fragment_size,
                contact.max_fragment_size,
            ),
            (
                "payload_crc",
                u32::from(ours.payload_crc),
                u32::from(contact.payload_crc),
            ),
        ]
        .into_iter()
        .find(|(_, a, b)| a != b);
        if let Some((what, a, b)) = mismatch {
            help::show(
                "settings mismatch",
                &[
                    &format!("{}", self.rank),
                    &format!("{vpid}"),
                    &format!("{what}: {a} here, {b} there"),
                    &format!("{vpid}"),
                ],
            );
            return None;
        }
        if contact.addrs.is_empty() {
            return None;
        }
        let Some(ip) = iface::pick_peer_addr(&self.ifaddrs, &contact.addrs, p.is_local()) else {
            verbose!(
                stream(),
                10,
                "btl:rusnic: no shared network with rank {vpid} ({:?})",
                contact.addrs
            );
            return None;
        };
        let addrs = [
            SocketAddrV4::new(ip, contact.ports[0]),
            SocketAddrV4::new(ip, contact.ports[1]),
        ];
        verbose!(
            stream(),
            10,
            "btl:rusnic: rank {vpid} at {ip} ports {:?}",
            contact.ports
        );
        let mut eng = self.engine();
        eng.add_peer(id, (self.isn, contact.isn), contact.key, addrs);
        // Same-node traffic goes through the loopback, a memory-to-memory copy: there the
        // header's CRC is enough, when both ends agreed to that (checked above).
        let settings = params::get();
        let trusted = settings.payload_crc() == PayloadCrc::OffNode && p.is_local();
        let send_crc = !(trusted && ip.is_loopback()) || settings.fault_corrupt.get() > 0;
        eng.set_payload_crc(id, send_crc, !trusted);
        // What it sent before we knew it (a peer of another job adds us at its own pace).
        eng.replay_early(self.now(), id);
        drop(eng);
        verbose!(
            stream(),
            10,
            "btl:rusnic: rank {vpid}: payload CRC {} (sent), {} (required)",
            if send_crc { "on" } else { "off" },
            if trusted { "no" } else { "yes" }
        );
        self.peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, *p);
        let _ = btl;
        Some(PeerEndpoint { id })
    }

    /// Hands `data[..len]` to the protocol (shared, not copied); busy is absorbed by the
    /// engine's own queue. `completion`: a descriptor whose callback is due. While the
    /// fragment could go out at once it runs from the next progress call; once fragments
    /// wait in the queue (`DEFER_QUEUED`), only when the peer acknowledged this one, so
    /// that ob1's pipeline depth bounds how much it queues here (it would otherwise push
    /// whole windows of large messages, each in a fresh buffer). It is registered before
    /// the engine lock is released, so the acknowledgement cannot be drained first.
    fn submit(
        &self,
        btl: &Btl<Rusnic>,
        peer: u64,
        tag: u8,
        (data, len): (Shared, usize),
        completion: Option<(usize, Descriptor)>,
    ) -> Result<()> {
        /// Queued fragments (256 KiB each at the defaults) from which a completion
        /// waits for the peer's acknowledgement.
        const DEFER_QUEUED: usize = 4;
        let now = self.now();
        let mut eng = self.engine();
        match eng.send(peer, tag, data, len) {
            Ok(id) => {
                // Push it out now: latency matters more than batching here, and
                // progress may be far away (a blocking MPI call polls, a compute
                // phase does not).
                eng.pump_tx(now);
                if let Some((endpoint, des)) = completion {
                    if eng.queued(peer) >= DEFER_QUEUED {
                        self.awaiting_ack
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(id, (peer, endpoint, des));
                    } else {
                        self.completions
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push_back((endpoint, des));
                    }
                }
                Ok(())
            }
            Err(e) => {
                drop(eng);
                if let SendError::TooLarge { len, max } = e {
                    help::show(
                        "internal error",
                        &[&format!(
                            "a {len}-byte fragment exceeds the {max}-byte limit"
                        )],
                    );
                }
                let _ = btl;
                Err(btl_error(&e))
            }
        }
    }
}

/// The OPAL error a refused send or put reports to ob1.
fn btl_error(e: &SendError) -> Error {
    match e {
        SendError::Busy => Error::OUT_OF_RESOURCE,
        SendError::TooLarge { .. } => Error::BAD_PARAM,
        SendError::Failed | SendError::UnknownPeer => Error::UNREACH,
    }
}

/// Effective largest fragment ob1 may hand us (after user overrides).
fn max_fragment(btl: &Btl<Rusnic>) -> usize {
    btl.eager_limit().max(btl.max_send_size())
}

impl Upcalls for Rusnic {
    /// Whether the PML may be called (false once finalize began).
    fn upcalls(&self) -> bool {
        !self.finalizing.load(Ordering::Acquire)
    }
}

impl BtlModule for Rusnic {
    type Endpoint = PeerEndpoint;
    const HAS_SENDI: bool = true;
    const HAS_FLUSH: bool = true;
    const HAS_PUT: bool = true;
    const HAS_REGISTER_MEM: bool = true;

    fn add_procs(btl: &Btl<Self>, procs: &[Proc]) -> Result<Vec<Option<PeerEndpoint>>> {
        LIVE.set(btl);
        let cfg = {
            let eng = btl.engine();
            params::get().core_config_mtu(max_fragment(btl), eng.config_mtu())
        };
        let cfg = match cfg {
            Ok(c) => c,
            Err(e) => {
                help::show_invalid(&e);
                return Err(Error::BAD_PARAM);
            }
        };
        if u32::try_from(max_fragment(btl)).ok() != Some(btl.contact.max_fragment_size) {
            help::show_invalid(&format!(
                "btl_rusnic_eager_limit/max_send_size changed after init ({} vs {})",
                max_fragment(btl),
                btl.contact.max_fragment_size
            ));
            return Err(Error::BAD_PARAM);
        }
        btl.engine().configure(cfg).map_err(|e| {
            help::show_invalid(&e.to_string());
            Error::BAD_PARAM
        })?;
        btl.set_registration_handle_size(raw_put::HANDLE_WIRE_LEN);
        Ok(procs.iter().map(|p| btl.connect(btl, p)).collect())
    }

    fn endpoint_placed(btl: &Btl<Self>, endpoint: &PeerEndpoint) {
        let addr = Btl::<Rusnic>::endpoint_ptr(endpoint) as usize;
        btl.endpoints
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(endpoint.id, addr);
    }

    fn endpoint_leaving(btl: &Btl<Self>, endpoint: &PeerEndpoint) {
        let addr = Btl::<Rusnic>::endpoint_ptr(endpoint) as usize;
        let mut map = btl.endpoints.lock().unwrap_or_else(|e| e.into_inner());
        // Only if it is this one: a later add_procs may have placed another for the peer.
        if map.get(&endpoint.id) == Some(&addr) {
            map.remove(&endpoint.id);
        }
    }

    fn del_procs(btl: &Btl<Self>, _procs: &[Proc], endpoints: Vec<PeerEndpoint>) -> Result<()> {
        let limit = Duration::from_millis(params::get().finalize_flush_ms.get() as u64);
        Rusnic::drain(btl, limit);
        let ids: Vec<u64> = endpoints.iter().map(|ep| ep.id).collect();
        {
            let mut eng = btl.engine();
            let mut peers = btl.peers.lock().unwrap_or_else(|e| e.into_inner());
            for id in &ids {
                eng.remove_peer(*id);
                peers.remove(id);
            }
        }
        btl.abandon_awaiting(btl, Some(&ids));
        btl.puts().abandon(Some(&ids));
        btl.finish_puts(btl);
        Ok(())
    }

    fn finalize(btl: &Btl<Self>) -> Result<()> {
        // ob1 is gone (see `finalizing`); a spawned job's last sends to its parent are
        // typically still unacknowledged here, and their callbacks crashed the process.
        btl.finalizing.store(true, Ordering::Release);
        let limit = Duration::from_millis(params::get().finalize_flush_ms.get() as u64);
        if !Rusnic::drain(btl, limit) {
            verbose!(stream(), 1, "btl:rusnic: finalize with unacknowledged data");
        }
        btl.run_completions(btl);
        btl.abandon_awaiting(btl, None);
        btl.puts().abandon(None);
        btl.finish_puts(btl);
        let s = btl.engine().stats();
        stats::publish(&s);
        if params::get().stats.get() > 0 {
            mca::output::emit_always(&stats::line(btl.rank, &s));
        }
        LIVE.clear();
        Ok(())
    }

    fn alloc(
        btl: &Btl<Self>,
        _ep: Option<&PeerEndpoint>,
        order: u8,
        size: usize,
        flags: u32,
    ) -> Option<Descriptor> {
        let mut frag = new_frag(size.min(max_fragment(btl)));
        frag.descriptor.des_flags = flags;
        frag.descriptor.order = order;
        Some(frag.into_descriptor())
    }

    fn free(_btl: &Btl<Self>, des: Descriptor) -> Result<()> {
        raw_ob1::free(des);
        Ok(())
    }

    fn prepare_src(
        btl: &Btl<Self>,
        _ep: &PeerEndpoint,
        convertor: &mut Convertor,
        order: u8,
        reserve: usize,
        size: &mut usize,
        flags: u32,
    ) -> Option<Descriptor> {
        let room = max_fragment(btl).checked_sub(reserve)?;
        let want = (*size).min(room);
        let mut frag = new_frag(reserve + want);
        let buf = raw_ob1::bytes_mut(&mut frag);
        let packed = convertor.pack(&mut buf[reserve..reserve + want]);
        *size = packed;
        let addr = buf.as_mut_ptr();
        frag.set_segments(&[(addr, reserve + packed)]);
        frag.descriptor.des_flags = flags;
        frag.descriptor.order = order;
        Some(frag.into_descriptor())
    }

    fn send(btl: &Btl<Self>, ep: &PeerEndpoint, des: Descriptor, tag: u8) -> Result<SendStatus> {
        let payload = raw_ob1::share_payload(des);
        let endpoint = Btl::<Rusnic>::endpoint_ptr(ep) as usize;
        if des.btl_owned() && des.always_callback() {
            // ob1 schedules its next pipeline fragments from this callback: see `submit`.
            btl.submit(btl, ep.id, tag, payload, Some((endpoint, des)))?;
            return Ok(SendStatus::Queued);
        }
        btl.submit(btl, ep.id, tag, payload, None)?;
        if des.btl_owned() && !des.always_callback() {
            raw_ob1::free(des);
            return Ok(SendStatus::CompletedInline);
        }
        btl.completions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back((endpoint, des));
        Ok(SendStatus::Queued)
    }

    fn sendi(
        btl: &Btl<Self>,
        ep: &PeerEndpoint,
        convertor: &mut Convertor,
        header: &[u8],
        payload_size: usize,
        order: u8,
        flags: u32,
        tag: u8,
        want_descriptor: bool,
    ) -> std::result::Result<(), SendiRefused> {
        let total = header.len() + payload_size;
        let queued_outside = btl.engine().would_queue_outside_core(ep.id);
        if total > max_fragment(btl) || queued_outside {
            let descriptor = if want_descriptor {
                Self::alloc(btl, Some(ep), order, total, flags)
            } else {
                None
            };
            return Err(SendiRefused { descriptor });
        }
        let mut buf = vec![0u8; total];
        buf[..header.len()].copy_from_slice(header);
        let packed = if payload_size > 0 {
            convertor.pack(&mut buf[header.len()..])
        } else {
            0
        };
        buf.truncate(header.len() + packed);
        let len = buf.len();
        btl.submit(btl, ep.id, tag, (Arc::new(buf), len), None)
            .map_err(|_| SendiRefused { descriptor: None })
    }

    fn put(btl: &Btl<Self>, ep: &PeerEndpoint, op: RdmaOp, done: RdmaCompletion) -> Result<()> {
        Rusnic::start_put(btl, ep, op, done)
    }

    fn register_mem(
        btl: &Btl<Self>,
        _ep: Option<&PeerEndpoint>,
        base: *mut u8,
        size: usize,
        _flags: u32,
    ) -> Option<Registration> {
        btl.open_region(base, size)
    }

    fn deregister_mem(btl: &Btl<Self>, handle: Registration) -> Result<()> {
        btl.close_region(handle)
    }

    fn flush(btl: &Btl<Self>, _endpoint: Option<&PeerEndpoint>) -> Result<()> {
        // Bounded: a peer that died must produce an error, not a hang.
        if Rusnic::drain(btl, Duration::from_secs(60)) {
            Ok(())
        } else {
            Err(Error::ERROR)
        }
    }
}
