//! What the core hands to the glue: datagrams to transmit and events for the upper layer.

use crate::wire::Channel;

/// A datagram to put on the wire to this connection's peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub channel: Channel,
    pub bytes: Vec<u8>,
}

/// Something for the upper layer, in the order it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A whole fragment for the active-message callback of `tag`. Holds one receive buffer:
    /// call `repost_rx_buffers(1)` once the upper layer is done with it.
    Deliver { tag: u8, data: Vec<u8> },
    /// Emulated PUT: copy `data` to `remote_addr + offset` in local memory. Holds one
    /// receive buffer like `Deliver`. A large PUT arrives as several events in offset order.
    Put {
        remote_addr: u64,
        offset: u32,
        data: Vec<u8>,
    },
    /// Every byte of the send or put with this id was acknowledged by the peer.
    SendComplete { id: u64 },
    /// The connection failed before this send or put could complete.
    SendFailed { id: u64 },
    /// The connectivity check passed: the peer answers at the configured MTU.
    PathVerified,
    /// The connection failed; no further traffic will flow.
    Error(ConnError),
}

/// Why a connection failed. `Display` gives a message fit for a `show_help`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnError {
    /// No answer to connectivity probes, or to retransmissions (`max_timeouts`).
    PeerUnreachable { peer: u64, attempts: u32 },
    /// Small probes are answered, MTU-sized ones are not.
    PathMtuTooSmall { peer: u64, configured: u32 },
}

impl std::fmt::Display for ConnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnError::PeerUnreachable { peer, attempts } => write!(
                f,
                "peer {peer:#x} is unreachable: no answer after {attempts} attempts \
                 (check routing/firewall between the two hosts)"
            ),
            ConnError::PathMtuTooSmall { peer, configured } => write!(
                f,
                "path MTU to peer {peer:#x} is smaller than the configured {configured} bytes: \
                 small probes are answered but {configured}-byte probes are not \
                 (lower the data-channel MTU or fix the network MTU)"
            ),
        }
    }
}

impl std::error::Error for ConnError {}

/// Why `send`/`put` refused a fragment. Window, credit or transmit-slot exhaustion are
/// never errors: those fragments are queued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendError {
    /// Larger than `max_fragment_size`.
    TooLarge { len: usize, max: u32 },
    /// `max_queued_fragments` are already waiting; retry after progress (the BTL's
    /// OUT_OF_RESOURCE).
    Busy,
    /// The connection failed.
    Failed,
    /// No connection to this peer (multi-peer endpoint only).
    UnknownPeer,
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::TooLarge { len, max } => {
                write!(f, "fragment of {len} bytes exceeds max_fragment_size {max}")
            }
            SendError::Busy => write!(f, "send queue full, retry after progress"),
            SendError::Failed => write!(f, "connection failed"),
            SendError::UnknownPeer => write!(f, "unknown peer"),
        }
    }
}

impl std::error::Error for SendError {}
