//! Processes of other jobs on this node (spawned, or joined with MPI_Comm_connect/accept):
//! one two-member segment per pair, met inside the add_procs of the connect, which both
//! sides run (see `rsmcuda_core::rendezvous` for the protocol and why it cannot
//! deadlock). The lower process name creates the anonymous segment
//! `rsmcuda-<its jobid>.<vpid>-<its pid>-<peer jobid>.<vpid>-<node hash>` (a memfd: no
//! name in /dev/shm, ever) as rank 0; the other finds it among the creator's open files
//! and attaches as rank 1. The creator waits for that attach before add_procs returns,
//! at most `btl_rsmcuda_attach_timeout`, then closes its descriptor (the door) either
//! way.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

use mca::verbose;
use rsmcuda_core::rendezvous::{Outcome, Poll, Rendezvous, Role};
use rsmcuda_shm::{Backing, Locator, Segment, SegmentName, ShmError};

use crate::help::HELP;
use crate::modex::Contact;
use crate::{params, setup};

/// The name of the segment between `creator` (process name and pid) and `attacher`.
fn pair_name(creator: u64, creator_pid: u32, attacher: u64) -> Result<SegmentName, ShmError> {
    let show = |n: u64| format!("{:x}.{}", n >> 32, n as u32);
    SegmentName::for_job(
        &format!("{}-{creator_pid}-{}", show(creator), show(attacher)),
        &setup::node_name(),
    )
}

/// Meets every peer of `pairs` (whose contacts are in `contacts`) and returns, per peer,
/// the shared segment or `None` (unreachable through rsmcuda; said why).
pub fn meet(
    pairs: &[(u64, Role)],
    contacts: &HashMap<u64, Contact>,
    limits: (usize, usize),
) -> Vec<(u64, Option<Segment>)> {
    let stream = crate::params::stream();
    let me = mca::proc::my_name_hash();
    let my_pid = std::process::id();
    let timeout =
        std::time::Duration::from_millis(params::get().attach_timeout_ms.get().max(1) as u64);
    // Each segment's name and where it is found (the creator's open files).
    let mut names: HashMap<u64, (SegmentName, Locator)> = HashMap::new();
    let segs: RefCell<HashMap<u64, Segment>> = RefCell::default();
    let mut rendezvous = Rendezvous::new(pairs.iter().copied(), timeout);
    let start = Instant::now();
    // First everything this process creates (never waits), then the waits.
    for &(peer, role) in pairs {
        let (named, creator_pid) = match (role, contacts.get(&peer)) {
            (Role::Create, _) => (pair_name(me, my_pid, peer), my_pid),
            (Role::Attach, Some(c)) => (pair_name(peer, c.pid, me), c.pid),
            (Role::Attach, None) => continue,
        };
        let name = match named {
            Ok(n) => n,
            Err(e) => {
                mca::help::show_help(HELP, "no segment name", true, &[&e.to_string()]);
                rendezvous.settle(|k| *k == peer, Outcome::Failed);
                continue;
            }
        };
        if role == Role::Create {
            let layout = setup::layout_params(2, limits);
            match Segment::create_in(Backing::Anonymous, &name, &layout, 0, &[]) {
                Ok((seg, _)) => {
                    segs.borrow_mut().insert(peer, seg);
                }
                Err(e) => {
                    mca::help::show_help(
                        HELP,
                        "segment failed",
                        true,
                        &["create", name.as_str(), &e.to_string()],
                    );
                    rendezvous.settle(|k| *k == peer, Outcome::Failed);
                }
            }
        }
        names.insert(peer, (name, Locator::Process(creator_pid)));
    }
    rendezvous.settle(|k| !names.contains_key(k), Outcome::Failed);
    while !rendezvous.round(
        start.elapsed(),
        |peer, role| match role {
            Role::Create => match segs.borrow().get(peer) {
                Some(seg) if seg.all_attached() => Poll::Ready,
                Some(_) => Poll::Waiting,
                None => Poll::Failed,
            },
            Role::Attach => match Segment::try_attach_from(names[peer].1, &names[peer].0, 1) {
                Ok(Some(seg)) => {
                    segs.borrow_mut().insert(*peer, seg);
                    Poll::Ready
                }
                Ok(None) => Poll::Waiting,
                Err(e) => {
                    verbose!(
                        stream,
                        1,
                        "btl:rsmcuda: cannot attach to {}: {e}; process {} of job {:x} is \
                         not reachable through rsmcuda",
                        names[peer].0,
                        *peer as u32,
                        peer >> 32
                    );
                    Poll::Failed
                }
            },
        },
        |peer, role| match role {
            Role::Create => segs.borrow().get(peer).is_some_and(crate::help::abandon),
            Role::Attach => {
                verbose!(
                    stream,
                    1,
                    "btl:rsmcuda: {} did not appear within btl_rsmcuda_attach_timeout; \
                     process {} of job {:x} is not reachable through rsmcuda",
                    names[peer].0,
                    *peer as u32,
                    peer >> 32
                );
                false
            }
        },
    ) {
        std::thread::sleep(rendezvous.pause());
    }
    let mut segs = segs.into_inner();
    rendezvous
        .outcomes()
        .map(|(peer, role, outcome)| {
            let seg = segs.remove(&peer);
            let seg = match (outcome, seg) {
                (Outcome::Ready, Some(seg)) => match setup::mismatch(&seg, limits) {
                    None => {
                        // The creator's door closes now: nobody else will attach.
                        let _ = seg.settle();
                        Some(seg)
                    }
                    Some(problem) => {
                        mca::help::show_help(
                            HELP,
                            "parameter mismatch",
                            true,
                            &[seg.name().as_str(), &problem],
                        );
                        let _ = seg.unlink_if_leader_on_failure();
                        None
                    }
                },
                _ => None,
            };
            if let Some(seg) = &seg {
                verbose!(
                    stream,
                    1,
                    "btl:rsmcuda: {} segment {} as local rank {} of 2 ({} bytes), shared with \
                     process {} of job {:x}",
                    if role == Role::Create {
                        "created"
                    } else {
                        "attached to"
                    },
                    seg.name(),
                    seg.local_rank(),
                    seg.layout().total_size(),
                    peer as u32,
                    peer >> 32
                );
            }
            (peer, seg)
        })
        .collect()
}
