//! What a segment and every handle derived from it share: the mapping, the layout, the
//! name and how peers find it. The FIFOs, fragment pools and fast boxes hold it (an
//! `Arc`) without depending on [`crate::Segment`], which builds them.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Mutex;
use std::sync::atomic::Ordering::AcqRel;

use crate::layout::Layout;
use crate::mapping::Mapping;
use crate::name::SegmentName;
use crate::repr::{RankEntry, SegmentHeader};
use crate::{ShmError, sys};

/// State shared by a segment and every handle derived from it.
pub(crate) struct SegShared {
    pub(crate) map: Mapping,
    pub(crate) layout: Layout,
    pub(crate) name: SegmentName,
    pub(crate) backing: Backing,
    /// The anonymous segment's descriptor, held by its creator until the door closes.
    pub(crate) held: Mutex<Option<OwnedFd>>,
}

/// How peers find a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// A POSIX shared-memory object under its name in /dev/shm (`shm_open`).
    Named,
    /// A memfd that only the creator's open descriptor makes reachable.
    Anonymous,
}

impl SegShared {
    pub(crate) fn header(&self) -> &SegmentHeader {
        self.map.get(0)
    }
    pub(crate) fn rank_entry(&self, r: u32) -> &RankEntry {
        self.map.get(self.layout.rank_entry_off(r))
    }
    pub(crate) fn os(&self, op: &'static str) -> impl FnOnce(io::Error) -> ShmError + '_ {
        move |source| ShmError::Os {
            op,
            name: self.name.to_string(),
            source,
        }
    }
    /// Unlinks the name unless some process already did (an anonymous segment: closes
    /// the creator's descriptor, if this process holds it). `Ok(true)` if this call did it.
    pub(crate) fn unlink_once(&self) -> Result<bool, ShmError> {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner()).take();
        if self.header().state.0.unlinked.swap(1, AcqRel) != 0 {
            return Ok(false);
        }
        if self.backing == Backing::Anonymous {
            return Ok(held.is_some());
        }
        match sys::shm_unlink(self.name.as_cstr()) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err((self.os("shm_unlink"))(e)),
        }
    }
}
