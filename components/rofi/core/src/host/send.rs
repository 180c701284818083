//! The sending side of host matching: how a message goes out, and which events its
//! sender still waits for before the bytes (and the request, if one waits) are done.
//!
//! A send ends when every event its path produces has arrived: the provider's
//! completion of an eager message sent with a completion, the receiver's Ack of a
//! synchronous eager message, the receiver's Fin of a rendezvous (which also serves as
//! the synchronous-send acknowledgement). Injected messages produce none. Who hears of
//! the end (a blocking caller, a request, or nobody for a detached send whose request
//! completed when it was posted) is the glue's business; when the bytes may be released
//! is this module's.

use super::wire::HEADER_LEN;

/// How a host-matched message of `len` payload bytes goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// Header and payload fit the inject size: the provider copies them during the call.
    Inject,
    /// Eager, sent from a copy of header and payload held until its completion.
    Sent,
    /// Rts: the bytes stay registered until the receiver's Fin.
    Rendezvous,
}

impl Path {
    /// The path of `len` payload bytes, with `eager_max` payload bytes fitting a receive
    /// buffer and messages (header included) up to `inject_size` injected.
    pub fn of(len: usize, eager_max: usize, inject_size: usize) -> Path {
        if len > eager_max {
            Path::Rendezvous
        } else if HEADER_LEN + len <= inject_size {
            Path::Inject
        } else {
            Path::Sent
        }
    }
}

/// An event a pending send waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leg {
    /// The provider completed the eager message sent with a completion.
    Completion,
    /// The receiver consumed a synchronous eager message.
    Ack,
    /// The receiver read a rendezvous message's data (or failed to).
    Fin,
}

/// What one event means for its send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// More events are to come; `message_done`: the provider no longer reads the eager
    /// message, which can be freed now.
    Wait { message_done: bool },
    /// The send ended: release everything, tell whoever waits.
    Done { failed: bool },
    /// The send did not wait for this event (a duplicate or a confused peer); ignored.
    Unexpected,
}

/// The events a pending send still waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Legs {
    completion: bool,
    ack: bool,
    fin: bool,
    failed: bool,
}

impl Legs {
    /// The events a send on `path` waits for (`sync`: MPI_Ssend).
    pub fn new(path: Path, sync: bool) -> Legs {
        Legs {
            completion: path == Path::Sent,
            ack: sync && path != Path::Rendezvous,
            fin: path == Path::Rendezvous,
            failed: false,
        }
    }

    /// Whether any event is to come; a send that waits for none ended when posted.
    pub fn waits(&self) -> bool {
        self.completion || self.ack || self.fin
    }

    /// Records `leg` (`failed`: the event reports a failure).
    pub fn on(&mut self, leg: Leg, failed: bool) -> Step {
        let awaited = match leg {
            Leg::Completion => &mut self.completion,
            Leg::Ack => &mut self.ack,
            Leg::Fin => &mut self.fin,
        };
        if !std::mem::take(awaited) {
            return Step::Unexpected;
        }
        self.failed |= failed;
        if self.waits() {
            Step::Wait {
                message_done: leg == Leg::Completion,
            }
        } else {
            Step::Done {
                failed: self.failed,
            }
        }
    }
}
