//! Error types.

use std::fmt;
use std::io;

use crate::layout::LayoutError;

/// Why a segment operation failed. Every variant names the segment and says what to do.
#[derive(Debug)]
pub enum ShmError {
    /// The segment name or job key is unusable.
    InvalidName {
        /// What was given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The configuration has no layout.
    Layout(LayoutError),
    /// `create` found a segment of that name already (a stale one, or two leaders).
    AlreadyExists {
        /// Segment name.
        name: String,
    },
    /// A system call failed.
    Os {
        /// Which call.
        op: &'static str,
        /// Segment name.
        name: String,
        /// The OS error.
        source: io::Error,
    },
    /// The object exists but is not one of our segments.
    BadMagic {
        /// Segment name.
        name: String,
        /// The first 8 bytes found.
        found: u64,
    },
    /// The segment was created by an incompatible version of this crate.
    VersionMismatch {
        /// Segment name.
        name: String,
        /// The creator's layout version.
        found: u32,
        /// Ours.
        expected: u32,
    },
    /// The header, the file size and the recomputed layout disagree.
    SizeMismatch {
        /// Segment name.
        name: String,
        /// Size recorded in the header.
        header: u64,
        /// Size of the file.
        file: u64,
        /// Size our layout computes from the header's parameters.
        layout: u64,
    },
    /// A rank number is not below the number of ranks.
    RankOutOfRange {
        /// The rank given.
        rank: u32,
        /// Ranks in the segment.
        nranks: u32,
    },
    /// Another process has already attached as this rank.
    RankAlreadyAttached {
        /// Segment name.
        name: String,
        /// The rank.
        rank: u32,
    },
    /// The leader gave up waiting (`abandon_waiting`) before this rank attached.
    Abandoned {
        /// Segment name.
        name: String,
    },
    /// `attach` ran out of attempts.
    AttachTimeout {
        /// Segment name.
        name: String,
        /// Attempts made.
        attempts: u32,
        /// The last state seen.
        last: &'static str,
    },
    /// A FIFO reader for this rank already exists (one reader per FIFO).
    ReaderBusy {
        /// The rank.
        rank: u32,
    },
    /// This rank's fragment pool has already been claimed (once per segment).
    PoolClaimed {
        /// The rank.
        rank: u32,
    },
}

impl fmt::Display for ShmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidName { name, reason } => {
                write!(f, "invalid shared-memory segment name {name:?}: {reason}")
            }
            Self::Layout(e) => write!(f, "shared-memory layout: {e}"),
            Self::AlreadyExists { name } => write!(
                f,
                "shared-memory segment {name} already exists (a stale segment from an earlier job \
                 with the same key, or two leaders): remove /dev/shm{name} if no job uses it"
            ),
            Self::Os { op, name, source } => {
                write!(f, "{op} failed for shared-memory segment {name}: {source}")
            }
            Self::BadMagic { name, found } => write!(
                f,
                "{name} is not an rsmcuda segment (magic {found:#018x}, expected {:#018x})",
                crate::repr::MAGIC
            ),
            Self::VersionMismatch {
                name,
                found,
                expected,
            } => write!(
                f,
                "segment {name} has layout version {found}, this build expects {expected}: \
                 all ranks must load the same rsmcuda build"
            ),
            Self::SizeMismatch {
                name,
                header,
                file,
                layout,
            } => write!(
                f,
                "segment {name} size inconsistent: header says {header}, file is {file}, \
                 layout computes {layout}"
            ),
            Self::RankOutOfRange { rank, nranks } => {
                write!(
                    f,
                    "local rank {rank} out of range (segment has {nranks} ranks)"
                )
            }
            Self::RankAlreadyAttached { name, rank } => {
                write!(f, "local rank {rank} is already attached to segment {name}")
            }
            Self::Abandoned { name } => write!(
                f,
                "the leader stopped waiting for local peers to attach to {name}; \
                 this rank cannot use shared memory in this job"
            ),
            Self::AttachTimeout {
                name,
                attempts,
                last,
            } => write!(
                f,
                "gave up attaching to shared-memory segment {name} after {attempts} attempts \
                 ({last}): the leader may have failed to create it"
            ),
            Self::ReaderBusy { rank } => {
                write!(f, "the FIFO of local rank {rank} already has a reader")
            }
            Self::PoolClaimed { rank } => {
                write!(
                    f,
                    "the fragment pool of local rank {rank} was already claimed"
                )
            }
        }
    }
}

impl std::error::Error for ShmError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Os { source, .. } => Some(source),
            Self::Layout(e) => Some(e),
            _ => None,
        }
    }
}

impl From<LayoutError> for ShmError {
    fn from(e: LayoutError) -> Self {
        Self::Layout(e)
    }
}

/// Why a fragment operation failed (bad values from a peer, or misuse by the glue).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FragError {
    /// `incoming` was given a value that is not a SEND.
    NotASend(u64),
    /// `complete` was given a value that is not an ACK.
    NotAnAck(u64),
    /// The offset is not the start of any fragment.
    BadOffset(u64),
    /// The fragment belongs to another rank's pool.
    NotMine {
        /// The offset.
        offset: u64,
        /// Its owner.
        owner: u32,
    },
    /// The header disagrees with where the fragment is (corruption).
    CorruptHeader(u64),
    /// The length is larger than the fragment's capacity.
    BadLength {
        /// The offset.
        offset: u64,
        /// The length found or asked for.
        len: u64,
        /// The capacity.
        capacity: u32,
    },
    /// An ACK for a fragment that is not in flight (duplicate or forged ACK).
    NotInFlight(u64),
}

impl fmt::Display for FragError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotASend(v) => write!(f, "FIFO value {v:#x} is not a SEND"),
            Self::NotAnAck(v) => write!(f, "FIFO value {v:#x} is not an ACK"),
            Self::BadOffset(o) => write!(f, "offset {o:#x} is not a fragment"),
            Self::NotMine { offset, owner } => {
                write!(f, "fragment {offset:#x} belongs to local rank {owner}")
            }
            Self::CorruptHeader(o) => write!(f, "fragment {o:#x} has a corrupt header"),
            Self::BadLength {
                offset,
                len,
                capacity,
            } => write!(
                f,
                "fragment {offset:#x}: length {len} exceeds capacity {capacity}"
            ),
            Self::NotInFlight(o) => write!(f, "ACK for fragment {o:#x} which is not in flight"),
        }
    }
}

impl std::error::Error for FragError {}
