//! Which scalable-endpoint context serves which communicator.
//!
//! With `mtl_rofi_enable_sep` and `mtl_rofi_thread_grouping`, communicators are spread
//! over the transmit/receive context pairs of a scalable endpoint, so threads working
//! on different communicators do not contend for one completion queue.
//!
//! A message must arrive at the receive context where the matching receive is posted,
//! so every member of a communicator must agree on its context without talking: the
//! context is a function of the communicator id alone (the same on every member) and of
//! the receiver's context count (published in the modex). A per-process assignment in
//! order of creation (the C MTL's) disagrees between processes that created different
//! communicators before, and the C MTL's `num_ctxts + 2` array indexed by CID overflows
//! as soon as a CID exceeds it; `cid % contexts` does neither.

mod sep;

#[cfg(test)]
mod tests;

pub use sep::{SepError, SepPlan, SepRequest, sep_request};

/// Communicator id → context index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextMap {
    // INVARIANT: >= 1.
    contexts: u32,
}

impl ContextMap {
    /// One context (no scalable endpoint, or one without thread grouping).
    #[must_use]
    pub fn single() -> ContextMap {
        ContextMap { contexts: 1 }
    }

    /// The map of a process that opened the contexts of `plan` (or none: `single`).
    #[must_use]
    pub fn of_plan(plan: Option<&SepPlan>) -> ContextMap {
        ContextMap {
            contexts: plan.map_or(1, SepPlan::contexts_used).max(1),
        }
    }

    /// Contexts this process opens and publishes to its peers.
    #[must_use]
    pub fn num_ctxts(&self) -> u32 {
        self.contexts
    }

    /// This process's context for communicator `cid` (its receives, and the transmit
    /// context of its sends).
    #[must_use]
    pub fn local(&self, cid: u32) -> u32 {
        Self::remote(cid, self.contexts)
    }

    /// The receive context of a peer that published `peer_ctxts` contexts, for a
    /// message on communicator `cid`; equal to that peer's own [`ContextMap::local`].
    #[must_use]
    pub fn remote(cid: u32, peer_ctxts: u32) -> u32 {
        cid % peer_ctxts.max(1)
    }
}
