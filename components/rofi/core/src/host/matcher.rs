//! Posted receives against unexpected messages, both in arrival order.

use std::collections::VecDeque;

/// `MPI_ANY_SOURCE` and `MPI_ANY_TAG` as Open MPI passes them.
pub const ANY: i32 = -1;

/// Where a message comes from and what it is tagged with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Envelope {
    /// Communicator context id (the same in every member under pml cm).
    pub cid: u32,
    /// The sender's rank in that communicator.
    pub source: u32,
    /// The MPI tag; negative tags are Open MPI's internal (collective) traffic.
    pub tag: i32,
}

/// What a receive or probe accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern {
    pub cid: u32,
    /// `None`: any source.
    pub source: Option<u32>,
    /// `None`: any tag that is not negative.
    pub tag: Option<i32>,
}

impl Pattern {
    /// The pattern of an MPI receive on communicator `cid` (`ANY` for either wildcard).
    /// Negative sources other than `ANY` cannot name a rank and match nothing.
    #[must_use]
    pub fn from_mpi(cid: u32, source: i32, tag: i32) -> Pattern {
        Pattern {
            cid,
            source: (source != ANY).then(|| u32::try_from(source).unwrap_or(u32::MAX)),
            tag: (tag != ANY).then_some(tag),
        }
    }

    #[must_use]
    pub fn matches(&self, e: &Envelope) -> bool {
        self.cid == e.cid
            && self.source.is_none_or(|s| s == e.source)
            // MPI_ANY_TAG never takes internal traffic (negative tags).
            && self.tag.map_or(e.tag >= 0, |t| t == e.tag)
    }
}

/// MPI matching state of one process: receives waiting for a message (`R`, the
/// request) and messages waiting for a receive (`M`, what was kept of them).
#[derive(Debug)]
pub struct Matcher<R, M> {
    posted: VecDeque<(Pattern, R)>,
    unexpected: VecDeque<(Envelope, M)>,
}

impl<R, M> Default for Matcher<R, M> {
    fn default() -> Self {
        Matcher {
            posted: VecDeque::new(),
            unexpected: VecDeque::new(),
        }
    }
}

impl<R, M> Matcher<R, M> {
    /// A receive is posted: it takes the oldest unexpected message it fits (handed
    /// back with the receive), or waits for one.
    pub fn post(&mut self, pattern: Pattern, recv: R) -> Option<(R, Envelope, M)> {
        match self.claim(&pattern) {
            Some((env, msg)) => Some((recv, env, msg)),
            None => {
                self.posted.push_back((pattern, recv));
                None
            }
        }
    }

    /// A message arrived: the oldest posted receive it fits takes it, or `keep` makes
    /// what is queued of it (called only when nothing matches).
    pub fn arrive(&mut self, env: Envelope, keep: impl FnOnce() -> M) -> Option<R> {
        match self.posted.iter().position(|(p, _)| p.matches(&env)) {
            Some(i) => self.posted.remove(i).map(|(_, r)| r),
            None => {
                self.unexpected.push_back((env, keep()));
                None
            }
        }
    }

    /// The oldest unexpected message `pattern` fits, left queued (MPI_Iprobe).
    #[must_use]
    pub fn probe(&self, pattern: &Pattern) -> Option<(&Envelope, &M)> {
        self.unexpected
            .iter()
            .find(|(e, _)| pattern.matches(e))
            .map(|(e, m)| (e, m))
    }

    /// The oldest unexpected message `pattern` fits, removed (MPI_Improbe).
    pub fn claim(&mut self, pattern: &Pattern) -> Option<(Envelope, M)> {
        let i = self
            .unexpected
            .iter()
            .position(|(e, _)| pattern.matches(e))?;
        self.unexpected.remove(i)
    }

    /// Removes the posted receive `is` selects (MPI_Cancel); `None` when it already
    /// matched (or was never posted).
    pub fn cancel(&mut self, is: impl Fn(&R) -> bool) -> Option<R> {
        let i = self.posted.iter().position(|(_, r)| is(r))?;
        self.posted.remove(i).map(|(_, r)| r)
    }

    /// `(posted receives, unexpected messages)` now queued.
    #[must_use]
    pub fn queued(&self) -> (usize, usize) {
        (self.posted.len(), self.unexpected.len())
    }
}

#[cfg(test)]
impl<R, M> Matcher<R, M> {
    pub(crate) fn posted_for_tests(&self) -> impl Iterator<Item = &(Pattern, R)> {
        self.posted.iter()
    }

    pub(crate) fn unexpected_for_tests(&self) -> impl Iterator<Item = &(Envelope, M)> {
        self.unexpected.iter()
    }
}
