//! Anonymous (memfd) segments: no name in /dev/shm at any time; peers find the segment
//! among the creator's open files; the creator closes that door once everyone attached
//! or when it gives up; a creator killed before its peers attached leaves nothing.

mod common;

use std::time::Duration;

use common::{ChildProc, child_role, report, spawn, unique_name, var, wait_for_parent};
use rsmcuda_shm::{AbandonOutcome, Backing, LayoutParams, Locator, Retry, Segment, SegmentName};

fn params(nranks: u32) -> LayoutParams {
    LayoutParams {
        nranks,
        fifo_size: 64,
        eager_size: 256,
        eager_count: 8,
        max_size: 4096,
        max_count: 2,
        fbox_bytes: 256,
    }
}

fn create(name: &SegmentName, nranks: u32) -> Segment {
    Segment::create_in(Backing::Anonymous, name, &params(nranks), 0, &[])
        .unwrap()
        .0
}

/// Whether process `pid` still holds the segment's descriptor.
fn held_by(pid: u32, name: &SegmentName) -> bool {
    let link = format!("/memfd:{} (deleted)", &name.as_str()[1..]);
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .any(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.as_os_str() == link.as_str()))
}

/// Child roles of this binary.
#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    let name = SegmentName::new(&var("SEG")).unwrap();
    match role.as_str() {
        "attach_and_hold" => {
            let rank: u32 = var("RANK").parse().unwrap();
            let pid: u32 = var("CREATOR").parse().unwrap();
            let retry = Retry {
                attempts: 400,
                first_sleep: Duration::from_millis(1),
                max_sleep: Duration::from_millis(25),
            };
            let seg = Segment::attach_from(Locator::Process(pid), &name, rank, &retry).unwrap();
            assert_eq!(seg.backing(), Backing::Anonymous);
            report(&format!("attached {}", seg.attached_count()));
            wait_for_parent();
        }
        "create_and_hold" => {
            let _seg = create(&name, 3);
            report("created");
            wait_for_parent();
        }
        other => panic!("unknown role {other}"),
    }
}

fn child(role: &str, name: &SegmentName, rank: u32, creator: u32) -> ChildProc {
    spawn(
        role,
        &[
            ("SEG", name.as_str().to_owned()),
            ("RANK", rank.to_string()),
            ("CREATOR", creator.to_string()),
        ],
    )
}

#[test]
fn peers_attach_through_the_creator_and_no_name_ever_exists() {
    let name = unique_name("anon");
    let me = std::process::id();
    let seg = create(&name, 3);
    assert!(!name.dev_shm_path().exists());
    assert!(held_by(me, &name));
    let mut kids: Vec<ChildProc> = (1..3)
        .map(|r| child("attach_and_hold", &name, r, me))
        .collect();
    for k in &mut kids {
        assert!(k.expect_line().starts_with("attached"));
    }
    assert!(seg.all_attached() && !name.dev_shm_path().exists());
    assert!(seg.settle().unwrap(), "everyone attached");
    assert!(!held_by(me, &name), "the creator closed the door");
    // Nobody new can come in.
    assert!(
        Segment::try_attach_from(Locator::Process(me), &name, 1)
            .unwrap()
            .is_none()
    );
    for k in kids {
        k.wait_ok();
    }
}

#[test]
fn creator_killed_before_its_peers_attached_leaves_nothing() {
    let name = unique_name("anon-kill");
    let mut creator = child("create_and_hold", &name, 0, 0);
    assert_eq!(creator.expect_line(), "created");
    let pid = creator.child.id();
    assert!(held_by(pid, &name));
    // Rank 1 attaches; rank 2 never comes, and the creator is killed waiting for it.
    let seg = Segment::try_attach_from(Locator::Process(pid), &name, 1)
        .unwrap()
        .expect("found through the creator");
    assert!(!name.dev_shm_path().exists());
    creator.kill9();
    assert!(!name.dev_shm_path().exists(), "nothing to clean up, ever");
    assert!(
        Segment::try_attach_from(Locator::Process(pid), &name, 2)
            .unwrap()
            .is_none()
    );
    // The memory lives on with the survivor's mapping.
    assert_eq!(seg.attached_count(), 2);
}

#[test]
fn giving_up_closes_the_door() {
    let name = unique_name("anon-abandon");
    let me = std::process::id();
    let seg = create(&name, 3);
    let _r1 = Segment::try_attach_from(Locator::Process(me), &name, 1)
        .unwrap()
        .unwrap();
    assert!(!seg.settle().unwrap(), "rank 2 is missing");
    assert!(held_by(me, &name));
    assert_eq!(
        seg.abandon_waiting().unwrap(),
        AbandonOutcome::Abandoned {
            attached: 2,
            missing: vec![2]
        }
    );
    assert!(!held_by(me, &name) && seg.is_unlinked());
    assert!(
        Segment::try_attach_from(Locator::Process(me), &name, 2)
            .unwrap()
            .is_none()
    );
}
