//! Reading the completion queue and turning entries into request completions.
//!
//! Entries are handled under the progress lock (the CQ buffer); what calls back into
//! the PML or posts (completing requests, sending synchronous-send ACKs) runs after
//! the lock is released, so a completion callback that re-enters the MTL cannot
//! deadlock on it.

use std::sync::Mutex;

use mca::mtl::{Comm, Status};
use mca::verbose;
use rofi_core::sync::{AckSend, OpError, RecvEvent, SendStep, SendTracker, complete_receive};

use crate::engine::Engine;
use crate::host_state::{Action, Actions};
use crate::raw::Owned;
use crate::raw::context::{Event, Leg, Target, deliver_local, target_of};
use crate::raw::fabric::{ADDR_ANY, CqRead, Entry, Fabric};
use crate::raw::slot;
use crate::request::{Op, recv_status, send_status};
use crate::stats::{Counter, bump};

/// Work left for after the lock.
#[derive(Debug)]
enum Deferred {
    Complete(usize, Status),
    Ack(AckSend, Comm),
    Host(crate::host_state::Action),
    /// A detached buffered send finished: free its copy (`raw::bsend::finish`).
    Detached(usize),
}

thread_local! {
    /// The storage of a drain's deferred list, kept between drains (see `drain`).
    static LATER: std::cell::Cell<Vec<Deferred>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Host matching's work, straight into the drain's deferred list.
struct HostLater<'a>(&'a mut Vec<Deferred>);

impl Actions for HostLater<'_> {
    fn push(&mut self, action: Action) {
        self.0.push(Deferred::Host(action));
    }
}

/// libfabric error number → the core's classification.
pub fn op_error(err: i32) -> OpError {
    match err.unsigned_abs() as u64 {
        e if e == fabric_sys::FI_ETRUNC as u64 => OpError::Truncated,
        e if e == fabric_sys::FI_ECANCELED => OpError::Canceled,
        _ => OpError::Other(err.abs()),
    }
}

impl Engine {
    /// Drains every context's CQ, this thread's first; returns the number of
    /// completions handled. A context another thread is draining is skipped.
    pub fn progress(&self) -> usize {
        if self.host.is_some() {
            self.host_repost();
        }
        let local = self.local.as_ref().map_or(0, |l| {
            let n = self.drain(&l.fabric, 0, &l.cq);
            l.completions
                .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            n
        });
        let n = self.cqs.len() as u32;
        if n == 1 {
            return local + self.progress_ctx(0);
        }
        let first = crate::engine::last_ctx() % n;
        local
            + (0..n)
                .map(|i| self.progress_ctx((first + i) % n))
                .sum::<usize>()
    }

    fn progress_ctx(&self, c: u32) -> usize {
        let handled = self.drain(&self.fabric, c, &self.cqs[c as usize]);
        if handled > 0 {
            self.per_ctx[c as usize].fetch_add(handled, std::sync::atomic::Ordering::Relaxed);
        }
        handled
    }

    /// Reads context `c` of `fabric`'s CQ through `cq`, its read buffer and progress
    /// lock (skipped when another thread holds it), then runs what the entries left.
    fn drain(&self, fabric: &Fabric, c: u32, cq: &Mutex<Owned<Vec<Entry>>>) -> usize {
        let Ok(mut buf) = cq.try_lock() else {
            return 0;
        };
        // This thread's list from its last drain, emptied, so that a drain that finds
        // work allocates nothing; a drain nested in a callback below takes an empty one.
        let mut later = LATER.take();
        let mut handled = 0;
        loop {
            match fabric.cq_read(c, &mut buf.0) {
                CqRead::Entries(n) => {
                    bump(Counter::CqReads);
                    for e in &buf.0[..n] {
                        let ev = Event::Done {
                            bits: e.tag,
                            data: e.data,
                            len: e.len as u64,
                        };
                        self.dispatch(target_of(e.op_context.cast()), ev, &mut later);
                    }
                    handled += n;
                    // A batch that did not fill the buffer has taken everything the
                    // provider had. Reading again to see it empty costs a whole provider
                    // progress pass (on tcp;ofi_rxm a poll of every socket) between a
                    // message's arrival and the return to the waiting MPI call: the stock
                    // MTL reads once per call too, and the next opal_progress reads on.
                    // Host matching keeps draining: its receive buffers are reposted
                    // from what a drain frees, and with one read per call rxd jobs under
                    // load hung far more often (4 of 6 runs of p2p_matching against 1).
                    if n < buf.0.len() && self.host.is_none() {
                        break;
                    }
                }
                CqRead::Error(e) => {
                    bump(Counter::Errors);
                    verbose!(
                        self.stream,
                        10,
                        "mtl:rofi: error completion {}: {}",
                        e.err,
                        e.message
                    );
                    let ev = Event::Failed {
                        err: e.err,
                        bits: e.bits,
                        data: e.data,
                        len: (e.len + e.olen) as u64,
                        message: e.message,
                    };
                    self.dispatch(target_of(e.context), ev, &mut later);
                    handled += 1;
                }
                CqRead::Empty => break,
                CqRead::Failed(why) => {
                    bump(Counter::Errors);
                    verbose!(self.stream, 1, "mtl:rofi: {why}");
                    break;
                }
            }
        }
        drop(buf);
        if later.is_empty() {
            LATER.set(later);
            return handled;
        }
        for d in later.drain(..) {
            match d {
                Deferred::Ack(ack, comm) => self.send_ack(ack, comm),
                Deferred::Complete(raw, status) => slot::complete(raw, status),
                Deferred::Host(a) => self.host_act([a]),
                Deferred::Detached(addr) => crate::raw::bsend::finish(addr),
            }
        }
        LATER.set(later);
        handled
    }

    fn dispatch(&self, target: Option<Target>, ev: Event, later: &mut Vec<Deferred>) {
        match target {
            // An operation posted without a context (none are), or one of the matching
            // probe's (its endpoints are closed before the engine exists): nothing to
            // complete.
            None | Some(Target::Probe) => {}
            Some(Target::Local(op)) => deliver_local(op, ev),
            Some(Target::Detached(addr)) => {
                // Its request completed when it was posted: an error has no one left
                // to go to (as with any buffered send), so it is counted and logged.
                if let Event::Failed { err, message, .. } = &ev {
                    verbose!(
                        self.stream,
                        1,
                        "mtl:rofi: buffered send failed after completing ({err}): {message}"
                    );
                }
                later.push(Deferred::Detached(addr));
            }
            Some(Target::HostSend(id)) => self.host_sent(id, &ev, &mut HostLater(later)),
            Some(Target::Bounce(rail, i)) => self.host_arrival(rail, i, ev, &mut HostLater(later)),
            Some(Target::Request { raw, .. }) if self.host.is_some() => {
                // Host matching posts one kind of operation per request: a read.
                if let Event::Failed { err, message, .. } = &ev {
                    verbose!(
                        self.stream,
                        1,
                        "mtl:rofi: host matching: read failed ({err}): {message}"
                    );
                }
                let failed = matches!(ev, Event::Failed { .. });
                let out = slot::with_state(raw, |st| {
                    st.finishing
                        .store(true, std::sync::atomic::Ordering::Release);
                    self.host_read_done(raw, st, failed)
                });
                later.extend(out.into_iter().map(Deferred::Host));
            }
            Some(Target::Request { raw, leg }) => {
                let (ack, status) = slot::with_state(raw, |st| {
                    let out = self.request_event(st, leg, ev);
                    if out.1.is_some() {
                        st.finishing
                            .store(true, std::sync::atomic::Ordering::Release);
                    }
                    out
                });
                // The ACK goes out before the receive completes, as the sender waits on it.
                if let Some((ack, comm)) = ack {
                    later.push(Deferred::Ack(ack, comm));
                }
                if let Some(status) = status {
                    later.push(Deferred::Complete(raw, status));
                }
            }
        }
    }

    /// Applies one event to a request; returns the ACK to send and the status to
    /// complete it with, both for after the lock.
    fn request_event(
        &self,
        st: &mut crate::request::RequestState,
        leg: Leg,
        ev: Event,
    ) -> (Option<(AckSend, Comm)>, Option<Status>) {
        match &mut st.op {
            Op::Send { tracker, buffer } => {
                let step = send_event(tracker, leg, &ev);
                if leg == Leg::Data {
                    // The provider is done reading the user's (or the packed) bytes.
                    buffer.take();
                }
                match step {
                    SendStep::Wait => (None, None),
                    SendStep::CancelAckRecv => {
                        self.fabric.cancel(st.ctx, st.ack_ctx.as_ptr());
                        (None, None)
                    }
                    SendStep::Complete(r) => (None, Some(send_status(r))),
                }
            }
            Op::Recv {
                buffer,
                posted_len,
                comm,
                path,
                ..
            } => {
                let event = match ev {
                    Event::Done { bits, data, len } => RecvEvent::Completed {
                        bits,
                        cq_data: data,
                        len,
                    },
                    Event::Failed {
                        err,
                        bits,
                        data,
                        len,
                        ..
                    } => RecvEvent::from_error(op_error(err), bits, data, len),
                };
                if let (Some(sink), RecvEvent::Completed { len, .. }) = (self.sink, &event)
                    && len > posted_len
                {
                    // The message ran into the sink: give its pages back.
                    sink.discard(len - *posted_len);
                }
                let done = complete_receive(&self.layout, *path, *posted_len, event);
                let status = recv_status(&done.status);
                if let Some(b) = buffer.take() {
                    if let Some(bounce) = st.bounce.take() {
                        crate::raw::buffer::copy_in(&b, &bounce[..status.count.min(bounce.len())]);
                        self.bounce.give(bounce);
                    }
                    b.finish_in_place(status.count);
                }
                (done.ack.map(|a| (a, *comm)), Some(status))
            }
            // Host-matched requests never reach here (see `dispatch`).
            Op::HostRecv(_) | Op::HostSend => (None, None),
        }
    }

    /// Sends the zero-byte acknowledgement of a synchronous send we received.
    pub fn send_ack(&self, ack: AckSend, comm: Comm) {
        let addr = match self.dest_addr(comm, ack.to_rank as i32) {
            Ok(a) => a,
            Err(_) => {
                bump(Counter::Errors);
                ADDR_ANY
            }
        };
        let c = self.ctx_of(comm);
        let rc = self.retry(|| self.fabric.tinject(c, &[], addr, ack.bits, None));
        if rc < 0 {
            verbose!(
                self.stream,
                1,
                "mtl:rofi: synchronous-send ACK to rank {} failed: {}",
                ack.to_rank,
                crate::raw::fabric::strerror(rc)
            );
        } else {
            bump(Counter::AcksSent);
        }
    }
}

/// Feeds a send leg's event to its tracker.
pub fn send_event(tracker: &mut SendTracker, leg: Leg, ev: &Event) -> SendStep {
    match (leg, ev) {
        (Leg::Data, Event::Done { .. }) => tracker.on_data_complete(),
        (Leg::Data, Event::Failed { err, .. }) => tracker.on_data_error(op_error(*err)),
        (Leg::Ack, Event::Done { .. }) => {
            bump(Counter::AcksReceived);
            tracker.on_ack_complete()
        }
        (Leg::Ack, Event::Failed { err, .. }) => tracker.on_ack_error(op_error(*err)),
    }
}
