//! What rofi keeps in the PML's request memory while an operation is outstanding.

use mca::convertor::{ReceiveBuffer, SendBuffer};
use mca::mtl::{Comm, Status};
use mca::sys;
use rofi_core::sync::{ProbeStatus, RecvError, RecvPath, RecvStatus, SendError, SendTracker};

use crate::raw::context::{Leg, OpContext, Target};

/// One request's state. The contexts are handed to libfabric, so this value is built
/// in place in the request memory and never moved while operations are posted.
#[derive(Debug)]
pub struct RequestState {
    /// The endpoint context (scalable endpoints) its operations are posted on.
    pub ctx: u32,
    /// Set under the progress lock once a completion of this request is dispatched
    /// (and before it is delivered): from then on MPI_Cancel must not read the rest.
    pub finishing: std::sync::atomic::AtomicBool,
    pub data_ctx: OpContext,
    pub ack_ctx: OpContext,
    pub op: Op,
    /// Where a receive smaller than the engine's minimum landing size lands instead
    /// of the user's buffer (see `Engine::min_landing`); copied out at completion.
    pub bounce: Option<Vec<u8>>,
}

impl RequestState {
    pub fn new(raw: usize, ctx: u32, op: Op) -> RequestState {
        RequestState {
            ctx,
            finishing: std::sync::atomic::AtomicBool::new(false),
            data_ctx: OpContext::new(Target::Request {
                raw,
                leg: Leg::Data,
            }),
            ack_ctx: OpContext::new(Target::Request { raw, leg: Leg::Ack }),
            op,
            bounce: None,
        }
    }

    /// The buffer to post for a receive of `capacity` bytes at `ptr`: the user's, or a
    /// bounce buffer from `pool` when the user's is smaller than the pool's size.
    pub fn landing(
        &mut self,
        ptr: *mut u8,
        capacity: usize,
        pool: &BouncePool,
    ) -> (*mut u8, usize) {
        if capacity >= pool.size {
            return (ptr, capacity);
        }
        let bounce = self.bounce.insert(pool.take());
        (bounce.as_mut_ptr(), bounce.len())
    }
}

/// Bounce buffers for small receives, reused: the receive path is latency-critical and
/// a fresh zeroed 16 KiB buffer per receive would cost more than the message. Reused
/// contents are never read beyond what the provider wrote in that receive.
#[derive(Debug)]
pub struct BouncePool {
    pub size: usize,
    free: std::sync::Mutex<Vec<Vec<u8>>>,
}

/// Buffers kept for reuse at most (a burst of small receives allocates the rest).
const POOL_KEEP: usize = 256;

impl BouncePool {
    pub fn new(size: usize) -> BouncePool {
        BouncePool {
            size,
            free: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn take(&self) -> Vec<u8> {
        let reused = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        reused.unwrap_or_else(|| vec![0u8; self.size])
    }

    pub fn give(&self, buffer: Vec<u8>) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < POOL_KEEP {
            free.push(buffer);
        }
    }
}

#[derive(Debug)]
pub enum Op {
    Send {
        tracker: SendTracker,
        /// The packed copy (non-contiguous data) or the user's buffer, until the data
        /// completion.
        buffer: Option<SendBuffer>,
    },
    Recv {
        buffer: Option<ReceiveBuffer>,
        posted_len: u64,
        /// Whom to acknowledge a synchronous send to.
        comm: Comm,
        path: RecvPath,
        /// The context a matched-probe receive must reuse (FI_CLAIM), kept alive here.
        claim: Option<Box<OpContext>>,
    },
    /// A host-matched receive (`crate::host`).
    HostRecv(HostRecv),
    /// A host-matched send, completed when its Ack or Fin arrives.
    HostSend,
}

/// A receive rofi matches itself.
#[derive(Debug)]
pub struct HostRecv {
    pub buffer: Option<ReceiveBuffer>,
    pub comm: Comm,
    /// Set once a large message matched and the read of its data is posted.
    pub reading: Option<Reading>,
}

/// What a receive whose data is being read reports when the read completes, and whom
/// it tells (Fin).
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    pub status: Status,
    pub rank: u32,
    pub id: u64,
}

const ANY: i32 = -1;

/// An MPI status from the core's receive status.
pub fn recv_status(s: &RecvStatus) -> Status {
    Status {
        source: s.source.map_or(ANY, |v| v as i32),
        tag: s.tag.unwrap_or(ANY),
        error: match s.error {
            None => 0,
            Some(RecvError::Truncated) => sys::MPI_ERR_TRUNCATE as i32,
            Some(RecvError::Internal(_) | RecvError::MatchedAck) => sys::MPI_ERR_INTERN as i32,
        },
        cancelled: s.cancelled,
        count: s.count as usize,
    }
}

/// The MPI status of a message a probe found (or claimed).
pub fn probe_status(s: &ProbeStatus) -> Status {
    Status {
        source: s.source as i32,
        tag: s.tag,
        error: 0,
        cancelled: false,
        count: s.count as usize,
    }
}

/// The status of an operation that could not even be posted.
pub fn post_failed_status() -> Status {
    Status {
        error: sys::MPI_ERR_INTERN as i32,
        ..Status::default()
    }
}

/// The MPI status of a finished send.
pub fn send_status(r: Result<(), SendError>) -> Status {
    Status {
        error: match r {
            Ok(()) => 0,
            Err(SendError::Truncated) => sys::MPI_ERR_TRUNCATE as i32,
            Err(SendError::Canceled | SendError::Internal(_)) => sys::MPI_ERR_INTERN as i32,
        },
        ..Status::default()
    }
}
