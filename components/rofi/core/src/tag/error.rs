//! Errors of tag-layout resolution and of packing values that do not fit.

use std::fmt;

use super::LayoutKind;

/// Why a layout could not be built or a value could not be packed. Every variant carries
/// what the user needs to fix it: the value, the limit, and the mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TagError {
    /// The string is not a tag mode.
    UnknownMode(String),
    /// `ofi_tag_full` was forced but the provider cannot carry the source rank out of band.
    FullModeUnsupported {
        provider_cq_data_size: usize,
        provider_directed_recv: bool,
        unknown_sender_matches_any: bool,
    },
    /// The provider reserves so many high tag bits that fewer than [`super::MIN_CID_BITS`]
    /// remain for the communicator id.
    NotEnoughCidBits {
        kind: LayoutKind,
        mem_tag_format: u64,
        available: u32,
    },
    /// Communicator id beyond what the layout can encode.
    CidOutOfRange {
        kind: LayoutKind,
        cid: u32,
        max: u32,
    },
    /// Source rank beyond the layout's source field.
    SourceOutOfRange {
        kind: LayoutKind,
        source: u32,
        max: u32,
    },
    /// MPI tag outside the layout's signed tag field: rejected, never truncated, because a
    /// truncated tag silently matches a different tag.
    TagOutOfRange {
        kind: LayoutKind,
        tag: i32,
        min: i32,
        max: i32,
    },
}

impl fmt::Display for TagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TagError::UnknownMode(s) => write!(
                f,
                "unknown tag mode {s:?} (expected auto, ofi_tag_1, ofi_tag_2 or ofi_tag_full)"
            ),
            TagError::FullModeUnsupported {
                unknown_sender_matches_any: true,
                ..
            } => write!(
                f,
                "tag mode ofi_tag_full matches a message's source by its address, and this \
                 provider takes a message from a sender not yet in the address vector as \
                 coming from anyone (libfabric's sockets provider): a spawned or connected \
                 job's messages could reach receives meant for another rank (use tag mode \
                 auto, ofi_tag_1 or ofi_tag_2)"
            ),
            TagError::FullModeUnsupported {
                provider_cq_data_size,
                provider_directed_recv,
                ..
            } => write!(
                f,
                "tag mode ofi_tag_full needs remote CQ data of at least {} bytes and \
                 FI_DIRECTED_RECV; the provider offers {provider_cq_data_size} bytes of CQ data \
                 and {} directed receive (use tag mode auto, ofi_tag_1 or ofi_tag_2)",
                super::MIN_CQ_DATA_SIZE,
                if *provider_directed_recv { "has" } else { "no" },
            ),
            TagError::NotEnoughCidBits {
                kind,
                mem_tag_format,
                available,
            } => write!(
                f,
                "not enough tag bits for the communicator id in {kind}: the provider's \
                 mem_tag_format {mem_tag_format:#018x} leaves {available} bits, at least {} \
                 are needed",
                super::MIN_CID_BITS
            ),
            TagError::CidOutOfRange { kind, cid, max } => write!(
                f,
                "communicator id {cid} exceeds the maximum {max} of {kind} \
                 (try tag mode ofi_tag_2 or ofi_tag_full for more communicators)"
            ),
            TagError::SourceOutOfRange { kind, source, max } => write!(
                f,
                "source rank {source} exceeds the maximum {max} of {kind} \
                 (use a provider with remote CQ data and tag mode ofi_tag_full)"
            ),
            TagError::TagOutOfRange {
                kind,
                tag,
                min,
                max,
            } => write!(
                f,
                "MPI tag {tag} is outside the range {min}..={max} of {kind}"
            ),
        }
    }
}

impl std::error::Error for TagError {}
