//! Reassembly of chunked fragments into bounded buffers.
//!
//! Chunks are copied into their fragment's buffer as they arrive, even out of order, so
//! their receive buffer is free at once; the fragment is delivered when in-order delivery
//! reaches its last chunk. At most `max` fragments are in reassembly per peer. A new
//! fragment may take a slot only while two are free, or one is free and the chunk sits at
//! the head of the receive window: the head fragment (the one delivery waits for) can
//! therefore always be reassembled, and later fragments can never starve it. A chunk that
//! finds no slot, or contradicts its slot (size, tag), is dropped without being
//! acknowledged, so the sender's SACK logic or timer sends it again.

use crate::wire::ChunkInfo;

#[derive(Debug)]
struct Slot {
    frag_id: u32,
    frag_size: u32,
    tag: u8,
    buf: Vec<u8>,
    filled: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Placed {
    /// Copied; `last` when this chunk ends the fragment.
    Ok { last: bool },
    /// No reassembly slot may be taken now.
    NoSlot,
    /// Contradicts the fragment already in reassembly under this id.
    Mismatch,
}

/// Delivered buffers smaller than this are not worth keeping for reuse.
const RECYCLE_MIN: usize = 16 * 1024;

#[derive(Debug)]
pub(crate) struct Reassembly {
    slots: Vec<Option<Slot>>,
    /// Buffers of delivered fragments handed back by the glue ([`Reassembly::recycle`]):
    /// reusing them spares a large zeroed allocation (and its page faults) per fragment.
    spare: Vec<Vec<u8>>,
}

impl Reassembly {
    pub fn new(max: u16) -> Self {
        Reassembly {
            slots: (0..max).map(|_| None).collect(),
            spare: Vec::new(),
        }
    }

    /// Keeps a delivered fragment's buffer for a later fragment (at most one per slot).
    /// When all are taken, a larger buffer replaces the smallest one: single-datagram
    /// fragments are handed back too, and must not crowd out the large buffers that
    /// reassembly needs (each fresh one is a zeroed allocation).
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if buf.capacity() < RECYCLE_MIN {
            return;
        }
        if self.spare.len() < self.slots.len() {
            self.spare.push(buf);
            return;
        }
        if let Some(smallest) = self.spare.iter_mut().min_by_key(|b| b.capacity())
            && smallest.capacity() < buf.capacity()
        {
            *smallest = buf;
        }
    }

    /// A buffer of `len` bytes: a recycled one when one is large enough. Its bytes are
    /// either zero or from an earlier fragment of this same connection; `take` hands it
    /// out only once every byte was written by this fragment's chunks.
    fn buffer(&mut self, len: usize) -> Vec<u8> {
        match self.spare.iter().rposition(|b| b.capacity() >= len) {
            Some(i) => {
                let mut b = self.spare.swap_remove(i);
                if b.len() >= len {
                    b.truncate(len);
                } else {
                    b.resize(len, 0);
                }
                b
            }
            None => vec![0; len],
        }
    }

    pub fn active(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// Bytes held in reassembly buffers.
    pub fn bytes(&self) -> usize {
        self.slots.iter().flatten().map(|s| s.buf.len()).sum()
    }

    /// Copies one chunk. `at_head`: the chunk is the next sequence number to deliver.
    pub fn place(&mut self, c: ChunkInfo, tag: u8, data: &[u8], at_head: bool) -> Placed {
        // The decoder guarantees offset + len <= frag_size; keep the invariant local anyway.
        let (off, end) = (c.offset as usize, c.offset as usize + data.len());
        if end > c.frag_size as usize {
            return Placed::Mismatch;
        }
        let idx = match self
            .slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.frag_id == c.frag_id))
        {
            Some(i) => i,
            None => {
                let free = self.slots.len() - self.active();
                if free >= 2 || (free == 1 && at_head) {
                    let i = self.slots.iter().position(Option::is_none).unwrap_or(0);
                    let buf = self.buffer(c.frag_size as usize);
                    self.slots[i] = Some(Slot {
                        frag_id: c.frag_id,
                        frag_size: c.frag_size,
                        tag,
                        buf,
                        filled: 0,
                    });
                    i
                } else {
                    return Placed::NoSlot;
                }
            }
        };
        let Some(slot) = self.slots[idx].as_mut() else {
            return Placed::NoSlot;
        };
        if slot.frag_size != c.frag_size || slot.tag != tag {
            return Placed::Mismatch;
        }
        slot.buf[off..end].copy_from_slice(data);
        slot.filled += data.len() as u64;
        Placed::Ok {
            last: end == c.frag_size as usize,
        }
    }

    /// Removes a fragment; `Some` only when every byte arrived exactly once.
    pub fn take(&mut self, frag_id: u32) -> Option<(u8, Vec<u8>)> {
        let i = self
            .slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.frag_id == frag_id))?;
        let s = self.slots[i].take()?;
        (s.filled == u64::from(s.frag_size)).then_some((s.tag, s.buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ci(frag_id: u32, frag_size: u32, offset: u32) -> ChunkInfo {
        ChunkInfo {
            frag_id,
            frag_size,
            offset,
        }
    }

    #[test]
    fn out_of_order_chunks_reassemble() {
        let mut r = Reassembly::new(2);
        assert_eq!(
            r.place(ci(5, 6, 4), 9, b"ef", true),
            Placed::Ok { last: true }
        );
        assert_eq!(
            r.place(ci(5, 6, 0), 9, b"ab", false),
            Placed::Ok { last: false }
        );
        assert_eq!(r.take(5), None, "incomplete: removed and refused");
        assert_eq!(
            r.place(ci(5, 6, 0), 9, b"ab", true),
            Placed::Ok { last: false }
        );
        assert_eq!(
            r.place(ci(5, 6, 2), 9, b"cd", false),
            Placed::Ok { last: false }
        );
        assert_eq!(
            r.place(ci(5, 6, 4), 9, b"ef", false),
            Placed::Ok { last: true }
        );
        assert_eq!(r.take(5), Some((9, b"abcdef".to_vec())));
        assert_eq!(r.active(), 0);
    }

    #[test]
    fn head_reservation_and_mismatch() {
        let mut r = Reassembly::new(2);
        assert_eq!(
            r.place(ci(1, 10, 0), 0, b"x", false),
            Placed::Ok { last: false }
        );
        // One slot left: only the head may take it.
        assert_eq!(r.place(ci(2, 10, 0), 0, b"x", false), Placed::NoSlot);
        assert_eq!(
            r.place(ci(2, 10, 0), 0, b"x", true),
            Placed::Ok { last: false }
        );
        assert_eq!(r.place(ci(3, 10, 0), 0, b"x", true), Placed::NoSlot);
        assert_eq!(r.place(ci(1, 11, 1), 0, b"x", false), Placed::Mismatch);
        assert_eq!(r.place(ci(1, 10, 1), 7, b"x", false), Placed::Mismatch);
        assert_eq!(r.place(ci(1, 10, 9), 0, b"xy", false), Placed::Mismatch);
        assert_eq!(r.bytes(), 20);
    }

    #[test]
    fn recycled_buffers_are_reused_and_fully_overwritten() {
        let mut r = Reassembly::new(2);
        let big = vec![7u8; RECYCLE_MIN + 10];
        let n = big.len() as u32;
        assert_eq!(
            r.place(ci(1, n, 0), 3, &big, true),
            Placed::Ok { last: true }
        );
        let (_, buf) = r.take(1).unwrap();
        let ptr = buf.as_ptr();
        r.recycle(buf);
        r.recycle(vec![0; 8]); // too small to keep
        assert_eq!(r.spare.len(), 1);
        let small: Vec<u8> = (0..RECYCLE_MIN as u32).map(|i| i as u8).collect();
        let m = small.len() as u32;
        assert_eq!(
            r.place(ci(2, m, 0), 4, &small, true),
            Placed::Ok { last: true }
        );
        let (tag, got) = r.take(2).unwrap();
        assert_eq!(
            (tag, got.as_ptr()),
            (4, ptr),
            "the recycled buffer was reused"
        );
        assert_eq!(got, small);
        assert!(r.spare.is_empty());
    }

    #[test]
    fn large_spare_buffers_are_not_crowded_out_by_small_ones() {
        let mut r = Reassembly::new(2);
        r.recycle(vec![0; RECYCLE_MIN]);
        r.recycle(vec![0; RECYCLE_MIN + 1]);
        r.recycle(vec![0; 4 * RECYCLE_MIN]);
        r.recycle(vec![0; RECYCLE_MIN]);
        let mut caps: Vec<usize> = r.spare.iter().map(Vec::capacity).collect();
        caps.sort_unstable();
        assert_eq!(caps, vec![RECYCLE_MIN + 1, 4 * RECYCLE_MIN]);
    }
}
