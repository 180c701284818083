//! The opened MTL: the fabric, the chosen tag layout and limits, and peer addresses.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use mca::mtl::Comm;
use mca::output::Stream;
use mca::{Error, Result, sys, verbose};
use rofi_core::context::ContextMap;
use rofi_core::provider::inherit::{self, Inherited};
use rofi_core::sync::{ClaimedMessage, SendLimits};
use rofi_core::tag::TagLayout;

use crate::raw::Owned;
use crate::raw::context::OpContext;
use crate::raw::fabric::{EAGAIN, Entry, Fabric, empty_entry};
use crate::raw::procs::{self, Peer, Rail};
use crate::request::BouncePool;
use crate::stats::{Counter, bump};

/// A message claimed by MPI_Improbe and not yet received by MPI_Mrecv.
#[derive(Debug)]
pub struct Claimed {
    /// The peek's context: the claiming receive must be posted with this very one.
    pub ctx: Box<OpContext>,
    pub message: ClaimedMessage,
}

#[derive(Debug)]
pub struct Engine {
    pub fabric: Fabric,
    pub layout: TagLayout,
    pub limits: SendLimits,
    pub provider: String,
    pub stream: Stream,
    /// Communicator → context (one context without thread grouping).
    pub contexts: ContextMap,
    /// One CQ read buffer per context; holding it is that context's progress lock,
    /// under which the request state of its completions is touched.
    pub cqs: Vec<Mutex<Owned<Vec<Entry>>>>,
    /// Completions read per context, for the verbose summary at finalize (shows
    /// whether thread grouping spread the traffic).
    pub per_ctx: Vec<AtomicUsize>,
    /// Claimed messages by `ompi_message_t` address.
    pub claimed: Mutex<HashMap<usize, Owned<Claimed>>>,
    /// Processes whose address is in the AV (for the source-rank limit).
    pub peers: AtomicUsize,
    /// Receives with less room than the pool's buffer size post one of its buffers.
    ///
    /// libfabric 1.17's tcp;ofi_rxm receives eager messages straight into the posted
    /// buffer ("dynamic receive buffers") and leaves the connection stalled when that
    /// buffer is too small (a truncated receive); with them disabled, its FI_PEEK never
    /// finds a message. So small receives get room for any eager message and rofi
    /// truncates itself. Also, a receive posted with no buffer at all hangs rendezvous
    /// truncation there: every provider gets at least one byte.
    pub bounce: BouncePool,
    /// Posted behind every receive buffer where the provider matches right but
    /// truncates wrong (`raw::sink`): the provider never truncates, rofi does.
    pub sink: Option<crate::raw::sink::Sink>,
    /// Small nonblocking sends inject too (`mtl_rofi_isend_inject`).
    pub isend_inject: bool,
    /// Persistent buffered sends are packed into rofi's own copy on every start and
    /// complete when posted (`mtl_rofi_bsend_copy`, `raw::bsend`).
    pub bsend_copy: bool,
    /// Host matching (`crate::host`) instead of the provider's tagged queues.
    pub host: Option<crate::host_state::Host>,
    /// The provider for peers on this node, beside `fabric` (host matching only).
    pub local: Option<LocalRail>,
    /// What this process chose (published in the modex; peers must agree).
    pub choice: Inherited,
}

impl Engine {
    /// Closes the engine at finalize. Registrations of large sends still pending (only
    /// an erroneous program leaves one) are closed before the domain they belong to,
    /// then the providers' objects; rofi's buffers, posted until then, are freed last.
    pub fn shut_down(self: Box<Self>) {
        if let Some(host) = &self.host {
            host.state().sends.clear();
        }
        if let Some(local) = &self.local {
            local.fabric.close();
        }
        self.fabric.close();
    }
}

/// A second provider for the peers on this node (`mtl_rofi_local_provider`).
#[derive(Debug)]
pub struct LocalRail {
    pub fabric: Fabric,
    pub provider: String,
    /// Its CQ read buffer; holding it is this rail's progress lock.
    pub cq: Mutex<Owned<Vec<Entry>>>,
    /// Completions read, for the verbose summary at finalize.
    pub completions: AtomicUsize,
}

impl LocalRail {
    pub fn new(fabric: Fabric, provider: String, event_cnt: usize) -> LocalRail {
        LocalRail {
            fabric,
            provider,
            cq: Mutex::new(Owned(vec![empty_entry(); event_cnt.max(1)])),
            completions: AtomicUsize::new(0),
        }
    }
}

/// What init learned and opened, for [`Engine::new`].
#[derive(Debug)]
pub struct Setup {
    pub fabric: Fabric,
    pub contexts: ContextMap,
    pub layout: TagLayout,
    pub limits: SendLimits,
    pub provider: String,
    pub stream: Stream,
    pub event_cnt: usize,
    pub min_landing: usize,
    pub sink: Option<crate::raw::sink::Sink>,
    pub isend_inject: bool,
    pub bsend_copy: bool,
    pub host: Option<crate::host_state::Host>,
    pub local: Option<LocalRail>,
    pub choice: Inherited,
}

thread_local! {
    /// The context this thread used last: drained first, as its completions are the
    /// ones it most likely waits for.
    static LAST_CTX: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Remembers that this thread works on context `c`.
fn note_ctx(c: u32) {
    LAST_CTX.with(|l| l.set(c));
}

/// The context this thread used last (see `note_ctx`).
pub fn last_ctx() -> u32 {
    LAST_CTX.with(std::cell::Cell::get)
}

impl Engine {
    pub fn new(s: Setup) -> Engine {
        let n = s.fabric.num_ctxts();
        Engine {
            fabric: s.fabric,
            layout: s.layout,
            limits: s.limits,
            provider: s.provider,
            stream: s.stream,
            per_ctx: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            cqs: (0..n)
                .map(|_| Mutex::new(Owned(vec![empty_entry(); s.event_cnt.max(1)])))
                .collect(),
            contexts: s.contexts,
            claimed: Mutex::new(HashMap::new()),
            peers: AtomicUsize::new(0),
            bounce: BouncePool::new(s.min_landing.max(1)),
            sink: s.sink,
            isend_inject: s.isend_inject,
            bsend_copy: s.bsend_copy,
            host: s.host,
            local: s.local,
            choice: s.choice,
        }
    }

    /// The fabric that reaches peers of `rail`.
    pub fn fabric_of(&self, rail: Rail) -> &Fabric {
        match (rail, &self.local) {
            (Rail::Local, Some(l)) => &l.fabric,
            _ => &self.fabric,
        }
    }

    /// One pass of a blocking wait: progress, then give the core away if nothing
    /// happened and Open MPI asks so (more ranks than cores). A blocking send on a
    /// provider's rendezvous waits for its peer's process to progress; spinning here
    /// kept that peer off the core for a whole time slice at each step
    /// (docs/rofi-measurements.md, "Collectives with more ranks than cores").
    pub fn wait_pass(&self) {
        if self.progress() == 0 && mca::progress::yield_when_idle() {
            std::thread::yield_now();
        }
    }

    /// Runs `post` until the provider stops answering FI_EAGAIN, progressing between
    /// tries so the resources it waits for are freed.
    pub fn retry(&self, mut post: impl FnMut() -> isize) -> isize {
        loop {
            let rc = post();
            if rc != EAGAIN {
                if rc < 0 {
                    bump(Counter::Errors);
                }
                return rc;
            }
            bump(Counter::EagainRetries);
            self.wait_pass();
        }
    }

    /// `rank` of `comm`, inserting the process into the AV if it is new.
    pub fn peer(&self, comm: Comm, rank: i32) -> Result<Peer> {
        let p = comm.peer(rank);
        if let Some(a) = procs::address(p) {
            return Ok(a);
        }
        self.add_procs(&[p])?;
        procs::address(p).ok_or(Error::UNREACH)
    }

    /// The endpoint address of `rank` in `comm`: the source of its messages.
    pub fn peer_addr(&self, comm: Comm, rank: i32) -> Result<u64> {
        Ok(self.peer(comm, rank)?.addr)
    }

    /// Where messages to `rank` on `comm` go: the receive context it posts that
    /// communicator's receives on.
    pub fn dest_addr(&self, comm: Comm, rank: i32) -> Result<u64> {
        Ok(self.route(comm, rank)?.1)
    }

    /// `(source, destination)` addresses of `rank` on `comm`: what its messages to us
    /// come from, and the receive context ours must reach.
    pub fn route(&self, comm: Comm, rank: i32) -> Result<(u64, u64)> {
        let peer = self.peer(comm, rank)?;
        let rx = ContextMap::remote(comm.agreed_id(), peer.ctxts);
        Ok((peer.addr, self.fabric_of(peer.rail).rx_addr(peer.addr, rx)))
    }

    /// Host matching: the fabric that reaches `rank` of `comm`, and its address there.
    pub fn host_dest(&self, comm: Comm, rank: i32) -> Result<(&Fabric, u64)> {
        let peer = self.peer(comm, rank)?;
        Ok((self.fabric_of(peer.rail), peer.addr))
    }

    /// This process's context for `comm` (and the one this thread now works on). Chosen
    /// by the id every member computes alike, so a sender's [`Engine::route`] reaches
    /// the context the receiver posted on.
    pub fn ctx_of(&self, comm: Comm) -> u32 {
        let c = self.contexts.local(comm.agreed_id());
        note_ctx(c);
        c
    }

    /// Context `c`'s progress lock, blocking.
    pub fn lock_ctx(&self, c: u32) -> std::sync::MutexGuard<'_, Owned<Vec<Entry>>> {
        self.cqs[c as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// One batched AV insert for every process not yet known.
    pub fn add_procs(&self, list: &[*mut sys::ompi_proc_t]) -> Result<()> {
        let fresh: Vec<_> = list
            .iter()
            .copied()
            .filter(|&p| procs::address(p).is_none())
            .collect();
        if fresh.is_empty() {
            return Ok(());
        }
        let total = self.peers.load(Ordering::Relaxed) + fresh.len();
        if let Some(max) = self.layout.max_source() {
            // Ranks run from 0 to total - 1 at most.
            if total > max as usize + 1 {
                mca::help::show_help(
                    "help-mtl-rofi.txt",
                    "too many ranks",
                    true,
                    &[
                        &self.layout.kind().to_string(),
                        &(max as usize + 1).to_string(),
                        &total.to_string(),
                    ],
                );
                return Err(Error::VALUE_OUT_OF_BOUNDS);
            }
        }
        let published = fresh
            .iter()
            .map(|&p| crate::raw::modex::recv(p))
            .collect::<Result<Vec<_>>>()?;
        if let Some(why) = published
            .iter()
            .find_map(|(p, _)| inherit::disagreement(&self.choice, &p.choice))
        {
            // A spawned job chooses as its parent (provider::inherit); processes
            // started apart may still have been given different settings: end the job
            // with both choices named, not in a hang between two protocols.
            mca::help::show_help("help-mtl-rofi.txt", "modex failed", true, &[&why]);
            return Err(Error::UNREACH);
        }
        // A peer on this node goes through the local rail when both ends opened one;
        // otherwise (it did not, or we did not) through the main one, as it decides
        // the same way about us.
        let rails: Vec<Rail> = published
            .iter()
            .map(|(p, on_node)| {
                if self.local.is_some() && *on_node && p.local.is_some() {
                    Rail::Local
                } else {
                    Rail::Main
                }
            })
            .collect();
        let mut addrs = vec![0; fresh.len()];
        for rail in [Rail::Main, Rail::Local] {
            let which: Vec<usize> = (0..fresh.len()).filter(|&i| rails[i] == rail).collect();
            let names: Vec<&[u8]> = which
                .iter()
                .map(|&i| match rail {
                    Rail::Main => published[i].0.name.as_slice(),
                    Rail::Local => published[i].0.local.as_deref().unwrap_or_default(),
                })
                .collect();
            let inserted = self.insert_names(self.fabric_of(rail), &names)?;
            for (i, addr) in which.into_iter().zip(inserted) {
                addrs[i] = addr;
            }
        }
        for (i, &p) in fresh.iter().enumerate() {
            procs::record(
                p,
                Peer {
                    addr: addrs[i],
                    ctxts: published[i].0.ctxts,
                    rail: rails[i],
                },
            );
        }
        if let Some(l) = &self.local {
            let local = rails.iter().filter(|&&r| r == Rail::Local).count();
            verbose!(
                self.stream,
                5,
                "mtl:rofi: {local} of {} processes reached through {} (on this node), \
                 the others through {}",
                fresh.len(),
                l.provider,
                self.provider
            );
        }
        self.peers.fetch_add(fresh.len(), Ordering::Relaxed);
        verbose!(
            self.stream,
            5,
            "mtl:rofi: {} processes added to the address vector",
            fresh.len()
        );
        Ok(())
    }

    /// Inserts endpoint names into `fabric`'s AV, in order.
    fn insert_names(&self, fabric: &Fabric, names: &[&[u8]]) -> Result<Vec<u64>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let insert = |bytes: &[u8], count: usize| {
            fabric.av_insert(bytes, count).map_err(|e| {
                mca::help::show_help("help-mtl-rofi.txt", "modex failed", true, &[&e]);
                Error::UNREACH
            })
        };
        // One batched insert when every name has the same length (binary address
        // formats); string formats (shm: "fi_shm://<pid>...") vary, so one each.
        if names.iter().all(|n| n.len() == names[0].len()) {
            return insert(&names.concat(), names.len());
        }
        let mut addrs = Vec::with_capacity(names.len());
        for n in names {
            addrs.extend(insert(n, 1)?);
        }
        Ok(addrs)
    }

    pub fn del_procs(&self, list: &[*mut sys::ompi_proc_t]) {
        for &p in list {
            if procs::address(p).is_some() {
                procs::forget(p);
                self.peers.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}
