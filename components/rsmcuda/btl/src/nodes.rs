//! Every segment this process uses: the job's own (shared by the local processes of
//! its job) and one per local process of another job it was connected to. Append-only
//! while the module lives, so that progress and the send paths read it without a lock.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::node::Node;

/// Segments one process can use at once: its job's and one per peer of another job.
pub const MAX_SEGMENTS: usize = 1024;

pub struct Nodes {
    slots: Box<[OnceLock<Box<Node>>]>,
    len: AtomicUsize,
}

impl Nodes {
    pub fn new() -> Nodes {
        Nodes {
            slots: (0..MAX_SEGMENTS).map(|_| OnceLock::new()).collect(),
            len: AtomicUsize::new(0),
        }
    }

    /// The index the next node gets (it must be built knowing it: its descriptors
    /// carry it).
    pub fn next_index(&self) -> Option<usize> {
        let i = self.len.load(Ordering::Acquire);
        (i < MAX_SEGMENTS).then_some(i)
    }

    /// Adds a node at [`next_index`](Self::next_index). Callers serialize (add_procs
    /// holds the module's setup lock); readers see it once `len` covers it.
    pub fn push(&self, node: Node) -> Option<usize> {
        let i = self.next_index()?;
        self.slots[i].set(Box::new(node)).ok()?;
        self.len.store(i + 1, Ordering::Release);
        Some(i)
    }

    pub fn get(&self, i: usize) -> Option<&Node> {
        self.slots.get(i)?.get().map(|b| &**b)
    }

    /// The only node, while there is exactly one (the job's segment, in a job that
    /// was never connected to another).
    #[inline]
    pub fn only(&self) -> Option<&Node> {
        if self.len.load(Ordering::Acquire) != 1 {
            return None;
        }
        self.slots[0].get().map(|b| &**b)
    }

    /// Every node so far, with its index.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &Node)> {
        let len = self.len.load(Ordering::Acquire);
        self.slots[..len]
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.get().map(|n| (i, &**n)))
    }
}
