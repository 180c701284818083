//! Who shares which segment, and the bounded meeting of two processes of different jobs.
//!
//! Processes are named by `jobid << 32 | vpid`. The processes of one job on a node share
//! the job's segment (formed from same-job peers only, so every member computes the same
//! set). A process of another job on the same node (spawned, or joined with
//! MPI_Comm_connect/accept) gets a segment of its own with us: two members, created by
//! the lower name, attached by the higher. Both sides list each other in the add_procs of
//! the connect and decide from the same facts (names, fragment sizes), so they agree on
//! the role and on whether to meet at all.
//!
//! The meeting ([`Rendezvous`]) runs inside add_procs: first every segment this process
//! creates is created (never blocks), then it polls, until a deadline, the attaches it
//! makes and the creations whose peer has not attached yet. Because no process waits
//! before it has created everything it creates, every wait is for a peer that only has
//! to *arrive* in add_procs: there is no cycle and every pair settles as soon as both
//! are there. At the deadline what is still pending is given up (the creator closes the
//! door, and an attach that slipped in before counts): both sides then leave the peer
//! unreachable, and ob1 uses another BTL.

use std::time::Duration;

/// The job of a process name.
pub fn jobid(name: u64) -> u32 {
    (name >> 32) as u32
}

/// The side this process takes in the segment it shares with `peer` (of another job).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// The lower name: creates the two-member segment as its rank 0.
    Create,
    /// The higher name: attaches as rank 1.
    Attach,
}

/// `me` and `peer` must differ.
pub fn role(me: u64, peer: u64) -> Role {
    if me < peer {
        Role::Create
    } else {
        Role::Attach
    }
}

/// A local peer as add_procs sees it: its name and, if it published a contact, the
/// fragment sizes (eager, max) it would use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub name: u64,
    pub sizes: Option<(u64, u64)>,
}

/// What add_procs does with its local peers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    /// Same-job peers with a contact: candidates for the job's segment.
    pub job: Vec<u64>,
    /// Peers of other jobs whose sizes equal ours, with our role, ordered by name.
    pub pairs: Vec<(u64, Role)>,
    /// Peers of other jobs with other fragment sizes (they compute the same and stay away).
    pub mismatched: Vec<u64>,
    /// Peers without a contact (rsmcuda not selected there): unreachable.
    pub silent: Vec<u64>,
}

/// Sorts the local peers of one add_procs. Peers in `known` (already met, or given up
/// on) are left out of `pairs`: each pair meets once.
pub fn split(me: u64, my_sizes: (u64, u64), peers: &[Candidate], known: &[u64]) -> Split {
    let mut out = Split::default();
    for c in peers.iter().filter(|c| c.name != me) {
        match c.sizes {
            None => out.silent.push(c.name),
            Some(_) if jobid(c.name) == jobid(me) => out.job.push(c.name),
            Some(_) if known.contains(&c.name) => {}
            Some(s) if s == my_sizes => out.pairs.push((c.name, role(me, c.name))),
            Some(_) => out.mismatched.push(c.name),
        }
    }
    out.pairs.sort_unstable();
    out.pairs.dedup();
    out
}

/// What one poll of a pending meeting found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// Not yet (the segment is not there, or the peer has not attached).
    Waiting,
    /// Met: the segment is shared by both.
    Ready,
    /// A final error (already reported by the poller): unreachable.
    Failed,
}

/// The end of one meeting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ready,
    Failed,
    /// The deadline passed first.
    TimedOut,
}

/// The pending meetings of one add_procs, keyed by `K` (the peer).
#[derive(Debug)]
pub struct Rendezvous<K> {
    items: Vec<(K, Role, Option<Outcome>)>,
    timeout: Duration,
    rounds: u32,
}

impl<K> Rendezvous<K> {
    /// `items` whose segments are created (creator) or to attach to (attacher); they are
    /// given up `timeout` after the start.
    pub fn new(items: impl IntoIterator<Item = (K, Role)>, timeout: Duration) -> Self {
        Rendezvous {
            items: items.into_iter().map(|(k, r)| (k, r, None)).collect(),
            timeout,
            rounds: 0,
        }
    }

    /// Marks `key`'s meeting ended before the first round (its creation failed).
    pub fn settle(&mut self, pick: impl Fn(&K) -> bool, outcome: Outcome) {
        for item in self.items.iter_mut().filter(|i| i.2.is_none()) {
            if pick(&item.0) {
                item.2 = Some(outcome);
            }
        }
    }

    /// True once no meeting is pending.
    pub fn finished(&self) -> bool {
        self.items.iter().all(|i| i.2.is_some())
    }

    /// One round at `elapsed` since the start: `poll` is asked about every pending
    /// meeting. At or past the deadline, every meeting still pending is handed to
    /// `give_up`, which returns whether it was met after all (the creator found the
    /// attach counted when it closed the door). Returns true when everything is settled.
    pub fn round(
        &mut self,
        elapsed: Duration,
        mut poll: impl FnMut(&K, Role) -> Poll,
        mut give_up: impl FnMut(&K, Role) -> bool,
    ) -> bool {
        self.rounds += 1;
        for (key, role, state) in self.items.iter_mut().filter(|i| i.2.is_none()) {
            match poll(key, *role) {
                Poll::Waiting => {}
                Poll::Ready => *state = Some(Outcome::Ready),
                Poll::Failed => *state = Some(Outcome::Failed),
            }
        }
        if elapsed >= self.timeout {
            for (key, role, state) in self.items.iter_mut().filter(|i| i.2.is_none()) {
                *state = Some(if give_up(key, *role) {
                    Outcome::Ready
                } else {
                    Outcome::TimedOut
                });
            }
        }
        self.finished()
    }

    /// How long to sleep before the next round: 50 µs doubling to 5 ms (peers usually
    /// arrive within microseconds to milliseconds of each other).
    pub fn pause(&self) -> Duration {
        let shift = self.rounds.min(7);
        Duration::from_micros(50 << shift).min(Duration::from_millis(5))
    }

    /// Every meeting and how it ended (`TimedOut` for one never given a round).
    pub fn outcomes(self) -> impl Iterator<Item = (K, Role, Outcome)> {
        self.items
            .into_iter()
            .map(|(k, r, s)| (k, r, s.unwrap_or(Outcome::TimedOut)))
    }
}

#[cfg(test)]
mod tests;
