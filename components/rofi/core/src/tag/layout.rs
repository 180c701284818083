//! Resolved tag layouts: bit positions, packing, receive masks and decoding.
//!
//! Bit 63 is the most significant bit. `P` = the two protocol bits: `S` = SYNC_SEND (the
//! lower one), `A` = SYNC_SEND_ACK (the upper one).
//!
//! ```text
//! ofi_tag_1   63        52 51                34 33 32 31                             0
//!            +------------+--------------------+--+--+--------------------------------+
//!            |  CID (12)  |    source (18)     |A |S |          MPI tag (32)          |
//!            +------------+--------------------+--+--+--------------------------------+
//!
//! ofi_tag_2   63                    40 39                22 21 20 19                  0
//!            +------------------------+--------------------+--+--+--------------------+
//!            |        CID (24)        |    source (18)     |A |S |    MPI tag (20)    |
//!            +------------------------+--------------------+--+--+--------------------+
//!
//! ofi_tag_full 63                        34 33 32 31                                 0
//!            +----------------------------+--+--+------------------------------------+
//!            |          CID (30)          |A |S |            MPI tag (32)            |
//!            +----------------------------+--+--+------------------------------------+
//!              source rank: 32-bit remote CQ data (fi_tsenddata), matched by address
//! ```
//!
//! A provider that reserves high tag bits (leading zeros in `mem_tag_format`) shrinks the
//! CID field from the top: positions never move, only [`TagLayout::max_contextid`] drops,
//! so the reserved bits are always zero in what we post.

use std::fmt;

use super::{TagError, TagMode};

/// Fewer CID bits than this make the layout useless (the C MTL's `MTL_OFI_MINIMUM_CID_BITS`).
pub const MIN_CID_BITS: u32 = 8;

/// Remote CQ data must hold a C `int` rank for the full layout.
pub const MIN_CQ_DATA_SIZE: usize = 4;

/// Width of the protocol field; the two bits are SYNC_SEND and SYNC_SEND_ACK.
const PROTO_BITS: u32 = 2;

/// A concrete layout, after `auto` has been decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayoutKind {
    Tag1,
    Tag2,
    Full,
}

impl LayoutKind {
    /// Field widths `(cid, source, tag)`; source 0 means "carried in CQ data".
    const fn widths(self) -> (u32, u32, u32) {
        match self {
            LayoutKind::Tag1 => (12, 18, 32),
            LayoutKind::Tag2 => (24, 18, 20),
            LayoutKind::Full => (30, 0, 32),
        }
    }
}

impl fmt::Display for LayoutKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LayoutKind::Tag1 => "ofi_tag_1",
            LayoutKind::Tag2 => "ofi_tag_2",
            LayoutKind::Full => "ofi_tag_full",
        })
    }
}

/// What the chosen provider offers that matters to the layout (from its `fi_info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TagCaps {
    /// `domain_attr->cq_data_size` in bytes.
    pub cq_data_size: usize,
    /// `caps & FI_DIRECTED_RECV`.
    pub directed_recv: bool,
    /// The provider takes a message from a sender that is not (yet) in the receiver's
    /// address vector as coming from anyone: it matches a receive directed at any other
    /// address. Then matching by address is no matching at all where a sender can be
    /// quicker than the receiver's `fi_av_insert` (a spawned or connected job), and the
    /// source must travel in the tag.
    pub unknown_sender_matches_any: bool,
    /// `ep_attr->mem_tag_format`: leading zero bits are reserved by the provider.
    pub mem_tag_format: u64,
}

impl TagCaps {
    /// Whether the full layout is possible: rank in CQ data and source matched by address.
    #[must_use]
    pub const fn supports_full(&self) -> bool {
        self.cq_data_size >= MIN_CQ_DATA_SIZE
            && self.directed_recv
            && !self.unknown_sender_matches_any
    }
}

/// A validated tag layout. Every packing function checks its inputs against the layout's
/// limits and fails instead of truncating.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TagLayout {
    kind: LayoutKind,
    // INVARIANT: MIN_CID_BITS <= cid_bits <= the kind's CID field width; established in
    // `with_kind`, the only constructor.
    cid_bits: u32,
}

impl TagLayout {
    /// Decide the layout for `mode` on a provider with `caps`.
    ///
    /// `auto` picks the full layout when the provider supports it and `ofi_tag_1` otherwise;
    /// a forced `ofi_tag_full` without support is an error, never a silent downgrade.
    pub fn resolve(mode: TagMode, caps: &TagCaps) -> Result<TagLayout, TagError> {
        let kind = match mode {
            TagMode::Auto if caps.supports_full() => LayoutKind::Full,
            TagMode::Auto | TagMode::OfiTag1 => LayoutKind::Tag1,
            TagMode::OfiTag2 => LayoutKind::Tag2,
            TagMode::OfiTagFull if caps.supports_full() => LayoutKind::Full,
            TagMode::OfiTagFull => {
                return Err(TagError::FullModeUnsupported {
                    provider_cq_data_size: caps.cq_data_size,
                    provider_directed_recv: caps.directed_recv,
                    unknown_sender_matches_any: caps.unknown_sender_matches_any,
                });
            }
        };
        TagLayout::with_kind(kind, caps.mem_tag_format)
    }

    /// Build `kind` for a provider whose `mem_tag_format` reserves its leading zero bits.
    ///
    /// Each leading zero of `mem_tag_format` removes one CID bit (the CID occupies the top of
    /// the tag in every layout). A format of 0 reserves everything and is rejected.
    pub fn with_kind(kind: LayoutKind, mem_tag_format: u64) -> Result<TagLayout, TagError> {
        let (cid_field, _, _) = kind.widths();
        let reserved = mem_tag_format.leading_zeros();
        let available = cid_field.saturating_sub(reserved);
        if available < MIN_CID_BITS {
            return Err(TagError::NotEnoughCidBits {
                kind,
                mem_tag_format,
                available,
            });
        }
        Ok(TagLayout {
            kind,
            cid_bits: available,
        })
    }

    #[must_use]
    pub const fn kind(&self) -> LayoutKind {
        self.kind
    }

    /// Usable CID bits after the provider's reservation.
    #[must_use]
    pub const fn cid_bits(&self) -> u32 {
        self.cid_bits
    }

    /// True when the source rank travels in remote CQ data: sends must use
    /// `fi_tsenddata` with [`TagLayout::cq_data`], and a receive from a specific source must
    /// be posted with that peer's address (FI_DIRECTED_RECV) because the tag cannot say it.
    #[must_use]
    pub const fn source_in_cq_data(&self) -> bool {
        matches!(self.kind, LayoutKind::Full)
    }

    const fn tag_width(&self) -> u32 {
        self.kind.widths().2
    }

    const fn source_width(&self) -> u32 {
        self.kind.widths().1
    }

    const fn proto_shift(&self) -> u32 {
        self.tag_width()
    }

    const fn source_shift(&self) -> u32 {
        self.tag_width() + PROTO_BITS
    }

    const fn cid_shift(&self) -> u32 {
        self.tag_width() + PROTO_BITS + self.source_width()
    }

    /// Bits of the MPI tag field.
    #[must_use]
    pub const fn tag_mask(&self) -> u64 {
        low_mask(self.tag_width())
    }

    /// Bits of the source-rank field (0 in the full layout).
    #[must_use]
    pub const fn source_mask(&self) -> u64 {
        low_mask(self.source_width()) << self.source_shift()
    }

    /// Bits of the CID field as positioned in the tag (the whole field, reserved part too).
    #[must_use]
    pub const fn cid_mask(&self) -> u64 {
        low_mask(self.kind.widths().0) << self.cid_shift()
    }

    /// The SYNC_SEND protocol bit: set on a synchronous send's data message.
    #[must_use]
    pub const fn sync_send_bit(&self) -> u64 {
        1 << self.proto_shift()
    }

    /// The SYNC_SEND_ACK protocol bit: set on the receiver's acknowledgement.
    #[must_use]
    pub const fn sync_ack_bit(&self) -> u64 {
        2 << self.proto_shift()
    }

    const fn proto_mask(&self) -> u64 {
        self.sync_send_bit() | self.sync_ack_bit()
    }

    /// Largest MPI tag (the value for `MPI_TAG_UB`).
    #[must_use]
    pub const fn max_tag(&self) -> i32 {
        ((1u64 << (self.tag_width() - 1)) - 1) as i32
    }

    /// Most negative tag the field holds; internal (collective) tags must stay above it.
    #[must_use]
    pub const fn min_tag(&self) -> i32 {
        -(self.max_tag()) - 1
    }

    /// Largest communicator id; shrinks with the provider's reserved tag bits.
    #[must_use]
    pub const fn max_contextid(&self) -> u32 {
        low_mask(self.cid_bits) as u32
    }

    /// Largest source rank the tag can carry; `None` when the rank travels in CQ data and
    /// any `u32` works. The glue refuses `add_procs` beyond it.
    #[must_use]
    pub const fn max_source(&self) -> Option<u32> {
        match self.kind {
            LayoutKind::Full => None,
            _ => Some(low_mask(self.source_width()) as u32),
        }
    }

    fn check_cid(&self, cid: u32) -> Result<(), TagError> {
        let max = self.max_contextid();
        if cid > max {
            return Err(TagError::CidOutOfRange {
                kind: self.kind,
                cid,
                max,
            });
        }
        Ok(())
    }

    fn check_source(&self, source: u32) -> Result<(), TagError> {
        match self.max_source() {
            Some(max) if source > max => Err(TagError::SourceOutOfRange {
                kind: self.kind,
                source,
                max,
            }),
            _ => Ok(()),
        }
    }

    fn check_tag(&self, tag: i32) -> Result<(), TagError> {
        if tag < self.min_tag() || tag > self.max_tag() {
            return Err(TagError::TagOutOfRange {
                kind: self.kind,
                tag,
                min: self.min_tag(),
                max: self.max_tag(),
            });
        }
        Ok(())
    }

    const fn tag_field(&self, tag: i32) -> u64 {
        // Two's complement truncated to the field: the field's top bit is the sign.
        (tag as u32 as u64) & self.tag_mask()
    }

    /// Tag bits of a send from `src_rank` (the sender's rank in the communicator).
    ///
    /// In the full layout `src_rank` is not in the tag; send it as [`TagLayout::cq_data`].
    pub fn send_bits(
        &self,
        cid: u32,
        src_rank: u32,
        tag: i32,
        sync: bool,
    ) -> Result<u64, TagError> {
        self.check_cid(cid)?;
        self.check_source(src_rank)?;
        self.check_tag(tag)?;
        let mut bits = (cid as u64) << self.cid_shift();
        if self.source_width() > 0 {
            bits |= (src_rank as u64) << self.source_shift();
        }
        bits |= self.tag_field(tag);
        if sync {
            bits |= self.sync_send_bit();
        }
        Ok(bits)
    }

    /// Remote CQ data accompanying a send (full layout only): the sender's rank.
    #[must_use]
    pub const fn cq_data(&self, src_rank: u32) -> Option<u64> {
        match self.kind {
            LayoutKind::Full => Some(src_rank as u64),
            _ => None,
        }
    }

    /// `(match_bits, ignore_bits)` of a receive; `None` is `MPI_ANY_SOURCE` / `MPI_ANY_TAG`
    /// (the glue maps the MPI constants, both −1, to `None` before calling).
    ///
    /// - SYNC_SEND is always ignored and SYNC_SEND_ACK never is: a receive takes ordinary
    ///   and synchronous sends alike but can never steal an acknowledgement (upstream #8051).
    /// - ANY_SOURCE ignores the source field. In the full layout a specific source is not
    ///   in the bits at all: post the receive with that peer's address instead.
    /// - ANY_TAG ignores every tag bit but the sign bit, which stays 0 in the match: ANY_TAG
    ///   never matches a negative (internal, collective) tag.
    pub fn recv_match(
        &self,
        cid: u32,
        src: Option<u32>,
        tag: Option<i32>,
    ) -> Result<(u64, u64), TagError> {
        self.check_cid(cid)?;
        let mut match_bits = (cid as u64) << self.cid_shift();
        let mut ignore_bits = self.sync_send_bit();
        match src {
            None => ignore_bits |= self.source_mask(),
            Some(s) => {
                self.check_source(s)?;
                if self.source_width() > 0 {
                    match_bits |= (s as u64) << self.source_shift();
                }
            }
        }
        match tag {
            None => ignore_bits |= self.tag_mask() >> 1,
            Some(t) => {
                self.check_tag(t)?;
                match_bits |= self.tag_field(t);
            }
        }
        Ok((match_bits, ignore_bits))
    }

    /// Tag of the acknowledgement a receiver sends for a synchronous send it received with
    /// tag `received_bits`: the same CID/source/tag, ACK bit set, SYNC_SEND cleared.
    #[must_use]
    pub const fn ack_bits(&self, received_bits: u64) -> u64 {
        (received_bits | self.sync_ack_bit()) & !self.sync_send_bit()
    }

    /// Match bits of the sender's acknowledgement receive, posted with ignore = 0 (exact)
    /// before the data send so the ACK can never arrive unexpected. Because the received
    /// tag echoes the sender's own fields, these equal [`TagLayout::ack_bits`] of the data.
    #[must_use]
    pub const fn ack_match_bits(&self, send_bits: u64) -> u64 {
        self.ack_bits(send_bits)
    }

    /// The MPI tag of a received message, sign-extended from the field.
    ///
    /// The C MTL returns `(int)(bits & mask)`, which in ofi_tag_2 turns a negative 20-bit
    /// tag into a large positive int; we extend the field's sign bit so every tag that
    /// [`TagLayout::send_bits`] accepts decodes to itself.
    #[must_use]
    pub const fn tag_of(&self, bits: u64) -> i32 {
        let unused = 32 - self.tag_width();
        (((bits & self.tag_mask()) as u32) << unused) as i32 >> unused
    }

    /// The sender's rank from the tag; `None` in the full layout (use
    /// [`TagLayout::source_of_completion`] with the CQ data there).
    #[must_use]
    pub const fn source_of(&self, bits: u64) -> Option<u32> {
        match self.kind {
            LayoutKind::Full => None,
            _ => Some(((bits & self.source_mask()) >> self.source_shift()) as u32),
        }
    }

    /// The sender's rank of a completion, whichever layout: tag bits or CQ data.
    #[must_use]
    pub const fn source_of_completion(&self, bits: u64, cq_data: u64) -> u32 {
        match self.source_of(bits) {
            Some(s) => s,
            // CQ data is at least 32 bits wide and the sender wrote its rank there.
            None => cq_data as u32,
        }
    }

    /// The communicator id in a tag.
    #[must_use]
    pub const fn cid_of(&self, bits: u64) -> u32 {
        ((bits & self.cid_mask()) >> self.cid_shift()) as u32
    }

    #[must_use]
    pub const fn is_sync_send(&self, bits: u64) -> bool {
        bits & self.proto_mask() == self.sync_send_bit()
    }

    #[must_use]
    pub const fn is_sync_ack(&self, bits: u64) -> bool {
        bits & self.proto_mask() == self.sync_ack_bit()
    }

    /// Map a negative internal tag into the representable negative range, keeping it
    /// negative (so ANY_TAG still never matches it) at the cost of aliasing tags that are
    /// a multiple of `-min_tag()` apart.
    ///
    /// Why it exists: nonblocking collectives draw tags down to about −2^30, which
    /// ofi_tag_2 (20-bit tags) cannot hold. [`TagLayout::send_bits`] rejects them; the glue
    /// may instead fold *internal* tags explicitly (the collective module recycles its tag
    /// space anyway). Non-negative tags and tags already in range are returned unchanged.
    #[must_use]
    pub const fn fold_negative_tag(&self, tag: i32) -> i32 {
        if tag >= self.min_tag() {
            return tag;
        }
        let span = -(self.min_tag() as i64);
        // tag < min_tag < 0: map -1 - k  to  -1 - (k mod span)
        let k = -1 - tag as i64;
        (-1 - (k % span)) as i32
    }
}

/// `n` low bits set (n ≤ 64).
const fn low_mask(n: u32) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}
