//! Sequence numbers per channel, so messages the provider completes out of order are
//! still matched in the order they were sent.
//!
//! A channel is one sender process, communicator id and receiver process (processes,
//! not ranks: a context id freed and reused names another communicator, whose ranks
//! may be other processes, while both ends keep counting the same channel). Eager messages larger than the
//! inject size may be copied by the provider in several steps (shm without CMA, rxm's
//! segmentation) and complete after a later, smaller one; MPI's non-overtaking rule
//! needs the send order back before matching.

use std::collections::BTreeMap;
use std::hash::Hash;

use crate::hash::FastMap;

/// Numbers for the sending side.
#[derive(Debug)]
pub struct Sequencer<K> {
    next: FastMap<K, u32>,
}

impl<K> Default for Sequencer<K> {
    fn default() -> Self {
        Sequencer {
            next: FastMap::default(),
        }
    }
}

impl<K: Hash + Eq> Sequencer<K> {
    /// The number of the next message on `channel` (wrapping).
    pub fn next(&mut self, channel: K) -> u32 {
        let n = self.next.entry(channel).or_insert(0);
        let seq = *n;
        *n = n.wrapping_add(1);
        seq
    }
}

/// Where an arriving message stands on its channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// The one expected: handle it, then call [`Reorder::handled`].
    Next,
    /// Later ones are missing: [`Reorder::park`] it.
    Early,
    /// Already seen (a duplicate, or a broken peer): drop it.
    Stale,
}

#[derive(Debug)]
struct Channel<M> {
    next: u32,
    parked: BTreeMap<u32, M>,
}

/// The receiving side: the next number expected per channel and the messages that
/// came early.
#[derive(Debug)]
pub struct Reorder<K, M> {
    channels: FastMap<K, Channel<M>>,
}

impl<K, M> Default for Reorder<K, M> {
    fn default() -> Self {
        Reorder {
            channels: FastMap::default(),
        }
    }
}

impl<K: Hash + Eq + Copy, M> Reorder<K, M> {
    fn channel(&mut self, key: K) -> &mut Channel<M> {
        self.channels.entry(key).or_insert_with(|| Channel {
            next: 0,
            parked: BTreeMap::new(),
        })
    }

    /// Classifies message `seq` of `channel` (half the number space ahead is early,
    /// the other half behind is stale).
    pub fn order(&mut self, channel: K, seq: u32) -> Order {
        let ahead = seq.wrapping_sub(self.channel(channel).next);
        match ahead {
            0 => Order::Next,
            a if a < 1 << 31 => Order::Early,
            _ => Order::Stale,
        }
    }

    /// Keeps an early message until its turn (a second copy of one number replaces
    /// nothing: the first is kept).
    pub fn park(&mut self, channel: K, seq: u32, msg: M) {
        self.channel(channel).parked.entry(seq).or_insert(msg);
    }

    /// The expected message of `channel` was handled: moves on, and returns the next
    /// one if it came early (handle it, then call this again).
    pub fn handled(&mut self, channel: K) -> Option<M> {
        let c = self.channel(channel);
        c.next = c.next.wrapping_add(1);
        c.parked.remove(&c.next)
    }

    /// Messages parked now, over every channel.
    #[must_use]
    pub fn parked(&self) -> usize {
        self.channels.values().map(|c| c.parked.len()).sum()
    }
}

#[cfg(test)]
impl<K: Hash + Eq + Copy, M> Reorder<K, M> {
    /// Makes `seq` the number `channel` expects next (to test the wrap).
    pub(crate) fn start_at(&mut self, channel: K, seq: u32) {
        self.channel(channel).next = seq;
    }
}
