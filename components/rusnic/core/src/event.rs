//! What the core hands to the glue: datagrams to transmit and events for the upper layer.

use std::sync::Arc;

use crate::wire::Channel;

/// Bytes the core may send from without owning them: a `Vec` the glue filled, or (for an
/// emulated PUT) a region of the application's memory the glue vouches for until the
/// operation completes.
pub trait Payload: Send + Sync + std::fmt::Debug {
    fn bytes(&self) -> &[u8];
}

impl Payload for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

/// A fragment's bytes shared between the glue and the core: a glue that already holds
/// the fragment in a buffer of its own hands it over without a copy, and every datagram
/// cut from it refers to it ([`Body`]) until the peer acknowledged it. Once the fragment
/// completed (`SendComplete`/`SendFailed`) and every datagram cut from it was dropped,
/// the core holds no clone: a glue that lent foreign memory waits for that.
pub type Shared = Arc<dyn Payload>;

/// A datagram to put on the wire to this connection's peer: `head`, then `body`.
/// The two parts are meant for a gather send (an iovec each), so a segment's payload is
/// never copied into the datagram; [`Transmit::to_vec`] joins them where that is needed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub channel: Channel,
    /// Header and extensions (the whole datagram when `body` is empty).
    pub head: Head,
    /// Payload bytes following `head`, a range of the fragment's shared buffer.
    pub body: Body,
}

impl Transmit {
    /// A datagram that is all header (ACKs, probes).
    #[must_use]
    pub fn whole(channel: Channel, bytes: Head) -> Transmit {
        Transmit {
            channel,
            head: bytes,
            body: Body::default(),
        }
    }

    /// Bytes on the wire.
    #[must_use]
    pub fn len(&self) -> usize {
        self.head.len() + self.body.as_slice().len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The datagram as one contiguous buffer (a copy of the body).
    #[must_use]
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        v.extend_from_slice(&self.head);
        v.extend_from_slice(self.body.as_slice());
        v
    }
}

/// Header bytes held inline: every data header and every ACK fits
/// ([`crate::wire::MAX_ACK_LEN`] is the longest).
pub const INLINE_HEAD: usize = crate::wire::MAX_ACK_LEN;

/// A datagram's header: inline (no allocation per datagram, the common case) or, for a
/// connectivity probe padded to a path MTU, on the heap. Reads as its bytes.
#[derive(Clone)]
pub enum Head {
    Inline { len: u8, bytes: [u8; INLINE_HEAD] },
    Heap(Vec<u8>),
}

impl Head {
    /// `len` zero bytes, to be filled in place.
    #[must_use]
    pub fn zeroed(len: usize) -> Head {
        if len <= INLINE_HEAD {
            Head::Inline {
                len: len as u8,
                bytes: [0; INLINE_HEAD],
            }
        } else {
            Head::Heap(vec![0; len])
        }
    }
}

impl From<Vec<u8>> for Head {
    fn from(v: Vec<u8>) -> Head {
        Head::Heap(v)
    }
}

impl std::ops::Deref for Head {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Head::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Head::Heap(v) => v,
        }
    }
}

impl std::ops::DerefMut for Head {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            Head::Inline { len, bytes } => &mut bytes[..usize::from(*len)],
            Head::Heap(v) => v,
        }
    }
}

impl std::fmt::Debug for Head {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Head) -> bool {
        **self == **other
    }
}

impl Eq for Head {}

/// A byte range of a [`Shared`] fragment buffer (empty by default).
#[derive(Clone, Debug, Default)]
pub struct Body {
    data: Option<Shared>,
    start: usize,
    end: usize,
}

impl Body {
    /// `data[start..end]`; the range is clamped to the buffer, so it can never panic.
    #[must_use]
    pub fn new(data: Shared, start: usize, end: usize) -> Body {
        let end = end.min(data.bytes().len());
        Body {
            start: start.min(end),
            end,
            data: Some(data),
        }
    }

    #[must_use]
    pub fn as_slice(&self) -> &[u8] {
        self.data
            .as_ref()
            .map_or(&[], |d| &d.bytes()[self.start..self.end])
    }
}

impl PartialEq for Body {
    fn eq(&self, other: &Body) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Body {}

/// Where PUT payloads land when the glue places them on arrival
/// ([`crate::Connection::handle_datagram_into`]) instead of taking `Event::Put`s.
pub trait PutTarget {
    /// Writes `data` at address `addr` of local memory. `false`: no region open for
    /// remote writes covers `addr..addr + data.len()`; nothing was written, and the
    /// datagram is dropped unacknowledged (the peer's retransmissions then fail the
    /// connection rather than the bytes landing anywhere else).
    fn place(&mut self, addr: u64, data: &[u8]) -> bool;
}

/// Something for the upper layer, in the order it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A whole fragment for the active-message callback of `tag`. Holds one receive buffer:
    /// call `repost_rx_buffers(1)` once the upper layer is done with it.
    Deliver { tag: u8, data: Vec<u8> },
    /// Emulated PUT: copy `data` to `remote_addr + offset` in local memory. Holds one
    /// receive buffer like `Deliver`. A large PUT arrives as several events in offset order.
    /// Only datagrams handled without a [`PutTarget`] produce it; with one, PUT data goes
    /// straight to the target on arrival.
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
