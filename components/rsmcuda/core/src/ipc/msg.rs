//! Control messages of the handshake and their 8-byte encoding.
//!
//! Layout (host byte order is irrelevant: both ends are on one node, but we fix little
//! endian so a dump reads the same everywhere): bytes 0..4 = kind (10 REQ, 11 ACK,
//! 12 NOTREADY as in the C `ipcCtrlMsg`, 13 NAK is ours), bytes 4..8 = device (REQ only,
//! else 0).

use std::fmt;

use super::CudaDevice;

/// A handshake control message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtrlMsg {
    /// "Can your GPU reach mine (`device`)?"
    Req { device: CudaDevice },
    /// "Yes; IPC is on."
    Ack,
    /// "My CUDA is not initialised yet; ask again later."
    NotReady,
    /// "No IPC between us, ever."
    Nak,
}

/// Size of an encoded message.
pub const CTRL_MSG_LEN: usize = 8;

/// Bytes that are not a control message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    Length(usize),
    Kind(u32),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Length(n) => {
                write!(
                    f,
                    "CUDA IPC control message of {n} bytes, expected {CTRL_MSG_LEN}"
                )
            }
            DecodeError::Kind(k) => write!(f, "unknown CUDA IPC control message kind {k}"),
        }
    }
}

impl std::error::Error for DecodeError {}

impl CtrlMsg {
    #[must_use]
    pub fn encode(self) -> [u8; CTRL_MSG_LEN] {
        let (kind, device): (u32, i32) = match self {
            CtrlMsg::Req { device } => (10, device),
            CtrlMsg::Ack => (11, 0),
            CtrlMsg::NotReady => (12, 0),
            CtrlMsg::Nak => (13, 0),
        };
        let mut b = [0u8; CTRL_MSG_LEN];
        b[..4].copy_from_slice(&kind.to_le_bytes());
        b[4..].copy_from_slice(&device.to_le_bytes());
        b
    }

    pub fn decode(bytes: &[u8]) -> Result<CtrlMsg, DecodeError> {
        let b: &[u8; CTRL_MSG_LEN] = bytes
            .try_into()
            .map_err(|_| DecodeError::Length(bytes.len()))?;
        let kind = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let device = i32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        match kind {
            10 => Ok(CtrlMsg::Req { device }),
            11 => Ok(CtrlMsg::Ack),
            12 => Ok(CtrlMsg::NotReady),
            13 => Ok(CtrlMsg::Nak),
            k => Err(DecodeError::Kind(k)),
        }
    }
}
