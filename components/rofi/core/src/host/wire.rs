//! The header of every host-matching message (little-endian, 64 bytes).
//!
//! ```text
//!  0      1      2             4             8            12            16
//!  +------+------+-------------+-------------+-------------+-------------+
//!  | kind |flags | reserved=0  | cid (u32)   | source (u32)| tag (i32)   |
//!  +------+------+-------------+-------------+-------------+-------------+
//! 16                          24                          32
//!  +---------------------------+---------------------------+
//!  | len (u64): message length | id (u64): sender's op id  |
//!  +---------------------------+---------------------------+
//! 32                          40                          48
//!  +---------------------------+---------------------------+
//!  | addr (u64): Rts buffer    | key (u64): Rts MR key     |
//!  +---------------------------+---------------------------+
//! 48            52            56                          64
//!  +-------------+-------------+---------------------------+
//!  | seq (u32)   | reserved=0  | origin (u64): sender name |
//!  +-------------+-------------+---------------------------+
//! ```
//! An eager message's payload follows the header and must be exactly `len` bytes.
//! `seq` numbers the eager and Rts messages of one sender process (`origin`, its
//! process name: ranks change between communicators, a context id can be reused) on
//! one communicator id to one receiver (see [`super::Reorder`]). Ack and Fin use only `id` (and Fin the FAILED
//! flag); unused fields are zero.

use std::fmt;

use super::Envelope;

pub const HEADER_LEN: usize = 64;

const EAGER: u8 = 1;
const RTS: u8 = 2;
const ACK: u8 = 3;
const FIN: u8 = 4;

/// Eager: the sender waits for an Ack (MPI_Ssend).
const SYNC: u8 = 1;
/// Fin: the read failed; the send completes with an error.
const FAILED: u8 = 2;

/// One decoded message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    Eager {
        env: Envelope,
        seq: u32,
        origin: u64,
        /// The operation to acknowledge, for a synchronous send.
        sync: Option<u64>,
        payload: &'a [u8],
    },
    Rts {
        env: Envelope,
        seq: u32,
        origin: u64,
        len: u64,
        id: u64,
        addr: u64,
        key: u64,
    },
    Ack {
        id: u64,
    },
    Fin {
        id: u64,
        failed: bool,
    },
}

/// Why bytes are not a message (from a foreign or broken peer: dropped, counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    Short(usize),
    Kind(u8),
    Flags(u8),
    Reserved,
    Length { header: u64, payload: usize },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Short(n) => {
                write!(f, "{n} bytes, shorter than a {HEADER_LEN}-byte header")
            }
            DecodeError::Kind(k) => write!(f, "unknown message kind {k}"),
            DecodeError::Flags(x) => write!(f, "flags {x:#x} not valid for the kind"),
            DecodeError::Reserved => f.write_str("reserved header bytes are not zero"),
            DecodeError::Length { header, payload } => {
                write!(f, "eager header says {header} bytes, {payload} arrived")
            }
        }
    }
}

struct Fields {
    kind: u8,
    flags: u8,
    env: Envelope,
    seq: u32,
    origin: u64,
    len: u64,
    id: u64,
    addr: u64,
    key: u64,
}

fn header(f: &Fields) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0] = f.kind;
    h[1] = f.flags;
    h[4..8].copy_from_slice(&f.env.cid.to_le_bytes());
    h[8..12].copy_from_slice(&f.env.source.to_le_bytes());
    h[12..16].copy_from_slice(&f.env.tag.to_le_bytes());
    h[16..24].copy_from_slice(&f.len.to_le_bytes());
    h[24..32].copy_from_slice(&f.id.to_le_bytes());
    h[32..40].copy_from_slice(&f.addr.to_le_bytes());
    h[40..48].copy_from_slice(&f.key.to_le_bytes());
    h[48..52].copy_from_slice(&f.seq.to_le_bytes());
    h[56..64].copy_from_slice(&f.origin.to_le_bytes());
    h
}

const NOWHERE: Envelope = Envelope {
    cid: 0,
    source: 0,
    tag: 0,
};

/// Appends an eager message (header, then `payload`) to `out`. `(seq, origin)`: its
/// number on its channel and the sender's process name.
pub fn encode_eager(
    env: Envelope,
    seq: (u32, u64),
    sync: Option<u64>,
    payload: &[u8],
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(&eager_header(env, seq, sync, payload.len()));
    out.extend_from_slice(payload);
}

/// The header [`encode_eager`] puts before a payload of `len` bytes, for a sender that
/// lays the message out itself.
#[must_use]
pub fn eager_header(
    env: Envelope,
    (seq, origin): (u32, u64),
    sync: Option<u64>,
    len: usize,
) -> [u8; HEADER_LEN] {
    header(&Fields {
        kind: EAGER,
        flags: if sync.is_some() { SYNC } else { 0 },
        env,
        seq,
        origin,
        len: len as u64,
        id: sync.unwrap_or(0),
        addr: 0,
        key: 0,
    })
}

/// An Rts: `(seq, origin)` as for [`encode_eager`].
#[must_use]
pub fn encode_rts(
    env: Envelope,
    (seq, origin): (u32, u64),
    len: u64,
    id: u64,
    addr: u64,
    key: u64,
) -> [u8; HEADER_LEN] {
    header(&Fields {
        kind: RTS,
        flags: 0,
        env,
        seq,
        origin,
        len,
        id,
        addr,
        key,
    })
}

#[must_use]
pub fn encode_ack(id: u64) -> [u8; HEADER_LEN] {
    control(ACK, 0, id)
}

#[must_use]
pub fn encode_fin(id: u64, failed: bool) -> [u8; HEADER_LEN] {
    control(FIN, if failed { FAILED } else { 0 }, id)
}

fn control(kind: u8, flags: u8, id: u64) -> [u8; HEADER_LEN] {
    header(&Fields {
        kind,
        flags,
        env: NOWHERE,
        seq: 0,
        origin: 0,
        len: 0,
        id,
        addr: 0,
        key: 0,
    })
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Parses one received message.
pub fn decode(bytes: &[u8]) -> Result<Message<'_>, DecodeError> {
    if bytes.len() < HEADER_LEN {
        return Err(DecodeError::Short(bytes.len()));
    }
    let (kind, flags) = (bytes[0], bytes[1]);
    if bytes[2] != 0 || bytes[3] != 0 || u32_at(bytes, 52) != 0 {
        return Err(DecodeError::Reserved);
    }
    let seq = u32_at(bytes, 48);
    let origin = u64_at(bytes, 56);
    let env = Envelope {
        cid: u32_at(bytes, 4),
        source: u32_at(bytes, 8),
        tag: u32_at(bytes, 12) as i32,
    };
    let (len, id) = (u64_at(bytes, 16), u64_at(bytes, 24));
    let allowed = match kind {
        EAGER => SYNC,
        FIN => FAILED,
        RTS | ACK => 0,
        k => return Err(DecodeError::Kind(k)),
    };
    if flags & !allowed != 0 {
        return Err(DecodeError::Flags(flags));
    }
    Ok(match kind {
        EAGER => {
            let payload = &bytes[HEADER_LEN..];
            if payload.len() as u64 != len {
                return Err(DecodeError::Length {
                    header: len,
                    payload: payload.len(),
                });
            }
            Message::Eager {
                env,
                seq,
                origin,
                sync: (flags & SYNC != 0).then_some(id),
                payload,
            }
        }
        RTS => Message::Rts {
            env,
            seq,
            origin,
            len,
            id,
            addr: u64_at(bytes, 32),
            key: u64_at(bytes, 40),
        },
        ACK => Message::Ack { id },
        _ => Message::Fin {
            id,
            failed: flags & FAILED != 0,
        },
    })
}
