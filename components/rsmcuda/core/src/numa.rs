//! Where each rank's part of the node segment should live (sans-IO).
//!
//! A rank's region (its FIFO, which only it reads, and the fragments it sends from) and
//! the fast boxes it reads belong on the NUMA node the rank runs on. Each rank finds
//! its node from the CPUs it is bound to ([`home_node`]) and publishes it in the modex;
//! the rank that creates the segment then [`plan`]s: every region whose owner has one
//! home node is bound there (preferred, so a full node spills instead of failing)
//! before the memory is allocated. A machine with one node, a rank bound across nodes
//! or not bound at all keeps the kernel's default (first touch) for that region.

use std::fmt;

/// A NUMA node number as the kernel numbers them (`/sys/devices/system/node/nodeN`).
pub type NodeId = u32;

/// A CPU list that cannot be read (`/sys/.../cpulist` format: "0-3,8,10-11").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadCpuList(pub String);

impl fmt::Display for BadCpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed CPU list {:?}", self.0)
    }
}

impl std::error::Error for BadCpuList {}

/// Parses a kernel CPU list ("0-3,8,10-11"; empty or blank: no CPU).
pub fn parse_cpulist(text: &str) -> Result<Vec<usize>, BadCpuList> {
    let bad = || BadCpuList(text.to_owned());
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?),
            None => {
                let c: usize = part.parse().map_err(|_| bad())?;
                (c, c)
            }
        };
        if lo > hi || hi - lo > 1 << 20 {
            return Err(bad());
        }
        cpus.extend(lo..=hi);
    }
    Ok(cpus)
}

/// Where a process runs, as far as memory placement goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Home {
    /// Every CPU it may run on belongs to this node.
    Node(NodeId),
    /// Its CPUs span these nodes (not bound, or bound across nodes).
    Spread(Vec<NodeId>),
    /// None of its CPUs belongs to a known node.
    Unknown,
}

/// The home of a process allowed on `cpus`, given each node's CPUs.
#[must_use]
pub fn home_node(cpus: &[usize], nodes: &[(NodeId, Vec<usize>)]) -> Home {
    home_of(
        nodes
            .iter()
            .filter(|(_, node_cpus)| node_cpus.iter().any(|c| cpus.contains(c)))
            .map(|(id, _)| *id)
            .collect(),
    )
}

/// The home of a process whose allowed CPUs meet the nodes `hit` (as hwloc reports
/// them: the NUMA nodes whose cpuset intersects the binding).
#[must_use]
pub fn home_of(mut hit: Vec<NodeId>) -> Home {
    hit.sort_unstable();
    hit.dedup();
    match hit.as_slice() {
        [] => Home::Unknown,
        [one] => Home::Node(*one),
        _ => Home::Spread(hit),
    }
}

/// Why nothing is placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoPlacement {
    /// `btl_rsmcuda_numa_placement` is off.
    Disabled,
    /// The machine has one NUMA node (or none is known): nothing to choose.
    SingleNode,
    /// No rank is bound within one node.
    NoRankBound,
}

impl fmt::Display for NoPlacement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NoPlacement::Disabled => "btl_rsmcuda_numa_placement is off",
            NoPlacement::SingleNode => "this machine has a single NUMA node",
            NoPlacement::NoRankBound => "no rank is bound within one NUMA node",
        })
    }
}

/// The creator's decision for the whole segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    Off(NoPlacement),
    /// By segment rank: the node that rank's region and fast boxes go to (`None`: the
    /// kernel's default for that rank).
    Place(Vec<Option<NodeId>>),
}

/// Decides the placement from the parameter, the number of NUMA nodes and each
/// participant's published home node (by segment rank).
#[must_use]
pub fn plan(enabled: bool, node_count: usize, homes: &[Option<NodeId>]) -> Plan {
    if !enabled {
        return Plan::Off(NoPlacement::Disabled);
    }
    if node_count < 2 {
        return Plan::Off(NoPlacement::SingleNode);
    }
    if homes.iter().all(Option::is_none) {
        return Plan::Off(NoPlacement::NoRankBound);
    }
    Plan::Place(homes.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists_parse_like_the_kernel_writes_them() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n"),
            Ok(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpulist("5"), Ok(vec![5]));
        assert_eq!(parse_cpulist("\n"), Ok(vec![]));
        for bad in ["a", "3-1", "1-", "0-2,x", "-4"] {
            assert_eq!(parse_cpulist(bad), Err(BadCpuList(bad.into())), "{bad}");
        }
    }

    #[test]
    fn the_home_is_the_one_node_holding_every_allowed_cpu() {
        let nodes = vec![(0, vec![0, 1, 2, 3]), (1, vec![4, 5, 6, 7])];
        assert_eq!(home_node(&[2], &nodes), Home::Node(0));
        assert_eq!(home_node(&[4, 5], &nodes), Home::Node(1));
        assert_eq!(home_node(&[3, 4], &nodes), Home::Spread(vec![0, 1]));
        assert_eq!(
            home_node(&(0..8).collect::<Vec<_>>(), &nodes),
            Home::Spread(vec![0, 1])
        );
        assert_eq!(home_node(&[9], &nodes), Home::Unknown);
        assert_eq!(home_node(&[0, 1], &[(0, vec![0, 1])]), Home::Node(0));
        assert_eq!(home_of(vec![3, 1, 3]), Home::Spread(vec![1, 3]));
        assert_eq!(home_of(vec![2, 2]), Home::Node(2));
        assert_eq!(home_of(vec![]), Home::Unknown);
    }

    #[test]
    fn placement_only_where_there_is_a_choice() {
        assert_eq!(
            plan(false, 4, &[Some(0), Some(1)]),
            Plan::Off(NoPlacement::Disabled)
        );
        assert_eq!(
            plan(true, 1, &[Some(0), Some(0)]),
            Plan::Off(NoPlacement::SingleNode)
        );
        assert_eq!(plan(true, 0, &[None]), Plan::Off(NoPlacement::SingleNode));
        assert_eq!(
            plan(true, 2, &[None, None]),
            Plan::Off(NoPlacement::NoRankBound)
        );
        assert_eq!(
            plan(true, 2, &[Some(1), None, Some(0)]),
            Plan::Place(vec![Some(1), None, Some(0)])
        );
    }
}
