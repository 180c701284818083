//! Receiver window: the next expected sequence number (`nxt`) and whatever arrived
//! beyond it, held until the gap fills so delivery is always in sequence order.

use crate::rangeset::RangeSet;
use crate::ring::Ring;
use crate::seq::{expand, wire};
use crate::wire::{SackBlock, Sacks};

/// What the receiver keeps for one accepted sequence number.
#[derive(Debug, Default)]
pub(crate) enum RxEntry {
    #[default]
    Empty,
    /// A chunk already copied into its reassembly buffer; its receive buffer is free.
    Placed,
    /// The last segment of a PUT, already written through the glue's `PutTarget`: the
    /// sender's completion (and the PML's FIN behind it) waits for its ACK.
    PutEnd,
    /// A segment that occupies a receive buffer until delivered and reposted.
    Held(Held),
}

#[derive(Debug)]
pub(crate) enum Held {
    Frag {
        tag: u8,
        data: Vec<u8>,
    },
    Put {
        addr: u64,
        offset: u32,
        data: Vec<u8>,
    },
    /// The last chunk of a fragment: delivering it delivers the reassembled fragment.
    FinalChunk {
        frag_id: u32,
    },
}

/// Where an incoming sequence number falls.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Before `nxt`: delivered already (its ACK was probably lost).
    Low,
    /// Beyond the window.
    High,
    /// In the window, already held.
    Dup,
    /// In the window and new, at this internal sequence number.
    New(u64),
}

/// The ring holds `rx_buffers` sequence numbers from `nxt`, not the whole window: the
/// connection accepts nothing at or beyond its grant (`nxt` + `rx_buffers` − buffers the
/// glue still holds), so a slot beyond that is never filled, and the receive side costs
/// a peer 256 entries at the defaults (12 KiB) instead of 4096 (a 1024-rank job held
/// 190 MiB per process in them before sending a byte).
#[derive(Debug)]
pub(crate) struct RecvWindow {
    ring: Ring<RxEntry>,
    window: u64,
    /// Next sequence number to deliver: everything below arrived.
    pub nxt: u64,
    /// Accepted sequence numbers at or above `nxt` (the SACK source).
    ooo: RangeSet,
    /// Entries of kind `Held` at or above `nxt`.
    held: u32,
}

impl RecvWindow {
    pub fn new(window: u16, rx_buffers: u16, start: u64) -> Self {
        RecvWindow {
            ring: Ring::new(usize::from(rx_buffers.min(window))),
            window: u64::from(window),
            nxt: start,
            ooo: RangeSet::default(),
            held: 0,
        }
    }

    pub fn classify(&self, wire_seq: u16) -> Slot {
        let seq = expand(wire_seq, self.nxt);
        if seq < self.nxt {
            Slot::Low
        } else if seq >= self.nxt + self.window {
            Slot::High
        } else if seq >= self.nxt + self.ring.capacity() as u64 {
            // Beyond every grant: never stored, so new; the grant check refuses it.
            Slot::New(seq)
        } else if !matches!(self.ring.get(seq), RxEntry::Empty) {
            Slot::Dup
        } else {
            Slot::New(seq)
        }
    }

    /// Stores an accepted segment. Caller obtained `seq` from `classify` as `New`.
    pub fn store(&mut self, seq: u64, entry: RxEntry) {
        debug_assert!(seq >= self.nxt && seq < self.nxt + self.ring.capacity() as u64);
        if matches!(entry, RxEntry::Held(_)) {
            self.held += 1;
        }
        *self.ring.get_mut(seq) = entry;
        self.ooo.insert(seq);
    }

    /// Takes the entry at `nxt` if it arrived, advancing `nxt`.
    pub fn pop_in_order(&mut self) -> Option<RxEntry> {
        let slot = self.ring.get_mut(self.nxt);
        if matches!(slot, RxEntry::Empty) {
            return None;
        }
        let e = std::mem::take(slot);
        if matches!(e, RxEntry::Held(_)) {
            self.held -= 1;
        }
        self.nxt += 1;
        self.ooo.remove_below(self.nxt);
        Some(e)
    }

    /// Out-of-order data is waiting (there is a hole at `nxt`).
    pub fn has_gaps(&self) -> bool {
        !self.ooo.is_empty()
    }

    /// Span from `nxt` to the highest accepted sequence number, inclusive.
    pub fn span(&self) -> u64 {
        self.ooo.max().map_or(0, |m| m + 1 - self.nxt)
    }

    /// Slots of the ring (introspection: memory per peer).
    pub fn ring_capacity(&self) -> usize {
        self.ring.capacity()
    }

    pub fn held(&self) -> u32 {
        self.held
    }

    /// SACK blocks for the lowest out-of-order ranges (the earliest holes matter most).
    pub fn sacks(&self) -> Sacks {
        let mut s = Sacks::default();
        for r in self.ooo.iter() {
            let len = (r.end - r.start).min(0x8000) as u16;
            if !s.push(SackBlock {
                start: wire(r.start),
                len,
            }) {
                break;
            }
        }
        s
    }
}
