//! Datagrams that arrive before their sender is a peer.
//!
//! A process learns of a new peer when the upper layer adds it (for Open MPI, when a
//! communicator that contains it is first used), and its peer may start sending before
//! that: the processes of a job that another job spawned or connected to each add the
//! other at their own pace. Such a datagram carries our key's tag, so it is genuine, but
//! no connection can take it yet. Dropping it is correct for a transport that resends,
//! yet the sender resends only from its own progress calls: Open MPI 5's
//! `MPI_Comm_disconnect` waits in a PMIx fence that makes none, so a sender that went
//! there after its last message would never resend it, and the receiver would wait for
//! it forever. So the first datagrams of each unknown sender are kept, within bounds,
//! and handed to its connection when it is added.

use std::collections::{BTreeMap, VecDeque};

use crate::wire::Channel;

/// Datagrams kept per unknown sender (a first contact: pings and the first messages).
const PER_SENDER: usize = 32;
/// Bytes kept for all unknown senders together.
const TOTAL_BYTES: usize = 4 << 20;
/// Unknown senders remembered at once (the oldest is forgotten first).
const SENDERS: usize = 64;

#[derive(Debug, Default)]
pub(crate) struct EarlyArrivals {
    by_sender: BTreeMap<u64, VecDeque<(Channel, Vec<u8>)>>,
    /// Senders in the order they were first kept, to forget the oldest.
    order: VecDeque<u64>,
    /// Senders first kept since the last [`take_new_senders`](Self::take_new_senders).
    new_senders: Vec<u64>,
    bytes: usize,
}

impl EarlyArrivals {
    /// Keeps a copy of `bytes` from `sender`, or returns false when a bound is reached
    /// (the datagram is then dropped, as before any peer: the sender will resend it).
    pub fn keep(&mut self, sender: u64, channel: Channel, bytes: &[u8]) -> bool {
        if bytes.len() > TOTAL_BYTES {
            return false;
        }
        if !self.by_sender.contains_key(&sender) {
            if self.order.len() >= SENDERS
                && let Some(oldest) = self.order.pop_front()
            {
                self.forget(oldest);
            }
            self.order.push_back(sender);
            self.by_sender.insert(sender, VecDeque::new());
            self.new_senders.push(sender);
        }
        while self.bytes + bytes.len() > TOTAL_BYTES {
            let Some(oldest) = self.order.front().copied() else {
                break;
            };
            if oldest == sender {
                // Only this sender's own datagrams are left to give up: keep the first.
                return false;
            }
            self.order.pop_front();
            self.forget(oldest);
        }
        let Some(queue) = self.by_sender.get_mut(&sender) else {
            return false;
        };
        if queue.len() >= PER_SENDER {
            return false;
        }
        queue.push_back((channel, bytes.to_vec()));
        self.bytes += bytes.len();
        true
    }

    /// Everything kept from `sender`, in arrival order; it is forgotten here.
    pub fn take(&mut self, sender: u64) -> Vec<(Channel, Vec<u8>)> {
        self.order.retain(|&s| s != sender);
        let queue = self.by_sender.remove(&sender).unwrap_or_default();
        self.bytes -= queue.iter().map(|(_, b)| b.len()).sum::<usize>();
        queue.into()
    }

    /// The senders first kept since the last call (each once), oldest first: the upper
    /// layer may be able to add them as peers itself.
    pub fn take_new_senders(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.new_senders)
    }

    fn forget(&mut self, sender: u64) {
        if let Some(queue) = self.by_sender.remove(&sender) {
            self.bytes -= queue.iter().map(|(_, b)| b.len()).sum::<usize>();
        }
    }

    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_senders_are_reported_once_each() {
        let mut early = EarlyArrivals::default();
        assert!(early.take_new_senders().is_empty());
        assert!(early.keep(7, Channel::Priority, b"ping"));
        assert!(early.keep(7, Channel::Data, b"frag"));
        assert!(early.keep(9, Channel::Data, b"other"));
        assert_eq!(early.take_new_senders(), vec![7, 9]);
        assert!(early.keep(7, Channel::Data, b"more"));
        assert!(early.take_new_senders().is_empty());
        // Taken (the peer was added) and heard from again before it was: new again.
        assert_eq!(early.take(9).len(), 1);
        assert!(early.keep(9, Channel::Data, b"again"));
        assert_eq!(early.take_new_senders(), vec![9]);
    }

    #[test]
    fn kept_in_order_and_taken_once() {
        let mut early = EarlyArrivals::default();
        assert!(early.keep(7, Channel::Priority, b"ping"));
        assert!(early.keep(7, Channel::Data, b"frag"));
        assert!(early.keep(8, Channel::Data, b"other"));
        let got = early.take(7);
        assert_eq!(
            got,
            vec![
                (Channel::Priority, b"ping".to_vec()),
                (Channel::Data, b"frag".to_vec())
            ]
        );
        assert!(early.take(7).is_empty());
        assert_eq!(early.bytes(), 5);
        assert_eq!(early.take(8).len(), 1);
        assert_eq!(early.bytes(), 0);
    }

    #[test]
    fn per_sender_bound() {
        let mut early = EarlyArrivals::default();
        for i in 0..PER_SENDER {
            assert!(early.keep(1, Channel::Data, &[i as u8]), "{i}");
        }
        assert!(!early.keep(1, Channel::Data, &[0]));
        assert_eq!(early.take(1).len(), PER_SENDER);
    }

    #[test]
    fn byte_bound_forgets_the_oldest_sender_first() {
        let mut early = EarlyArrivals::default();
        let big = vec![0u8; TOTAL_BYTES / 2];
        assert!(early.keep(1, Channel::Data, &big));
        assert!(early.keep(2, Channel::Data, &big));
        // A third sender's datagram pushes the first sender out, never past the bound.
        assert!(early.keep(3, Channel::Data, &big));
        assert!(early.bytes() <= TOTAL_BYTES);
        assert!(early.take(1).is_empty());
        assert_eq!(early.take(2).len(), 1);
        assert_eq!(early.take(3).len(), 1);
        // One sender never evicts its own first datagrams.
        assert!(early.keep(4, Channel::Data, &big));
        assert!(early.keep(4, Channel::Data, &big));
        assert!(!early.keep(4, Channel::Data, &big));
        assert_eq!(early.take(4).len(), 2);
        assert_eq!(early.bytes(), 0);
    }

    #[test]
    fn sender_bound_forgets_the_oldest() {
        let mut early = EarlyArrivals::default();
        for s in 0..=SENDERS as u64 {
            assert!(early.keep(s, Channel::Priority, b"x"));
        }
        assert!(early.take(0).is_empty());
        assert_eq!(early.take(SENDERS as u64).len(), 1);
        assert_eq!(early.bytes(), SENDERS - 1);
    }
}
