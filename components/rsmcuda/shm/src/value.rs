//! The 64-bit values the FIFOs carry: a fragment's segment offset (64-byte aligned), its
//! type (SEND or ACK) and an ACK's status bit. Shared by the FIFOs that move them and the
//! fragment pools that make and take them back.

use std::fmt;

/// Mask of the type bits of a [`FifoValue`].
pub const TYPE_MASK: u64 = 0x3;
/// Status bit: set in an ACK that reports an error.
pub const STATUS_BIT: u64 = 0x4;
/// All tag bits (below the 64-byte aligned offset).
pub const TAG_MASK: u64 = 0x3f;

/// The type of a FIFO value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FifoKind {
    /// A peer's fragment with a message for the reader.
    Send,
    /// One of the reader's own fragments, returned by the peer that consumed it.
    Ack,
    /// Reserved type bits (2 or 3): a peer of another version, or corruption.
    Reserved(u8),
}

/// A value carried by a FIFO: fragment offset | type | status.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FifoValue(u64);

impl FifoValue {
    /// A SEND of the fragment at `offset` (must be 64-byte aligned).
    pub fn send(offset: u64) -> Self {
        debug_assert_eq!(offset & TAG_MASK, 0);
        Self(offset & !TAG_MASK)
    }
    /// An ACK returning the fragment at `offset`; `ok == false` sets the status bit.
    pub fn ack(offset: u64, ok: bool) -> Self {
        debug_assert_eq!(offset & TAG_MASK, 0);
        Self((offset & !TAG_MASK) | 1 | if ok { 0 } else { STATUS_BIT })
    }
    /// Any 64-bit value (tests, or glue-defined uses of the reserved types).
    pub const fn from_raw(raw: u64) -> Self {
        Self(raw)
    }
    /// The raw 64 bits.
    pub const fn raw(self) -> u64 {
        self.0
    }
    /// The fragment offset.
    pub const fn offset(self) -> u64 {
        self.0 & !TAG_MASK
    }
    /// The type.
    pub fn kind(self) -> FifoKind {
        match self.0 & TYPE_MASK {
            0 => FifoKind::Send,
            1 => FifoKind::Ack,
            t => FifoKind::Reserved(t as u8),
        }
    }
    /// True unless the status bit reports an error.
    pub const fn ok(self) -> bool {
        self.0 & STATUS_BIT == 0
    }
}

impl fmt::Debug for FifoValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "FifoValue({:?} off={:#x} ok={})",
            self.kind(),
            self.offset(),
            self.ok()
        )
    }
}
