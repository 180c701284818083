//! Send and receive completion bookkeeping, including the synchronous-send protocol.
//!
//! # The protocol
//! 1. The sender of an `MPI_Ssend` posts an exact-match receive for the acknowledgement
//!    ([`SendPlan::ack_recv`]) *before* posting the data (SYNC_SEND bit set), so the ACK can
//!    never arrive unexpected.
//! 2. When a receive consumes a message with the SYNC_SEND bit — by `MPI_Recv`, by
//!    `MPI_Mrecv` after `MPI_Improbe`, or even when the receive fails with truncation
//!    (the message *was* matched) — the receiver sends a zero-byte message tagged
//!    [`crate::tag::TagLayout::ack_bits`] to the sender.
//! 3. The send request completes when both its data completion and the ACK have arrived
//!    ([`SendTracker`]).
//!
//! Step 2 is decided in exactly one place, [`complete_receive`], which every consuming
//! receive path must go through to obtain its MPI status: the status and the ACK come out
//! together. Probes return a different type that cannot carry an ACK, because peeking
//! does not consume the message. This is why the 4.1.4 bug where `MPI_Mrecv` of an
//! `MPI_Ssend` never acknowledged it (upstream #11327) cannot be written here.

mod recv;
mod send;

#[cfg(test)]
mod tests;

pub use recv::{
    AckSend, ClaimedMessage, ProbeEvent, ProbeOutcome, ProbeStatus, RecvCompletion, RecvError,
    RecvEvent, RecvPath, RecvStatus, complete_probe, complete_receive,
};
pub use send::{
    AckRecv, OpError, SendError, SendKind, SendLimits, SendPlan, SendPlanError, SendRequest,
    SendStep, SendTracker, plan_send,
};
