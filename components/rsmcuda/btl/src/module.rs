//! The BTL module: ob1's entry points on top of the segments this process uses (the
//! job's own and one per connected process of another job; see `nodes`).

use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, OnceLock};

use mca::btl::{
    Btl, BtlModule, Descriptor, RdmaCompletion, RdmaOp, Registration, SendStatus, SendiRefused,
};
use mca::convertor::Convertor;
use mca::proc::Proc;
use mca::{Error, Result, verbose};
use rsmcuda_core::rendezvous::{self, Candidate, Role};

use crate::modex::Contact;
use crate::node::Node;
use crate::nodes::Nodes;
use crate::{cuda, help, pair, setup, single_copy};

/// One peer on this node: the segment it shares with us and its rank there.
pub struct Endpoint {
    /// The segment's node (in the module's `Nodes`), so that a send reaches it without
    /// the module's table.
    node_ptr: NonNull<Node>,
    pub rank: u32,
    /// The segment is the job's own: the CUDA IPC handshake runs only there.
    pub job: bool,
    pub proc_: Proc,
}

// SAFETY: `node_ptr` is a shared reference in all but lifetime (see `Endpoint::node`);
// `Node` is shared between threads by the module already.
unsafe impl Send for Endpoint {}
// SAFETY: as for Send: only `&Node` is ever made from it.
unsafe impl Sync for Endpoint {}

impl Endpoint {
    /// The segment this peer is in.
    #[inline(always)]
    pub fn node(&self) -> &Node {
        // SAFETY: the node is a Box in the module's append-only table (`Nodes`), which
        // never moves or drops it before the module itself is freed in finalize; ob1
        // makes no call with an endpoint of a finalized module.
        unsafe { self.node_ptr.as_ref() }
    }
}

/// What add_procs decided so far, under the module's setup lock.
#[derive(Default)]
struct Setup {
    /// The job's segment has been attempted (formed or not): only once.
    job_tried: bool,
    /// Every local peer decided on: its segment and rank there, or None (unreachable).
    peers: HashMap<u64, Option<(usize, u32)>>,
}

pub struct Module {
    nodes: Nodes,
    /// Index of the job's segment, once formed.
    job: OnceLock<usize>,
    setup: Mutex<Setup>,
}

/// The module component progress works on (progress functions take no argument).
static ACTIVE: AtomicPtr<Btl<Module>> = AtomicPtr::new(std::ptr::null_mut());
/// The active module's only node while it has exactly one (the job's segment in a job
/// never connected to another), so that an idle progress pass asks it without the
/// module's table; NULL otherwise.
static ONLY: AtomicPtr<Node> = AtomicPtr::new(std::ptr::null_mut());

impl Module {
    pub fn new() -> Module {
        Module {
            nodes: Nodes::new(),
            job: OnceLock::new(),
            setup: Mutex::new(Setup::default()),
        }
    }

    /// The job's own segment, if formed.
    fn job_node(&self) -> Option<&Node> {
        self.nodes.get(*self.job.get()?)
    }

    /// Segment `index`'s progress, its messages delivered to ob1 (CUDA control messages
    /// to the handshake when it is the job's segment; on a pair segment, where no
    /// handshake runs, they are dropped).
    #[inline(always)]
    fn node_progress(btl: &Btl<Module>, node: &Node, index: usize) -> usize {
        node.progress(btl, |sender, tag, payload| {
            if tag != cuda::CTRL_TAG {
                // SAFETY: NULL or an endpoint placed and not leaving (the node keeps
                // exactly those).
                unsafe { btl.deliver_one(node.endpoint(sender), tag, payload) };
            } else if btl.job.get() == Some(&index) {
                cuda::on_control(payload);
            }
        })
    }

    /// Every segment's progress; CUDA's (control messages, device gets) on the job's.
    #[inline(never)]
    fn progress(btl: &Btl<Module>) -> usize {
        let mut handled = 0;
        for (i, node) in btl.nodes.iter() {
            handled += Self::node_progress(btl, node, i);
        }
        // One load says whether CUDA has anything to do (control messages, release
        // notices, device gets): most busy passes carry host messages only.
        if !cuda::idle()
            && let Some(node) = btl.job_node()
        {
            handled += cuda::progress(btl, node);
        }
        handled
    }

    /// A refused sendi: the descriptor ob1 asked for, if one can be had.
    #[inline(never)]
    fn sendi_refused(
        btl: &Btl<Module>,
        endpoint: &Endpoint,
        size: usize,
        order: u8,
        flags: u32,
        want_descriptor: bool,
    ) -> std::result::Result<(), SendiRefused> {
        let descriptor = want_descriptor
            .then(|| <Self as BtlModule>::alloc(btl, Some(endpoint), order, size, flags))
            .flatten();
        Err(SendiRefused { descriptor })
    }

    /// Adds a segment as a node; false (said why) if it cannot be used.
    fn add_node(btl: &Btl<Module>, seg: rsmcuda_shm::Segment) -> Option<usize> {
        let p = crate::params::get();
        let timeout = std::time::Duration::from_millis(p.attach_timeout_ms.get().max(1) as u64);
        let Some(index) = btl.nodes.next_index() else {
            verbose!(
                crate::params::stream(),
                1,
                "btl:rsmcuda: {} segments in use already; {} is not used",
                crate::nodes::MAX_SEGMENTS,
                seg.name()
            );
            let _ = seg.unlink_if_leader_on_failure();
            return None;
        };
        match Node::new(
            seg,
            index as u32,
            p.poll_batch.get().max(1) as usize,
            timeout,
        ) {
            Ok(node) => {
                let index = btl.nodes.push(node)?;
                if index == 0 {
                    let only = btl
                        .nodes
                        .only()
                        .map_or(std::ptr::null_mut(), |n| n as *const Node as *mut Node);
                    ONLY.store(only, Ordering::Release);
                    ACTIVE.store(btl as *const Btl<Module> as *mut _, Ordering::Release);
                    single_copy::announce(btl);
                } else {
                    ONLY.store(std::ptr::null_mut(), Ordering::Release);
                }
                Some(index)
            }
            Err(e) => {
                mca::help::show_help(
                    help::HELP,
                    "segment failed",
                    true,
                    &["use", "the shared segment", &e.to_string()],
                );
                None
            }
        }
    }

    /// Decides every local peer of `procs` not decided yet: the job's segment at the
    /// first add_procs with same-job peers, a pair segment for each process of another
    /// job, unreachable otherwise. A process of another job that Open MPI does not flag
    /// local (MPI_Intercomm_create between jobs that never connected leaves their
    /// locality unknown) is local if its contact names this node.
    fn decide(btl: &Btl<Module>, state: &mut Setup, procs: &[Proc]) {
        let me = mca::proc::my_name_hash();
        let asked: Vec<Proc> = procs
            .iter()
            .filter(|p| {
                !p.is_me()
                    && (p.is_local() || p.jobid_vpid().0 != rendezvous::jobid(me))
                    && !state.peers.contains_key(&p.name_hash())
            })
            .copied()
            .collect();
        if asked.is_empty() {
            return;
        }
        let limits = (btl.eager_limit(), btl.max_send_size());
        let here = setup::my_node_key();
        let mut contacts: HashMap<u64, Contact> = HashMap::new();
        let mut fresh: Vec<Proc> = Vec::new();
        for (p, c) in setup::contacts(btl.component(), &asked) {
            if p.is_local() || c.as_ref().is_some_and(|c| c.node == here) {
                fresh.push(p);
                if let Some(c) = c {
                    contacts.insert(p.name_hash(), c);
                }
            } else {
                // On another node: never ours.
                state.peers.insert(p.name_hash(), None);
            }
        }
        let candidates: Vec<Candidate> = fresh
            .iter()
            .map(|p| Candidate {
                name: p.name_hash(),
                sizes: contacts.get(&p.name_hash()).map(|c| (c.eager, c.max)),
            })
            .collect();
        let split = rendezvous::split(me, (limits.0 as u64, limits.1 as u64), &candidates, &[]);
        if !split.job.is_empty() && !state.job_tried {
            state.job_tried = true;
            let members = split
                .job
                .iter()
                .map(|n| (*n, contacts[n].clone()))
                .collect();
            if let Some(joined) = setup::join(members, limits)
                && let Some(index) = Self::add_node(btl, joined.seg)
            {
                let _ = btl.job.set(index);
                if let Some(node) = btl.nodes.get(index) {
                    cuda::attach(btl, node, joined.all_cuda_ipc);
                }
                for (rank, name) in joined.members.iter().enumerate() {
                    state.peers.insert(*name, Some((index, rank as u32)));
                }
            }
        }
        for name in &split.mismatched {
            verbose!(
                crate::params::stream(),
                1,
                "btl:rsmcuda: process {} of job {:x} uses other fragment sizes; it is not \
                 reachable through rsmcuda",
                *name as u32,
                name >> 32
            );
        }
        for (name, seg) in pair::meet(&split.pairs, &contacts, limits) {
            let rank = match rendezvous::role(me, name) {
                Role::Create => 1,
                Role::Attach => 0,
            };
            let at = seg.and_then(|seg| Self::add_node(btl, seg));
            state.peers.insert(name, at.map(|index| (index, rank)));
        }
        // Everyone else seen here (no contact, other sizes, left out of the job's
        // segment) stays unreachable: decided once.
        for p in &fresh {
            state.peers.entry(p.name_hash()).or_insert(None);
        }
    }
}

/// Most passes find nothing: true for those, with a few loads (no call, nothing that
/// can panic), without the module's table or the whole walk (whose frame and iterator
/// set-up cost ~120 instructions a pass against vader's ~48 in all). False when unsure.
#[inline]
pub fn idle() -> bool {
    let only = ONLY.load(Ordering::Acquire);
    // SAFETY: ONLY points at a node of the module in ACTIVE (a Box in its append-only
    // table, which never moves it); it is cleared with ACTIVE in finalize, before the
    // cell and its nodes are freed, and ob1 stops progress before finalize.
    !only.is_null() && cuda::quiet() && unsafe { &*only }.idle()
}

/// Component progress: every segment of the active module, if there is one yet.
#[inline(never)]
pub fn progress() -> usize {
    let btl = ACTIVE.load(Ordering::Acquire);
    if btl.is_null() {
        return 0;
    }
    // SAFETY: ACTIVE holds a module cell from btl_init, set in add_procs and cleared
    // in finalize before the cell is freed; ob1 stops progress before finalize.
    let btl = unsafe { &*btl };
    // The component asked `idle()` just before: with no CUDA work at all it said "busy"
    // because something arrived (or there are several nodes), so the single node is not
    // asked again; with some CUDA work, a pass whose only work is the idle-pass count
    // still takes the short way.
    if !cuda::quiet() && btl.nodes.only().is_some_and(Node::idle) && cuda::idle() {
        cuda::idle_pass();
        return 0;
    }
    let only = ONLY.load(Ordering::Acquire);
    let handled = if cuda::quiet() && !only.is_null() {
        // The common pass of a busy job: its one segment (the module's first and only
        // node), no CUDA work.
        // SAFETY: as in `idle`.
        Module::node_progress(btl, unsafe { &*only }, 0)
    } else {
        Module::progress(btl)
    };
    if handled == 0 {
        cuda::idle_pass();
    }
    handled
}

impl BtlModule for Module {
    type Endpoint = Endpoint;
    const HAS_SENDI: bool = true;
    const HAS_GET: bool = true;
    // Not advertised (no MCA_BTL_FLAGS_PUT), but ob1 still asks a GET-only BTL to put
    // when a rendezvous's sender could not register its buffer (pml_ob1_recvreq.c: its
    // "registered on both sides" and pipeline branches); a NULL btl_put crashed there.
    const HAS_PUT: bool = true;
    const HAS_REGISTER_MEM: bool = true;

    fn add_procs(btl: &Btl<Self>, procs: &[Proc]) -> Result<Vec<Option<Endpoint>>> {
        let mut state = btl.setup.lock().unwrap_or_else(|e| e.into_inner());
        Self::decide(btl, &mut state, procs);
        let job = btl.job.get().copied();
        Ok(procs
            .iter()
            .map(|p| {
                if p.is_me() {
                    return None;
                }
                let (node, rank) = (*state.peers.get(&p.name_hash())?)?;
                let node_ptr = NonNull::from(btl.nodes.get(node)?);
                let job = Some(node) == job;
                if job {
                    cuda::remember(rank, *p);
                }
                Some(Endpoint {
                    node_ptr,
                    rank,
                    job,
                    proc_: *p,
                })
            })
            .collect())
    }

    fn endpoint_placed(_btl: &Btl<Self>, endpoint: &Endpoint) {
        endpoint
            .node()
            .set_endpoint(endpoint.rank, Btl::<Module>::endpoint_ptr(endpoint));
    }

    fn endpoint_leaving(_btl: &Btl<Self>, endpoint: &Endpoint) {
        endpoint
            .node()
            .clear_endpoint(endpoint.rank, Btl::<Module>::endpoint_ptr(endpoint));
    }

    fn del_procs(_btl: &Btl<Self>, _procs: &[Proc], _endpoints: Vec<Endpoint>) -> Result<()> {
        Ok(())
    }

    fn finalize(btl: &Btl<Self>) -> Result<()> {
        cuda::finalize(btl);
        let limit = std::time::Instant::now() + std::time::Duration::from_secs(2);
        for (_, node) in btl.nodes.iter() {
            let left =
                node.drain_before_exit(limit.saturating_duration_since(std::time::Instant::now()));
            if left > 0 {
                verbose!(
                    crate::params::stream(),
                    1,
                    "btl:rsmcuda: finalize with {left} fragments still waiting for a full FIFO"
                );
            }
        }
        let me = btl as *const Btl<Self> as *mut Btl<Self>;
        if ACTIVE.load(Ordering::Acquire) == me {
            ONLY.store(std::ptr::null_mut(), Ordering::Release);
        }
        let _ = ACTIVE.compare_exchange(
            me,
            std::ptr::null_mut(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        verbose!(
            crate::params::stream(),
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
        endpoint: Option<&Endpoint>,
        order: u8,
        size: usize,
        flags: u32,
    ) -> Option<Descriptor> {
        // ob1 always names the endpoint; without one, the job's segment (or the first).
        let node = match endpoint {
            Some(e) => e.node(),
            None => btl.job_node().or_else(|| btl.nodes.get(0))?,
        };
        if size > node.max_capacity() {
            return None;
        }
        node.alloc(size, flags, order)
    }

    fn free(btl: &Btl<Self>, descriptor: Descriptor) -> Result<()> {
        let node = crate::desc::extra(descriptor).node as usize;
        btl.nodes
            .get(node)
            .ok_or(Error::BAD_PARAM)?
            .free(descriptor)
    }

    fn prepare_src(
        _btl: &Btl<Self>,
        endpoint: &Endpoint,
        convertor: &mut Convertor,
        order: u8,
        reserve: usize,
        size: &mut usize,
        flags: u32,
    ) -> Option<Descriptor> {
        let node = endpoint.node();
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
        _btl: &Btl<Self>,
        endpoint: &Endpoint,
        descriptor: Descriptor,
        tag: u8,
    ) -> Result<SendStatus> {
        let node = endpoint.node();
        if endpoint.job {
            cuda::before_send(endpoint.rank, false);
        }
        node.send(descriptor, endpoint.rank, tag)
    }

    // Inlined into the entry point: a call with nine arguments cost ~35 instructions of
    // moves and a second frame per message.
    #[inline(always)]
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
        let node = endpoint.node();
        let device = convertor.on_device();
        if endpoint.job {
            cuda::before_send(endpoint.rank, device);
        }
        if !(endpoint.job && cuda::refuse_sendi(endpoint.rank, device))
            && node.sendi(endpoint.rank, header, convertor, payload_size, tag)
        {
            return Ok(());
        }
        Self::sendi_refused(
            btl,
            endpoint,
            header.len() + payload_size,
            order,
            flags,
            want_descriptor,
        )
    }

    /// A CMA write for host memory on both sides; anything else is refused, and ob1 then
    /// copies that part in and out (pml_ob1_sendreq.c, put_frag_failed).
    fn put(btl: &Btl<Self>, endpoint: &Endpoint, op: RdmaOp, done: RdmaCompletion) -> Result<()> {
        let node = endpoint.node();
        if cuda::put_touches_device(&op)? {
            return Err(Error::NOT_SUPPORTED);
        }
        single_copy::put(btl, node, endpoint.rank, op, done)
    }

    fn get(btl: &Btl<Self>, endpoint: &Endpoint, op: RdmaOp, done: RdmaCompletion) -> Result<()> {
        let node = endpoint.node();
        match cuda::remote_device(&op)? {
            Some(region) if endpoint.job => cuda::get(endpoint.rank, &region, op, done),
            // No IPC handshake with a process of another job: ob1 falls back.
            Some(_) => Err(Error::ERROR),
            None => single_copy::get(btl, node, endpoint.rank, op, done),
        }
    }

    fn register_mem(
        btl: &Btl<Self>,
        endpoint: Option<&Endpoint>,
        base: *mut u8,
        size: usize,
        flags: u32,
    ) -> Option<Registration> {
        let to = match endpoint {
            Some(e) if e.job => cuda::RegisteredFor::Peer(e.rank),
            Some(_) => cuda::RegisteredFor::OtherJob,
            None => cuda::RegisteredFor::Unknown,
        };
        match cuda::register(base, size, flags, to) {
            cuda::Reg::Inactive => single_copy::register(btl, size, flags),
            cuda::Reg::Host => {
                single_copy::register(btl, size, flags).map(|_| cuda::host_registration())
            }
            cuda::Reg::UnsharedDevice => Some(cuda::unshared_device_registration()),
            cuda::Reg::Device(handle) => Some(handle),
            cuda::Reg::Decline => None,
        }
    }

    fn deregister_mem(_btl: &Btl<Self>, handle: Registration) -> Result<()> {
        cuda::deregister(handle);
        Ok(())
    }
}
