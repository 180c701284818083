//! Host matching's sending side: eager and Rts messages out, and the pending sends their
//! completions, Acks and Fins finish (`rofi_core::host::send` decides the path and the
//! events awaited).
//!
//! A send's bytes are packed from the PML's convertor ([`SendBytes::Packed`]), or are
//! rofi's own copy of a persistent buffered send ([`SendBytes::Detached`], from
//! `raw::bsend`), whose request completed when it was posted: nobody waits for that
//! send, whose end only frees the copy.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use mca::convertor::{Convertor, SendBuffer};
use mca::mtl::{Comm, SendMode, Status};
use mca::{Error, Result, sys, verbose};
use rofi_core::host::Envelope;
use rofi_core::host::send::{Leg, Legs, Path, Step};
use rofi_core::host::wire::{self, HEADER_LEN};

use crate::engine::Engine;
use crate::host_state::{Action, Actions, PendingSend, SendBytes, Waiter};
use crate::raw::bsend;
use crate::raw::context::{Event, OpContext, Target};
use crate::raw::fabric::Fabric;
use crate::raw::slot::{self, Slot};
use crate::raw::{Owned, post, procs};
use crate::request::{Op, RequestState, post_failed_status};
use crate::stats::{Counter, bump};

/// Injected messages up to this many bytes (header included) are built on the stack.
const INLINE_INJECT: usize = 256;

/// What became of a posted send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Posted {
    /// Events are to come (`PendingSend`).
    Waits,
    /// Injected without a synchronous-send Ack: done already.
    Done,
    /// The provider refused it: nothing was sent.
    Failed,
}

impl Engine {
    /// MPI_Send (`request` None, returns when done) and MPI_Isend.
    pub fn host_send(
        &self,
        comm: Comm,
        dest: i32,
        tag: i32,
        convertor: &mut Convertor,
        mode: SendMode,
        request: Option<Slot>,
    ) -> Result<()> {
        let to = self.host_dest(comm, dest)?;
        let buffer = SendBuffer::new(convertor)?;
        if let Some(r) = &request {
            r.init(Owned(RequestState::new(r.key(), 0, Op::HostSend)));
        }
        let sync = mode == SendMode::Synchronous;
        // A blocking send that will wait for events gets a flag to wait on; an isend's
        // request, or a send done when posted (injected), needs none (no allocation).
        let h = self.host();
        let path = Path::of(buffer.as_slice().len(), h.eager_max, h.inject_size);
        let flag = (request.is_none() && Legs::new(path, sync).waits())
            .then(|| Arc::new(AtomicU8::new(0)));
        let waiter = match (&request, &flag) {
            (Some(r), _) => Waiter::Request(r.key()),
            (None, Some(f)) => Waiter::Local(f.clone()),
            (None, None) => Waiter::Detached,
        };
        let posted =
            self.host_post(comm, dest, tag, to, SendBytes::Packed(buffer), sync, waiter)?;
        match (request, posted) {
            (Some(r), Posted::Failed) => slot::complete(r.key(), post_failed_status()),
            (None, Posted::Failed) => return Err(Error::ERROR),
            (Some(r), Posted::Done) => slot::complete(r.key(), Status::default()),
            (Some(_), Posted::Waits) | (None, Posted::Done) => {}
            (None, Posted::Waits) => {
                let Some(flag) = flag else {
                    // The path said it would not wait: a send that does is a defect here.
                    verbose!(
                        self.stream,
                        1,
                        "mtl:rofi: host matching: an unexpected wait"
                    );
                    return Err(Error::ERROR);
                };
                loop {
                    match flag.load(Ordering::Acquire) {
                        0 => self.wait_pass(),
                        1 => break,
                        _ => return Err(Error::ERROR),
                    }
                }
            }
        }
        Ok(())
    }

    /// A persistent buffered send from rofi's own copy (`raw::bsend`): `request`
    /// completes first (`Engine::complete_then_copy`: cm frees its slot before rofi
    /// takes one), so cm finds it PML-complete at the next MPI_Start. The copy lives
    /// until the send ends (the eager message's completion or the rendezvous Fin); an
    /// eager message is a copy of its own, so the copy is freed when it is built. A
    /// post that fails is MPI_Start's error.
    pub fn host_isend_detached(
        &self,
        comm: Comm,
        dest: i32,
        tag: i32,
        packer: bsend::Packer,
        request: Slot,
    ) -> Result<()> {
        let to = self.host_dest(comm, dest)?;
        let raw = request.key();
        request.init(Owned(RequestState::new(raw, 0, Op::HostSend)));
        let bytes = SendBytes::Detached(self.complete_then_copy(raw, packer)?);
        match self.host_post(comm, dest, tag, to, bytes, false, Waiter::Detached) {
            Ok(Posted::Waits | Posted::Done) => Ok(()),
            Ok(Posted::Failed) | Err(_) => Err(Error::ERROR),
        }
    }

    /// Posts `bytes` to `dest` (fabric and address `to`) of `comm`: injected, sent with a
    /// completion or announced by an Rts; a send that waits for events is kept until
    /// they came (`host_leg_done`). `Err` only when nothing was attempted (the
    /// registration failed).
    #[allow(clippy::too_many_arguments)]
    fn host_post(
        &self,
        comm: Comm,
        dest: i32,
        tag: i32,
        to: (&Fabric, u64),
        bytes: SendBytes,
        sync: bool,
        waiter: Waiter,
    ) -> Result<Posted> {
        let h = self.host();
        let (fabric, to) = to;
        let env = Envelope {
            // The id `dest` matches on (each member has its own on a communicator
            // made from a group); the sequence below is kept per that id and peer,
            // as the receiver keeps it per its own id and sender.
            cid: comm.remote_context_id(dest)?,
            source: comm.rank() as u32,
            tag,
        };
        let len = bytes.as_slice().len();
        let id = h.next_id.fetch_add(1, Ordering::Relaxed);
        let path = Path::of(len, h.eager_max, h.inject_size);
        let mut pending = PendingSend {
            legs: Legs::new(path, sync),
            mr: None,
            bytes: None,
            message: None,
            waiter,
        };
        // An eager message carries a copy of the bytes: those are not needed after it
        // is built (dropped at the end, outside the lock).
        let mut spent = None;
        // What to post: bytes to inject, or a message sent with a completion.
        let mut inject = Vec::new();
        let mut sent: Option<(*const u8, usize, *mut OpContext)> = None;
        let mut st = h.state();
        let me = procs::own_name();
        let seq = (
            st.sequencer.next((env.cid, procs::name(comm.peer(dest)))),
            me,
        );
        // A small injected message is laid out on the stack (no allocation).
        let mut inline = [0u8; INLINE_INJECT];
        let mut inline_len = 0;
        match path {
            Path::Inject if HEADER_LEN + len <= INLINE_INJECT => {
                let header = wire::eager_header(env, seq, sync.then_some(id), len);
                inline[..HEADER_LEN].copy_from_slice(&header);
                inline[HEADER_LEN..HEADER_LEN + len].copy_from_slice(bytes.as_slice());
                inline_len = HEADER_LEN + len;
                spent = Some(bytes);
            }
            Path::Inject | Path::Sent => {
                let mut msg = Vec::with_capacity(HEADER_LEN + len);
                wire::encode_eager(env, seq, sync.then_some(id), bytes.as_slice(), &mut msg);
                spent = Some(bytes);
                if path == Path::Inject {
                    inject = msg;
                } else {
                    // Sent from a copy that lives in the pending send until its
                    // completion.
                    let mut ctx = Box::new(OpContext::new(Target::HostSend(id)));
                    sent = Some((msg.as_ptr(), msg.len(), ctx.as_ptr()));
                    pending.message = Some(Owned((msg, ctx)));
                }
            }
            Path::Rendezvous => {
                // The bytes stay valid while the registration exists: both live in the
                // pending send, dropped together (the registration first) at the Fin.
                let mr = post::register(fabric, bytes.bytes(), id).map_err(|e| {
                    bump(Counter::Errors);
                    verbose!(self.stream, 1, "mtl:rofi: host matching: {e}");
                    Error::ERROR
                })?;
                // Offset 0 of the registration (see `Fabric::register`).
                inject = wire::encode_rts(env, seq, len as u64, id, 0, mr.key).to_vec();
                pending.mr = Some(mr);
                pending.bytes = Some(Owned(bytes));
            }
        }
        let waits = pending.legs.waits();
        if waits {
            st.sends.insert(id, pending);
        }
        drop(st);
        drop(spent);
        let rc = match sent {
            Some((ptr, n, ctx)) => {
                bump(Counter::Sends);
                // The message and its context are kept by the pending send until the
                // completion.
                self.retry(|| post::host_send(fabric, ptr, n, to, ctx))
            }
            None => {
                bump(Counter::Injects);
                let message = if inline_len > 0 {
                    &inline[..inline_len]
                } else {
                    &inject[..]
                };
                self.retry(|| fabric.inject(0, message, to))
            }
        };
        if rc < 0 {
            // Nothing went out: no event will come, and the bytes are freed here.
            let failed = h.state().sends.remove(&id);
            drop(failed);
            verbose!(
                self.stream,
                1,
                "mtl:rofi: host matching: send to rank {dest} failed: {}",
                crate::raw::fabric::strerror(rc)
            );
            return Ok(Posted::Failed);
        }
        Ok(if waits { Posted::Waits } else { Posted::Done })
    }

    /// One of send `id`'s awaited events (completion of its eager message, Ack, Fin).
    pub(super) fn host_leg_done(&self, id: u64, leg: Leg, failed: bool, out: &mut impl Actions) {
        let mut st = self.host().state();
        let Some(pending) = st.sends.get_mut(&id) else {
            bump(Counter::Errors);
            verbose!(self.stream, 1, "mtl:rofi: host matching: no send {id}");
            return;
        };
        if leg == Leg::Ack {
            bump(Counter::AcksReceived);
        }
        let failed = match pending.legs.on(leg, failed) {
            Step::Unexpected => {
                bump(Counter::Errors);
                verbose!(
                    self.stream,
                    1,
                    "mtl:rofi: host matching: send {id} did not wait for {leg:?}"
                );
                return;
            }
            // The provider is done with the eager bytes at their completion (an Ack may
            // come before it: completions can be reported late).
            Step::Wait { message_done } => {
                if message_done {
                    pending.message = None;
                }
                return;
            }
            Step::Done { failed } => failed,
        };
        let pending = st.sends.remove(&id).expect("looked up above");
        drop(st);
        match pending.waiter {
            Waiter::Local(ref flag) => flag.store(1 + u8::from(failed), Ordering::Release),
            Waiter::Request(raw) => out.push(Action::Complete(
                raw,
                Status {
                    error: if failed {
                        sys::MPI_ERR_INTERN as i32
                    } else {
                        0
                    },
                    ..Status::default()
                },
            )),
            Waiter::Detached => {
                // Its request completed when it was posted: a failure has no one left
                // to go to (as with any buffered send), so it is logged (and was
                // counted where it was seen: the CQ error or the receiver's read).
                if failed {
                    verbose!(
                        self.stream,
                        1,
                        "mtl:rofi: host matching: buffered send {id} failed after completing"
                    );
                }
                // Freeing a slot of the attached buffer takes the PML's bsend lock:
                // after the progress lock, as on the tagged path.
                out.push(Action::Release(Owned(pending)));
            }
        }
    }

    /// The completion of a sent eager message (`Target::HostSend`).
    pub fn host_sent(&self, id: u64, ev: &Event, out: &mut impl Actions) {
        if let Event::Failed { err, message, .. } = ev {
            verbose!(
                self.stream,
                1,
                "mtl:rofi: host matching: send failed ({err}): {message}"
            );
        }
        let failed = matches!(ev, Event::Failed { .. });
        self.host_leg_done(id, Leg::Completion, failed, out);
    }
}
