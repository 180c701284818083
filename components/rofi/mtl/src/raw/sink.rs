//! The overflow sink: memory posted behind every receive buffer on a provider whose
//! matching is right but whose truncation is not (libfabric 2.1's shm reports a
//! truncated receive without its length and remote CQ data, where rofi carries the
//! source). With the sink as a second iov entry a message longer than the receive's
//! buffer is never truncated by the provider: the buffer gets its first bytes, the sink
//! the rest, the completion its full length, tag and data, and rofi truncates itself
//! (`complete_receive`: count = the buffer's size, MPI_ERR_TRUNCATE).
//!
//! The sink is one private anonymous mapping per process, as large as the node's memory
//! and swap (no message from a process on this node can be longer), mapped with
//! MAP_NORESERVE: it costs address space, not memory, until an overflow writes it, and
//! [`Sink::discard`] gives those pages back. Receives share it: what lands there is never
//! read, so concurrent overflows may overwrite each other. It is left out of core dumps
//! and forked children. Under strict overcommit, where MAP_NORESERVE does not apply, no
//! sink is made: the matching probe's overflow checks then fail and rofi matches
//! messages itself, as with any provider whose truncation it cannot repair.
//!
//! INVARIANT: the mapping is created once and never unmapped (a receive posted at exit
//! may still point into it), so its address stays valid for the process.

use std::sync::OnceLock;

/// The process's overflow sink.
#[derive(Debug, Clone, Copy)]
pub struct Sink {
    base: usize,
    len: usize,
}

/// The sink, created on first use, or why it could not be.
static SINK: OnceLock<Result<Sink, String>> = OnceLock::new();

/// Smallest sink worth mapping (a machine reporting less memory still gets this).
const MIN_LEN: usize = 1 << 30;

impl Sink {
    /// The process's sink (mapped on the first call).
    pub fn get() -> Result<Sink, String> {
        SINK.get_or_init(map).clone()
    }

    /// `(address, length)` for an iov entry.
    pub fn iov(self) -> (*mut u8, usize) {
        (self.base as *mut u8, self.len)
    }

    /// Returns the pages an overflow of `bytes` may have touched to the kernel.
    pub fn discard(self, bytes: u64) {
        let page = page_size();
        let len = usize::try_from(bytes)
            .unwrap_or(usize::MAX)
            .min(self.len)
            .div_ceil(page)
            .saturating_mul(page)
            .min(self.len);
        if len == 0 {
            return;
        }
        // SAFETY: the range lies inside the sink (module invariant: mapped for the
        // process's life); MADV_DONTNEED on private anonymous memory only drops its
        // contents, which nobody reads.
        unsafe {
            libc::madvise(self.base as *mut libc::c_void, len, libc::MADV_DONTNEED);
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// Memory and swap of the node, in bytes.
fn node_memory() -> usize {
    let mut info = std::mem::MaybeUninit::<libc::sysinfo>::zeroed();
    // SAFETY: sysinfo fills the struct it is given; it was zeroed.
    if unsafe { libc::sysinfo(info.as_mut_ptr()) } != 0 {
        return MIN_LEN;
    }
    // SAFETY: sysinfo succeeded, so the struct is initialised.
    let info = unsafe { info.assume_init() };
    let unit = usize::try_from(info.mem_unit.max(1)).unwrap_or(1);
    let total = u128::from(info.totalram) + u128::from(info.totalswap);
    usize::try_from(total.saturating_mul(unit as u128))
        .unwrap_or(usize::MAX)
        .max(MIN_LEN)
}

/// Under strict overcommit (`vm.overcommit_memory` 2) MAP_NORESERVE is ignored: a sink
/// as large as the node's memory would be charged against the commit limit in every
/// process, and the job's own allocations could then fail. None is made there.
fn refusal(overcommit_memory: &str) -> Option<String> {
    (overcommit_memory.trim() == "2").then(|| {
        "vm.overcommit_memory is 2 (strict): the overflow sink, as large as the node's \
         memory, would be charged against the commit limit"
            .to_owned()
    })
}

fn map() -> Result<Sink, String> {
    let setting = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap_or_default();
    if let Some(why) = refusal(&setting) {
        return Err(why);
    }
    let page = page_size();
    let len = node_memory().div_ceil(page).saturating_mul(page);
    // SAFETY: a fresh private anonymous mapping at an address the kernel picks: no
    // existing memory is affected.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(format!(
            "mapping {len} bytes of address space for the overflow sink failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    // Neither a core dump nor a forked child needs what lands here. Advice only: a
    // kernel that refuses it changes nothing else.
    // SAFETY: the mapping just made, whole.
    unsafe {
        libc::madvise(p, len, libc::MADV_DONTDUMP);
        libc::madvise(p, len, libc::MADV_DONTFORK);
    }
    Ok(Sink {
        base: p as usize,
        len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sink_spans_the_node_memory_and_discarding_gives_pages_back() {
        let setting = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap_or_default();
        if let Some(why) = refusal(&setting) {
            // A machine with strict overcommit gets no sink, and says why.
            assert_eq!(Sink::get().unwrap_err(), why);
            return;
        }
        let sink = Sink::get().expect("sink");
        let (base, len) = sink.iov();
        assert!(len >= MIN_LEN && len >= node_memory() - page_size());
        // SAFETY: inside the sink, which is writable and never read by rofi.
        unsafe { std::ptr::write_bytes(base, 0xee, 3 * page_size()) };
        sink.discard(3 * page_size() as u64);
        // SAFETY: as above; MADV_DONTNEED left zero pages behind.
        assert_eq!(unsafe { *base.add(page_size()) }, 0);
        // The same mapping every time.
        assert_eq!(Sink::get().expect("sink").iov().0, base);
        sink.discard(u64::MAX);
    }

    #[test]
    fn no_sink_under_strict_overcommit() {
        assert!(refusal("2\n").is_some_and(|w| w.contains("vm.overcommit_memory is 2")));
        assert_eq!(refusal("0\n"), None);
        assert_eq!(refusal("1"), None);
        assert_eq!(refusal(""), None);
    }
}
