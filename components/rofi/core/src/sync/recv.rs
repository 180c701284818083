//! Receive and probe completions: MPI status, and whether to acknowledge a synchronous send.

use super::OpError;
use crate::tag::TagLayout;

/// What the provider reported for a posted receive (`fi_trecv` / claim `fi_trecvmsg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvEvent {
    /// Success entry: `tag`, `data` and `len` of the `fi_cq_tagged_entry`.
    Completed { bits: u64, cq_data: u64, len: u64 },
    /// Error entry with FI_ETRUNC: the message *was* matched; `len` is its full length
    /// (`len + olen` of the error entry), `bits`/`cq_data` from the entry.
    Truncated { bits: u64, cq_data: u64, len: u64 },
    /// Error entry with FI_ECANCELED: nothing was matched.
    Canceled,
    /// Any other error entry: whether a message was consumed is unknown.
    Failed(i32),
}

impl RecvEvent {
    /// Build from an error entry's class (the glue maps `err` first).
    #[must_use]
    pub fn from_error(e: OpError, bits: u64, cq_data: u64, len: u64) -> RecvEvent {
        match e {
            OpError::Truncated => RecvEvent::Truncated { bits, cq_data, len },
            OpError::Canceled => RecvEvent::Canceled,
            OpError::Other(n) => RecvEvent::Failed(n),
        }
    }
}

/// Which receive operation completed. Every path that consumes a message is listed here,
/// and all go through [`complete_receive`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvPath {
    /// `MPI_Recv`/`MPI_Irecv`.
    Recv,
    /// `MPI_Mrecv`/`MPI_Imrecv` of a message claimed by `MPI_Improbe`.
    Mrecv(ClaimedMessage),
}

/// Error part of an MPI status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvError {
    /// MPI_ERR_TRUNCATE.
    Truncated,
    /// MPI_ERR_INTERN with the libfabric error number.
    Internal(i32),
    /// The receive matched an acknowledgement: impossible with masks from
    /// [`TagLayout::recv_match`]; reported as MPI_ERR_INTERN rather than trusted.
    MatchedAck,
}

/// The MPI status of a completed receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvStatus {
    /// `MPI_SOURCE`; `None` when nothing was matched.
    pub source: Option<u32>,
    /// `MPI_TAG`; `None` when nothing was matched.
    pub tag: Option<i32>,
    /// Bytes placed in the user buffer (never more than was posted).
    pub count: u64,
    pub error: Option<RecvError>,
    pub cancelled: bool,
}

/// A zero-byte acknowledgement the glue must send (`fi_tsendmsg`, no completion wanted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckSend {
    /// Tag of the ACK.
    pub bits: u64,
    /// Communicator of the acknowledged message (to resolve the address, and the SEP
    /// receive context via `fi_rx_addr`).
    pub cid: u32,
    /// Rank of the synchronous sender in that communicator.
    pub to_rank: u32,
}

/// Everything the glue does when a receive completes: set the status, send the ACK if
/// any. Both come out of one call so no completion path can forget the ACK.
#[must_use = "an ACK left unsent deadlocks the synchronous sender"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvCompletion {
    pub status: RecvStatus,
    pub ack: Option<AckSend>,
}

/// The one function deciding MPI status and acknowledgement for every consuming receive.
///
/// An ACK is due whenever a message carrying SYNC_SEND was *matched*: on success and on
/// truncation (the C MTL does not acknowledge truncated receives, leaving the sender
/// blocked), for `Recv` and `Mrecv` alike (4.1.4 forgets `Mrecv`, upstream #11327).
pub fn complete_receive(
    layout: &TagLayout,
    path: RecvPath,
    posted_len: u64,
    event: RecvEvent,
) -> RecvCompletion {
    let (bits, cq_data, len, truncated) = match (event, path) {
        (RecvEvent::Completed { bits, cq_data, len }, _) => (bits, cq_data, len, len > posted_len),
        // The claim told the message's full length: that, not the provider's verdict,
        // decides. libfabric 1.17's rxd reports FI_ETRUNC for every claimed receive
        // whose buffer is larger than the message (it compares the bytes delivered
        // with the buffer, not the message, on its FI_CLAIM path).
        (RecvEvent::Truncated { bits, cq_data, .. }, RecvPath::Mrecv(m)) => {
            let full = m.status().count;
            (bits, cq_data, full, full > posted_len)
        }
        (RecvEvent::Truncated { bits, cq_data, len }, RecvPath::Recv) => (bits, cq_data, len, true),
        (RecvEvent::Canceled, _) => return unmatched(None, true),
        (RecvEvent::Failed(n), _) => return unmatched(Some(RecvError::Internal(n)), false),
    };
    // For Mrecv the claim identified the message; its bits are authoritative even if a
    // provider leaves the claim completion's tag empty.
    let (bits, cq_data) = match path {
        RecvPath::Recv => (bits, cq_data),
        RecvPath::Mrecv(m) => (m.bits, m.cq_data),
    };
    let source = layout.source_of_completion(bits, cq_data);
    let mut status = RecvStatus {
        source: Some(source),
        tag: Some(layout.tag_of(bits)),
        count: len.min(posted_len),
        error: truncated.then_some(RecvError::Truncated),
        cancelled: false,
    };
    if layout.is_sync_ack(bits) {
        status.error = Some(RecvError::MatchedAck);
        return RecvCompletion { status, ack: None };
    }
    let ack = layout.is_sync_send(bits).then(|| AckSend {
        bits: layout.ack_bits(bits),
        cid: layout.cid_of(bits),
        to_rank: source,
    });
    RecvCompletion { status, ack }
}

fn unmatched(error: Option<RecvError>, cancelled: bool) -> RecvCompletion {
    RecvCompletion {
        status: RecvStatus {
            source: None,
            tag: None,
            count: 0,
            error,
            cancelled,
        },
        ack: None,
    }
}

/// What the provider reported for a peek (`FI_PEEK`, with `FI_CLAIM` for improbe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeEvent {
    Found {
        bits: u64,
        cq_data: u64,
        len: u64,
    },
    /// Error entry FI_ENOMSG: no matching message (not an error for MPI).
    NoMessage,
    Failed(i32),
}

/// Status of a successful probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeStatus {
    pub source: u32,
    pub tag: i32,
    pub count: u64,
}

/// Result of a probe. It has no ACK: a probe does not consume the message; the receive
/// that later does (including `Mrecv`) acknowledges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeOutcome {
    Found(ProbeStatus),
    /// For `MPI_Improbe`: the claimed message to pass to `MPI_Mrecv`.
    Claimed(ClaimedMessage),
    NotFound,
    Failed(i32),
}

/// A message claimed by `MPI_Improbe`, to be received by `MPI_Mrecv`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimedMessage {
    bits: u64,
    cq_data: u64,
    ignore_bits: u64,
    status: ProbeStatus,
}

impl ClaimedMessage {
    /// The matched tag; post the claiming `fi_trecvmsg` with it.
    #[must_use]
    pub const fn bits(&self) -> u64 {
        self.bits
    }

    /// The ignore mask the probe was posted with; post the claiming receive with it.
    #[must_use]
    pub const fn ignore_bits(&self) -> u64 {
        self.ignore_bits
    }

    /// Status for `MPI_Improbe` (source, tag, count for `MPI_Get_count`).
    #[must_use]
    pub const fn status(&self) -> ProbeStatus {
        self.status
    }
}

/// Turn a probe's completion into its outcome. `claim` is `Some(posted_ignore_bits)` for
/// `MPI_Improbe` (FI_CLAIM), `None` for `MPI_Iprobe`.
pub fn complete_probe(layout: &TagLayout, claim: Option<u64>, event: ProbeEvent) -> ProbeOutcome {
    match event {
        ProbeEvent::NoMessage => ProbeOutcome::NotFound,
        ProbeEvent::Failed(n) => ProbeOutcome::Failed(n),
        ProbeEvent::Found { bits, cq_data, len } => {
            let status = ProbeStatus {
                source: layout.source_of_completion(bits, cq_data),
                tag: layout.tag_of(bits),
                count: len,
            };
            match claim {
                None => ProbeOutcome::Found(status),
                Some(ignore_bits) => ProbeOutcome::Claimed(ClaimedMessage {
                    bits,
                    cq_data,
                    ignore_bits,
                    status,
                }),
            }
        }
    }
}
