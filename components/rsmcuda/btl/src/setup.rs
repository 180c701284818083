//! The job's segment: who shares it, who creates it, and attaching to it.
//!
//! At init every rank publishes a [`Contact`] in the modex. In the first add_procs
//! that lists local peers of this job, the participants are this rank plus every local
//! peer of the same job that published one (a peer that excluded rsmcuda never
//! attaches, so it is not counted), ordered by their process name; the first creates
//! the segment, an anonymous one (memfd) under the name from its own contact, and the
//! others find it among its open files (`/proc/<pid>/fd`, the pid from its contact) and
//! attach. Nothing is ever named in /dev/shm, so nothing can be left there however the
//! job ends. Processes of other jobs are met one by one (`pair`).

use std::time::Duration;

use mca::proc::Proc;
use mca::verbose;
use rsmcuda_shm::{Backing, LayoutParams, Locator, Retry, Segment, SegmentName};

use rsmcuda_core::numa::Plan;

use crate::help::HELP;
use crate::modex::Contact;
use crate::params;
/// This process's contact: its pid and the segment name it would create.
pub fn my_contact(limits: (usize, usize)) -> Result<Contact, String> {
    let (jobid, _) = split(mca::proc::my_name_hash());
    let pid = std::process::id();
    let name = SegmentName::for_job(&format!("{jobid:x}-{pid}"), &node_name())
        .map_err(|e| e.to_string())?;
    Ok(Contact {
        pid,
        eager: limits.0 as u64,
        max: limits.1 as u64,
        numa_node: crate::numa::my_node(),
        cuda_ipc: crate::cuda::probed(),
        node: my_node_key(),
        segment: name.as_str().to_owned(),
    })
}

/// This node's key, as published in contacts.
pub fn my_node_key() -> u64 {
    rsmcuda_shm::node_key(&node_name())
}

/// This node's name (hashed into segment names).
pub fn node_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

fn split(hash: u64) -> (u32, u32) {
    ((hash >> 32) as u32, hash as u32)
}

/// The outcome of setup: the segment and, by segment rank, each participant's
/// process name.
pub struct Joined {
    pub seg: Segment,
    pub members: Vec<u64>,
    /// Every participant has CUDA IPC active.
    pub all_cuda_ipc: bool,
}

/// Every process of `procs`, with its contact if it published a usable one (a
/// malformed one is reported and counts as none; a local one without one is named at
/// verbose 1).
pub fn contacts(
    component: *const mca::sys::mca_base_component_t,
    procs: &[Proc],
) -> Vec<(Proc, Option<Contact>)> {
    let stream = crate::params::stream();
    procs
        .iter()
        .map(|proc_| {
            // SAFETY: our exported component structure.
            let contact = match unsafe { proc_.modex_recv(component) } {
                Ok(blob) => match Contact::decode(&blob) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        let (_, vpid) = proc_.jobid_vpid();
                        mca::help::show_help(
                            HELP,
                            "bad contact",
                            true,
                            &[&vpid.to_string(), &e.to_string()],
                        );
                        None
                    }
                },
                Err(_) if !proc_.is_local() => None,
                Err(_) => {
                    let (jobid, vpid) = proc_.jobid_vpid();
                    verbose!(
                        stream,
                        1,
                        "btl:rsmcuda: local rank with vpid {vpid} (job {jobid:x}) did not \
                         publish a contact (rsmcuda not selected there); it is not part of \
                         the segment"
                    );
                    None
                }
            };
            (*proc_, contact)
        })
        .collect()
}

/// Forms the job's segment with `members`: the local peers of this job that published
/// a contact. `None` (after telling the user why, where it is an error) leaves them
/// unreachable through rsmcuda.
pub fn join(mut members: Vec<(u64, Contact)>, limits: (usize, usize)) -> Option<Joined> {
    let p = params::get();
    let stream = crate::params::stream();
    let me = mca::proc::my_name_hash();
    if members.is_empty() {
        return None;
    }
    let mine = my_contact(limits).ok()?;
    members.push((me, mine.clone()));
    members.sort_by_key(|(hash, _)| *hash);
    // Every rank decides from the same contacts: the segment is the leader's and has
    // its fragment sizes; ranks that differ stay out (and know it themselves).
    let sizes = (members[0].1.eager, members[0].1.max);
    if (mine.eager, mine.max) != sizes {
        mca::help::show_help(
            HELP,
            "parameter mismatch",
            true,
            &[
                &members[0].1.segment,
                &format!(
                    "the segment has eager fragments of {} bytes and max fragments of {} \
                     bytes, but this rank's btl_rsmcuda_eager_limit is {} and \
                     btl_rsmcuda_max_send_size is {}",
                    sizes.0, sizes.1, mine.eager, mine.max
                ),
            ],
        );
        return None;
    }
    members.retain(|(_, c)| (c.eager, c.max) == sizes);
    if members.len() < 2 {
        return None;
    }
    let my_rank = members.iter().position(|(h, _)| *h == me)? as u32;
    let leader = &members[0].1;
    let name = match SegmentName::new(&leader.segment) {
        Ok(n) => n,
        Err(e) => {
            mca::help::show_help(
                HELP,
                "bad contact",
                true,
                &[&split(members[0].0).1.to_string(), &e.to_string()],
            );
            return None;
        }
    };
    let nranks = members.len() as u32;
    let timeout = Duration::from_millis(p.attach_timeout_ms.get().max(1) as u64);
    let result = if my_rank == 0 {
        let layout = layout_params(nranks, limits);
        let homes: Vec<Option<u32>> = members.iter().map(|(_, c)| c.numa_node).collect();
        let plan = crate::numa::plan(&homes);
        let place = match &plan {
            Plan::Place(v) => v.as_slice(),
            Plan::Off(_) => &[],
        };
        Segment::create_in(Backing::Anonymous, &name, &layout, 0, place).map(|(seg, placed)| {
            crate::numa::report(&plan, Some(&placed));
            seg
        })
    } else {
        let retry = Retry {
            attempts: (timeout.as_millis() / 20).max(1) as u32 + 10,
            first_sleep: Duration::from_millis(1),
            max_sleep: Duration::from_millis(20),
        };
        Segment::attach_from(Locator::Process(leader.pid), &name, my_rank, &retry)
    };
    let seg = match result {
        Ok(seg) => seg,
        Err(e) => {
            let what = if my_rank == 0 { "create" } else { "attach to" };
            mca::help::show_help(
                HELP,
                "segment failed",
                true,
                &[what, name.as_str(), &e.to_string()],
            );
            return None;
        }
    };
    verbose!(
        stream,
        1,
        "btl:rsmcuda: {} segment {} as local rank {my_rank} of {nranks} ({} bytes)",
        if seg.is_leader() {
            "created"
        } else {
            "attached to"
        },
        name.as_str(),
        seg.layout().total_size()
    );
    if let Some(problem) = mismatch(&seg, limits) {
        mca::help::show_help(HELP, "parameter mismatch", true, &[name.as_str(), &problem]);
        let _ = seg.unlink_if_leader_on_failure();
        return None;
    }
    let all_cuda_ipc = members.iter().all(|(_, c)| c.cuda_ipc);
    Some(Joined {
        seg,
        all_cuda_ipc,
        members: members.into_iter().map(|(h, _)| h).collect(),
    })
}

/// Fast box ring per ordered pair of ranks (messages up to a quarter of it go inline):
/// 256 KiB for 2 ranks, halved as the rank count doubles, 16 KiB from 17 to 32 ranks
/// (15.5 MiB in all), none above (they grow with the square of the rank count). A ring
/// holds a window of small messages: with 64 KiB at 2 ranks, 64 messages of 1 KiB did
/// not fit, the sender fell back to fragments and 1 KiB bandwidth was 0.71x vader's
/// (2.05x with 256 KiB, 2026-12-03). The segment maps 0.52x vader's at 2-16 ranks
/// (vader: 4 MiB a rank) and, sparse, holds only the pages the rings have used.
pub fn fbox_bytes(nranks: u32) -> u32 {
    match nranks {
        0..=2 => 256 << 10,
        3..=4 => 128 << 10,
        5..=8 => 64 << 10,
        9..=16 => 32 << 10,
        17..=32 => 16 << 10,
        _ => 0,
    }
}

/// The layout this rank would create, from its parameters and ob1's limits.
pub fn layout_params(nranks: u32, limits: (usize, usize)) -> LayoutParams {
    let p = params::get();
    LayoutParams {
        nranks,
        fifo_size: p.fifo_size.get() as u32,
        eager_size: u32::try_from(limits.0).unwrap_or(u32::MAX),
        eager_count: p.eager_frags.get() as u32,
        max_size: u32::try_from(limits.1).unwrap_or(u32::MAX),
        max_count: p.max_frags.get() as u32,
        fbox_bytes: fbox_bytes(nranks),
    }
}

/// Fragment sizes are part of the segment; a rank whose limits differ from the
/// creator's would hand ob1 fragments of the wrong size.
pub fn mismatch(seg: &Segment, (eager, max): (usize, usize)) -> Option<String> {
    let have = seg.layout().params();
    (have.eager_size as usize != eager || have.max_size as usize != max).then(|| {
        format!(
            "the segment has eager fragments of {} bytes and max fragments of {} bytes, but \
             this rank's btl_rsmcuda_eager_limit is {eager} and btl_rsmcuda_max_send_size is \
             {max}",
            have.eager_size, have.max_size
        )
    })
}
