//! Thin `io::Result` wrappers over the POSIX calls std does not provide.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `shm_open(name, oflag, mode)` with `O_CLOEXEC` added.
pub fn shm_open(name: &CStr, oflag: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
    let fd = cvt(unsafe { libc::shm_open(name.as_ptr(), oflag | libc::O_CLOEXEC, mode) })?;
    // SAFETY: shm_open just returned this descriptor to us; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `shm_unlink(name)`.
pub fn shm_unlink(name: &CStr) -> io::Result<()> {
    // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
    cvt(unsafe { libc::shm_unlink(name.as_ptr()) }).map(drop)
}

/// `fchmod(fd, mode)`: makes the mode independent of the umask.
pub fn fchmod(fd: &OwnedFd, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor we own.
    cvt(unsafe { libc::fchmod(fd.as_raw_fd(), mode) }).map(drop)
}

/// `ftruncate(fd, len)`.
pub fn ftruncate(fd: &OwnedFd, len: u64) -> io::Result<()> {
    let len =
        libc::off_t::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: plain syscall on a descriptor we own.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), len) }).map(drop)
}

/// `posix_fallocate(fd, 0, len)`: reserves the pages now so that a full /dev/shm is an
/// `ENOSPC` here rather than a `SIGBUS` at first touch. `Ok(false)` where the filesystem
/// does not support it (then we go on without the reservation).
pub fn fallocate(fd: &OwnedFd, len: u64) -> io::Result<bool> {
    let len =
        libc::off_t::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: plain syscall on a descriptor we own; it returns an errno value, not -1.
    let rc = unsafe { libc::posix_fallocate(fd.as_raw_fd(), 0, len) };
    match rc {
        0 => Ok(true),
        libc::EOPNOTSUPP | libc::EINVAL => Ok(false),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Size of the file behind `fd`.
pub fn fstat_size(fd: &OwnedFd) -> io::Result<u64> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is valid for writes of a `struct stat`; `fd` is ours.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstat succeeded, so it initialized `st`.
    let st = unsafe { st.assume_init() };
    u64::try_from(st.st_size).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
}

/// `mmap(NULL, len, PROT_READ|PROT_WRITE, MAP_SHARED, fd, 0)`.
pub fn mmap_shared(fd: &OwnedFd, len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: a fresh shared mapping of a file we own; the kernel picks the address, so no
    // existing memory is affected.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::from(io::ErrorKind::Other))
}

/// `munmap(ptr, len)`.
///
/// # Safety
/// `ptr`/`len` must be exactly a mapping returned by [`mmap_shared`], and nothing may
/// access it afterwards.
pub unsafe fn munmap(ptr: NonNull<u8>, len: usize) {
    // SAFETY: guaranteed by the caller. A failure (EINVAL) could only come from a bad
    // range, which the caller's contract excludes; there is nothing useful to do with it.
    unsafe {
        libc::munmap(ptr.as_ptr().cast(), len);
    }
}
