//! Planning a send and tracking it to completion.

use std::fmt;

use crate::tag::{TagError, TagLayout};

/// Whether the PML waits in the call (MPI_Send) or gets a request back (MPI_Isend).
///
/// Both inject a message that fits `inject_size`: `fi_tinject` returns with the buffer
/// reusable, so a nonblocking request may complete before isend returns, which MPI
/// allows. The C MTL injects only in blocking sends and pays a CQ entry per small isend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendKind {
    Blocking,
    Nonblocking,
}

/// The exact-match receive a synchronous sender posts for its acknowledgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckRecv {
    pub match_bits: u64,
    /// Always 0: every bit must match, so no other message can satisfy it.
    pub ignore_bits: u64,
}

/// Everything the glue needs to post one send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendPlan {
    /// Tag of the data message (SYNC_SEND set for synchronous sends).
    pub bits: u64,
    /// Remote CQ data (`fi_tsenddata`/`fi_tinjectdata`); `None`: plain `fi_tsend`.
    pub cq_data: Option<u64>,
    /// Use `fi_tinject[data]`: no completion entry will come for the data.
    pub inject: bool,
    /// Post this receive (directed at the destination) *before* the data.
    pub ack_recv: Option<AckRecv>,
}

/// A send that cannot be posted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendPlanError {
    Tag(TagError),
    /// Larger than the provider's `max_msg_size`.
    TooBig {
        len: u64,
        max: u64,
    },
}

impl fmt::Display for SendPlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendPlanError::Tag(e) => e.fmt(f),
            SendPlanError::TooBig { len, max } => write!(
                f,
                "message of {len} bytes exceeds the provider's maximum message size {max}"
            ),
        }
    }
}

impl std::error::Error for SendPlanError {}

/// One send as the PML asked for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendRequest {
    /// Communicator id.
    pub cid: u32,
    /// The sender's own rank in that communicator.
    pub src_rank: u32,
    pub tag: i32,
    /// `MPI_Ssend`/`MPI_Issend`.
    pub sync: bool,
    pub kind: SendKind,
    /// Packed length in bytes.
    pub len: u64,
}

/// Provider limits that shape a send (from the chosen `fi_info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendLimits {
    /// `tx_attr->inject_size`, or 0: every send posted with a completion.
    pub inject_size: u64,
    /// `ep_attr->max_msg_size`.
    pub max_msg_size: u64,
}

/// Plan one send: its tag, CQ data, whether to inject, and the ACK receive to post first.
pub fn plan_send(
    layout: &TagLayout,
    limits: &SendLimits,
    req: &SendRequest,
) -> Result<SendPlan, SendPlanError> {
    if req.len > limits.max_msg_size {
        return Err(SendPlanError::TooBig {
            len: req.len,
            max: limits.max_msg_size,
        });
    }
    let bits = layout
        .send_bits(req.cid, req.src_rank, req.tag, req.sync)
        .map_err(SendPlanError::Tag)?;
    Ok(SendPlan {
        bits,
        cq_data: layout.cq_data(req.src_rank),
        // An inject size of 0 means no inject at all, 0-byte messages included.
        inject: limits.inject_size > 0 && req.len <= limits.inject_size,
        ack_recv: req.sync.then(|| AckRecv {
            match_bits: layout.ack_match_bits(bits),
            ignore_bits: 0,
        }),
    })
}

/// How a libfabric operation failed (the glue maps `fi_cq_err_entry.err`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpError {
    /// FI_ETRUNC.
    Truncated,
    /// FI_ECANCELED.
    Canceled,
    /// Any other (positive) libfabric error number.
    Other(i32),
}

/// Final error of a send request (→ MPI_ERR_TRUNCATE / MPI_ERR_INTERN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    Truncated,
    /// The provider cancelled an operation we did not ask to cancel; sends are not
    /// cancellable in this MTL, so the glue reports MPI_ERR_INTERN.
    Canceled,
    /// Any other libfabric error number.
    Internal(i32),
}

impl From<OpError> for SendError {
    fn from(e: OpError) -> Self {
        match e {
            OpError::Truncated => SendError::Truncated,
            OpError::Canceled => SendError::Canceled,
            OpError::Other(n) => SendError::Internal(n),
        }
    }
}

/// What the glue must do after feeding an event to a [`SendTracker`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendStep {
    /// Nothing yet.
    Wait,
    /// The data failed while the ACK receive is still posted: `fi_cancel` it. The request
    /// completes when the ACK receive reports (cancelled or not), so its context is never
    /// freed under the provider.
    CancelAckRecv,
    /// The request is complete: call the PML's completion callback. Returned exactly once.
    Complete(Result<(), SendError>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Leg {
    NotNeeded,
    Pending,
    Cancelling,
    Done,
}

/// Completion state of one send request: its data leg and, for a synchronous send, its
/// acknowledgement leg. Order of the two events does not matter.
#[derive(Clone, Copy, Debug)]
pub struct SendTracker {
    data: Leg,
    ack: Leg,
    error: Option<SendError>,
    reported: bool,
}

impl SendTracker {
    /// Track a send posted according to `plan` (ACK receive first, then the data).
    #[must_use]
    pub fn new(plan: &SendPlan) -> SendTracker {
        SendTracker {
            data: if plan.inject { Leg::Done } else { Leg::Pending },
            ack: if plan.ack_recv.is_some() {
                Leg::Pending
            } else {
                Leg::NotNeeded
            },
            error: None,
            reported: false,
        }
    }

    /// The step to report right after posting: an injected non-synchronous send is
    /// already complete.
    pub fn after_post(&mut self) -> SendStep {
        self.settle()
    }

    /// The data's CQ entry arrived.
    pub fn on_data_complete(&mut self) -> SendStep {
        if self.data == Leg::Pending {
            self.data = Leg::Done;
        }
        self.settle()
    }

    /// The data failed, in its CQ error entry or when posting it.
    pub fn on_data_error(&mut self, e: OpError) -> SendStep {
        if self.data != Leg::Pending {
            return SendStep::Wait;
        }
        self.data = Leg::Done;
        self.error.get_or_insert(e.into());
        if self.ack == Leg::Pending {
            self.ack = Leg::Cancelling;
            return SendStep::CancelAckRecv;
        }
        self.settle()
    }

    /// The acknowledgement arrived.
    pub fn on_ack_complete(&mut self) -> SendStep {
        if matches!(self.ack, Leg::Pending | Leg::Cancelling) {
            self.ack = Leg::Done;
        }
        self.settle()
    }

    /// The acknowledgement receive failed or was cancelled (also: posting it failed, in
    /// which case the glue must not post the data and calls this instead).
    pub fn on_ack_error(&mut self, e: OpError) -> SendStep {
        match self.ack {
            Leg::Cancelling => {}
            Leg::Pending => {
                self.error.get_or_insert(e.into());
            }
            Leg::NotNeeded | Leg::Done => return SendStep::Wait,
        }
        self.ack = Leg::Done;
        self.settle()
    }

    /// Posting the ACK receive failed: the data was never posted.
    pub fn on_ack_post_failed(&mut self, e: OpError) -> SendStep {
        if self.data == Leg::Pending {
            self.data = Leg::Done;
        }
        self.on_ack_error(e)
    }

    /// Whether the request is complete (and was reported as such).
    #[must_use]
    pub fn is_complete(&self) -> bool {
        self.reported
    }

    fn settle(&mut self) -> SendStep {
        let busy = |l: Leg| matches!(l, Leg::Pending | Leg::Cancelling);
        if self.reported || busy(self.data) || busy(self.ack) {
            return SendStep::Wait;
        }
        // INVARIANT: `reported` flips once, so Complete is returned exactly once.
        self.reported = true;
        SendStep::Complete(self.error.map_or(Ok(()), Err))
    }
}
