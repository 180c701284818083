//! Which scalable-endpoint context serves which communicator.
//!
//! With `mtl_rofi_enable_sep` and `mtl_rofi_thread_grouping`, each communicator gets its
//! own transmit/receive context pair so threads working on different communicators do
//! not contend. Contexts are few (sockets offers 16 per node); communicator ids are not
//! (up to 2^30 and sparse). The C MTL keeps a `num_ctxts + 2` array indexed by CID, which
//! overflows as soon as a CID exceeds it; here the mapping is a map keyed by CID, so no
//! CID can index out of bounds, and contexts are reference-counted so a freed one is
//! reused before any sharing starts.

mod sep;

#[cfg(test)]
mod tests;

pub use sep::{SepError, SepPlan, SepRequest, sep_request};

use std::collections::BTreeMap;
use std::fmt;

/// What the glue must do after [`ContextMap::add_comm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Assignment {
    /// Context index the communicator uses (`fi_tx_context`/`fi_rx_context` index).
    pub ctx: u32,
    /// The context had no user: create it (tx/rx contexts, CQ, enable) now.
    pub create: bool,
    /// First time contexts ran out and sharing began: print the "context limit" warning.
    pub warn_exhausted: bool,
}

/// What the glue must do after [`ContextMap::del_comm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    pub ctx: u32,
    /// That was the last communicator on the context: close it.
    pub destroy: bool,
}

/// Misuse of the map by the glue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextError {
    /// `add_comm` twice for one CID without `del_comm` in between.
    AlreadyMapped { cid: u32, ctx: u32 },
}

impl fmt::Display for ContextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContextError::AlreadyMapped { cid, ctx } => {
                write!(f, "communicator {cid} already uses context {ctx}")
            }
        }
    }
}

impl std::error::Error for ContextError {}

/// Communicator id → context index.
#[derive(Clone, Debug)]
pub struct ContextMap {
    grouping: bool,
    by_cid: BTreeMap<u32, u32>,
    // INVARIANT: users.len() == number of contexts (>= 1) and users[c] == number of
    // entries in by_cid mapping to c; maintained by add_comm/del_comm only.
    users: Vec<u32>,
    next_shared: u32,
    warned: bool,
}

impl ContextMap {
    /// `thread_grouping` off: every communicator shares context 0 (`num_ctxts` is ignored).
    /// On: up to `num_ctxts` (at least 1) private contexts, then round-robin sharing.
    #[must_use]
    pub fn new(thread_grouping: bool, num_ctxts: u32) -> ContextMap {
        let n = if thread_grouping { num_ctxts.max(1) } else { 1 };
        ContextMap {
            grouping: thread_grouping,
            by_cid: BTreeMap::new(),
            users: vec![0; n as usize],
            next_shared: 0,
            warned: false,
        }
    }

    /// Number of contexts this map hands out.
    #[must_use]
    pub fn num_ctxts(&self) -> u32 {
        self.users.len() as u32
    }

    /// Assign a context to a new communicator.
    ///
    /// A context with no user is preferred (lowest index first); when all are in use the
    /// communicators share them round-robin and the first such assignment asks for a
    /// warning.
    pub fn add_comm(&mut self, cid: u32) -> Result<Assignment, ContextError> {
        if let Some(&ctx) = self.by_cid.get(&cid) {
            return Err(ContextError::AlreadyMapped { cid, ctx });
        }
        let mut warn_exhausted = false;
        let ctx = match self.users.iter().position(|&u| u == 0) {
            Some(free) => free as u32,
            None => {
                let c = self.next_shared % self.num_ctxts();
                self.next_shared = self.next_shared.wrapping_add(1);
                warn_exhausted = self.grouping && !self.warned;
                self.warned |= warn_exhausted;
                c
            }
        };
        let create = self.users[ctx as usize] == 0;
        self.users[ctx as usize] += 1;
        self.by_cid.insert(cid, ctx);
        Ok(Assignment {
            ctx,
            create,
            warn_exhausted,
        })
    }

    /// Forget a communicator; `None` if it was never added (e.g. MPI_COMM_SELF, which the
    /// glue may leave on the default context).
    pub fn del_comm(&mut self, cid: u32) -> Option<Release> {
        let ctx = self.by_cid.remove(&cid)?;
        let users = &mut self.users[ctx as usize];
        *users -= 1;
        Some(Release {
            ctx,
            destroy: *users == 0,
        })
    }

    /// The context of a communicator on the data path; unknown CIDs use context 0, which
    /// exists for the whole job (MPI_COMM_WORLD is added first and deleted last).
    #[must_use]
    pub fn context_of(&self, cid: u32) -> u32 {
        self.by_cid.get(&cid).copied().unwrap_or(0)
    }

    /// Communicators currently on context `ctx`.
    #[must_use]
    pub fn users_of(&self, ctx: u32) -> u32 {
        self.users.get(ctx as usize).copied().unwrap_or(0)
    }
}
