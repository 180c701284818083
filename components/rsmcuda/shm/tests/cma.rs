//! Cross-memory attach between a parent and a child process: probe through the addresses
//! published in the segment, then a 4 MiB read and a 4 MiB write.

mod common;

use common::{child_role, report, spawn, unique_name, var, wait_for_parent};
use rsmcuda_shm::cma::{self, CmaError};
use rsmcuda_shm::{LayoutParams, Retry, Segment, SegmentName};

const LEN: usize = 4 << 20;

fn byte(i: usize, salt: u8) -> u8 {
    (i as u8).wrapping_mul(13).wrapping_add(salt) ^ (i >> 11) as u8
}

#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    assert_eq!(role, "cma_peer");
    let name = SegmentName::new(&var("SEG")).unwrap();
    let _seg = Segment::attach(&name, 1, &Retry::default()).unwrap();
    let src: Vec<u8> = (0..LEN).map(|i| byte(i, 1)).collect();
    let dst = vec![0u8; LEN];
    report(&format!(
        "{:x} {:x}",
        src.as_ptr() as usize,
        dst.as_ptr() as usize
    ));
    // The parent writes `dst` while we wait, then closes our stdin.
    wait_for_parent();
    // Another process wrote `dst`: black_box keeps the compiler from assuming it is
    // still all zero.
    let dst = std::hint::black_box(dst);
    assert!(
        dst.iter().enumerate().all(|(i, &b)| b == byte(i, 2)),
        "CMA write mismatch"
    );
    drop(src);
}

#[test]
fn parent_child_read_and_write() {
    match cma::ptrace_scope() {
        Some(s) if s >= 2 => {
            eprintln!("skipping: yama ptrace_scope={s} forbids process_vm_readv between peers");
            return;
        }
        s => eprintln!("yama ptrace_scope: {s:?}"),
    }
    let name = unique_name("cma");
    let seg = Segment::create(&name, &LayoutParams::new(2), 0).unwrap();
    let mut kid = spawn("cma_peer", &[("SEG", name.as_str().to_owned())]);
    let line = kid.expect_line();
    let mut it = line
        .split(' ')
        .map(|h| usize::from_str_radix(h, 16).unwrap());
    let (src, dst) = (it.next().unwrap(), it.next().unwrap());
    let pid = seg.peer_pid(1).expect("child attached") as i32;
    assert_eq!(pid as u32, kid.child.id());
    match cma::probe(pid, seg.peer_cma_probe_addr(1).unwrap()) {
        Ok(()) => {}
        Err(e @ (CmaError::NotPermitted { .. } | CmaError::Unsupported)) => {
            eprintln!("skipping: the kernel forbids CMA here: {e}");
            kid.kill9();
            return;
        }
        Err(e) => panic!("CMA probe failed: {e}"),
    }
    let mut buf = vec![0u8; LEN];
    cma::read_from(pid, src, &mut buf).unwrap();
    assert!(
        buf.iter().enumerate().all(|(i, &b)| b == byte(i, 1)),
        "CMA read mismatch"
    );
    let out: Vec<u8> = (0..LEN).map(|i| byte(i, 2)).collect();
    // SAFETY: `dst` is the child's buffer, lent for this write: it only reads it after we
    // close its stdin below.
    unsafe { cma::write_to(pid, dst, &out) }.unwrap();
    // A wrong probe address is a clear error, not a crash.
    let e = cma::probe(pid, src).unwrap_err();
    assert!(matches!(e, CmaError::ProbeMismatch(_)), "{e}");
    kid.wait_ok();
}
