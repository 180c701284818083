//! The BTL module: ob1's entry points on top of the node's segment.

use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, OnceLock};

use mca::btl::{
    Btl, BtlModule, Descriptor, RdmaCompletion, RdmaOp, Registration, SendStatus, SendiRefused,
};
use mca::convertor::Convertor;
use mca::proc::Proc;
use mca::{Error, Result, sys, verbose};

use crate::node::Node;
use crate::{cuda, setup, single_copy};

/// One peer on this node, by its rank in the segment.
pub struct Endpoint {
    pub rank: u32,
    pub proc_: Proc,
}

enum Setup {
    NotYet,
    /// Process names of the segment's ranks, by segment rank.
    Joined(Vec<u64>),
    /// No segment in this process (alone on the node, or setup failed).
    Without,
}

pub struct Module {
    node: OnceLock<Node>,
    setup: Mutex<Setup>,
}

/// The module component progress works on (progress functions take no argument).
static ACTIVE: AtomicPtr<Btl<Module>> = AtomicPtr::new(std::ptr::null_mut());

impl Module {
    pub fn new() -> Module {
        Module {
            node: OnceLock::new(),
            setup: Mutex::new(Setup::NotYet),
        }
    }

    pub fn node(&self) -> Option<&Node> {
        self.node.get()
    }
}

/// Component progress: the FIFO of the active module, if there is one yet.
pub fn progress() -> usize {
    let btl = ACTIVE.load(Ordering::Acquire);
    if btl.is_null() {
        return 0;
    }
    // SAFETY: ACTIVE holds a module cell from btl_init, set in add_procs and cleared
    // in finalize before the cell is freed; ob1 stops progress before finalize.
    let btl = unsafe { &*btl };
    btl.node()
        .map_or(0, |node| node.progress(btl) + cuda::progress(btl, node))
}

fn component() -> *const sys::mca_base_component_t {
    <crate::Rsmcuda as mca::component::Exported>::raw()
}

impl BtlModule for Module {
    type Endpoint = Endpoint;
    const HAS_SENDI: bool = true;
    const HAS_GET: bool = true;
    const HAS_REGISTER_MEM: bool = true;

    fn add_procs(btl: &Btl<Self>, procs: &[Proc]) -> Result<Vec<Option<Endpoint>>> {
        let mut state = btl.setup.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(*state, Setup::NotYet) && procs.iter().any(|p| p.is_local() && !p.is_me()) {
            let limits = (btl.eager_limit(), btl.max_send_size());
            *state = match setup::join(component(), procs, limits) {
                Some(joined) => {
                    let p = crate::params::get();
                    let timeout =
                        std::time::Duration::from_millis(p.attach_timeout_ms.get().max(1) as u64);
                    match Node::new(joined.seg, p.poll_batch.get().max(1) as usize, timeout) {
                        Ok(node) => {
                            cuda::attach(btl, &node, joined.all_cuda_ipc);
                            let _ = btl.node.set(node);
                            ACTIVE.store(btl as *const Btl<Self> as *mut _, Ordering::Release);
                            single_copy::announce(btl);
                            Setup::Joined(joined.members)
                        }
                        Err(e) => {
                            mca::help::show_help(
                                setup::HELP,
                                "segment failed",
                                true,
                                &["use", "the node segment", &e.to_string()],
                            );
                            Setup::Without
                        }
                    }
                }
                None => Setup::Without,
            };
        }
        let members: &[u64] = match &*state {
            Setup::Joined(m) => m,
            _ => &[],
        };
        Ok(procs
            .iter()
            .map(|p| {
                if p.is_me() || !p.is_local() {
                    return None;
                }
                let rank = members.iter().position(|h| *h == p.name_hash())? as u32;
                cuda::remember(rank, *p);
                Some(Endpoint { rank, proc_: *p })
            })
            .collect())
    }

    fn del_procs(_btl: &Btl<Self>, _procs: &[Proc], _endpoints: Vec<Endpoint>) -> Result<()> {
        Ok(())
    }

    fn finalize(btl: &Btl<Self>) -> Result<()> {
        cuda::finalize(btl);
        if let Some(node) = btl.node() {
            let left = node.drain_before_exit(std::time::Duration::from_secs(2));
            if left > 0 {
                verbose!(
                    crate::stream(),
                    1,
                    "btl:rsmcuda: finalize with {left} fragments still waiting for a full FIFO"
                );
            }
        }
        let me = btl as *const Btl<Self> as *mut Btl<Self>;
        let _ = ACTIVE.compare_exchange(
            me,
            std::ptr::null_mut(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        verbose!(
            crate::stream(),
            1,
            "btl:rsmcuda: finalize ({} sends, {} sendis, {} receives, {} fifo-full stalls, \
             {} single-copy gets of {} bytes)",
            crate::stats::SENDS.load(Ordering::Relaxed),
            crate::stats::SENDIS.load(Ordering::Relaxed),
            crate::stats::RECEIVES.load(Ordering::Relaxed),
            crate::stats::FIFO_FULL.load(Ordering::Relaxed),
            crate::stats::SINGLE_COPY_OPS.load(Ordering::Relaxed),
            crate::stats::SINGLE_COPY_BYTES.load(Ordering::Relaxed)
        );
        // The node (mapping, descriptors) goes with the module cell right after this.
        Ok(())
    }

    fn alloc(
        btl: &Btl<Self>,
        _endpoint: Option<&Endpoint>,
        order: u8,
        size: usize,
        flags: u32,
    ) -> Option<Descriptor> {
        let node = btl.node()?;
        if size > node.max_capacity() {
            return None;
        }
        node.alloc(size, flags, order)
    }

    fn free(btl: &Btl<Self>, descriptor: Descriptor) -> Result<()> {
        btl.node().ok_or(Error::BAD_PARAM)?.free(descriptor)
    }

    fn prepare_src(
        btl: &Btl<Self>,
        _endpoint: &Endpoint,
        convertor: &mut Convertor,
        order: u8,
        reserve: usize,
        size: &mut usize,
        flags: u32,
    ) -> Option<Descriptor> {
        let node = btl.node()?;
        let room = node.max_capacity().checked_sub(reserve)?;
        let want = (*size).min(room);
        let des = node.alloc(reserve + want, flags, order)?;
        let packed = if want > 0 {
            // SAFETY: the descriptor's fragment has at least reserve + want payload
            // bytes (alloc picked a pool that fits) and is exclusively ours until sent.
            let dst =
                unsafe { std::slice::from_raw_parts_mut(node.payload(des).add(reserve), want) };
            convertor.pack(dst)
        } else {
            0
        };
        *size = packed;
        node.set_len(des, reserve + packed);
        Some(des)
    }

    fn send(
        btl: &Btl<Self>,
        endpoint: &Endpoint,
        descriptor: Descriptor,
        tag: u8,
    ) -> Result<SendStatus> {
        let node = btl.node().ok_or(Error::UNREACH)?;
        cuda::before_send(endpoint.rank);
        node.send(descriptor, endpoint.rank, tag)
    }

    fn sendi(
        btl: &Btl<Self>,
        endpoint: &Endpoint,
        convertor: &mut Convertor,
        header: &[u8],
        payload_size: usize,
        order: u8,
        flags: u32,
        tag: u8,
        want_descriptor: bool,
    ) -> std::result::Result<(), SendiRefused> {
        let Some(node) = btl.node() else {
            return Err(SendiRefused { descriptor: None });
        };
        cuda::before_send(endpoint.rank);
        if !cuda::refuse_sendi(endpoint.rank, convertor.flags())
            && node.sendi(endpoint.rank, header, convertor, payload_size, tag)
        {
            return Ok(());
        }
        let descriptor = want_descriptor
            .then(|| {
                Self::alloc(
                    btl,
                    Some(endpoint),
                    order,
                    header.len() + payload_size,
                    flags,
                )
            })
            .flatten();
        Err(SendiRefused { descriptor })
    }

    fn get(btl: &Btl<Self>, endpoint: &Endpoint, op: RdmaOp, done: RdmaCompletion) -> Result<()> {
        match cuda::remote_device(&op)? {
            Some(region) => cuda::get(endpoint.rank, &region, op, done),
            None => single_copy::get(btl, endpoint, op, done),
        }
    }

    fn register_mem(
        btl: &Btl<Self>,
        _endpoint: Option<&Endpoint>,
        base: *mut u8,
        size: usize,
        flags: u32,
    ) -> Option<Registration> {
        match cuda::register(base, size, flags) {
            cuda::Reg::Inactive => single_copy::register(btl, size, flags),
            cuda::Reg::Host => {
                single_copy::register(btl, size, flags).map(|_| cuda::host_registration())
            }
            cuda::Reg::Device(handle) => Some(handle),
            cuda::Reg::Decline => None,
        }
    }

    fn deregister_mem(_btl: &Btl<Self>, handle: Registration) -> Result<()> {
        cuda::deregister(handle);
        Ok(())
    }
}
