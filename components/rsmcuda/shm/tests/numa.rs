//! NUMA placement on this machine: the creator's `mbind` really sets the policy of the
//! placed ranks' memory (checked with `get_mempolicy`), and leaves the others alone.
//! Node 0 exists on every Linux machine with NUMA support, single node or not.

mod common;

use common::unique_name;
use rsmcuda_shm::{LayoutParams, Segment, numa};

const MPOL_DEFAULT: i32 = 0;
const MPOL_PREFERRED: i32 = 1;

#[test]
fn placed_regions_prefer_their_node_and_the_others_keep_the_default() {
    if numa::nodes().unwrap().is_empty() {
        eprintln!("SKIP: this kernel exposes no NUMA node (/sys/devices/system/node)");
        return;
    }
    let params = LayoutParams {
        nranks: 3,
        fifo_size: 64,
        eager_size: 4096,
        eager_count: 8,
        max_size: 32768,
        max_count: 2,
        fbox_bytes: 16 << 10,
    };
    let name = unique_name("numa");
    let (seg, placed) =
        Segment::create_placed(&name, &params, 0, &[Some(0), None, Some(0)]).unwrap();
    let placed = placed.expect("mbind to node 0");
    assert_eq!(
        placed.len(),
        4,
        "two ranks × (region, fast boxes): {placed:?}"
    );
    let l = *seg.layout();
    for r in [0, 2] {
        assert_eq!(
            seg.policy_at(l.region_off(r)).unwrap(),
            (MPOL_PREFERRED, 1),
            "rank {r}'s region"
        );
        let last = l.region_off(r) + l.region_bytes() - 1;
        assert_eq!(seg.policy_at(last).unwrap(), (MPOL_PREFERRED, 1));
    }
    assert_eq!(
        seg.policy_at(l.region_off(1)).unwrap().0,
        MPOL_DEFAULT,
        "rank 1 not placed"
    );
    assert_eq!(
        seg.policy_at(0).unwrap().0,
        MPOL_DEFAULT,
        "the header is nobody's"
    );
    seg.unlink_if_leader_on_failure().unwrap();
}

#[test]
fn without_a_plan_nothing_is_bound() {
    let params = LayoutParams {
        nranks: 2,
        fifo_size: 64,
        eager_size: 4096,
        eager_count: 8,
        max_size: 32768,
        max_count: 2,
        fbox_bytes: 16 << 10,
    };
    let name = unique_name("nonuma");
    let (seg, placed) = Segment::create_placed(&name, &params, 0, &[None, None]).unwrap();
    assert!(placed.unwrap().is_empty());
    let l = *seg.layout();
    assert_eq!(seg.policy_at(l.region_off(0)).unwrap().0, MPOL_DEFAULT);
    seg.unlink_if_leader_on_failure().unwrap();
}

#[test]
fn this_process_runs_somewhere_known() {
    let cpus = numa::allowed_cpus().unwrap();
    assert!(!cpus.is_empty());
    for (id, list) in numa::nodes().unwrap() {
        assert!(
            !list.trim().is_empty() || id > 0,
            "node {id} has no CPU list"
        );
    }
}
