//! "Device" memory: a reserved PROT_NONE address range in which every allocation (and
//! every IPC-opened mapping) takes slots of a first-fit allocator (2 MiB slots, freed
//! addresses reused). As on a GPU, the CPU cannot touch it: the device address stays
//! PROT_NONE (a `memcpy` or `process_vm_readv` of it faults or fails) and the bytes, a
//! MAP_SHARED mapping of the allocation's own /dev/shm file, live at the same offset in
//! a second reserved range, the shadow, which only the stand-in's copies use
//! ([`Memory::view`]). Managed memory is mapped at both, since the CPU may read it.
//! Also the host regions the driver knows (pinned allocations, registered ranges).

use std::collections::{BTreeMap, HashMap};
use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

use crate::codes::*;

/// Size of the reserved range.
pub const RESERVED: usize = 64 << 30;
/// Every allocation takes a whole number of slots.
pub const SLOT: usize = 2 << 20;
const PAGE: usize = 4096;
pub const SHM_DIR: &str = "/dev/shm";
pub const PREFIX: &str = "rmca-cuda-standin-";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Allocated here; this process owns (and unlinks) the file.
    Own { file: String },
    /// Opened from another process's handle.
    Ipc { pid: u32, remote_id: u64 },
}

#[derive(Debug, Clone)]
pub struct Alloc {
    pub size: usize,
    /// Bytes of address space taken (whole slots).
    pub span: usize,
    pub buffer_id: u64,
    pub ctx: usize,
    /// Visible ordinal, and the physical device (the owner's, for IPC mappings).
    pub ordinal: i32,
    pub physical: i32,
    pub managed: bool,
    pub sync_memops: bool,
    pub origin: Origin,
}

#[derive(Debug, Clone)]
pub struct HostRegion {
    pub size: usize,
    pub ctx: usize,
    pub ordinal: i32,
    pub buffer_id: u64,
    /// Allocated by cuMemAllocHost/cuMemHostAlloc (freed with munmap) or registered.
    pub pinned_alloc: bool,
}

#[derive(Debug, Default)]
pub struct Memory {
    pub base: usize,
    /// Free slot runs: start address → length.
    free: BTreeMap<usize, usize>,
    pub allocs: BTreeMap<usize, Alloc>,
    pub host: BTreeMap<usize, HostRegion>,
    next_buffer_id: u64,
    /// (owner pid, owner buffer id) → our base, for every IPC mapping.
    pub opened: HashMap<(u32, u64), usize>,
}

/// What a pointer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Inside the allocation at this base.
    Device(usize),
    /// Inside the known host region at this base.
    Host(usize),
    /// Inside the device range but in no allocation.
    Invalid,
    /// Ordinary host memory the driver knows nothing about.
    Unknown,
}

fn os_error(what: &str) -> CuResult {
    crate::log!("{what} failed: {}", std::io::Error::last_os_error());
    OUT_OF_MEMORY
}

/// Maps fresh PROT_NONE reservation over `[addr, addr + len)` (or anywhere when `addr`
/// is 0); returns the address.
fn reserve_at(addr: usize, len: usize) -> Result<usize, CuResult> {
    let fixed = if addr == 0 { 0 } else { libc::MAP_FIXED };
    // SAFETY: an anonymous PROT_NONE mapping; MAP_FIXED only over our own reserved range.
    let p = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | fixed,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(os_error("mmap (reserve)"));
    }
    Ok(p as usize)
}

/// Maps `len` bytes of `file` read-write and shared at `addr` (inside our ranges).
fn map_file(file: &std::fs::File, addr: usize, len: usize) -> Result<(), CuResult> {
    // SAFETY: MAP_FIXED over a slot of our own reserved range that holds nothing else.
    let p = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(os_error("mmap (file)"));
    }
    Ok(())
}

pub fn file_path(pid: u32, buffer_id: u64) -> String {
    format!("{SHM_DIR}/{PREFIX}{pid}-{buffer_id}")
}

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

impl Memory {
    pub fn reserve(&mut self) -> Result<(), CuResult> {
        // The device range, then its shadow.
        let raw = reserve_at(0, 2 * RESERVED + SLOT)?;
        let base = round_up(raw, SLOT);
        self.base = base;
        self.free.insert(base, RESERVED);
        Ok(())
    }

    pub fn next_id(&mut self) -> u64 {
        self.next_buffer_id += 1;
        self.next_buffer_id
    }

    fn take_slots(&mut self, span: usize) -> Result<usize, CuResult> {
        let (&start, &len) = self
            .free
            .iter()
            .find(|(_, len)| **len >= span)
            .ok_or(OUT_OF_MEMORY)?;
        self.free.remove(&start);
        if len > span {
            self.free.insert(start + span, len - span);
        }
        Ok(start)
    }

    /// Where the stand-in itself reads and writes the bytes at `p`: the shadow of a
    /// device address, any other address itself.
    pub fn view(&self, p: usize) -> usize {
        if p >= self.base && p < self.base + RESERVED {
            p + RESERVED
        } else {
            p
        }
    }

    /// Maps an allocation's file at its shadow, and for managed memory (which the CPU
    /// may touch) at the device address too.
    fn map_allocation(
        &self,
        file: &std::fs::File,
        addr: usize,
        len: usize,
        managed: bool,
    ) -> Result<(), CuResult> {
        map_file(file, self.view(addr), len)?;
        if managed {
            map_file(file, addr, len)?;
        }
        Ok(())
    }

    fn give_slots(&mut self, start: usize, span: usize) {
        let _ = reserve_at(start, span);
        let _ = reserve_at(self.view(start), span);
        let (mut start, mut span) = (start, span);
        if let Some((&next, &nlen)) = self.free.range(start + span..).next()
            && next == start + span
        {
            self.free.remove(&next);
            span += nlen;
        }
        if let Some((&prev, &plen)) = self.free.range(..start).next_back()
            && prev + plen == start
        {
            self.free.remove(&prev);
            start = prev;
            span += plen;
        }
        self.free.insert(start, span);
    }

    /// A new allocation backed by a new file of this process.
    pub fn alloc(
        &mut self,
        size: usize,
        ctx: usize,
        ordinal: i32,
        physical: i32,
        managed: bool,
    ) -> Result<usize, CuResult> {
        if size == 0 {
            return Err(INVALID_VALUE);
        }
        let span = round_up(size, SLOT);
        let id = self.next_id();
        let path = file_path(std::process::id(), id);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| {
                crate::log!("cannot create {path}: {e}");
                OUT_OF_MEMORY
            })?;
        let len = round_up(size, PAGE);
        let placed = file
            .set_len(len as u64)
            .map_err(|_| OUT_OF_MEMORY)
            .and_then(|()| self.take_slots(span))
            .and_then(
                |addr| match self.map_allocation(&file, addr, len, managed) {
                    Ok(()) => Ok(addr),
                    Err(e) => {
                        self.give_slots(addr, span);
                        Err(e)
                    }
                },
            );
        let addr = match placed {
            Ok(a) => a,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        self.allocs.insert(
            addr,
            Alloc {
                size,
                span,
                buffer_id: id,
                ctx,
                ordinal,
                physical,
                managed,
                sync_memops: false,
                origin: Origin::Own { file: path },
            },
        );
        Ok(addr)
    }

    /// Maps another process's allocation file; `Err(INVALID_VALUE)` when it is gone.
    pub fn map_remote(
        &mut self,
        pid: u32,
        remote_id: u64,
        size: usize,
        mut a: Alloc,
    ) -> Result<usize, CuResult> {
        let path = file_path(pid, remote_id);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|_| INVALID_VALUE)?;
        let len = round_up(size, PAGE);
        if file
            .metadata()
            .map(|m| m.len() < len as u64)
            .unwrap_or(true)
        {
            return Err(INVALID_VALUE);
        }
        let span = round_up(size, SLOT);
        let addr = self.take_slots(span)?;
        if let Err(e) = self.map_allocation(&file, addr, len, a.managed) {
            self.give_slots(addr, span);
            return Err(e);
        }
        a.span = span;
        a.buffer_id = self.next_id();
        self.allocs.insert(addr, a);
        self.opened.insert((pid, remote_id), addr);
        Ok(addr)
    }

    /// Removes the allocation at `base` (unmaps; unlinks the file when we own it).
    pub fn release(&mut self, base: usize) -> Option<Alloc> {
        let a = self.allocs.remove(&base)?;
        match &a.origin {
            Origin::Own { file } => {
                let _ = std::fs::remove_file(file);
            }
            Origin::Ipc { pid, remote_id } => {
                self.opened.remove(&(*pid, *remote_id));
            }
        }
        self.give_slots(base, a.span);
        Some(a)
    }

    /// Whether `p` lies in a mapping opened from another process's IPC handle.
    pub fn in_ipc_mapping(&self, p: usize) -> bool {
        self.allocs
            .range(..=p)
            .next_back()
            .is_some_and(|(&b, a)| p < b + a.size && matches!(a.origin, Origin::Ipc { .. }))
    }

    pub fn classify(&self, p: usize) -> Kind {
        if let Some((&b, a)) = self.allocs.range(..=p).next_back()
            && p < b + a.size
        {
            return Kind::Device(b);
        }
        if p >= self.base && p < self.base + RESERVED {
            return Kind::Invalid;
        }
        if let Some((&b, h)) = self.host.range(..=p).next_back()
            && p < b + h.size
        {
            return Kind::Host(b);
        }
        Kind::Unknown
    }

    /// Checks `[p, p + n)` for a copy: device memory must lie inside one allocation,
    /// known host memory inside its region; returns whether it is device memory.
    pub fn check_range(&self, p: usize, n: usize) -> Result<bool, CuResult> {
        if p == 0 {
            return Err(INVALID_VALUE);
        }
        let end = p.checked_add(n).ok_or(INVALID_VALUE)?;
        match self.classify(p) {
            Kind::Device(b) => {
                if end <= b + self.allocs[&b].size {
                    Ok(true)
                } else {
                    Err(INVALID_VALUE)
                }
            }
            Kind::Host(b) => {
                if end <= b + self.host[&b].size {
                    Ok(false)
                } else {
                    Err(INVALID_VALUE)
                }
            }
            Kind::Invalid => Err(INVALID_VALUE),
            Kind::Unknown => {
                // Pageable host memory: it must not run into the device range.
                if end > self.base && p < self.base + RESERVED {
                    Err(INVALID_VALUE)
                } else {
                    Ok(false)
                }
            }
        }
    }

    /// Whether `[p, p + n)` is usable as the device side of a copy (device memory or
    /// pinned/registered host memory, which has a device address under UVA).
    pub fn check_device_side(&self, p: usize, n: usize) -> Result<(), CuResult> {
        self.check_range(p, n)?;
        match self.classify(p) {
            Kind::Device(_) | Kind::Host(_) => Ok(()),
            _ => Err(INVALID_VALUE),
        }
    }

    /// Registers host memory; overlapping an existing region is an error.
    pub fn add_host(
        &mut self,
        p: usize,
        size: usize,
        ctx: usize,
        ordinal: i32,
        pinned_alloc: bool,
    ) -> Result<(), CuResult> {
        if p == 0 || size == 0 {
            return Err(INVALID_VALUE);
        }
        let end = p.checked_add(size).ok_or(INVALID_VALUE)?;
        if end > self.base && p < self.base + RESERVED {
            return Err(INVALID_VALUE);
        }
        if let Some((&b, h)) = self.host.range(..end).next_back()
            && b + h.size > p
        {
            return Err(HOST_MEMORY_ALREADY_REGISTERED);
        }
        let buffer_id = self.next_id();
        self.host.insert(
            p,
            HostRegion {
                size,
                ctx,
                ordinal,
                buffer_id,
                pinned_alloc,
            },
        );
        Ok(())
    }

    pub fn live_counts(&self) -> (u64, u64) {
        let ipc = self.opened.len() as u64;
        (self.allocs.len() as u64 - ipc, ipc)
    }

    /// IPC mappings open here whose allocation no longer exists in its owner (its file
    /// is gone: unlinked at the owner's `cuMemFree`, or at its exit): how many, and
    /// their bytes, which the mapping alone keeps alive.
    pub fn ipc_freed(&self) -> (u64, u64) {
        self.allocs
            .values()
            .filter_map(|a| match a.origin {
                Origin::Ipc { pid, remote_id } => Some((pid, remote_id, a.size)),
                Origin::Own { .. } => None,
            })
            .filter(|&(pid, id, _)| !std::path::Path::new(&file_path(pid, id)).exists())
            .fold((0, 0), |(n, bytes), (_, _, size)| {
                (n + 1, bytes + size as u64)
            })
    }

    /// Bytes of every IPC mapping open here.
    pub fn ipc_bytes(&self) -> u64 {
        self.allocs
            .values()
            .filter(|a| matches!(a.origin, Origin::Ipc { .. }))
            .map(|a| a.size as u64)
            .sum()
    }

    /// Exit: unlink every file we own (mappings go with the process).
    pub fn unlink_all(&mut self) {
        for a in self.allocs.values() {
            if let Origin::Own { file } = &a.origin {
                let _ = std::fs::remove_file(file);
            }
        }
    }
}

/// Host memory for cuMemAllocHost/cuMemHostAlloc: anonymous pages.
pub fn host_pages(size: usize) -> Result<usize, CuResult> {
    // SAFETY: a fresh private anonymous mapping.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            round_up(size, PAGE),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(os_error("mmap (host)"));
    }
    Ok(p as usize)
}

pub fn free_host_pages(p: usize, size: usize) {
    // SAFETY: `p` came from `host_pages(size)` and is no longer referenced by the state.
    unsafe { libc::munmap(p as *mut libc::c_void, round_up(size, PAGE)) };
}

/// Unlinks files left by stand-in processes that no longer exist (killed ones).
pub fn remove_stale_files() {
    let Ok(dir) = std::fs::read_dir(SHM_DIR) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        // SAFETY: signal 0 only checks whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
