//! NUMA placement glue: where this rank runs (published in the modex), and the
//! creator's plan for the segment. The decisions are rsmcuda-core's `numa`; reading the
//! machine and binding memory are rsmcuda-shm's.
//!
//! The topology comes from Open MPI's already-loaded hwloc topology
//! (`opal_hwloc_topology`, read by `mca::hwloc`: the NUMA nodes whose cpusets meet this
//! thread's binding). Where that cannot be read (no topology loaded, a run-time hwloc of
//! another API version than the headers'), the same facts come from the kernel: the binding (`sched_getaffinity`)
//! against `/sys/devices/system/node/node*/cpulist`. The verbose line names the source.

use std::sync::OnceLock;

use mca::verbose;
use rsmcuda_core::numa::{self, Home, NodeId, Plan};
use rsmcuda_shm::numa as machine;

use crate::params;

struct Topology {
    nodes: usize,
    home: Home,
    source: String,
}

fn from_sysfs() -> Result<(usize, Home), String> {
    let nodes = machine::nodes().map_err(|e| e.to_string())?;
    let nodes = nodes
        .into_iter()
        .map(|(id, list)| Ok((id, numa::parse_cpulist(&list).map_err(|e| e.to_string())?)))
        .collect::<Result<Vec<(NodeId, Vec<usize>)>, String>>()?;
    let cpus = machine::allowed_cpus().map_err(|e| e.to_string())?;
    Ok((nodes.len(), numa::home_node(&cpus, &nodes)))
}

fn topology() -> &'static Topology {
    static TOPO: OnceLock<Topology> = OnceLock::new();
    TOPO.get_or_init(|| match mca::hwloc::numa_of_binding() {
        Ok((nodes, hits)) => Topology {
            nodes,
            home: numa::home_of(hits),
            source: "Open MPI's hwloc topology".into(),
        },
        Err(why) => match from_sysfs() {
            Ok((nodes, home)) => Topology {
                nodes,
                home,
                source: format!("sysfs; hwloc: {why}"),
            },
            Err(e) => Topology {
                nodes: 0,
                home: Home::Unknown,
                source: format!("unreadable: hwloc: {why}; sysfs: {e}"),
            },
        },
    })
}

/// The node to publish: this rank's home when placement is on and it has one.
pub fn my_node() -> Option<NodeId> {
    if !params::get().numa_placement.enabled() {
        return None;
    }
    match topology().home {
        Home::Node(n) => Some(n),
        _ => None,
    }
}

/// The creator's plan from every participant's published node (by segment rank).
pub fn plan(homes: &[Option<NodeId>]) -> Plan {
    numa::plan(
        params::get().numa_placement.enabled(),
        topology().nodes,
        homes,
    )
}

/// One verbose line saying what was decided and done.
pub fn report(plan: &Plan, placed: Option<&std::io::Result<Vec<(u32, u64)>>>) {
    let stream = crate::params::stream();
    let source = &topology().source;
    match (plan, placed) {
        (Plan::Off(why), _) => {
            verbose!(
                stream,
                1,
                "btl:rsmcuda: NUMA placement off: {why} (topology: {source})"
            );
        }
        (Plan::Place(homes), Some(Ok(done))) => {
            let per_rank: Vec<String> = homes
                .iter()
                .enumerate()
                .map(|(r, n)| match n {
                    Some(n) => format!("rank {r} -> node {n}"),
                    None => format!("rank {r} -> default"),
                })
                .collect();
            let bytes: u64 = done.iter().map(|(_, b)| b).sum();
            verbose!(
                stream,
                1,
                "btl:rsmcuda: NUMA placement: {} ({bytes} bytes bound, preferred policy; \
                 topology: {source})",
                per_rank.join(", ")
            );
        }
        (Plan::Place(_), Some(Err(e))) => {
            verbose!(
                stream,
                1,
                "btl:rsmcuda: NUMA placement failed (mbind: {e}); the kernel's default \
                 placement is used"
            );
        }
        (Plan::Place(_), None) => {}
    }
}
