//! Segment lifecycle: creation, attachment by other processes, unlink as soon as all have
//! attached (also when ranks are SIGKILLed), the abandon path, and bad segments.

mod common;

use std::io::{Seek, SeekFrom, Write};
use std::time::Duration;

use common::{ChildProc, child_role, report, spawn, unique_name, var, wait_for_parent};
use rsmcuda_shm::{
    AbandonOutcome, LAYOUT_VERSION, LayoutParams, Retry, Segment, SegmentName, ShmError,
};

fn params(nranks: u32) -> LayoutParams {
    LayoutParams {
        nranks,
        fifo_size: 64,
        eager_size: 256,
        eager_count: 8,
        max_size: 4096,
        max_count: 2,
        fbox_bytes: 0,
    }
}

fn quick() -> Retry {
    Retry {
        attempts: 3,
        first_sleep: Duration::from_millis(1),
        max_sleep: Duration::from_millis(2),
    }
}

fn patient() -> Retry {
    Retry {
        attempts: 400,
        first_sleep: Duration::from_millis(1),
        max_sleep: Duration::from_millis(25),
    }
}

/// Child roles of this binary.
#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    let name = SegmentName::new(&var("SEG")).unwrap();
    match role.as_str() {
        // Attach as RANK, report, stay alive until the parent closes stdin or kills us.
        "attach_and_hold" => {
            let rank: u32 = var("RANK").parse().unwrap();
            let seg = Segment::attach(&name, rank, &patient()).unwrap();
            report(&format!("attached {}", seg.attached_count()));
            wait_for_parent();
        }
        // Create as rank 0 of NRANKS, report, hold.
        "create_and_hold" => {
            let n: u32 = var("NRANKS").parse().unwrap();
            let _seg = Segment::create(&name, &params(n), 0).unwrap();
            report("created");
            wait_for_parent();
        }
        other => panic!("unknown role {other}"),
    }
}

fn child(role: &str, name: &SegmentName, rank: u32) -> ChildProc {
    spawn(
        role,
        &[
            ("SEG", name.as_str().to_owned()),
            ("RANK", rank.to_string()),
            ("NRANKS", "2".to_owned()),
        ],
    )
}

#[test]
fn n_processes_attach_then_name_is_gone() {
    let name = unique_name("n-attach");
    let seg = Segment::create(&name, &params(4), 0).unwrap();
    assert!(name.dev_shm_path().exists());
    let mode = std::fs::metadata(name.dev_shm_path()).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
    let mut kids: Vec<ChildProc> = (1..4).map(|r| child("attach_and_hold", &name, r)).collect();
    for k in &mut kids {
        assert!(k.expect_line().starts_with("attached"));
    }
    assert!(seg.all_attached());
    assert!(seg.is_unlinked());
    assert!(
        !name.dev_shm_path().exists(),
        "name must be unlinked once all attached"
    );
    for r in 1..4 {
        assert!(seg.peer_pid(r).is_some());
    }
    for k in kids {
        k.wait_ok();
    }
}

#[test]
fn kill9_after_attach_leaves_no_file() {
    // 3 ranks: a child attaches and is SIGKILLed before the last rank comes; the last
    // attach still completes the count and unlinks.
    let name = unique_name("kill9");
    let seg = Segment::create(&name, &params(3), 0).unwrap();
    let mut a = child("attach_and_hold", &name, 1);
    a.expect_line();
    a.kill9();
    assert!(name.dev_shm_path().exists(), "rank 2 has not attached yet");
    let mut b = child("attach_and_hold", &name, 2);
    b.expect_line();
    assert!(!name.dev_shm_path().exists());
    b.kill9();
    drop(seg);
    assert!(!name.dev_shm_path().exists());
}

#[test]
fn kill9_of_leader_after_all_attached_leaves_no_file() {
    let name = unique_name("kill9-leader");
    let mut leader = child("create_and_hold", &name, 0);
    assert_eq!(leader.expect_line(), "created");
    let seg = Segment::attach(&name, 1, &patient()).unwrap();
    assert!(!name.dev_shm_path().exists());
    leader.kill9();
    // The mapping stays valid after the leader's death.
    assert_eq!(seg.attached_count(), 2);
}

#[test]
fn never_attaching_rank_is_abandoned() {
    let name = unique_name("abandon");
    let seg = Segment::create(&name, &params(3), 0).unwrap();
    let _r1 = Segment::attach(&name, 1, &quick()).unwrap();
    assert!(name.dev_shm_path().exists());
    // The leader's own timeout expired: rank 2 never came.
    let out = seg.abandon_waiting().unwrap();
    assert_eq!(
        out,
        AbandonOutcome::Abandoned {
            attached: 2,
            missing: vec![2]
        }
    );
    assert!(!name.dev_shm_path().exists());
    assert!(seg.is_abandoned());
    // Idempotent.
    assert!(matches!(
        seg.abandon_waiting().unwrap(),
        AbandonOutcome::Abandoned { .. }
    ));
    // The late rank finds nothing.
    assert!(Segment::try_attach(&name, 2).unwrap().is_none());
    let e = Segment::attach(&name, 2, &quick()).unwrap_err();
    assert!(
        matches!(e, ShmError::AttachTimeout { attempts: 3, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("no such segment"), "{e}");
}

#[test]
fn abandon_after_all_attached_is_a_no_op() {
    let name = unique_name("abandon-noop");
    let seg = Segment::create(&name, &params(2), 0).unwrap();
    let _r1 = Segment::try_attach(&name, 1).unwrap().unwrap();
    assert_eq!(seg.abandon_waiting().unwrap(), AbandonOutcome::AllAttached);
}

#[test]
fn leader_failure_path_unlinks() {
    let name = unique_name("leader-fail");
    let seg = Segment::create(&name, &params(2), 0).unwrap();
    seg.unlink_if_leader_on_failure().unwrap();
    assert!(!name.dev_shm_path().exists());
    drop(seg);
    // Non-leaders: no effect.
    let name = unique_name("leader-fail2");
    let seg = Segment::create(&name, &params(3), 0).unwrap();
    let r1 = Segment::try_attach(&name, 1).unwrap().unwrap();
    r1.unlink_if_leader_on_failure().unwrap();
    assert!(name.dev_shm_path().exists());
    seg.unlink_if_leader_on_failure().unwrap();
    assert!(!name.dev_shm_path().exists());
}

#[test]
fn single_rank_unlinks_at_create() {
    let name = unique_name("single");
    let seg = Segment::create(&name, &params(1), 0).unwrap();
    assert!(seg.is_unlinked() && seg.all_attached());
    assert!(!name.dev_shm_path().exists());
}

#[test]
fn attach_waits_for_a_late_leader() {
    let name = unique_name("late-leader");
    let n2 = name.clone();
    let t = std::thread::spawn(move || Segment::attach(&n2, 1, &patient()));
    std::thread::sleep(Duration::from_millis(50));
    let seg = Segment::create(&name, &params(2), 0).unwrap();
    let peer = t.join().unwrap().unwrap();
    assert_eq!(peer.local_rank(), 1);
    assert!(seg.all_attached() && !name.dev_shm_path().exists());
}

#[test]
fn rank_collisions_and_ranges() {
    let name = unique_name("collide");
    let seg = Segment::create(&name, &params(3), 0).unwrap();
    let e = Segment::try_attach(&name, 0).unwrap_err();
    assert!(
        matches!(e, ShmError::RankAlreadyAttached { rank: 0, .. }),
        "{e}"
    );
    let e = Segment::try_attach(&name, 3).unwrap_err();
    assert!(
        matches!(e, ShmError::RankOutOfRange { rank: 3, nranks: 3 }),
        "{e}"
    );
    let _r1 = Segment::try_attach(&name, 1).unwrap().unwrap();
    let e = Segment::try_attach(&name, 1).unwrap_err();
    assert!(
        matches!(e, ShmError::RankAlreadyAttached { rank: 1, .. }),
        "{e}"
    );
    let e = Segment::create(&name, &params(3), 0).unwrap_err();
    assert!(matches!(e, ShmError::AlreadyExists { .. }), "{e}");
    let e = Segment::create(&unique_name("x"), &params(3), 3).unwrap_err();
    assert!(matches!(e, ShmError::RankOutOfRange { .. }), "{e}");
    seg.unlink_if_leader_on_failure().unwrap();
}

#[test]
fn bad_params_fail_before_touching_dev_shm() {
    let name = unique_name("badparams");
    let e = Segment::create(
        &name,
        &LayoutParams {
            fifo_size: 100,
            ..params(2)
        },
        0,
    )
    .unwrap_err();
    assert!(e.to_string().contains("power of two"), "{e}");
    assert!(!name.dev_shm_path().exists());
}

/// Writes `bytes` at `off` of the object behind `name` (as a stranger or a corrupting peer).
fn poke(name: &SegmentName, off: u64, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(name.dev_shm_path())
        .unwrap();
    f.seek(SeekFrom::Start(off)).unwrap();
    f.write_all(bytes).unwrap();
}

#[test]
fn foreign_object_is_bad_magic() {
    let name = unique_name("foreign");
    std::fs::write(name.dev_shm_path(), vec![0xab; 8192]).unwrap();
    let e = Segment::try_attach(&name, 1).unwrap_err();
    let _ = std::fs::remove_file(name.dev_shm_path());
    assert!(
        matches!(
            e,
            ShmError::BadMagic {
                found: 0xabab_abab_abab_abab,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("not an rsmcuda segment"), "{e}");
}

#[test]
fn uninitialised_object_times_out_clearly() {
    let name = unique_name("uninit");
    std::fs::write(name.dev_shm_path(), vec![0; 8192]).unwrap();
    assert!(Segment::try_attach(&name, 1).unwrap().is_none());
    let e = Segment::attach(&name, 1, &quick()).unwrap_err();
    let _ = std::fs::remove_file(name.dev_shm_path());
    assert!(e.to_string().contains("magic 0"), "{e}");
    // Size 0: the leader is between shm_open and ftruncate.
    std::fs::write(name.dev_shm_path(), []).unwrap();
    let e = Segment::attach(&name, 1, &quick()).unwrap_err();
    let _ = std::fs::remove_file(name.dev_shm_path());
    assert!(e.to_string().contains("size 0"), "{e}");
}

#[test]
fn wrong_version_is_a_clear_error() {
    let name = unique_name("version");
    let seg = Segment::create(&name, &params(2), 0).unwrap();
    poke(&name, 8, &(LAYOUT_VERSION + 1).to_ne_bytes());
    let e = Segment::try_attach(&name, 1).unwrap_err();
    assert!(
        matches!(e, ShmError::VersionMismatch { found, expected, .. }
            if found == LAYOUT_VERSION + 1 && expected == LAYOUT_VERSION),
        "{e}"
    );
    assert!(e.to_string().contains("same rsmcuda build"), "{e}");
    seg.unlink_if_leader_on_failure().unwrap();
}

#[test]
fn inconsistent_size_is_a_clear_error() {
    let name = unique_name("size");
    let seg = Segment::create(&name, &params(2), 0).unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(name.dev_shm_path())
        .unwrap();
    f.set_len(seg.layout().total_size() + 4096).unwrap();
    let e = Segment::try_attach(&name, 1).unwrap_err();
    assert!(matches!(e, ShmError::SizeMismatch { .. }), "{e}");
    seg.unlink_if_leader_on_failure().unwrap();
}
