//! The checker: every event against the expected traffic (exactly once, in order, byte
//! exact, completion only after delivery) and every bound after every step.

use rusnic_core::Event;

use super::{MsgKind, Sim, node_id};

impl Sim {
    pub(super) fn on_event(&mut self, node: usize, peer: usize, ev: Event) -> Result<(), String> {
        let seed = self.cfg.seed;
        match ev {
            Event::Deliver { tag, data } => {
                self.nodes[node].owed.push(node_id(peer));
                let place_puts = self.cfg.place_puts;
                let p = &mut self.pairs[peer][node];
                if place_puts {
                    p.settle_placed_puts();
                    if p.is_placed_put(p.received, true) {
                        return Err(format!(
                            "seed {seed}: {peer}->{node}: a delivery overtook PUT #{} before all its bytes landed",
                            p.received
                        ));
                    }
                }
                let Some(m) = p.msgs.get(p.received) else {
                    return Err(format!(
                        "seed {seed}: {peer}->{node}: delivery beyond the last message"
                    ));
                };
                match m.kind {
                    MsgKind::Send { tag: t } if t == tag && m.data == data => {
                        p.received += 1;
                        if place_puts {
                            // PUTs right behind it may have landed already.
                            p.settle_placed_puts();
                        }
                    }
                    _ => {
                        return Err(format!(
                            "seed {seed}: {peer}->{node}: message #{} delivered wrong (tag {tag}, {} bytes, expected {:?} of {} bytes, content equal: {})",
                            p.received,
                            data.len(),
                            m.kind,
                            m.data.len(),
                            m.data == data
                        ));
                    }
                }
            }
            Event::Put {
                remote_addr,
                offset,
                data,
            } => {
                if self.cfg.place_puts {
                    return Err(format!(
                        "seed {seed}: {peer}->{node}: Event::Put although PUTs are placed on arrival"
                    ));
                }
                self.nodes[node].owed.push(node_id(peer));
                let p = &mut self.pairs[peer][node];
                let Some(m) = p.msgs.get(p.received) else {
                    return Err(format!(
                        "seed {seed}: {peer}->{node}: PUT beyond the last message"
                    ));
                };
                let off = offset as usize;
                let ok = matches!(m.kind, MsgKind::Put { addr } if addr == remote_addr)
                    && off == p.put_offset
                    && m.data.get(off..off + data.len()) == Some(&data[..])
                    && (!data.is_empty() || m.data.is_empty());
                if !ok {
                    return Err(format!(
                        "seed {seed}: {peer}->{node}: PUT #{} wrong (offset {offset}, {} bytes, expected {:?} at offset {})",
                        p.received,
                        data.len(),
                        m.kind,
                        p.put_offset
                    ));
                }
                p.put_offset += data.len();
                if p.put_offset == m.data.len() {
                    p.received += 1;
                    p.put_offset = 0;
                }
            }
            Event::SendComplete { id } => {
                let received = self.pairs[node][peer].received;
                let p = &mut self.pairs[node][peer];
                let i = id as usize;
                if i >= p.msgs.len() || p.completed[i] {
                    return Err(format!(
                        "seed {seed}: {node}->{peer}: completion #{id} duplicated or unknown"
                    ));
                }
                let landed = if p.is_placed_put(i, self.cfg.place_puts) {
                    p.placed[i].iter().all(|&b| b)
                } else {
                    received > i
                };
                if !landed {
                    return Err(format!(
                        "seed {seed}: {node}->{peer}: #{id} completed before it was delivered"
                    ));
                }
                p.completed[i] = true;
                p.n_completed += 1;
            }
            Event::SendFailed { id } => {
                if !self.cfg.allow_errors {
                    return Err(format!("seed {seed}: {node}->{peer}: send #{id} failed"));
                }
            }
            Event::PathVerified => self.verified += 1,
            Event::Error(e) => {
                if !self.cfg.allow_errors {
                    return Err(format!("seed {seed}: node {node}: {e}"));
                }
                self.errors.push((node, node_id(peer), e.to_string()));
            }
        }
        Ok(())
    }

    pub(super) fn check_invariants(&self) -> Result<(), String> {
        for (i, n) in self.nodes.iter().enumerate() {
            for c in n.ep.peers() {
                let cfg = c.config();
                let w = u64::from(cfg.window);
                let bad = |what: String| {
                    Err(format!(
                        "seed {}: node {i} peer {:#x}: {what}",
                        self.cfg.seed,
                        c.peer_id()
                    ))
                };
                if c.in_flight() > w {
                    return bad(format!("{} segments in flight > window {w}", c.in_flight()));
                }
                if c.resend_backlog() as u64 > w {
                    return bad(format!("resend backlog {} > window", c.resend_backlog()));
                }
                if c.rx_span() > w {
                    return bad(format!("receive span {} > window", c.rx_span()));
                }
                if c.rx_held() + c.rx_in_glue() > u32::from(cfg.rx_buffers) {
                    return bad(format!(
                        "receive buffers in use {}+{} > rx_buffers {}",
                        c.rx_held(),
                        c.rx_in_glue(),
                        cfg.rx_buffers
                    ));
                }
                let (asm, bytes) = c.reassembly_usage();
                if asm > usize::from(cfg.max_reassemblies)
                    || bytes > usize::from(cfg.max_reassemblies) * cfg.max_fragment_size as usize
                {
                    return bad(format!("reassembly {asm} slots / {bytes} bytes over bound"));
                }
                if c.queued_fragments() > cfg.max_queued_fragments as usize {
                    return bad(format!("{} fragments queued", c.queued_fragments()));
                }
                if !self.cfg.allow_overruns && c.stats().num_rx_overruns > 0 {
                    return bad("receiver overrun: a sender exceeded the granted buffers".into());
                }
            }
        }
        Ok(())
    }
}
