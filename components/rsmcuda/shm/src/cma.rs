//! Cross-memory attach: single-copy transfers between local processes with
//! `process_vm_readv` / `process_vm_writev` (Linux ≥ 3.2).
//!
//! For large host messages the receiver copies straight from the sender's buffer (one copy
//! instead of two through fragments). The kernel allows it when the caller may ptrace the
//! target: same uid and Yama `ptrace_scope` 0, or scope 1 with the target a descendant (or
//! having called `prctl(PR_SET_PTRACER)`), or `CAP_SYS_PTRACE`; seccomp profiles (containers)
//! may forbid the calls outright. [`probe`] tells whether it works between this process and
//! a peer before the glue advertises the single-copy path; nothing here panics.

use std::fmt;
use std::io;
use std::sync::atomic::AtomicU64;

/// The value of every process's probe word.
pub const PROBE_PATTERN: u64 = 0x434d_415f_5052_4f42; // "CMA_PROB"

/// This process's probe word; its address is published in the segment's rank table.
static PROBE_WORD: AtomicU64 = AtomicU64::new(PROBE_PATTERN);

/// Address of this process's probe word (what a peer passes to [`probe`]).
pub fn probe_word_addr() -> usize {
    std::ptr::from_ref(&PROBE_WORD) as usize
}

/// Why a CMA transfer failed.
#[derive(Debug)]
pub enum CmaError {
    /// EPERM: the kernel forbids it (ptrace policy, or seccomp).
    NotPermitted {
        /// The target pid.
        pid: i32,
        /// /proc/sys/kernel/yama/ptrace_scope, if present.
        ptrace_scope: Option<u32>,
    },
    /// ENOSYS: the kernel (or a seccomp filter returning ENOSYS) lacks the calls.
    Unsupported,
    /// ESRCH: no such process.
    NoSuchProcess(i32),
    /// EFAULT: the remote (or local) range is not mapped.
    BadAddress {
        /// The target pid.
        pid: i32,
        /// Remote address of the failing transfer.
        remote: usize,
    },
    /// The transfer stopped short (the remote range ends early).
    Short {
        /// Bytes transferred.
        done: usize,
        /// Bytes asked for.
        wanted: usize,
    },
    /// The probe word read does not hold [`PROBE_PATTERN`].
    ProbeMismatch(u64),
    /// Any other OS error.
    Os(io::Error),
}

impl fmt::Display for CmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotPermitted { pid, ptrace_scope } => {
                write!(f, "cross-memory attach to pid {pid} not permitted (EPERM)")?;
                match ptrace_scope {
                    Some(s) if *s > 0 => write!(
                        f,
                        "; /proc/sys/kernel/yama/ptrace_scope is {s}: set it to 0 or run with \
                         CAP_SYS_PTRACE to enable single-copy transfers"
                    ),
                    _ => write!(
                        f,
                        "; different users, or a seccomp profile forbids process_vm_readv"
                    ),
                }
            }
            Self::Unsupported => f.write_str("process_vm_readv/writev not supported (ENOSYS)"),
            Self::NoSuchProcess(pid) => write!(f, "no process {pid} (ESRCH)"),
            Self::BadAddress { pid, remote } => {
                write!(f, "address {remote:#x} not mapped in pid {pid} (EFAULT)")
            }
            Self::Short { done, wanted } => {
                write!(
                    f,
                    "cross-memory transfer stopped after {done} of {wanted} bytes"
                )
            }
            Self::ProbeMismatch(v) => write!(
                f,
                "CMA probe read {v:#x} instead of {PROBE_PATTERN:#x} (wrong address?)"
            ),
            Self::Os(e) => write!(f, "cross-memory attach failed: {e}"),
        }
    }
}

impl std::error::Error for CmaError {}

/// Yama's `ptrace_scope` (0 classic, 1 restricted, 2 admin-only, 3 none); `None` when Yama
/// is absent (then ordinary same-uid ptrace rules apply).
pub fn ptrace_scope() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn classify(e: io::Error, pid: i32, remote: usize) -> CmaError {
    match e.raw_os_error() {
        Some(libc::EPERM) => CmaError::NotPermitted {
            pid,
            ptrace_scope: ptrace_scope(),
        },
        Some(libc::ENOSYS) => CmaError::Unsupported,
        Some(libc::ESRCH) => CmaError::NoSuchProcess(pid),
        Some(libc::EFAULT) => CmaError::BadAddress { pid, remote },
        _ => CmaError::Os(e),
    }
}

/// Repeats `op(done)` (which transfers from offset `done` and returns the bytes moved)
/// until `wanted` bytes are done; the kernel may return short counts.
fn transfer_all(
    wanted: usize,
    pid: i32,
    remote: usize,
    mut op: impl FnMut(usize) -> isize,
) -> Result<(), CmaError> {
    let mut done = 0;
    while done < wanted {
        let n = op(done);
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(classify(e, pid, remote + done));
        }
        if n == 0 {
            return Err(CmaError::Short { done, wanted });
        }
        done += n as usize;
    }
    Ok(())
}

/// Copies `local.len()` bytes from `remote_addr` in process `pid` into `local`.
pub fn read_from(pid: i32, remote_addr: usize, local: &mut [u8]) -> Result<(), CmaError> {
    let wanted = local.len();
    let base = local.as_mut_ptr();
    transfer_all(wanted, pid, remote_addr, |done| {
        let liov = libc::iovec {
            // In bounds: done < wanted = local.len().
            iov_base: base.wrapping_add(done).cast(),
            iov_len: wanted - done,
        };
        let riov = libc::iovec {
            iov_base: (remote_addr + done) as *mut libc::c_void,
            iov_len: wanted - done,
        };
        // SAFETY: the local iovec covers the tail of `local`, which we borrow mutably for
        // the whole call, so the kernel may write it; the remote iovec is only interpreted
        // in the target's address space (the kernel checks it, EFAULT otherwise).
        unsafe { libc::process_vm_readv(pid, &liov, 1, &riov, 1, 0) }
    })
}

/// Copies `local` to `remote_addr` in process `pid`.
///
/// # Safety
/// The remote range must be memory the target has lent for this transfer (e.g. a receive
/// buffer it announced and does not touch until told the transfer is done). Writing
/// anywhere else corrupts the target. Nothing in this process is affected.
pub unsafe fn write_to(pid: i32, remote_addr: usize, local: &[u8]) -> Result<(), CmaError> {
    let wanted = local.len();
    let base = local.as_ptr();
    transfer_all(wanted, pid, remote_addr, |done| {
        let liov = libc::iovec {
            iov_base: base.wrapping_add(done).cast_mut().cast(),
            iov_len: wanted - done,
        };
        let riov = libc::iovec {
            iov_base: (remote_addr + done) as *mut libc::c_void,
            iov_len: wanted - done,
        };
        // SAFETY: the local iovec covers the tail of `local` (only read by the kernel); the
        // remote range is the caller's responsibility (see # Safety).
        unsafe { libc::process_vm_writev(pid, &liov, 1, &riov, 1, 0) }
    })
}

/// Checks that CMA works towards `pid` by reading its probe word at `remote_probe_addr`
/// (published in the segment: `Segment::peer_cma_probe_addr`). A clear error, never a panic.
pub fn probe(pid: i32, remote_probe_addr: usize) -> Result<(), CmaError> {
    let mut buf = [0u8; 8];
    read_from(pid, remote_probe_addr, &mut buf)?;
    let v = u64::from_ne_bytes(buf);
    if v == PROBE_PATTERN {
        Ok(())
    } else {
        Err(CmaError::ProbeMismatch(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_probe_and_errors() {
        let me = std::process::id() as i32;
        match probe(me, probe_word_addr()) {
            Ok(()) => {}
            Err(e @ (CmaError::NotPermitted { .. } | CmaError::Unsupported)) => {
                eprintln!("skipping CMA self probe: {e}");
                return;
            }
            Err(e) => panic!("{e}"),
        }
        let src: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        read_from(me, src.as_ptr() as usize, &mut dst).unwrap();
        assert_eq!(src, dst);
        let e = read_from(me, 8, &mut dst[..8]).unwrap_err();
        assert!(matches!(e, CmaError::BadAddress { .. }), "{e}");
        let e = read_from(i32::MAX, probe_word_addr(), &mut dst[..8]).unwrap_err();
        assert!(matches!(e, CmaError::NoSuchProcess(_)), "{e}");
        let mut z: [u8; 0] = [];
        read_from(me, 0, &mut z).unwrap();
    }
}
