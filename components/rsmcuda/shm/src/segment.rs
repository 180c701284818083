//! The node-wide segment: creation by the leader, attachment by the peers, early unlink.
//!
//! Lifecycle:
//! 1. The leader `create`s: `shm_open(O_CREAT|O_EXCL, 0600)`, `fchmod 0600`, `ftruncate`,
//!    `mmap`, NUMA policies, `posix_fallocate` (a full /dev/shm fails here with ENOSPC
//!    instead of SIGBUS later; not for an anonymous segment, which stays sparse),
//!    initialise the header and rank table (the rest is valid as zeros), then publish
//!    `MAGIC` with a Release store.
//! 2. Peers `attach` (or `try_attach`, caller-driven): open, check size, Acquire-load the
//!    magic (0 = not ready yet: retry), check version and size, recompute the layout from
//!    the stored parameters, claim their rank entry, then count themselves in.
//! 3. Whoever's count makes the number of attached ranks reach `nranks` calls
//!    `shm_unlink` at once. From then on the segment lives only in the mappings: no file is
//!    left in /dev/shm whether ranks exit normally or are killed with SIGKILL.
//! 4. If a peer never comes, the leader calls `abandon_waiting` after its own timeout: it
//!    sets the ABANDONED bit in the same atomic word as the count (so an attach is either
//!    counted before it or refused after it, never lost) and unlinks.
//!    `unlink_if_leader_on_failure` does the same on the leader's error paths.
//! 5. `Drop` unmaps (once the last handle — FIFO reader/writer, pool — is gone too). It
//!    does not unlink: after a normal start-up the name is already gone.
//!
//! An **anonymous** segment ([`Backing::Anonymous`]) has no name in any filesystem: the
//! leader creates a memfd and keeps its descriptor open; peers find it among the
//! leader's open files (`/proc/<leader pid>/fd`, [`Locator::Process`]) by its memfd name
//! and open it there. "Unlinking" is then the leader closing that descriptor: once every
//! rank attached ([`Segment::settle`]) or when it gives up, after which nobody can
//! attach. Nothing is ever left behind, whoever is killed whenever.

use std::fmt;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cma;
use crate::fifo::{FifoReader, FifoWriter};
use crate::freelist::FragPool;
use crate::layout::{HEADER_BYTES, Layout, LayoutParams, PoolKind};
use crate::mapping::Mapping;
use crate::name::SegmentName;
use crate::repr::{ABANDONED_BIT, FifoCtrl, LAYOUT_VERSION, MAGIC, RankEntry, SegmentHeader, Slot};
use crate::shared::{Backing, SegShared};
use crate::{ShmError, sys};

/// Where an attacher looks for a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Locator {
    /// Under its name in /dev/shm ([`Backing::Named`]).
    Name,
    /// Among the open files of the creating process ([`Backing::Anonymous`]).
    Process(u32),
}

/// How `attach` retries while the leader has not created the segment yet.
#[derive(Clone, Copy, Debug)]
pub struct Retry {
    /// Attempts before giving up with `AttachTimeout` (at least 1 is made).
    pub attempts: u32,
    /// Sleep after the first failed attempt; doubled each time up to `max_sleep`.
    pub first_sleep: Duration,
    /// Cap of the sleep between attempts.
    pub max_sleep: Duration,
}

impl Default for Retry {
    /// About 10 s in all: 1 ms doubling up to 50 ms, 210 attempts.
    fn default() -> Self {
        Self {
            attempts: 210,
            first_sleep: Duration::from_millis(1),
            max_sleep: Duration::from_millis(50),
        }
    }
}

/// What `abandon_waiting` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AbandonOutcome {
    /// Every rank had attached: nothing was abandoned (the name was already unlinked).
    AllAttached,
    /// Some ranks had not attached; they never will. The name is unlinked.
    Abandoned {
        /// Ranks attached (creator included) when the door closed.
        attached: u32,
        /// Ranks that had not attached.
        missing: Vec<u32>,
    },
}

/// Why `try_attach` found nothing to attach to yet.
#[derive(Clone, Copy, Debug)]
enum NotReady {
    Missing,
    Unsized,
    Uninitialized,
}

impl NotReady {
    fn describe(self) -> &'static str {
        match self {
            Self::Missing => "no such segment",
            Self::Unsized => "segment exists but has size 0",
            Self::Uninitialized => "segment exists but is not initialised (magic 0)",
        }
    }
}

/// One process's view of the node's shared segment.
pub struct Segment {
    shared: Arc<SegShared>,
    rank: u32,
    leader: bool,
}

impl fmt::Debug for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Segment")
            .field("name", &self.shared.name.as_str())
            .field("rank", &self.rank)
            .field("leader", &self.leader)
            .field("size", &self.shared.layout.total_size())
            .finish()
    }
}

/// Publishes this process in its (already claimed) rank entry: the probe address first,
/// then the pid with Release, so a reader that sees the pid (Acquire) sees the address.
fn register_self(entry: &RankEntry) {
    entry
        .cma_probe_addr
        .store(cma::probe_word_addr() as u64, Relaxed);
    entry.pid.store(std::process::id(), Release);
}

impl Segment {
    /// Creates the segment as local rank `my_rank` (the leader), initialised and counted as
    /// attached. Fails with `AlreadyExists` if the name is taken. On any failure after
    /// `shm_open` the name is unlinked again.
    pub fn create(
        name: &SegmentName,
        params: &LayoutParams,
        my_rank: u32,
    ) -> Result<Self, ShmError> {
        Self::create_placed(name, params, my_rank, &[]).map(|(seg, _)| seg)
    }

    /// [`Segment::create`], with each rank's region and the fast boxes it reads placed
    /// on `homes[rank]` (see [`crate::numa`]) before the memory is allocated. Returns
    /// what was placed (see [`crate::numa::Placed`]).
    pub fn create_placed(
        name: &SegmentName,
        params: &LayoutParams,
        my_rank: u32,
        homes: &[Option<u32>],
    ) -> Result<(Self, crate::numa::Placed), ShmError> {
        Self::create_in(Backing::Named, name, params, my_rank, homes)
    }

    /// [`Segment::create_placed`] with the given backing. An anonymous segment is found by
    /// its peers with [`Locator::Process`] and this process's pid.
    pub fn create_in(
        backing: Backing,
        name: &SegmentName,
        params: &LayoutParams,
        my_rank: u32,
        homes: &[Option<u32>],
    ) -> Result<(Self, crate::numa::Placed), ShmError> {
        let layout = Layout::compute(params)?;
        if my_rank >= layout.nranks() {
            return Err(ShmError::RankOutOfRange {
                rank: my_rank,
                nranks: layout.nranks(),
            });
        }
        let os = |op| {
            move |source| ShmError::Os {
                op,
                name: name.to_string(),
                source,
            }
        };
        let fd = match backing {
            Backing::Named => sys::shm_open(
                name.as_cstr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                0o600,
            )
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::EEXIST) {
                    ShmError::AlreadyExists {
                        name: name.to_string(),
                    }
                } else {
                    os("shm_open(O_CREAT|O_EXCL)")(e)
                }
            })?,
            Backing::Anonymous => {
                sys::memfd_create(&name.memfd_cstr()).map_err(os("memfd_create"))?
            }
        };
        let total = layout.total_size();
        let mut placed = Ok(Vec::new());
        let mapped = (|| {
            sys::fchmod(&fd, 0o600).map_err(os("fchmod"))?;
            sys::ftruncate(&fd, total).map_err(os("ftruncate"))?;
            // Layout::compute checked that the total fits in usize.
            let len = total as usize;
            let ptr = sys::mmap_shared(&fd, len).map_err(os("mmap"))?;
            // SAFETY: `ptr`/`len` is the mapping mmap_shared just returned; only the
            // Mapping will unmap it.
            let map = unsafe { Mapping::from_raw(ptr, len) };
            // Policies first, then allocation: the policies belong to the shared object
            // (tmpfs/memfd keep them per page index, whichever mapping set them), so
            // fallocate here, or a first touch in any process later, puts each page
            // where its range's policy says.
            placed = place(&map, &layout, homes);
            if backing == Backing::Named {
                // /dev/shm is a tmpfs mount with a size limit (by default half the RAM):
                // reserve the pages now so that a full /dev/shm is ENOSPC here, not a
                // SIGBUS at some later first touch.
                sys::fallocate(&fd, total)
                    .map_err(os("posix_fallocate (is /dev/shm large enough?)"))?;
            }
            // A memfd is left sparse: its pages are allocated when first touched, so
            // that unused FIFO slots, fragments and fast boxes cost no memory. It lives on
            // the kernel's internal shmem mount, which has no size limit, so the reason
            // above does not apply (see `sys::fallocate` for what a first touch can still
            // meet: strict overcommit, memory cgroups).
            Ok(map)
        })();
        // Peers of an anonymous segment open it through this descriptor.
        let held = (backing == Backing::Anonymous).then_some(fd);
        let map = match mapped {
            Ok(m) => m,
            Err(e) => {
                // We created the name (O_EXCL): remove it again. Nothing else to report.
                if backing == Backing::Named {
                    let _ = sys::shm_unlink(name.as_cstr());
                }
                return Err(e);
            }
        };
        let shared = Arc::new(SegShared {
            map,
            layout,
            name: name.clone(),
            backing,
            held: Mutex::new(held),
        });
        init_segment(&shared, my_rank);
        let seg = Self {
            shared,
            rank: my_rank,
            leader: true,
        };
        if layout.nranks() == 1 {
            seg.shared.unlink_once()?;
        }
        Ok((seg, placed))
    }

    /// One attempt to attach as `my_rank`. `Ok(None)`: the leader has not created or
    /// initialised the segment yet (try again later). Errors are final.
    pub fn try_attach(name: &SegmentName, my_rank: u32) -> Result<Option<Self>, ShmError> {
        Self::try_attach_from(Locator::Name, name, my_rank)
    }

    /// [`Segment::try_attach`] to a segment found through `locator`.
    pub fn try_attach_from(
        locator: Locator,
        name: &SegmentName,
        my_rank: u32,
    ) -> Result<Option<Self>, ShmError> {
        Self::attach_once(locator, name, my_rank).map(Result::ok)
    }

    /// Attaches as `my_rank`, retrying per `retry` while the segment is not there yet.
    /// Sleeps (std::thread::sleep) between attempts; no other clock is read.
    pub fn attach(name: &SegmentName, my_rank: u32, retry: &Retry) -> Result<Self, ShmError> {
        Self::attach_from(Locator::Name, name, my_rank, retry)
    }

    /// [`Segment::attach`] to a segment found through `locator`.
    pub fn attach_from(
        locator: Locator,
        name: &SegmentName,
        my_rank: u32,
        retry: &Retry,
    ) -> Result<Self, ShmError> {
        let mut sleep = retry.first_sleep;
        let attempts = retry.attempts.max(1);
        let mut last = NotReady::Missing;
        for i in 0..attempts {
            match Self::attach_once(locator, name, my_rank)? {
                Ok(seg) => return Ok(seg),
                Err(nr) => last = nr,
            }
            if i + 1 < attempts {
                std::thread::sleep(sleep);
                sleep = (sleep * 2).min(retry.max_sleep);
            }
        }
        Err(ShmError::AttachTimeout {
            name: name.to_string(),
            attempts,
            last: last.describe(),
        })
    }

    fn attach_once(
        locator: Locator,
        name: &SegmentName,
        my_rank: u32,
    ) -> Result<Result<Self, NotReady>, ShmError> {
        let os = |op| {
            move |source| ShmError::Os {
                op,
                name: name.to_string(),
                source,
            }
        };
        let (fd, backing) = match locator {
            Locator::Name => match sys::shm_open(name.as_cstr(), libc::O_RDWR, 0) {
                Ok(fd) => (fd, Backing::Named),
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    return Ok(Err(NotReady::Missing));
                }
                Err(e) => return Err(os("shm_open(O_RDWR)")(e)),
            },
            Locator::Process(pid) => match sys::open_held_by(pid, &name.memfd_link()) {
                Ok(Some(fd)) => (fd, Backing::Anonymous),
                Ok(None) => return Ok(Err(NotReady::Missing)),
                Err(e) => return Err(os("open through /proc/<creator>/fd")(e)),
            },
        };
        let file = sys::fstat_size(&fd).map_err(os("fstat"))?;
        if file == 0 {
            // Between the leader's shm_open and its ftruncate.
            return Ok(Err(NotReady::Unsized));
        }
        let size_err = |header, layout| ShmError::SizeMismatch {
            name: name.to_string(),
            header,
            file,
            layout,
        };
        if file < HEADER_BYTES {
            return Err(size_err(0, 0));
        }
        let len = usize::try_from(file).map_err(|_| size_err(0, 0))?;
        let ptr = sys::mmap_shared(&fd, len).map_err(os("mmap"))?;
        drop(fd);
        // SAFETY: `ptr`/`len` is the mapping mmap_shared just returned; only the Mapping
        // will unmap it.
        let map = unsafe { Mapping::from_raw(ptr, len) };
        let id = &map.get::<SegmentHeader>(0).id.0;
        // Acquire: pairs with the leader's Release store of MAGIC after initialisation.
        let magic = id.magic.load(Acquire);
        if magic == 0 {
            return Ok(Err(NotReady::Uninitialized));
        }
        if magic != MAGIC {
            return Err(ShmError::BadMagic {
                name: name.to_string(),
                found: magic,
            });
        }
        let version = id.version.load(Relaxed);
        if version != LAYOUT_VERSION {
            return Err(ShmError::VersionMismatch {
                name: name.to_string(),
                found: version,
                expected: LAYOUT_VERSION,
            });
        }
        let params = LayoutParams {
            nranks: id.nranks.load(Relaxed),
            fifo_size: id.fifo_size.load(Relaxed),
            eager_size: id.eager_size.load(Relaxed),
            eager_count: id.eager_count.load(Relaxed),
            max_size: id.max_size.load(Relaxed),
            max_count: id.max_count.load(Relaxed),
            fbox_bytes: id.fbox_bytes.load(Relaxed),
        };
        let layout = Layout::compute(&params)?;
        let header_size = id.total_size.load(Relaxed);
        if header_size != file || layout.total_size() != file {
            return Err(size_err(header_size, layout.total_size()));
        }
        if my_rank >= layout.nranks() {
            return Err(ShmError::RankOutOfRange {
                rank: my_rank,
                nranks: layout.nranks(),
            });
        }
        let shared = Arc::new(SegShared {
            map,
            layout,
            name: name.clone(),
            backing,
            held: Mutex::new(None),
        });
        for r in 0..layout.nranks() {
            let e = shared.rank_entry(r);
            if e.fifo_off.load(Relaxed) != layout.fifo_ctrl_off(r)
                || e.eager_off.load(Relaxed) != layout.pool_off(r, PoolKind::Eager)
                || e.max_off.load(Relaxed) != layout.pool_off(r, PoolKind::Max)
            {
                return Err(ShmError::SizeMismatch {
                    name: name.to_string(),
                    header: header_size,
                    file,
                    layout: layout.total_size(),
                });
            }
        }
        let entry = shared.rank_entry(my_rank);
        if entry
            .attached
            .compare_exchange(0, 1, AcqRel, Acquire)
            .is_err()
        {
            return Err(ShmError::RankAlreadyAttached {
                name: name.to_string(),
                rank: my_rank,
            });
        }
        register_self(entry);
        let state = &shared.header().state.0;
        let mut cur = state.attached.load(Acquire);
        let count = loop {
            if cur & ABANDONED_BIT != 0 {
                entry.pid.store(0, Relaxed);
                entry.attached.store(0, Release);
                return Err(ShmError::Abandoned {
                    name: name.to_string(),
                });
            }
            // AcqRel: our rank entry (pid, probe address) is visible to whoever sees the
            // new count, and we see everything the earlier attachers published.
            match state
                .attached
                .compare_exchange_weak(cur, cur + 1, AcqRel, Acquire)
            {
                Ok(_) => break cur + 1,
                Err(now) => cur = now,
            }
        };
        let seg = Self {
            shared,
            rank: my_rank,
            leader: false,
        };
        if count == layout.nranks() {
            seg.shared.unlink_once()?;
        }
        Ok(Ok(seg))
    }

    /// The leader's give-up path when peers are late: closes the door (no attach succeeds
    /// afterwards; one in progress either completed before or fails with `Abandoned`) and
    /// unlinks the name. Ranks already attached keep working. Idempotent.
    pub fn abandon_waiting(&self) -> Result<AbandonOutcome, ShmError> {
        let state = &self.shared.header().state.0;
        let prev = state.attached.fetch_or(ABANDONED_BIT, AcqRel);
        self.shared.unlink_once()?;
        let attached = prev & !ABANDONED_BIT;
        if attached >= self.nranks() {
            return Ok(AbandonOutcome::AllAttached);
        }
        let missing = (0..self.nranks())
            .filter(|&r| self.shared.rank_entry(r).attached.load(Acquire) == 0)
            .collect();
        Ok(AbandonOutcome::Abandoned { attached, missing })
    }

    /// Once every rank has attached: drops what let peers find the segment (the
    /// anonymous creator's descriptor; a named segment is already unlinked by then).
    /// Returns whether every rank had attached.
    pub fn settle(&self) -> Result<bool, ShmError> {
        if !self.all_attached() {
            return Ok(false);
        }
        self.shared.unlink_once()?;
        Ok(true)
    }

    /// How peers find this segment.
    pub fn backing(&self) -> Backing {
        self.shared.backing
    }

    /// On the leader's error paths: make sure no name is left behind and no late peer
    /// attaches to a segment nobody will serve. No effect on a non-leader.
    pub fn unlink_if_leader_on_failure(&self) -> Result<(), ShmError> {
        if self.leader {
            self.shared
                .header()
                .state
                .0
                .attached
                .fetch_or(ABANDONED_BIT, AcqRel);
            self.shared.unlink_once()?;
        }
        Ok(())
    }

    /// The segment name.
    pub fn name(&self) -> &SegmentName {
        &self.shared.name
    }
    /// This process's local rank.
    pub fn local_rank(&self) -> u32 {
        self.rank
    }
    /// True in the process that created the segment.
    pub fn is_leader(&self) -> bool {
        self.leader
    }
    /// Number of local ranks.
    pub fn nranks(&self) -> u32 {
        self.shared.layout.nranks()
    }
    /// The policy of the page at offset `off` of this process's mapping (see
    /// [`crate::numa::policy_at`]): where the placement can be checked.
    pub fn policy_at(&self, off: u64) -> std::io::Result<(i32, u64)> {
        crate::numa::policy_at(self.shared.map.bytes_ptr(off, 1))
    }

    /// The node of the page at offset `off`, `None` while this process has not touched
    /// it (see [`crate::numa::node_of`]).
    pub fn node_at(&self, off: u64) -> std::io::Result<Option<u32>> {
        crate::numa::node_of(self.shared.map.bytes_ptr(off, 1))
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.shared.layout
    }
    /// Ranks attached so far (creator included).
    pub fn attached_count(&self) -> u32 {
        self.shared.header().state.0.attached.load(Acquire) & !ABANDONED_BIT
    }
    /// True once every rank has attached (the start-up barrier's condition).
    pub fn all_attached(&self) -> bool {
        self.attached_count() == self.nranks()
    }
    /// True once the name has been removed from /dev/shm.
    pub fn is_unlinked(&self) -> bool {
        self.shared.header().state.0.unlinked.load(Acquire) != 0
    }
    /// True once `abandon_waiting` or `unlink_if_leader_on_failure` has run.
    pub fn is_abandoned(&self) -> bool {
        self.shared.header().state.0.attached.load(Acquire) & ABANDONED_BIT != 0
    }
    fn entry(&self, r: u32) -> Option<&RankEntry> {
        (r < self.nranks()).then(|| self.shared.rank_entry(r))
    }
    /// Process id of rank `r`, once it has attached (`None` before, or if `r` is out of
    /// range). Reliable for every rank once [`all_attached`](Self::all_attached).
    pub fn peer_pid(&self, r: u32) -> Option<u32> {
        let pid = self.entry(r)?.pid.load(Acquire);
        (pid != 0).then_some(pid)
    }
    /// Address (in rank `r`'s process) of its CMA probe word, for [`cma::probe`], once
    /// rank `r` has attached.
    pub fn peer_cma_probe_addr(&self, r: u32) -> Option<usize> {
        let e = self.entry(r)?;
        // Acquire on pid: pairs with register_self's Release, so the address is there.
        (e.pid.load(Acquire) != 0).then(|| e.cma_probe_addr.load(Relaxed) as usize)
    }

    /// A writer into `receiver`'s FIFO (any rank, including this one).
    pub fn fifo_writer(&self, receiver: u32) -> Result<FifoWriter, ShmError> {
        if receiver >= self.nranks() {
            return Err(ShmError::RankOutOfRange {
                rank: receiver,
                nranks: self.nranks(),
            });
        }
        Ok(FifoWriter {
            seg: Arc::clone(&self.shared),
            receiver,
        })
    }

    /// The reader of this rank's own FIFO. Only one may exist at a time (across all
    /// processes); dropping it saves its position and frees the claim.
    pub fn fifo_reader(&self) -> Result<FifoReader, ShmError> {
        let ctrl = self
            .shared
            .map
            .get::<FifoCtrl>(self.shared.layout.fifo_ctrl_off(self.rank));
        // Acquire: pairs with the Release in FifoReader::drop, so the saved head is seen.
        if ctrl
            .reader
            .0
            .claimed
            .compare_exchange(0, 1, Acquire, Relaxed)
            .is_err()
        {
            return Err(ShmError::ReaderBusy { rank: self.rank });
        }
        Ok(FifoReader {
            seg: Arc::clone(&self.shared),
            rank: self.rank,
            head: ctrl.reader.0.head.load(Relaxed),
        })
    }

    /// This rank's fragment pools. Claimable once per segment: the free lists live in this
    /// process only (only the owner allocates), so a second pool would hand out fragments
    /// that are in flight.
    /// The writing end of the fast box from this rank to `receiver` (None without fast
    /// boxes or for this rank itself). One per process and receiver: the writer's position
    /// is kept in the handle.
    pub fn fbox_writer(&self, receiver: u32) -> Option<crate::fbox::FboxWriter> {
        (receiver < self.nranks() && receiver != self.rank)
            .then(|| crate::fbox::FboxWriter::new(Arc::clone(&self.shared), self.rank, receiver))
            .flatten()
    }

    /// The reading end of the fast box from `sender` to this rank (None without fast boxes
    /// or for this rank itself). Keep one per sender, used by one thread at a time.
    pub fn fbox_reader(&self, sender: u32) -> Option<crate::fbox::FboxReader> {
        (sender < self.nranks() && sender != self.rank)
            .then(|| crate::fbox::FboxReader::new(Arc::clone(&self.shared), sender, self.rank))
            .flatten()
    }

    /// Cheap check without the reader: is a value published at position `head` (from
    /// [`FifoReader::head`]) of this rank's FIFO?
    pub fn fifo_ready(&self, head: u64) -> bool {
        let l = &self.shared.layout;
        let slots = self
            .shared
            .map
            .slice::<Slot>(l.fifo_slots_off(self.rank), l.fifo_size() as usize);
        crate::fifo::ready(slots, head)
    }

    /// [`Self::fifo_ready`] for every progress pass: the slots' place checked once.
    pub fn fifo_probe(&self) -> crate::fifo::FifoProbe {
        let l = &self.shared.layout;
        crate::fifo::FifoProbe::new(
            Arc::clone(&self.shared),
            l.fifo_slots_off(self.rank),
            l.fifo_size(),
        )
    }

    pub fn frag_pool(&self) -> Result<FragPool, ShmError> {
        let e = self.shared.rank_entry(self.rank);
        if e.pool_claimed
            .compare_exchange(0, 1, AcqRel, Relaxed)
            .is_err()
        {
            return Err(ShmError::PoolClaimed { rank: self.rank });
        }
        Ok(FragPool::new(Arc::clone(&self.shared), self.rank))
    }
}

/// Initialises a freshly created (zero-filled) segment and publishes it.
///
/// Writes only the header and the rank table (the first page or pages): everything else
/// is valid as zeros, so its pages are allocated (anonymous segments) or at least written
/// (named ones) only when first used. A FIFO of zeros is empty (see `fifo.rs`); a
/// fragment header is written by its owner each time it posts the fragment
/// (`FragPool::post`); fast boxes start at position 0 with zero headers.
fn init_segment(s: &SegShared, leader: u32) {
    let l = &s.layout;
    let p = l.params();
    let hdr = s.header();
    let id = &hdr.id.0;
    id.version.store(LAYOUT_VERSION, Relaxed);
    id.nranks.store(p.nranks, Relaxed);
    id.total_size.store(l.total_size(), Relaxed);
    id.fifo_size.store(p.fifo_size, Relaxed);
    id.eager_size.store(p.eager_size, Relaxed);
    id.eager_count.store(p.eager_count, Relaxed);
    id.max_size.store(p.max_size, Relaxed);
    id.max_count.store(p.max_count, Relaxed);
    id.fbox_bytes.store(p.fbox_bytes, Relaxed);
    id.leader_rank.store(leader, Relaxed);
    id.leader_pid.store(std::process::id(), Relaxed);
    hdr.state.0.attached.store(1, Relaxed);
    hdr.state.0.unlinked.store(0, Relaxed);
    for r in 0..p.nranks {
        let e = s.rank_entry(r);
        e.fifo_off.store(l.fifo_ctrl_off(r), Relaxed);
        e.eager_off.store(l.pool_off(r, PoolKind::Eager), Relaxed);
        e.max_off.store(l.pool_off(r, PoolKind::Max), Relaxed);
    }
    let me = s.rank_entry(leader);
    me.attached.store(1, Relaxed);
    register_self(me);
    // Release: everything above happens-before any attacher's Acquire load of the magic.
    id.magic.store(MAGIC, Release);
}

/// Applies the placement of [`crate::numa::ranges`] to a fresh mapping.
fn place(map: &Mapping, layout: &Layout, homes: &[Option<u32>]) -> crate::numa::Placed {
    let page = sys::page_size() as u64;
    let mut done = Vec::new();
    for (off, len, node) in crate::numa::ranges(layout, homes, page) {
        sys::mbind_preferred(map.bytes_ptr(off, len as usize), len as usize, node)?;
        done.push((node, len));
    }
    Ok(done)
}
