//! Receivers that place PUT data on arrival (`SimConfig::place_puts`): each pair's PUT
//! messages are the regions open for writes, and every write is checked against them
//! (inside a region, the right bytes, each byte once).

use rusnic_core::{Channel, Instant, PutTarget};

use super::{Msg, MsgKind, Pair, Sim, node_id};

/// The receiving side's memory as seen from one sender.
struct PairMemory<'a> {
    msgs: &'a [Msg],
    placed: &'a mut [Vec<bool>],
    /// The first write the checker rejected.
    error: Option<String>,
}

impl PutTarget for PairMemory<'_> {
    fn place(&mut self, addr: u64, data: &[u8]) -> bool {
        let region = self
            .msgs
            .iter()
            .enumerate()
            .find_map(|(k, m)| match m.kind {
                MsgKind::Put { addr: base }
                    if base <= addr && addr + data.len() as u64 <= base + m.data.len() as u64 =>
                {
                    Some((k, (addr - base) as usize))
                }
                _ => None,
            });
        let Some((k, off)) = region else {
            self.error.get_or_insert(format!(
                "PUT of {} bytes at {addr:#x}: outside every region",
                data.len()
            ));
            return false;
        };
        let end = off + data.len();
        if self.msgs[k].data[off..end] != *data {
            self.error
                .get_or_insert(format!("PUT #{k} bytes {off}..{end}: wrong content"));
        } else if self.placed[k][off..end].iter().any(|&b| b) {
            self.error
                .get_or_insert(format!("PUT #{k} bytes {off}..{end}: written twice"));
        }
        self.placed[k][off..end].fill(true);
        true
    }
}

impl Pair {
    fn put_complete(&self, k: usize) -> bool {
        self.placed[k].iter().all(|&b| b)
    }

    /// Moves `received` past leading PUTs whose bytes all landed: in `place_puts` mode
    /// they produce no event, and in-order delivery only promises that a later
    /// delivery (ob1's FIN) comes after them.
    pub(super) fn settle_placed_puts(&mut self) {
        while self
            .msgs
            .get(self.received)
            .is_some_and(|m| matches!(m.kind, MsgKind::Put { .. }))
            && self.put_complete(self.received)
        {
            self.received += 1;
        }
    }

    /// Whether message `k` is a placed PUT (no events; its bytes are tracked instead).
    pub(super) fn is_placed_put(&self, k: usize, place_puts: bool) -> bool {
        place_puts
            && self
                .msgs
                .get(k)
                .is_some_and(|m| matches!(m.kind, MsgKind::Put { .. }))
    }
}

impl Sim {
    /// One datagram `from` → `to`, PUT data placed or queued as events by configuration.
    pub(super) fn receive(
        &mut self,
        now: Instant,
        to: usize,
        from: usize,
        ch: Channel,
        bytes: &[u8],
    ) -> Result<(), String> {
        if !self.cfg.place_puts {
            self.nodes[to]
                .ep
                .handle_datagram(now, ch, Some(node_id(from)), bytes);
            return Ok(());
        }
        let pair = &mut self.pairs[from][to];
        let mut memory = PairMemory {
            msgs: &pair.msgs,
            placed: &mut pair.placed,
            error: None,
        };
        self.nodes[to]
            .ep
            .handle_datagram_into(now, ch, Some(node_id(from)), bytes, &mut memory);
        if let Some(e) = memory.error {
            return Err(format!("seed {}: {from}->{to}: {e}", self.cfg.seed));
        }
        pair.settle_placed_puts();
        Ok(())
    }
}
