//! NUMA placement on this machine: the creator's `mbind` really sets the policy of the
//! placed ranks' memory (checked with `get_mempolicy`), and leaves the others alone.
//! Node 0 exists on every Linux machine with NUMA support, single node or not.

mod common;

use common::{child_role, report, spawn, unique_name, var};
use rsmcuda_shm::{Backing, FifoValue, LayoutParams, Locator, Retry, Segment, SegmentName, numa};

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

/// The highest-numbered node with memory (`has_memory`; 0 where it cannot be read).
fn last_node_with_memory() -> u32 {
    std::fs::read_to_string("/sys/devices/system/node/has_memory")
        .ok()
        .and_then(|s| {
            s.trim()
                .split([',', '-'])
                .filter_map(|n| n.parse::<u32>().ok())
                .max()
        })
        .unwrap_or(0)
}

/// Child roles of this binary.
#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    assert_eq!(role, "attach_and_touch", "unknown role");
    let name = SegmentName::new(&var("SEG")).unwrap();
    let creator: u32 = var("CREATOR").parse().unwrap();
    let seg = Segment::attach_from(Locator::Process(creator), &name, 1, &Retry::default()).unwrap();
    let l = *seg.layout();
    // Policies as this process's own mapping, made after the creator's mbind, sees them.
    let region0 = seg.policy_at(l.region_off(0)).unwrap();
    let boxes0 = seg.policy_at(l.fbox_off(1, 0) + 64).unwrap();
    let region1 = seg.policy_at(l.region_off(1)).unwrap();
    // The first page of rank 0's FIFO does not exist yet: nobody has touched it. Pushing
    // into that FIFO from here allocates it, in this process, by the object's policy.
    let slot = l.fifo_slots_off(0);
    let before = seg.node_at(slot).unwrap();
    seg.fifo_writer(0)
        .unwrap()
        .push(FifoValue::send(l.region_off(1)))
        .unwrap();
    let after = seg.node_at(slot).unwrap();
    report(&format!(
        "{:?} {:?} {:?} {before:?} {after:?}",
        region0, boxes0, region1
    ));
}

/// The BTL's case: an anonymous segment, which stays sparse, so its pages are allocated
/// later by whichever rank touches them first. `mbind` in the creator set the policy of
/// the shared object (not of its own mapping): another process's mapping reports it, and
/// a page that process allocates lands on the placed node.
#[test]
fn an_anonymous_segment_keeps_its_placement_for_pages_other_ranks_touch_later() {
    if numa::nodes().unwrap().is_empty() {
        eprintln!("SKIP: this kernel exposes no NUMA node (/sys/devices/system/node)");
        return;
    }
    let node = last_node_with_memory();
    let params = LayoutParams {
        nranks: 2,
        fifo_size: 1024,
        eager_size: 4096,
        eager_count: 8,
        max_size: 32768,
        max_count: 2,
        fbox_bytes: 16 << 10,
    };
    let name = unique_name("numa-anon");
    let (seg, placed) =
        Segment::create_in(Backing::Anonymous, &name, &params, 0, &[Some(node), None]).unwrap();
    assert_eq!(placed.expect("mbind").len(), 2, "rank 0's region and boxes");
    let mut child = spawn(
        "attach_and_touch",
        &[
            ("SEG", name.as_str().to_owned()),
            ("CREATOR", std::process::id().to_string()),
        ],
    );
    let line = child.expect_line();
    let preferred = format!("({MPOL_PREFERRED}, {})", 1u64 << node);
    let default = format!("({MPOL_DEFAULT}, 0)");
    assert_eq!(
        line,
        format!("{preferred} {preferred} {default} None Some({node})"),
        "rank 1's view: rank 0's region and boxes, rank 1's region, the FIFO page's node \
         before and after its first touch"
    );
    child.wait_ok();
    assert!(seg.settle().unwrap());
}
