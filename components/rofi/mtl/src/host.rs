//! Host matching (`rofi_core::host`): rofi matches MPI messages itself and the provider
//! moves untagged messages and RMA reads only. Used for providers whose tag matching
//! is broken (libfabric < 1.19's shm), with `mtl_rofi_host_matching always`, and on
//! both providers when one for on-node peers is opened beside the main one
//! (`crate::local`).
//!
//! Locking: the matcher, pending sends and claimed messages sit under one mutex, taken
//! inside the progress lock (arrivals) or alone (posting); nothing that can progress
//! or call back into the PML runs under it. Such work comes out as [`Action`]s, run
//! after every lock is released.
//!
//! The receiving side (arrivals, matching, reads) is here; the sending side (eager and
//! Rts messages, the pending sends their events finish) is in [`send`]; the state both
//! work on is [`crate::host_state`], which the engine holds.

mod send;

use std::sync::atomic::Ordering;

use mca::convertor::Convertor;
use mca::mtl::{Comm, Status};
use mca::{Error, Result, sys, verbose};
use rofi_core::host::send::Leg;
use rofi_core::host::wire::{self, Message};
use rofi_core::host::{Envelope, Order, Pattern};

use crate::engine::Engine;
use crate::host_state::{Action, Actions, Control, Delivery, FewActions, Host, State};
use crate::raw::context::Event;
use crate::raw::procs::Rail;
use crate::raw::slot::{self, Slot};
use crate::raw::{Owned, message, post};
use crate::request::{HostRecv, Op, Reading, RequestState};
use crate::stats::{Counter, bump};

fn status_of(env: Envelope, len: u64, room: usize) -> Status {
    Status {
        source: env.source as i32,
        tag: env.tag,
        error: if len > room as u64 {
            sys::MPI_ERR_TRUNCATE as i32
        } else {
            0
        },
        cancelled: false,
        count: len.min(room as u64) as usize,
    }
}

impl Engine {
    fn host(&self) -> &Host {
        self.host.as_ref().expect("host matching is on")
    }

    /// Posts every receive buffer (once, after the engine has its final address).
    pub fn host_start(&self) -> Result<()> {
        let h = self.host();
        for (rail, bounces) in &h.bounces {
            let fabric = self.fabric_of(*rail);
            for i in 0..bounces.count() {
                let rc = self.retry(|| bounces.post(fabric, i));
                if rc < 0 {
                    mca::help::show_help(
                        "help-mtl-rofi.txt",
                        "init failed",
                        true,
                        &[&self.provider, &crate::raw::fabric::strerror(rc)],
                    );
                    return Err(Error::ERROR);
                }
            }
        }
        Ok(())
    }

    /// Re-posts buffers an earlier progress could not (FI_EAGAIN).
    pub fn host_repost(&self) {
        let h = self.host();
        if !h.any_unposted.load(Ordering::Acquire) {
            return;
        }
        let mut unposted = h.unposted.lock().unwrap_or_else(|e| e.into_inner());
        unposted.retain(|&(rail, i)| h.bounces(rail).post(self.fabric_of(rail), i) < 0);
        h.any_unposted
            .store(!unposted.is_empty(), Ordering::Release);
    }

    /// One untagged receive buffer of `rail` completed: handle its message, post it
    /// again.
    pub fn host_arrival(&self, rail: Rail, i: u32, ev: Event, out: &mut impl Actions) {
        let h = self.host();
        let bounces = h.bounces(rail);
        match ev {
            Event::Done { len, .. } => {
                self.host_message(bounces.received(i, len as usize), out);
            }
            Event::Failed { err, message, .. } => {
                bump(Counter::Errors);
                verbose!(
                    self.stream,
                    1,
                    "mtl:rofi: host matching: receive buffer {i} failed ({err}): {message}"
                );
            }
        }
        if bounces.post(self.fabric_of(rail), i) < 0 {
            let mut unposted = h.unposted.lock().unwrap_or_else(|e| e.into_inner());
            unposted.push((rail, i));
            h.any_unposted.store(true, Ordering::Release);
        }
    }

    fn host_message(&self, bytes: &[u8], out: &mut impl Actions) {
        let h = self.host();
        let msg = match wire::decode(bytes) {
            Ok(m) => m,
            Err(e) => {
                bump(Counter::Errors);
                verbose!(self.stream, 1, "mtl:rofi: host matching: dropped: {e}");
                return;
            }
        };
        verbose!(self.stream, 50, "mtl:rofi: host matching: arrived {msg:?}");
        let (env, seq, origin, delivery) = match msg {
            Message::Eager {
                env,
                seq,
                origin,
                sync,
                payload,
            } => (env, seq, origin, Delivery::Eager { payload, sync }),
            Message::Rts {
                env,
                seq,
                origin,
                len,
                id,
                addr,
                key,
            } => (env, seq, origin, Delivery::Rts { len, id, addr, key }),
            Message::Ack { id } => return self.host_leg_done(id, Leg::Ack, false, out),
            Message::Fin { id, failed } => return self.host_leg_done(id, Leg::Fin, failed, out),
        };
        let channel = (env.cid, origin);
        let mut st = h.state();
        match st.reorder.order(channel, seq) {
            Order::Stale => {
                bump(Counter::Errors);
                verbose!(
                    self.stream,
                    1,
                    "mtl:rofi: host matching: dropped message {seq} from rank {} (seen)",
                    env.source
                );
            }
            Order::Early => st.reorder.park(channel, seq, (env, delivery.keep())),
            Order::Next => {
                self.host_match(&mut st, env, delivery, out);
                while let Some((env, parked)) = st.reorder.handled(channel) {
                    self.host_match(&mut st, env, parked.delivery(), out);
                }
            }
        }
    }

    /// A message in its turn meets the posted receives (or waits for one).
    fn host_match(&self, st: &mut State, env: Envelope, msg: Delivery<'_>, out: &mut impl Actions) {
        if let Some(raw) = st.matcher.arrive(env, || msg.keep()) {
            self.deliver(raw, env, msg, out);
        }
    }

    /// Receive `raw` (already out of the matcher) consumes a message.
    fn deliver(&self, raw: usize, env: Envelope, msg: Delivery<'_>, out: &mut impl Actions) {
        /// What the receive does next.
        enum Next {
            Complete(Status),
            /// Read this many bytes of the sender's registration.
            Read(usize),
        }
        let (comm, next) = slot::with_state(raw, |st| {
            let Op::HostRecv(r) = &mut st.op else {
                unreachable!("only host receives are matched")
            };
            let buffer = r
                .buffer
                .take()
                .expect("an unmatched receive has its buffer");
            let room = buffer.capacity();
            let next = match msg {
                Delivery::Eager { payload, .. } => {
                    buffer.finish(payload);
                    Next::Complete(status_of(env, payload.len() as u64, room))
                }
                Delivery::Rts { len, id, .. } => {
                    let status = status_of(env, len, room);
                    if status.count == 0 {
                        buffer.finish_in_place(0);
                        Next::Complete(status)
                    } else {
                        r.buffer = Some(buffer);
                        r.reading = Some(Reading {
                            status,
                            rank: env.source,
                            id,
                        });
                        Next::Read(status.count)
                    }
                }
            };
            (r.comm, next)
        });
        let rank = env.source;
        match (msg, next) {
            (Delivery::Rts { addr, key, .. }, Next::Read(len)) => out.push(Action::Read {
                raw,
                comm,
                rank,
                len,
                addr,
                key,
            }),
            (Delivery::Eager { sync, .. }, Next::Complete(status)) => {
                if let Some(id) = sync {
                    let control = Control::Ack(id);
                    out.push(Action::Control {
                        comm,
                        rank,
                        control,
                    });
                }
                out.push(Action::Complete(raw, status));
            }
            // Nothing to read (an empty receive buffer): the sender may go.
            (Delivery::Rts { id, .. }, Next::Complete(status)) => {
                let control = Control::Fin { id, failed: false };
                out.push(Action::Control {
                    comm,
                    rank,
                    control,
                });
                out.push(Action::Complete(raw, status));
            }
            (Delivery::Eager { .. }, Next::Read(_)) => unreachable!("eager data is here"),
        }
    }

    /// The read of receive `raw` (whose state is `st`) completed or failed: finish the
    /// buffer, tell the sender (Fin), complete the receive.
    pub fn host_read_done(&self, raw: usize, st: &mut RequestState, failed: bool) -> Vec<Action> {
        let mut internal = Status {
            error: sys::MPI_ERR_INTERN as i32,
            ..Status::default()
        };
        let Op::HostRecv(r) = &mut st.op else {
            return vec![Action::Complete(raw, internal)];
        };
        let (Some(buffer), Some(reading)) = (r.buffer.take(), r.reading.take()) else {
            return vec![Action::Complete(raw, internal)];
        };
        let mut status = reading.status;
        if failed {
            bump(Counter::Errors);
            internal.source = status.source;
            internal.tag = status.tag;
            status = internal;
        }
        buffer.finish_in_place(status.count);
        vec![
            Action::Control {
                comm: r.comm,
                rank: reading.rank,
                control: Control::Fin {
                    id: reading.id,
                    failed,
                },
            },
            Action::Complete(raw, status),
        ]
    }

    /// Runs what arrivals and matches left for after the locks.
    pub fn host_act(&self, actions: impl IntoIterator<Item = Action>) {
        for a in actions {
            match a {
                Action::Control {
                    comm,
                    rank,
                    control,
                } => {
                    let bytes = match control {
                        Control::Ack(id) => wire::encode_ack(id),
                        Control::Fin { id, failed } => wire::encode_fin(id, failed),
                    };
                    let sent = self
                        .host_dest(comm, rank as i32)
                        .map(|(fabric, to)| self.retry(|| fabric.inject(0, &bytes, to)));
                    match sent {
                        Ok(rc) if rc >= 0 => {
                            if matches!(control, Control::Ack(_)) {
                                bump(Counter::AcksSent);
                            }
                        }
                        _ => {
                            bump(Counter::Errors);
                            verbose!(
                                self.stream,
                                1,
                                "mtl:rofi: host matching: Ack/Fin to rank {rank} failed"
                            );
                        }
                    }
                }
                Action::Read {
                    raw,
                    comm,
                    rank,
                    len,
                    addr,
                    key,
                } => self.post_read(raw, comm, rank, len, addr, key),
                Action::Complete(raw, status) => slot::complete(raw, status),
                Action::Release(pending) => drop(pending),
            }
        }
    }

    fn post_read(&self, raw: usize, comm: Comm, rank: u32, len: usize, addr: u64, key: u64) {
        let (ptr, ctx) = slot::with_state(raw, |st| {
            let ptr = match &st.op {
                Op::HostRecv(HostRecv {
                    buffer: Some(b), ..
                }) => b.as_mut_ptr(),
                _ => std::ptr::null_mut(),
            };
            (ptr, st.data_ctx.as_ptr())
        });
        verbose!(
            self.stream,
            50,
            "mtl:rofi: host matching: reading {len} B at {addr:#x} key {key} from rank {rank}"
        );
        let rc = match self.host_dest(comm, rank as i32) {
            // The receive's buffer has `len` <= capacity writable bytes, and its request
            // (with the context) stays alive until this read's completion. The sender
            // registered its bytes on the rail it sends to us on, which is this one.
            Ok((fabric, src)) if !ptr.is_null() => {
                self.retry(|| post::read(fabric, ptr, len, src, addr, key, ctx))
            }
            _ => -(fabric_sys::FI_EINVAL as isize),
        };
        if rc < 0 {
            verbose!(
                self.stream,
                1,
                "mtl:rofi: host matching: reading {len} bytes from rank {rank} failed: {}",
                crate::raw::fabric::strerror(rc)
            );
            let actions = slot::with_state(raw, |st| self.host_read_done(raw, st, true));
            self.host_act(actions);
        }
    }

    /// Builds a receive's state in `request` (plain or matched-probe) and returns its key.
    fn init_host_recv(&self, comm: Comm, convertor: &mut Convertor, request: Slot) -> usize {
        let raw = request.key();
        let buffer = crate::raw::buffer::receive(convertor);
        request.init(Owned(RequestState::new(
            raw,
            0,
            Op::HostRecv(HostRecv {
                buffer: Some(buffer),
                comm,
                reading: None,
            }),
        )));
        bump(Counter::Recvs);
        raw
    }

    pub fn host_irecv(
        &self,
        comm: Comm,
        src: i32,
        tag: i32,
        convertor: &mut Convertor,
        request: Slot,
    ) -> Result<()> {
        let raw = self.init_host_recv(comm, convertor, request);
        let pattern = Pattern::from_mpi(comm.context_id(), src, tag);
        let matched = self.host().state().matcher.post(pattern, raw);
        if let Some((raw, env, msg)) = matched {
            let mut out = FewActions::default();
            self.deliver(raw, env, msg.delivery(), &mut out);
            self.host_act(out);
        }
        Ok(())
    }

    pub fn host_iprobe(&self, comm: Comm, src: i32, tag: i32) -> Result<Option<Status>> {
        bump(Counter::Probes);
        self.progress();
        let pattern = Pattern::from_mpi(comm.context_id(), src, tag);
        let st = self.host().state();
        Ok(st
            .matcher
            .probe(&pattern)
            .map(|(env, m)| status_of(*env, m.len(), usize::MAX)))
    }

    pub fn host_improbe(
        &self,
        comm: Comm,
        src: i32,
        tag: i32,
    ) -> Result<Option<(*mut sys::ompi_message_t, Status)>> {
        bump(Counter::Probes);
        self.progress();
        let pattern = Pattern::from_mpi(comm.context_id(), src, tag);
        let mut st = self.host().state();
        let Some(status) = st
            .matcher
            .probe(&pattern)
            .map(|(env, m)| status_of(*env, m.len(), usize::MAX))
        else {
            return Ok(None);
        };
        // The handle first: without one the message must stay where it is.
        let handle = message::alloc(comm, status.source, status.count);
        if handle.is_null() {
            return Err(Error::OUT_OF_RESOURCE);
        }
        let claimed = st.matcher.claim(&pattern).expect("probed under this lock");
        st.claimed.insert(handle as usize, claimed);
        Ok(Some((handle, status)))
    }

    pub fn host_imrecv(
        &self,
        convertor: &mut Convertor,
        handle: *mut sys::ompi_message_t,
        request: Slot,
    ) -> Result<()> {
        let Some((env, arrived)) = self.host().state().claimed.remove(&(handle as usize)) else {
            return Err(Error::BAD_PARAM);
        };
        let comm = message::comm(handle);
        message::release(handle);
        let raw = self.init_host_recv(comm, convertor, request);
        let mut out = FewActions::default();
        self.deliver(raw, env, arrived.delivery(), &mut out);
        self.host_act(out);
        Ok(())
    }

    /// Cancels a receive still waiting in the matcher; anything else is left alone.
    pub fn host_cancel(&self, raw: usize) {
        let cancelled = self.host().state().matcher.cancel(|&r| r == raw);
        if cancelled.is_none() {
            return;
        }
        slot::with_state(raw, |st| {
            if let Op::HostRecv(r) = &mut st.op
                && let Some(b) = r.buffer.take()
            {
                b.finish_in_place(0);
            }
        });
        slot::complete(
            raw,
            Status {
                cancelled: true,
                ..Status::default()
            },
        );
    }
}
