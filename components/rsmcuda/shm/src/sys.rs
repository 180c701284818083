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

/// `memfd_create(name, MFD_CLOEXEC)`: an anonymous shared-memory file that no
/// filesystem names; it lives while a descriptor or a mapping of it does.
pub fn memfd_create(name: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
    let fd = cvt(unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) })?;
    // SAFETY: memfd_create just returned this descriptor to us; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens (read-write) the file that process `pid` holds open as `link` (what
/// `/proc/<pid>/fd/<n>` reads as, e.g. `/memfd:name (deleted)`). `Ok(None)` if the
/// process holds no such file (or is gone); an error if its descriptors cannot be read
/// (another user, a restricted /proc).
pub fn open_held_by(pid: u32, link: &str) -> io::Result<Option<OwnedFd>> {
    let dir = match std::fs::read_dir(format!("/proc/{pid}/fd")) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    for entry in dir.flatten() {
        let path = entry.path();
        if std::fs::read_link(&path).is_ok_and(|l| l.as_os_str() == link) {
            let file = match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
            {
                Ok(f) => f,
                // Closed meanwhile.
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
            let fd = OwnedFd::from(file);
            // The number may have been closed and reused between the two looks.
            let ours = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
            return Ok((ours.as_os_str() == link).then_some(fd));
        }
    }
    Ok(None)
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
///
/// Used for named segments only. Why a memfd does not need it (Linux `mm/shmem.c`,
/// `Documentation/filesystems/tmpfs.rst`, `memfd_create(2)`): a tmpfs page is accounted
/// when it is allocated, and a refusal at a first touch is a `SIGBUS`. What refuses it
/// is (a) the mount's `size=` limit — /dev/shm has one (half the RAM by default), while
/// a memfd lives on the kernel's internal shmem mount, whose instance is left unlimited —
/// and (b) the commit check for the page, which only refuses under
/// `vm.overcommit_memory = 2` (strict accounting): there a first touch of a memfd page
/// past the commit limit is a `SIGBUS` too (fallocate would have failed with `ENOSPC`
/// at creation instead). Memory cgroups charge a shmem page to the cgroup of the process
/// that allocates it: with fallocate the creator's, for the whole segment at once; for a
/// sparse memfd whichever rank touches the page first, when it does. A cgroup at its
/// limit then reclaims and, failing that, runs the memory-cgroup OOM killer at that touch
/// (not a `SIGBUS`), as it would for any other memory the rank touches.
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

/// `MPOL_PREFERRED`.
pub const MPOL_PREFERRED: libc::c_int = 1;

/// Prefers `node` for the pages of `[ptr, ptr + len)` (page aligned) not yet allocated;
/// for a shared mapping of tmpfs or a memfd the policy is the object's, so it also
/// decides where a later `posix_fallocate`, or a first touch through any process's
/// mapping, puts them.
pub fn mbind_preferred(ptr: *mut u8, len: usize, node: u32) -> io::Result<()> {
    const BITS: usize = 64;
    let mut mask = vec![0u64; node as usize / BITS + 1];
    mask[node as usize / BITS] |= 1 << (node as usize % BITS);
    // The kernel reads `maxnode - 1` bits.
    let maxnode = (mask.len() * BITS + 1) as libc::c_ulong;
    // SAFETY: mbind only changes the memory policy of our own mapping's range; the mask
    // is a live buffer of `maxnode - 1` bits.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            ptr,
            len as libc::c_ulong,
            MPOL_PREFERRED as libc::c_ulong,
            mask.as_ptr(),
            maxnode,
            0 as libc::c_ulong,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The policy of the page at `addr`: (mode, nodes 0..64).
pub fn mempolicy_at(addr: *const u8) -> io::Result<(i32, u64)> {
    const MPOL_F_ADDR: libc::c_ulong = 2;
    let mut mode: libc::c_int = 0;
    let mut mask = [0u64; 16];
    // SAFETY: writes one int and at most 1024 bits into our locals; `addr` is only
    // looked up in our address space.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode,
            mask.as_mut_ptr(),
            (mask.len() * 64) as libc::c_ulong,
            addr,
            MPOL_F_ADDR,
        )
    };
    if rc == 0 {
        Ok((mode, mask[0]))
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The NUMA node of the page at `addr` in this process (`move_pages` without moving:
/// the status query); `None` while the page is not mapped in this process's page tables
/// (untouched here, whether or not the shared object has it).
pub fn node_of_page(addr: *const u8) -> io::Result<Option<u32>> {
    let page = page_size();
    let mut pages = [(addr as usize & !(page - 1)) as *const libc::c_void];
    let mut status: [libc::c_int; 1] = [0];
    // SAFETY: pid 0 is this process; a null `nodes` array only queries, so nothing is
    // moved; the kernel reads one address from `pages` and writes one int to `status`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0 as libc::pid_t,
            1 as libc::c_ulong,
            pages.as_mut_ptr(),
            std::ptr::null::<libc::c_int>(),
            status.as_mut_ptr(),
            0 as libc::c_int,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    match status[0] {
        n if n >= 0 => Ok(Some(n as u32)),
        e if -e == libc::ENOENT => Ok(None),
        e => Err(io::Error::from_raw_os_error(-e)),
    }
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: writes at most size_of::<cpu_set_t>() bytes into our local.
    let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let max = 8 * size_of::<libc::cpu_set_t>();
    // SAFETY: CPU_ISSET reads the set we own, for indices below its size.
    Ok((0..max)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf reads a system constant.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).unwrap_or(4096)
}
