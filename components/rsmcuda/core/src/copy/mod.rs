//! In-order completion of asynchronous IPC copies (the RGET path).
//!
//! Each `btl_get` issues `cuMemcpyAsync` on the IPC stream and records a CUDA event behind
//! it. Completions are reported to the PML strictly in the order the copies were issued:
//! progress queries only the oldest event and stops at the first one not ready, even if a
//! younger one has finished (copies on one stream finish in order anyway; reporting in
//! order keeps the PML's fragment bookkeeping simple and bounds the work per progress
//! call to the copies actually done).
//!
//! The ring owns a fixed pool of events (created by the glue at init; the C default is
//! `cuda_event_max` = [`DEFAULT_EVENT_MAX`]) and the per-copy token (the fragment). When
//! every event is in flight, [`EventRing::reserve`] reports [`OutOfResource`] and the
//! caller returns `OPAL_ERR_OUT_OF_RESOURCE`, which ob1 retries later.
//!
//! Issuing a copy is two-phase so a failed `cuMemcpyAsync` never consumes a slot:
//! `reserve()` → issue the copy and record `slot.event()` → `slot.commit(token)`. Dropping
//! the slot instead abandons it.

#[cfg(test)]
mod tests;

use std::fmt;

/// Default number of IPC events (`mpi_common_cuda_event_max`).
pub const DEFAULT_EVENT_MAX: usize = 400;

/// Whether a recorded event has completed (`cuEventQuery`: SUCCESS → `Ok(true)`,
/// NOT_READY → `Ok(false)`, anything else → `Err`).
pub trait EventQuery<E> {
    type Error;
    fn query(&mut self, event: &E) -> Result<bool, Self::Error>;
}

/// Every event is in flight; retry after progress has completed some copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfResource;

impl fmt::Display for OutOfResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("out of CUDA IPC events (raise mpi_common_cuda_event_max)")
    }
}

impl std::error::Error for OutOfResource {}

/// A copy reported complete, oldest first.
#[derive(Debug, PartialEq, Eq)]
pub enum Completion<T, Err> {
    Done(T),
    /// The event query failed: the copy's outcome is unknown; report an error for it.
    Failed(T, Err),
}

/// Fixed-capacity FIFO of in-flight copies, each tied to one event of the pool.
#[derive(Debug)]
pub struct EventRing<E, T> {
    events: Vec<E>,
    // INVARIANT: tokens[i] is Some exactly for the `len` slots head, head+1, … (mod
    // capacity); commit fills the slot after them, poll empties the one at head.
    tokens: Vec<Option<T>>,
    head: usize,
    len: usize,
}

/// A reserved slot: record its event after issuing the copy, then commit.
#[derive(Debug)]
pub struct Slot<'a, E, T> {
    ring: &'a mut EventRing<E, T>,
    index: usize,
}

impl<E, T> Slot<'_, E, T> {
    /// The event to record (`cuEventRecord(event, ipc_stream)`) behind the copy.
    #[must_use]
    pub fn event(&self) -> &E {
        &self.ring.events[self.index]
    }

    /// The copy is issued: queue `token` (the fragment) for in-order completion.
    pub fn commit(self, token: T) {
        self.ring.tokens[self.index] = Some(token);
        self.ring.len += 1;
    }
}

impl<E, T> EventRing<E, T> {
    /// A ring with one slot per event of `events`.
    #[must_use]
    pub fn new(events: Vec<E>) -> Self {
        let tokens = events.iter().map(|_| None).collect();
        EventRing {
            events,
            tokens,
            head: 0,
            len: 0,
        }
    }

    #[must_use]
    pub fn capacity(&self) -> usize {
        self.events.len()
    }

    /// Copies in flight.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reserve the next slot, or report that all events are in flight.
    pub fn reserve(&mut self) -> Result<Slot<'_, E, T>, OutOfResource> {
        if self.len == self.capacity() {
            return Err(OutOfResource);
        }
        let index = (self.head + self.len) % self.capacity();
        Ok(Slot { ring: self, index })
    }

    /// Report the oldest copy if its event has completed; `None` while it has not (younger
    /// copies wait behind it) or when nothing is in flight. Call until `None`.
    pub fn poll<Q: EventQuery<E>>(&mut self, q: &mut Q) -> Option<Completion<T, Q::Error>> {
        if self.len == 0 {
            return None;
        }
        let result = q.query(&self.events[self.head]);
        if matches!(result, Ok(false)) {
            return None;
        }
        let token = self.tokens[self.head].take()?;
        self.head = (self.head + 1) % self.capacity();
        self.len -= 1;
        Some(match result {
            Err(e) => Completion::Failed(token, e),
            Ok(_) => Completion::Done(token),
        })
    }

    /// Give the events back for destruction at finalize, with the tokens of copies still
    /// in flight (oldest first) so the glue can fail them.
    #[must_use]
    pub fn into_parts(mut self) -> (Vec<E>, Vec<T>) {
        let cap = self.capacity();
        let pending = (0..self.len)
            .filter_map(|i| self.tokens[(self.head + i) % cap].take())
            .collect();
        (self.events, pending)
    }
}
