//! The handshake with every peer of the node, as the BTL drives it (sans-IO).
//!
//! [`IpcPeers`] owns one [`PeerIpc`] per peer and turns what the BTL sees (a send to a
//! peer, a control message on the BTL's own tag) into [`Output`]s the glue carries out in
//! order: control messages to push into a peer's FIFO, the `ADD_CUDA_IPC` notification
//! for ob1, and log lines. It never calls the driver: the glue passes the current device
//! (`None` while no CUDA context exists) and a `cuDeviceCanAccessPeer` closure.
//!
//! Control messages travel as an [`Envelope`] (the sender's local rank, then the
//! [`CtrlMsg`]), because the receiving side of a FIFO or fast box does not otherwise
//! know who wrote the message.
//!
//! `ADD_CUDA_IPC` is emitted only when the host Open MPI is CUDA-aware: ob1 of a build
//! without CUDA aborts the job on that error callback. In such a host this side never
//! asks and refuses every request ([`Denial::HostNotCudaAware`]), so a peer that asks
//! ends in `Bad` instead of waiting.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use super::{
    Access, Action, BadReason, CTRL_MSG_LEN, CtrlMsg, CudaDevice, DecodeError, Denial, PeerIpc,
    decide_access,
};

/// The active-message tag of the control messages (`MCA_BTL_TAG_SMCUDA`): below the
/// PML's tags, so ob1 never registers a callback for it.
pub const CTRL_TAG: u8 = 0x22;

/// The device this side reports where it has no CUDA at all (never compared: such a
/// side refuses before any device check).
const NO_DEVICE: CudaDevice = -1;

/// Bytes of an encoded [`Envelope`].
pub const ENVELOPE_LEN: usize = 4 + CTRL_MSG_LEN;

/// A control message with its sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// The sender's local rank (its rank in the node's segment).
    pub from: u32,
    pub msg: CtrlMsg,
}

impl Envelope {
    #[must_use]
    pub fn encode(self) -> [u8; ENVELOPE_LEN] {
        let mut b = [0u8; ENVELOPE_LEN];
        b[..4].copy_from_slice(&self.from.to_le_bytes());
        b[4..].copy_from_slice(&self.msg.encode());
        b
    }

    pub fn decode(bytes: &[u8]) -> Result<Envelope, DecodeError> {
        if bytes.len() != ENVELOPE_LEN {
            return Err(DecodeError::Length(bytes.len()));
        }
        let from = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        Ok(Envelope {
            from,
            msg: CtrlMsg::decode(&bytes[4..])?,
        })
    }
}

/// Settings fixed at init.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeersConfig {
    /// This process's local rank.
    pub my_rank: u32,
    /// Ranks on the node (peers are `0..nranks` except `my_rank`).
    pub nranks: u32,
    /// `btl_rsmcuda_use_cuda_ipc_same_gpu`.
    pub same_gpu_allowed: bool,
    /// `opal_built_with_cuda_support` of the running Open MPI.
    pub host_cuda_aware: bool,
}

/// What the glue must do, oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Push this control message (an [`Envelope`] from us) into `to`'s FIFO with
    /// [`CTRL_TAG`]. If no fragment is free, give it back with [`IpcPeers::requeue`].
    Send { to: u32, msg: CtrlMsg },
    /// Call ob1's error callback with `MCA_BTL_ERROR_FLAGS_ADD_CUDA_IPC` for `peer`:
    /// ob1 then registers GPU buffers for that peer and uses RGET. Only ever emitted
    /// when the host is CUDA-aware, once per peer.
    AddCudaIpc { peer: u32 },
    /// IPC with `peer` is off for good (one log line).
    Bad { peer: u32, reason: BadReason },
}

/// A control message that cannot be handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlError {
    Decode(DecodeError),
    /// The sender is not a peer of this node (out of range, or ourselves).
    UnknownSender(u32),
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControlError::Decode(e) => e.fmt(f),
            ControlError::UnknownSender(r) => {
                write!(
                    f,
                    "CUDA IPC control message from local rank {r}, not a peer"
                )
            }
        }
    }
}

impl std::error::Error for ControlError {}

/// The handshakes of one BTL module with every peer on the node.
#[derive(Debug)]
pub struct IpcPeers {
    cfg: PeersConfig,
    peers: BTreeMap<u32, PeerIpc>,
    out: VecDeque<Output>,
}

impl IpcPeers {
    #[must_use]
    pub fn new(cfg: PeersConfig) -> IpcPeers {
        let peers = (0..cfg.nranks)
            .filter(|&r| r != cfg.my_rank)
            .filter_map(|r| PeerIpc::new(cfg.my_rank, r).ok().map(|p| (r, p)))
            .collect();
        IpcPeers {
            cfg,
            peers,
            out: VecDeque::new(),
        }
    }

    #[must_use]
    pub fn config(&self) -> &PeersConfig {
        &self.cfg
    }

    /// The handshake with `peer`, if it is one.
    #[must_use]
    pub fn peer(&self, peer: u32) -> Option<&PeerIpc> {
        self.peers.get(&peer)
    }

    /// Whether RGET of device buffers is on with `peer`.
    #[must_use]
    pub fn ipc_enabled(&self, peer: u32) -> bool {
        self.peers.get(&peer).is_some_and(PeerIpc::ipc_enabled)
    }

    /// Whether a send to `peer` could start a request (cheap pre-check for the send
    /// path: the glue only asks the driver for the device when this is true).
    #[must_use]
    pub fn wants_to_ask(&self, peer: u32) -> bool {
        self.cfg.host_cuda_aware
            && self
                .peers
                .get(&peer)
                .is_some_and(|p| p.state() == super::IpcState::Init)
    }

    /// A message is being sent to `peer` (smcuda asks on any send while nothing is
    /// decided). `local`: our current device, `None` without a CUDA context.
    pub fn on_send(&mut self, peer: u32, local: Option<CudaDevice>) {
        if !self.cfg.host_cuda_aware {
            return;
        }
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        let actions = p.on_send_of_device_buffer(local);
        self.emit(peer, actions);
    }

    /// A control message arrived (the payload of a fragment with [`CTRL_TAG`]); returns
    /// its sender. `can_access_peer(local, peer)` is `cuDeviceCanAccessPeer`, called
    /// only when a request from another device must be answered.
    pub fn on_control<E>(
        &mut self,
        bytes: &[u8],
        local: Option<CudaDevice>,
        can_access_peer: impl FnOnce(CudaDevice, CudaDevice) -> Result<bool, E>,
    ) -> Result<u32, ControlError> {
        let env = Envelope::decode(bytes).map_err(ControlError::Decode)?;
        let cfg = self.cfg;
        let p = self
            .peers
            .get_mut(&env.from)
            .ok_or(ControlError::UnknownSender(env.from))?;
        // Without CUDA here the answer is no whether or not a context exists: give the
        // state machine a device so it refuses (NAK) instead of saying NOTREADY, which
        // would only make the peer ask again until it runs out of tries.
        let local = if cfg.host_cuda_aware {
            local
        } else {
            Some(local.unwrap_or(NO_DEVICE))
        };
        let actions = p.on_message(env.msg, local, |mine, theirs| {
            if !cfg.host_cuda_aware {
                return Access::Denied(Denial::HostNotCudaAware);
            }
            decide_access(mine, theirs, cfg.same_gpu_allowed, can_access_peer)
        });
        self.emit(env.from, actions);
        Ok(env.from)
    }

    /// The next thing to do, oldest first.
    pub fn pop(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// A `Send` that could not be pushed (no free fragment): it goes first next time,
    /// so control messages to one peer keep their order.
    pub fn requeue(&mut self, output: Output) {
        self.out.push_front(output);
    }

    /// Outputs waiting.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.out.len()
    }

    fn emit(&mut self, peer: u32, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Send(msg) => self.out.push_back(Output::Send { to: peer, msg }),
                Action::EnableIpc if self.cfg.host_cuda_aware => {
                    self.out.push_back(Output::AddCudaIpc { peer });
                }
                // Such a host never asks and refuses every request, so a well-behaved
                // peer never enables it; whatever happened, its ob1 must not hear of it.
                Action::EnableIpc => {}
                Action::MarkBad(reason) => self.out.push_back(Output::Bad { peer, reason }),
            }
        }
    }
}

#[cfg(test)]
mod tests;
