//! MPI_Send / MPI_Isend (and their synchronous, buffered and ready variants).

use mca::convertor::{Convertor, SendBuffer};
use mca::mtl::{Comm, SendMode, Status};
use mca::{Error, Result, verbose};
use rofi_core::sync::{
    OpError, SendKind, SendPlan, SendPlanError, SendRequest, SendStep, SendTracker, plan_send,
};

use crate::engine::Engine;
use crate::progress::send_event;
use crate::raw::Owned;
use crate::raw::bsend::{self, BsendCopy};
use crate::raw::context::{Leg, LocalOp, OpContext, Target};
use crate::raw::post;
use crate::raw::slot::{self, Slot};
use crate::request::{Op, RequestState, send_status};
use crate::stats::{Counter, bump};

/// The bytes of a send: where they are and how many. The owner (a `SendBuffer` on the
/// caller's stack or in the request) keeps them alive while the provider may read them.
type Bytes = (*const u8, usize);

fn bytes_of(b: &SendBuffer) -> Bytes {
    (b.as_slice().as_ptr(), b.as_slice().len())
}

/// What both send entry points work out before posting anything.
struct Prepared {
    /// The peer's address for the ACK receive, and for the data.
    from: u64,
    to: u64,
    /// The communicator's context.
    ctx: u32,
    buffer: SendBuffer,
    plan: SendPlan,
}

impl Engine {
    /// Route, context, packed bytes and plan of a send of `kind`.
    fn prepare(
        &self,
        comm: Comm,
        dest: i32,
        tag: i32,
        convertor: &mut Convertor,
        mode: SendMode,
        kind: SendKind,
    ) -> Result<Prepared> {
        let (from, to) = self.route(comm, dest)?;
        let ctx = self.ctx_of(comm);
        let buffer = SendBuffer::new(convertor)?;
        let plan = self.plan(comm, dest, tag, bytes_of(&buffer).1, mode, kind)?;
        Ok(Prepared {
            from,
            to,
            ctx,
            buffer,
            plan,
        })
    }

    fn plan(
        &self,
        comm: Comm,
        dest: i32,
        tag: i32,
        len: usize,
        mode: SendMode,
        kind: SendKind,
    ) -> Result<SendPlan> {
        let req = SendRequest {
            // The id `dest` matches on: on a communicator made from a group (in the
            // MPI Sessions model) each member has its own.
            cid: comm.remote_context_id(dest)?,
            src_rank: comm.rank() as u32,
            // Internal (collective) tags below the layout's range are folded into it;
            // receives fold the same way, so both sides agree.
            tag: self.layout.fold_negative_tag(tag),
            sync: mode == SendMode::Synchronous,
            kind,
            len: len as u64,
        };
        let mut limits = self.limits;
        if kind == SendKind::Nonblocking && !self.isend_inject {
            limits.inject_size = 0;
        }
        plan_send(&self.layout, &limits, &req).map_err(|e| {
            bump(Counter::Errors);
            if let SendPlanError::TooBig { len, max } = e {
                mca::help::show_help(
                    "help-mtl-rofi.txt",
                    "message too big",
                    true,
                    &[&len.to_string(), &max.to_string(), &self.provider],
                );
            } else {
                verbose!(self.stream, 1, "mtl:rofi: send refused: {e}");
            }
            Error::BAD_PARAM
        })
    }

    /// Posts the ACK receive of a synchronous send, before its data so the ACK can
    /// never arrive unexpected.
    fn post_ack_recv(
        &self,
        c: u32,
        from: u64,
        plan: &SendPlan,
        ctx: *mut OpContext,
    ) -> std::result::Result<(), OpError> {
        if let Some(a) = plan.ack_recv {
            let rc = self.retry(|| post::ack_recv(&self.fabric, c, from, a.match_bits, ctx));
            if rc < 0 {
                return Err(OpError::Other(rc.unsigned_abs() as i32));
            }
        }
        Ok(())
    }

    /// Posts the data: injected (no completion) or sent with `ctx`.
    fn post_data(
        &self,
        c: u32,
        addr: u64,
        plan: &SendPlan,
        bytes: Bytes,
        ctx: *mut OpContext,
    ) -> std::result::Result<(), OpError> {
        let rc = if plan.inject {
            bump(Counter::Injects);
            self.retry(|| post::inject(&self.fabric, c, bytes, addr, plan))
        } else {
            bump(Counter::Sends);
            self.retry(|| post::data(&self.fabric, c, bytes, addr, plan, ctx))
        };
        if rc < 0 {
            return Err(OpError::Other(rc.unsigned_abs() as i32));
        }
        Ok(())
    }

    pub fn send(
        &self,
        comm: Comm,
        dest: i32,
        tag: i32,
        convertor: &mut Convertor,
        mode: SendMode,
    ) -> Result<()> {
        if self.host.is_some() {
            return self.host_send(comm, dest, tag, convertor, mode, None);
        }
        let Prepared {
            from,
            to,
            ctx: c,
            buffer,
            plan,
        } = self.prepare(comm, dest, tag, convertor, mode, SendKind::Blocking)?;
        let bytes = bytes_of(&buffer);
        let (data_op, ack_op) = (LocalOp::default(), LocalOp::default());
        let mut data_ctx = OpContext::new(Target::Local(&data_op));
        let mut ack_ctx = OpContext::new(Target::Local(&ack_op));
        let mut tracker = SendTracker::new(&plan);
        let mut step = match self.post_ack_recv(c, from, &plan, ack_ctx.as_ptr()) {
            Err(e) => tracker.on_ack_post_failed(e),
            Ok(()) => match self.post_data(c, to, &plan, bytes, data_ctx.as_ptr()) {
                Err(e) => tracker.on_data_error(e),
                Ok(()) => tracker.after_post(),
            },
        };
        // The buffer and both contexts live on this stack until the tracker has heard
        // from every posted operation, which is when it reports Complete.
        loop {
            match step {
                SendStep::Complete(r) => {
                    drop(buffer);
                    return if send_status(r).error == 0 {
                        Ok(())
                    } else {
                        Err(Error::ERROR)
                    };
                }
                SendStep::CancelAckRecv => {
                    self.fabric.cancel(c, ack_ctx.as_ptr());
                }
                SendStep::Wait => {}
            }
            self.wait_pass();
            step = SendStep::Wait;
            if let Some(ev) = data_op.take() {
                step = send_event(&mut tracker, Leg::Data, &ev);
            }
            if matches!(step, SendStep::Wait)
                && let Some(ev) = ack_op.take()
            {
                step = send_event(&mut tracker, Leg::Ack, &ev);
            }
        }
    }

    pub fn isend(
        &self,
        comm: Comm,
        dest: i32,
        tag: i32,
        convertor: &mut Convertor,
        mode: SendMode,
        request: Slot,
    ) -> Result<()> {
        if mode == SendMode::Buffered
            && self.bsend_copy
            && let Some(user) =
                bsend::persistent_bsend(request.key(), comm.as_ptr(), dest, tag, convertor.as_ptr())
        {
            if let Some(packer) = user.packer() {
                return if self.host.is_some() {
                    self.host_isend_detached(comm, dest, tag, packer, request)
                } else {
                    self.isend_detached(comm, dest, tag, packer, request)
                };
            }
            // The user's data could not be packed: at least send this start's data, not
            // a previous start's.
            if !user.refresh_packed() {
                verbose!(
                    self.stream,
                    1,
                    "mtl:rofi: persistent bsend: repacking failed"
                );
            }
        }
        if self.host.is_some() {
            return self.host_send(comm, dest, tag, convertor, mode, Some(request));
        }
        let Prepared {
            from,
            to,
            ctx: c,
            buffer,
            plan,
        } = self.prepare(comm, dest, tag, convertor, mode, SendKind::Nonblocking)?;
        let bytes = bytes_of(&buffer);
        let raw = request.key();
        // Injected bytes are copied during the call: the buffer stays on this stack.
        // Sent bytes are read until the data completion: the request keeps the buffer
        // (moving the SendBuffer does not move the bytes it points to).
        let (kept, local) = if plan.inject {
            (None, Some(buffer))
        } else {
            (Some(buffer), None)
        };
        request.init(Owned(RequestState::new(
            raw,
            c,
            Op::Send {
                tracker: SendTracker::new(&plan),
                buffer: kept,
            },
        )));
        let (data_ctx, ack_ctx) =
            slot::with_state(raw, |st| (st.data_ctx.as_ptr(), st.ack_ctx.as_ptr()));
        if let Err(e) = self.post_ack_recv(c, from, &plan, ack_ctx) {
            // Nothing is posted: the request is ours alone to complete.
            let step = slot::with_state(raw, |st| match &mut st.op {
                Op::Send { tracker, .. } => tracker.on_ack_post_failed(e),
                Op::Recv { .. } | Op::HostRecv(_) | Op::HostSend => SendStep::Wait,
            });
            if let SendStep::Complete(r) = step {
                slot::complete(raw, send_status(r));
            }
            return Ok(());
        }
        let posted = self.post_data(c, to, &plan, bytes, data_ctx);
        drop(local);
        match posted {
            // Everything was injected: nothing will ever complete, so complete now.
            Ok(()) if plan.inject && plan.ack_recv.is_none() => {
                slot::complete(raw, Status::default());
            }
            // From here on completions own the request: this thread must not touch it.
            Ok(()) => {}
            Err(e) => {
                // Only the ACK receive can be outstanding, and it cannot complete before
                // the data went out; the lock orders this with progress all the same.
                let guard = self.lock_ctx(c);
                let step = slot::with_state(raw, |st| match &mut st.op {
                    Op::Send { tracker, .. } => tracker.on_data_error(e),
                    Op::Recv { .. } | Op::HostRecv(_) | Op::HostSend => SendStep::Wait,
                });
                drop(guard);
                match step {
                    SendStep::Complete(r) => slot::complete(raw, send_status(r)),
                    SendStep::CancelAckRecv => {
                        self.fabric.cancel(c, ack_ctx);
                    }
                    SendStep::Wait => {}
                }
            }
        }
        Ok(())
    }

    /// A persistent buffered send from rofi's own copy (`raw::bsend`). The request
    /// completes first, so cm frees its own slot of the attached buffer before rofi
    /// takes one for the copy (`bsend::complete_then_copy`), and cm finds the request
    /// PML-complete at the next MPI_Start. The copy lives until the provider's
    /// completion (`Target::Detached`); a post that fails is MPI_Start's error.
    fn isend_detached(
        &self,
        comm: Comm,
        dest: i32,
        tag: i32,
        packer: bsend::Packer,
        request: Slot,
    ) -> Result<()> {
        let (to, c) = (self.route(comm, dest)?.1, self.ctx_of(comm));
        let plan = self.plan(
            comm,
            dest,
            tag,
            packer.bytes(),
            SendMode::Buffered,
            SendKind::Nonblocking,
        )?;
        let raw = request.key();
        request.init(Owned(RequestState::new(
            raw,
            c,
            Op::Send {
                tracker: SendTracker::new(&plan),
                buffer: None,
            },
        )));
        let copy = self.complete_then_copy(raw, packer)?;
        let bytes = copy.bytes();
        let posted = if plan.inject {
            // Copied by the provider during the call: the copy is freed on return.
            self.post_data(c, to, &plan, bytes, std::ptr::null_mut())
        } else {
            copy.post(|bytes, ctx| self.post_data(c, to, &plan, bytes, ctx))
        };
        posted.map_err(|_| Error::ERROR)
    }

    /// Completes the request of a persistent buffered send (its state is set), then
    /// packs rofi's copy of the user's data. cm frees its slot of the attached buffer
    /// when the request completes, so the copy can take that room: every message in
    /// flight holds one slot, as the user sized the buffer. (A copy taken while cm's
    /// slot was still held needed room for two: with threads starting at once, the
    /// last MPI_Start of a buffer sized for every message in flight found no room,
    /// MPI_ERR_BUFFER, which 4.1.4 returns without calling the error handler, so its
    /// MPI_Wait hung.)
    pub(crate) fn complete_then_copy(
        &self,
        raw: usize,
        packer: bsend::Packer,
    ) -> Result<Box<BsendCopy>> {
        slot::complete(raw, Status::default());
        packer.copy().ok_or_else(|| {
            verbose!(
                self.stream,
                1,
                "mtl:rofi: persistent bsend: packing the user's data failed"
            );
            Error::ERROR
        })
    }
}
