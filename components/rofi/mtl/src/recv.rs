//! MPI_Irecv, MPI_Iprobe, MPI_Improbe + MPI_Mrecv, and cancellation.

use mca::convertor::Convertor;
use mca::mtl::{Comm, Status};
use mca::{Error, Result, sys, verbose};
use rofi_core::sync::{ProbeEvent, ProbeOutcome, RecvPath, complete_probe};

use crate::engine::{Claimed, Engine};
use crate::progress::op_error;
use crate::raw::Owned;
use crate::raw::context::{Event, Leg, LocalOp, OpContext, Target};
use crate::raw::fabric::ADDR_ANY;
use crate::raw::post::{self, Matching};
use crate::raw::slot::Slot;
use crate::raw::{message, slot};
use crate::request::{Op, RequestState, post_failed_status, probe_status};
use crate::stats::{Counter, bump};

const ANY: i32 = -1;

impl Engine {
    fn matching(&self, comm: Comm, src: i32, tag: i32) -> Result<Matching> {
        let source = (src != ANY).then_some(src as u32);
        let tag = (tag != ANY).then(|| self.layout.fold_negative_tag(tag));
        let (bits, ignore) = self
            .layout
            .recv_match(comm.context_id(), source, tag)
            .map_err(|e| {
                bump(Counter::Errors);
                verbose!(self.stream, 1, "mtl:rofi: receive refused: {e}");
                Error::BAD_PARAM
            })?;
        // In the full layout the tag has no source: the provider matches the address.
        let src = if src != ANY && self.layout.source_in_cq_data() {
            self.peer_addr(comm, src)?
        } else {
            ADDR_ANY
        };
        Ok(Matching { bits, ignore, src })
    }

    pub fn irecv(
        &self,
        comm: Comm,
        src: i32,
        tag: i32,
        convertor: &mut Convertor,
        request: Slot,
    ) -> Result<()> {
        if self.host.is_some() {
            return self.host_irecv(comm, src, tag, convertor, request);
        }
        let m = self.matching(comm, src, tag)?;
        let c = self.ctx_of(comm);
        let raw = request.key();
        let buffer = crate::raw::buffer::receive(convertor);
        let (ptr, capacity) = (buffer.as_mut_ptr(), buffer.capacity());
        request.init(Owned(RequestState::new(
            raw,
            c,
            Op::Recv {
                buffer: Some(buffer),
                posted_len: capacity as u64,
                comm,
                path: RecvPath::Recv,
                claim: None,
            },
        )));
        let (ctx, (ptr, capacity)) = slot::with_state(raw, |st| {
            (
                st.data_ctx.as_ptr(),
                st.landing(ptr, capacity, &self.bounce),
            )
        });
        bump(Counter::Recvs);
        let sink = self.sink.map(|s| s.iov());
        let rc = self.retry(|| post::recv(&self.fabric, c, (ptr, capacity), sink, &m, ctx, 0));
        if rc < 0 {
            verbose!(
                self.stream,
                1,
                "mtl:rofi: posting a receive failed: {}",
                crate::raw::fabric::strerror(rc)
            );
            // Not posted: complete it with the error, as a completion would.
            slot::complete(raw, post_failed_status());
        }
        Ok(())
    }

    /// Posts a peek (optionally claiming) and waits for its answer.
    fn peek(
        &self,
        c: u32,
        m: &Matching,
        ctx: &mut OpContext,
        op: &LocalOp,
        flags: u64,
    ) -> Result<Event> {
        bump(Counter::Probes);
        let f = &self.fabric;
        let rc = self.retry(|| {
            post::recv(
                f,
                c,
                (std::ptr::null_mut(), 0),
                None,
                m,
                ctx.as_ptr(),
                flags,
            )
        });
        if rc < 0 {
            return Err(Error::ERROR);
        }
        // The context lives on the caller's stack or heap until this event arrives.
        loop {
            self.wait_pass();
            if let Some(ev) = op.take() {
                return Ok(ev);
            }
        }
    }

    fn probe_event(ev: Event) -> ProbeEvent {
        match ev {
            Event::Done { bits, data, len } => ProbeEvent::Found {
                bits,
                cq_data: data,
                len,
            },
            Event::Failed { err, .. } if err.unsigned_abs() as u64 == fabric_sys::FI_ENOMSG => {
                ProbeEvent::NoMessage
            }
            Event::Failed { err, .. } => ProbeEvent::Failed(err),
        }
    }

    pub fn iprobe(&self, comm: Comm, src: i32, tag: i32) -> Result<Option<Status>> {
        if self.host.is_some() {
            return self.host_iprobe(comm, src, tag);
        }
        let m = self.matching(comm, src, tag)?;
        let op = LocalOp::default();
        let mut ctx = OpContext::new(Target::Local(&op));
        let ev = self.peek(self.ctx_of(comm), &m, &mut ctx, &op, fabric_sys::FI_PEEK)?;
        match complete_probe(&self.layout, None, Self::probe_event(ev)) {
            ProbeOutcome::Found(s) => Ok(Some(probe_status(&s))),
            ProbeOutcome::NotFound | ProbeOutcome::Claimed(_) => Ok(None),
            ProbeOutcome::Failed(e) => {
                verbose!(self.stream, 1, "mtl:rofi: probe failed: {:?}", op_error(e));
                Err(Error::ERROR)
            }
        }
    }

    pub fn improbe(
        &self,
        comm: Comm,
        src: i32,
        tag: i32,
    ) -> Result<Option<(*mut sys::ompi_message_t, Status)>> {
        if self.host.is_some() {
            return self.host_improbe(comm, src, tag);
        }
        let m = self.matching(comm, src, tag)?;
        let op = LocalOp::default();
        // Boxed: a claimed message is received with this very context later.
        let mut ctx = Box::new(OpContext::new(Target::Local(&op)));
        let ev = self.peek(
            self.ctx_of(comm),
            &m,
            &mut ctx,
            &op,
            fabric_sys::FI_PEEK | fabric_sys::FI_CLAIM,
        )?;
        match complete_probe(&self.layout, Some(m.ignore), Self::probe_event(ev)) {
            ProbeOutcome::Claimed(msg) => {
                let s = msg.status();
                let handle = message::alloc(comm, s.source as i32, s.count as usize);
                if handle.is_null() {
                    return Err(Error::OUT_OF_RESOURCE);
                }
                self.claimed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(handle as usize, Owned(Claimed { ctx, message: msg }));
                Ok(Some((handle, probe_status(&s))))
            }
            ProbeOutcome::NotFound | ProbeOutcome::Found(_) => Ok(None),
            ProbeOutcome::Failed(e) => {
                verbose!(self.stream, 1, "mtl:rofi: mprobe failed: {:?}", op_error(e));
                Err(Error::ERROR)
            }
        }
    }

    pub fn imrecv(
        &self,
        convertor: &mut Convertor,
        handle: *mut sys::ompi_message_t,
        request: Slot,
    ) -> Result<()> {
        if self.host.is_some() {
            return self.host_imrecv(convertor, handle, request);
        }
        let Some(Owned(claimed)) = self
            .claimed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(handle as usize))
        else {
            return Err(Error::BAD_PARAM);
        };
        let comm = message::comm(handle);
        message::release(handle);
        // The claimed message waits in the receive context it was peeked on.
        let c = self.ctx_of(comm);
        let raw = request.key();
        let buffer = crate::raw::buffer::receive(convertor);
        let (ptr, capacity) = (buffer.as_mut_ptr(), buffer.capacity());
        let Claimed { mut ctx, message } = claimed;
        ctx.target = Target::Request {
            raw,
            leg: Leg::Data,
        };
        let ctx_ptr = ctx.as_ptr();
        request.init(Owned(RequestState::new(
            raw,
            c,
            Op::Recv {
                buffer: Some(buffer),
                posted_len: capacity as u64,
                comm,
                path: RecvPath::Mrecv(message),
                claim: Some(ctx),
            },
        )));
        let (ptr, capacity) = slot::with_state(raw, |st| st.landing(ptr, capacity, &self.bounce));
        let m = Matching {
            bits: message.bits(),
            ignore: message.ignore_bits(),
            src: ADDR_ANY,
        };
        bump(Counter::Recvs);
        let f = &self.fabric;
        let sink = self.sink.map(|s| s.iov());
        let rc = self.retry(|| {
            post::recv(
                f,
                c,
                (ptr, capacity),
                sink,
                &m,
                ctx_ptr,
                fabric_sys::FI_CLAIM,
            )
        });
        if rc < 0 {
            slot::complete(raw, post_failed_status());
        }
        Ok(())
    }

    /// Cancels a posted receive that has not matched; sends and matched receives are
    /// left alone (MPI_Test_cancelled then reports false).
    pub fn cancel(&self, request: Slot) -> Result<()> {
        if self.host.is_some() {
            self.host_cancel(request.key());
            return Ok(());
        }
        // Every progress lock: no completion of this request can be dispatched while
        // they are held, so a request not yet finishing keeps its state until we are
        // done reading it. (Progress only try-locks; the one blocking holder elsewhere,
        // isend's error path, takes a single lock and waits for nothing under it.)
        let guards: Vec<_> = (0..self.fabric.num_ctxts())
            .map(|c| self.lock_ctx(c))
            .collect();
        let Some(c) = slot::pending_receive_ctx(request.key()) else {
            return Ok(());
        };
        // Only a plain receive is posted with its data context, so naming that address
        // cancels nothing else.
        let rc = self
            .fabric
            .cancel(c, slot::data_context_addr(request.key()));
        drop(guards);
        verbose!(self.stream, 20, "mtl:rofi: cancel: {rc}");
        // A successful cancel completes the receive as cancelled through the CQ.
        self.progress();
        Ok(())
    }
}
