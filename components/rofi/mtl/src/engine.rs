//! The opened MTL: the fabric, the chosen tag layout and limits, and peer addresses.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use mca::mtl::Comm;
use mca::output::Stream;
use mca::{Error, Result, sys, verbose};
use rofi_core::sync::{ClaimedMessage, SendLimits};
use rofi_core::tag::TagLayout;

use crate::raw::Owned;
use crate::raw::context::OpContext;
use crate::raw::fabric::{EAGAIN, Entry, Fabric, empty_entry};
use crate::raw::procs;
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
    /// The CQ read buffer; holding it is the progress lock, under which every
    /// completion's request state is touched.
    pub cq: Mutex<Owned<Vec<Entry>>>,
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
    /// Small nonblocking sends inject too (`mtl_rofi_isend_inject`).
    pub isend_inject: bool,
}

/// What init learned and opened, for [`Engine::new`].
#[derive(Debug)]
pub struct Setup {
    pub fabric: Fabric,
    pub layout: TagLayout,
    pub limits: SendLimits,
    pub provider: String,
    pub stream: Stream,
    pub event_cnt: usize,
    pub min_landing: usize,
    pub isend_inject: bool,
}

impl Engine {
    pub fn new(s: Setup) -> Engine {
        Engine {
            fabric: s.fabric,
            layout: s.layout,
            limits: s.limits,
            provider: s.provider,
            stream: s.stream,
            cq: Mutex::new(Owned(vec![empty_entry(); s.event_cnt.max(1)])),
            claimed: Mutex::new(HashMap::new()),
            peers: AtomicUsize::new(0),
            bounce: BouncePool::new(s.min_landing.max(1)),
            isend_inject: s.isend_inject,
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
            self.progress();
        }
    }

    /// The fabric address of `rank` in `comm`, inserting the process if it is new.
    pub fn peer_addr(&self, comm: Comm, rank: i32) -> Result<u64> {
        let p = comm.peer(rank);
        if let Some(a) = procs::address(p) {
            return Ok(a);
        }
        self.add_procs(&[p])?;
        procs::address(p).ok_or(Error::UNREACH)
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
        let names = fresh
            .iter()
            .map(|&p| crate::raw::modex::recv(p))
            .collect::<Result<Vec<_>>>()?;
        let insert = |bytes: &[u8], count: usize| {
            self.fabric.av_insert(bytes, count).map_err(|e| {
                mca::help::show_help("help-mtl-rofi.txt", "modex failed", true, &[&e]);
                Error::UNREACH
            })
        };
        // One batched insert when every name has the same length (binary address
        // formats); string formats (shm: "fi_shm://<pid>...") vary, so one each.
        let addrs = if names.iter().all(|n| n.len() == names[0].len()) {
            insert(&names.concat(), names.len())?
        } else {
            let mut addrs = Vec::with_capacity(names.len());
            for n in &names {
                addrs.extend(insert(n, 1)?);
            }
            addrs
        };
        for (&p, a) in fresh.iter().zip(addrs) {
            procs::record(p, a);
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

    pub fn del_procs(&self, list: &[*mut sys::ompi_proc_t]) {
        for &p in list {
            if procs::address(p).is_some() {
                procs::forget(p);
                self.peers.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}
