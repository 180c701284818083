//! NUMA placement of the segment: which byte ranges belong to which rank's node, and
//! where this process runs.
//!
//! A rank's region (its FIFO, read only by it, and the fragments it sends from) and the
//! fast boxes it reads go to that rank's node. The creator binds those ranges with a
//! *preferred* policy (a full node spills to another instead of failing) after `mmap`
//! and before any page exists. `mbind` on a shared mapping of tmpfs or a memfd sets the
//! *shared* policy of the object (shmem's `set_policy`, kept per page index with the
//! inode, not with the creator's mapping), and shmem allocates every page by the policy
//! of its index, whichever process allocates it: a named segment's `posix_fallocate` at
//! creation, or — an anonymous segment being sparse — the first touch of the page by any
//! rank, later. An attacher's own mapping reports the same policy (`get_mempolicy`;
//! `tests/numa.rs`). Ranges without a policy (ranks not placed, the header) get the
//! kernel's default: the node of whoever touches the page first (before, with fallocate
//! for every segment, that was the creator's node). Deciding *whether* to place (one
//! node, ranks not bound) is rsmcuda-core's `numa::plan`; this module only maps a plan
//! onto the layout and reads the machine's topology.

use std::io;

use crate::layout::Layout;
use crate::sys;

/// What the creator placed: (node, bytes) per range, or the `mbind` error that stopped
/// it (placement is best effort: the segment exists either way).
pub type Placed = Result<Vec<(u32, u64)>, io::Error>;

/// Byte ranges of the segment (offset, length, node), each a whole number of pages.
#[must_use]
pub fn ranges(layout: &Layout, homes: &[Option<u32>], page: u64) -> Vec<(u64, u64, u32)> {
    let n = layout.nranks();
    let mut out = Vec::new();
    for r in 0..n.min(homes.len() as u32) {
        let Some(node) = homes[r as usize] else {
            continue;
        };
        let mut push = |off: u64, len: u64| {
            if let Some((o, l)) = whole_pages(off, len, page) {
                out.push((o, l, node));
            }
        };
        push(layout.region_off(r), layout.region_bytes());
        if layout.fbox_bytes() > 0 && n > 1 {
            // Receiver r's boxes (one per sender) are contiguous.
            let first = layout.fbox_off(0, r);
            let stride = layout.fbox_off(1, r) - first;
            push(first, stride * u64::from(n));
        }
    }
    out
}

/// The page-aligned part of `[start, start + len)`; `None` when it holds no whole page.
#[must_use]
pub fn whole_pages(start: u64, len: u64, page: u64) -> Option<(u64, u64)> {
    debug_assert!(page.is_power_of_two());
    let first = start.checked_add(page - 1)? & !(page - 1);
    let end = start.checked_add(len)? & !(page - 1);
    (end > first).then(|| (first, end - first))
}

/// The NUMA nodes of this machine with their CPUs (`/sys/devices/system/node`), by node
/// number; empty where sysfs has no node directory (no NUMA support).
pub fn nodes() -> io::Result<Vec<(u32, String)>> {
    let mut nodes = Vec::new();
    let dir = match std::fs::read_dir("/sys/devices/system/node") {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(nodes),
        Err(e) => return Err(e),
    };
    for entry in dir {
        let entry = entry?;
        let name = entry.file_name();
        let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_prefix("node"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let cpus = std::fs::read_to_string(entry.path().join("cpulist"))?;
        nodes.push((id, cpus));
    }
    nodes.sort_by_key(|(id, _)| *id);
    Ok(nodes)
}

/// The CPUs this process may run on (its binding; `sched_getaffinity`).
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    sys::allowed_cpus()
}

/// The node holding the page at `addr` of this process, `None` while the page is not
/// mapped here (`move_pages` status query).
pub fn node_of(addr: *const u8) -> io::Result<Option<u32>> {
    sys::node_of_page(addr)
}

/// The memory policy of the page at `addr` of this process: (mode, node mask of the
/// first 64 nodes). `MPOL_PREFERRED` is 1, `MPOL_DEFAULT` 0.
pub fn policy_at(addr: *const u8) -> io::Result<(i32, u64)> {
    sys::mempolicy_at(addr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::LayoutParams;

    #[test]
    fn whole_pages_only() {
        assert_eq!(whole_pages(0, 8192, 4096), Some((0, 8192)));
        assert_eq!(whole_pages(100, 8192, 4096), Some((4096, 4096)));
        assert_eq!(whole_pages(100, 4000, 4096), None);
        assert_eq!(whole_pages(4096, 4095, 4096), None);
        assert_eq!(whole_pages(u64::MAX - 10, 5, 4096), None);
    }

    #[test]
    fn each_placed_rank_gets_its_region_and_the_boxes_it_reads() {
        let layout = Layout::compute(&LayoutParams {
            nranks: 3,
            fifo_size: 64,
            eager_size: 4096,
            eager_count: 16,
            max_size: 32768,
            max_count: 4,
            fbox_bytes: 32 << 10,
        })
        .unwrap();
        let page = 4096;
        let r = ranges(&layout, &[Some(1), None, Some(0)], page);
        let mine = |node: u32| r.iter().filter(move |x| x.2 == node).collect::<Vec<_>>();
        assert_eq!(mine(1).len(), 2, "{r:?}");
        assert_eq!(mine(0).len(), 2, "{r:?}");
        let (off, len, _) = *mine(1)[0];
        assert_eq!((off, len), (layout.region_off(0), layout.region_bytes()));
        for (off, len, _) in &r {
            assert_eq!(off % page, 0);
            assert_eq!(len % page, 0);
            assert!(off + len <= layout.total_size());
        }
        // Rank 2's boxes cover what it reads from ranks 0 and 1, and nothing of rank 1's.
        let (boff, blen, _) = *mine(0)[1];
        assert!(boff + page > layout.fbox_off(0, 2) && boff <= layout.fbox_off(1, 2));
        assert!(boff + blen >= layout.fbox_off(1, 2));
        assert!(boff >= layout.fbox_off(2, 1));
        assert!(ranges(&layout, &[None, None, None], page).is_empty());
    }
}
