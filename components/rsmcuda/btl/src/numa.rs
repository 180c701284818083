//! NUMA placement glue: where this rank runs (published in the modex), and the
//! creator's plan for the segment. The decisions are rsmcuda-core's `numa`; reading the
//! machine and binding memory are rsmcuda-shm's.
//!
//! The binding is the one mpirun applied (`sched_getaffinity`), matched against the
//! kernel's NUMA nodes (`/sys/devices/system/node`), which is what hwloc itself reads
//! on Linux; Open MPI's hwloc topology is not consulted because the helpers that map a
//! cpuset to NUMA nodes are inline functions of hwloc's headers, not library symbols.

use std::sync::OnceLock;

use mca::verbose;
use rsmcuda_core::numa::{self, Home, NodeId, Plan};
use rsmcuda_shm::numa as machine;

use crate::params;

struct Topology {
    nodes: usize,
    home: Home,
}

fn topology() -> &'static Topology {
    static TOPO: OnceLock<Topology> = OnceLock::new();
    TOPO.get_or_init(|| {
        let read = || -> Result<(usize, Home), String> {
            let nodes = machine::nodes().map_err(|e| e.to_string())?;
            let nodes = nodes
                .into_iter()
                .map(|(id, list)| Ok((id, numa::parse_cpulist(&list).map_err(|e| e.to_string())?)))
                .collect::<Result<Vec<(NodeId, Vec<usize>)>, String>>()?;
            let cpus = machine::allowed_cpus().map_err(|e| e.to_string())?;
            Ok((nodes.len(), numa::home_node(&cpus, &nodes)))
        };
        match read() {
            Ok((nodes, home)) => Topology { nodes, home },
            Err(e) => {
                verbose!(
                    crate::stream(),
                    1,
                    "btl:rsmcuda: NUMA topology unreadable ({e})"
                );
                Topology {
                    nodes: 0,
                    home: Home::Unknown,
                }
            }
        }
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
    let stream = crate::stream();
    match (plan, placed) {
        (Plan::Off(why), _) => {
            verbose!(stream, 1, "btl:rsmcuda: NUMA placement off: {why}");
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
                "btl:rsmcuda: NUMA placement: {} ({bytes} bytes bound, preferred policy)",
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
