//! Host matching's state (`crate::host`): the receive buffers of each rail, the matcher
//! with its queues, the order of arrivals, the sends waiting for events, and the work
//! arrivals leave for after the locks. Data only, below the engine that holds it, so
//! that the engine does not depend on the code that drives it.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicBool, AtomicU8};
use std::sync::{Arc, Mutex, MutexGuard};

use mca::convertor::SendBuffer;
use mca::mtl::{Comm, Status};
use rofi_core::hash::FastMap;
use rofi_core::host::send::Legs;
use rofi_core::host::wire::HEADER_LEN;
use rofi_core::host::{Envelope, Matcher, Reorder, Sequencer};

use crate::raw::Owned;
use crate::raw::bounce::Bounces;
use crate::raw::bsend::BsendCopy;
use crate::raw::context::OpContext;
use crate::raw::fabric::Mr;
use crate::raw::procs::Rail;

/// Untagged receive buffers kept posted.
const BOUNCE_COUNT: u32 = 128;

/// Payloads up to this many bytes wait in the queue entry itself.
const KEPT_INLINE: usize = 48;

/// The bytes of an eager message that waits for its receive: in the entry up to
/// [`KEPT_INLINE`] bytes (collectives' and most small messages: no allocation for them),
/// else a copy on the heap.
#[derive(Debug)]
pub enum Kept {
    Inline { len: u8, bytes: [u8; KEPT_INLINE] },
    Heap(Vec<u8>),
}

impl Kept {
    pub fn new(payload: &[u8]) -> Kept {
        if payload.len() <= KEPT_INLINE {
            let mut bytes = [0; KEPT_INLINE];
            bytes[..payload.len()].copy_from_slice(payload);
            Kept::Inline {
                len: payload.len() as u8,
                bytes,
            }
        } else {
            Kept::Heap(payload.to_vec())
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            Kept::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Kept::Heap(v) => v,
        }
    }
}

/// A message that arrived before its receive: what is kept of it.
#[derive(Debug)]
pub enum Arrived {
    Eager {
        payload: Kept,
        sync: Option<u64>,
    },
    Rts {
        len: u64,
        id: u64,
        addr: u64,
        key: u64,
    },
}

impl Arrived {
    pub fn len(&self) -> u64 {
        match self {
            Arrived::Eager { payload, .. } => payload.as_slice().len() as u64,
            Arrived::Rts { len, .. } => *len,
        }
    }
}

/// A message being consumed by a receive.
#[derive(Debug, Clone, Copy)]
pub enum Delivery<'a> {
    Eager {
        payload: &'a [u8],
        sync: Option<u64>,
    },
    Rts {
        len: u64,
        id: u64,
        addr: u64,
        key: u64,
    },
}

impl Delivery<'_> {
    /// What is kept of a message that waits (its payload copied out of the buffer).
    pub fn keep(self) -> Arrived {
        match self {
            Delivery::Eager { payload, sync } => Arrived::Eager {
                payload: Kept::new(payload),
                sync,
            },
            Delivery::Rts { len, id, addr, key } => Arrived::Rts { len, id, addr, key },
        }
    }
}

impl Arrived {
    pub fn delivery(&self) -> Delivery<'_> {
        match *self {
            Arrived::Eager { ref payload, sync } => Delivery::Eager {
                payload: payload.as_slice(),
                sync,
            },
            Arrived::Rts { len, id, addr, key } => Delivery::Rts { len, id, addr, key },
        }
    }
}

/// Eager and Rts messages are numbered per (communicator id, peer process name).
pub type Channel = (u32, u64);

#[derive(Debug, Default)]
pub struct State {
    /// Posted receives are named by their request address.
    pub matcher: Matcher<usize, Arrived>,
    /// Numbers of the messages we send, and the order of those we receive.
    pub sequencer: Sequencer<Channel>,
    pub reorder: Reorder<Channel, (Envelope, Arrived)>,
    pub sends: FastMap<u64, PendingSend>,
    /// Messages taken by MPI_Improbe, by `ompi_message_t` address.
    pub claimed: FastMap<usize, (Envelope, Arrived)>,
}

/// A message that answers a send: it is matched by nothing, only looked up by `id`.
#[derive(Debug, Clone, Copy)]
pub enum Control {
    /// A receive consumed synchronous send `id`.
    Ack(u64),
    /// The data of send `id` was read (or could not be).
    Fin { id: u64, failed: bool },
}

/// Where host matching's handlers put the work they leave for after the locks: a
/// `Vec<Action>`, or the progress loop's own list of deferred work (no list of their own
/// per message).
pub trait Actions {
    fn push(&mut self, action: Action);
}

impl Actions for Vec<Action> {
    fn push(&mut self, action: Action) {
        Vec::push(self, action);
    }
}

/// The work of one delivery (a completion, and an ACK or a read before it) without a
/// list on the heap; a third action and any after it go to `more`.
#[derive(Debug, Default)]
pub struct FewActions {
    first: [Option<Action>; 2],
    more: Vec<Action>,
}

impl Actions for FewActions {
    fn push(&mut self, action: Action) {
        match self.first.iter_mut().find(|a| a.is_none()) {
            Some(free) => *free = Some(action),
            None => self.more.push(action),
        }
    }
}

impl IntoIterator for FewActions {
    type Item = Action;
    type IntoIter = std::iter::Chain<
        std::iter::Flatten<std::array::IntoIter<Option<Action>, 2>>,
        std::vec::IntoIter<Action>,
    >;

    /// In the order they were pushed.
    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().flatten().chain(self.more)
    }
}

/// Work for after the locks.
#[derive(Debug)]
pub enum Action {
    /// Injects an Ack or Fin to `rank` of `comm`.
    Control {
        comm: Comm,
        rank: u32,
        control: Control,
    },
    /// Reads the data of a matched large message into receive `raw`'s buffer.
    Read {
        raw: usize,
        comm: Comm,
        rank: u32,
        len: usize,
        addr: u64,
        key: u64,
    },
    Complete(usize, Status),
    /// A detached send ended: drop what it held (its registration, then rofi's copy of
    /// a buffered send, whose slot of the attached buffer is freed under the PML's
    /// lock, so not under ours).
    Release(Owned<PendingSend>),
}

#[derive(Debug)]
pub struct Host {
    /// Receive buffers, per rail.
    pub bounces: Vec<(Rail, Bounces)>,
    /// Buffers whose re-post met FI_EAGAIN, posted again at the next progress.
    pub unposted: Mutex<Vec<(Rail, u32)>>,
    /// `unposted` is not empty (set under its lock): every progress pass asks, and
    /// almost always the answer is no, without a lock round trip.
    pub any_unposted: AtomicBool,
    state: Mutex<State>,
    pub next_id: AtomicU64,
    /// Payload bytes an eager message carries at most (the rest of a receive buffer).
    pub eager_max: usize,
    /// Messages up to this many bytes (header included) are injected.
    pub inject_size: usize,
}

impl Host {
    /// Receive buffers of `eager_size` bytes (at least the inject size) on each rail;
    /// `None` when the inject size (the smallest of the rails') cannot hold a header
    /// (Rts, Ack and Fin are injected).
    pub fn new(inject_size: usize, eager_size: usize, rails: &[Rail]) -> Option<Host> {
        if inject_size < HEADER_LEN {
            return None;
        }
        let buffer = eager_size.max(inject_size);
        Some(Host {
            bounces: rails
                .iter()
                .map(|&r| (r, Bounces::new(r, BOUNCE_COUNT, buffer)))
                .collect(),
            unposted: Mutex::new(Vec::new()),
            any_unposted: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            next_id: AtomicU64::new(1),
            eager_max: buffer - HEADER_LEN,
            inject_size,
        })
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn bounces(&self, rail: Rail) -> &Bounces {
        &self
            .bounces
            .iter()
            .find(|(r, _)| *r == rail)
            .expect("completions come from rails with buffers")
            .1
    }
}

/// Who hears of a send's end.
#[derive(Debug)]
pub enum Waiter {
    /// A blocking send on its caller's stack: 0 pending, 1 done, 2 failed.
    Local(Arc<AtomicU8>),
    /// A nonblocking send's request.
    Request(usize),
    /// Nobody: a detached send, whose request completed when it was posted. Its end
    /// frees the bytes (after the locks); a failure is only logged.
    Detached,
}

/// The bytes of a send, owned until the provider and the receiver are done with them.
#[derive(Debug)]
pub enum SendBytes {
    /// The user's buffer, or the PML convertor's packed copy of it.
    Packed(SendBuffer),
    /// rofi's own copy of a persistent buffered send (a slot of the attached buffer
    /// or heap memory), freed when dropped.
    Detached(Box<BsendCopy>),
}

impl SendBytes {
    pub fn bytes(&self) -> (*const u8, usize) {
        match self {
            SendBytes::Packed(b) => (b.as_slice().as_ptr(), b.as_slice().len()),
            SendBytes::Detached(c) => c.bytes(),
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            SendBytes::Packed(b) => b.as_slice(),
            SendBytes::Detached(c) => c.as_slice(),
        }
    }
}

#[derive(Debug)]
pub struct PendingSend {
    /// Events still to come: the completion of a sent (not injected) eager message,
    /// an Ack, a Fin.
    pub legs: Legs,
    /// The registration peers read a large message through, closed when it is dropped
    /// (before the bytes below: fields drop in order).
    pub mr: Option<Mr>,
    /// The bytes (the user's, a packed copy or rofi's copy) until the Fin.
    pub bytes: Option<Owned<SendBytes>>,
    /// A sent eager message (header and payload) and its context, until its completion.
    pub message: Option<Owned<(Vec<u8>, Box<OpContext>)>>,
    pub waiter: Waiter,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_payloads_come_back_whole_on_either_side_of_the_inline_size() {
        for len in [0, 1, 8, KEPT_INLINE - 1, KEPT_INLINE, KEPT_INLINE + 1, 4096] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let kept = Kept::new(&payload);
            assert_eq!(matches!(kept, Kept::Inline { .. }), len <= KEPT_INLINE);
            assert_eq!(kept.as_slice(), &payload[..]);
            let arrived = Arrived::Eager {
                payload: kept,
                sync: Some(9),
            };
            assert_eq!(arrived.len(), len as u64);
            let Delivery::Eager {
                payload: back,
                sync,
            } = arrived.delivery()
            else {
                panic!("an eager message comes back eager");
            };
            assert_eq!((back, sync), (&payload[..], Some(9)));
        }
    }

    #[test]
    fn few_actions_keep_the_order_they_were_pushed_in() {
        let status = |count| Status {
            count,
            ..Status::default()
        };
        for n in 0..5 {
            let mut few = FewActions::default();
            for i in 0..n {
                few.push(Action::Complete(i, status(i * 10)));
            }
            let back: Vec<(usize, usize)> = few
                .into_iter()
                .map(|a| match a {
                    Action::Complete(raw, st) => (raw, st.count),
                    other => panic!("unexpected {other:?}"),
                })
                .collect();
            let want: Vec<(usize, usize)> = (0..n).map(|i| (i, i * 10)).collect();
            assert_eq!(back, want);
        }
    }
}
