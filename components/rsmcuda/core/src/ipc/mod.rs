//! The per-peer CUDA IPC handshake.
//!
//! CUDA IPC is set up lazily, when a process first sends a GPU buffer to a peer on the same
//! node: it sends `Req{device}`; the peer checks whether its GPU can reach ours and answers
//! `Ack` (both sides enable the RGET path), `NotReady` (its CUDA is not initialised yet: try
//! again on a later send) or `Nak` (no IPC between us, ever). At most [`MAX_TRIES`] requests
//! are sent; then the requester gives up.
//!
//! Both sides may ask at once. The side with the higher local rank answers the other's
//! request and the lower one sets the higher's request aside, because the answer to its
//! own request is coming (the rule of the C smcuda BTL). If that answer is `NotReady`, the
//! lower side then answers the request it set aside: with messages reordered, the higher
//! side may have sent it *after* its `NotReady` and now waits for it (found by the
//! randomized simulation; the C BTL drops it and the higher side waits forever).
//!
//! Differences from the C smcuda BTL, each to make the outcome symmetric:
//! - `Nak` is new: the C responder marks itself bad and sends nothing, leaving the
//!   requester in IPC_SENT forever (it never asks again and never learns why). Whoever
//!   gives up tells the other, so both end in [`IpcState::Bad`].
//! - A request reaching an established side is answered `Ack` again, a request reaching a
//!   side that gave up is answered `Nak`: every request gets an answer unless the tie-break
//!   drops it, so no side waits in `Sent` forever.
//! - The C IPC_ACKING state only exists while the responder queries the driver; here the
//!   query is a synchronous callback inside [`PeerIpc::on_message`], so the state is never
//!   observable and has no variant. IPC_OK (unused in C) is the requester's final state.
//!
//! The glue must deliver control messages reliably (shared-memory FIFOs are; a full FIFO
//! means queueing, never dropping). Order does not matter.

mod msg;
pub mod peers;

#[cfg(test)]
mod tests;

pub use msg::{CTRL_MSG_LEN, CtrlMsg, DecodeError};

use std::fmt;

/// Most requests one side sends before giving up (the C `MAXTRIES`).
pub const MAX_TRIES: u32 = 5;

/// A CUDA device ordinal as the driver reports it.
pub type CudaDevice = i32;

/// Handshake state with one peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpcState {
    /// Nothing decided; the next GPU send asks.
    Init,
    /// Our request is out; waiting for the answer.
    Sent,
    /// We answered the peer's request with `Ack`: IPC enabled.
    Acked,
    /// The peer answered our request with `Ack`: IPC enabled.
    Ok,
    /// No IPC with this peer; final.
    Bad,
}

/// Why IPC cannot be used between two devices (decided by the responder).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denial {
    /// Both processes use the same GPU and `btl_rsmcuda_use_cuda_ipc_same_gpu` is 0.
    SameDeviceDisallowed,
    /// `cuDeviceCanAccessPeer` says no.
    NoPeerAccess,
    /// `cuDeviceCanAccessPeer` failed.
    QueryFailed,
    /// The host ob1 has no CUDA support: enabling IPC would abort the job there.
    HostNotCudaAware,
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Denial::SameDeviceDisallowed => {
                "both processes use the same GPU and btl_rsmcuda_use_cuda_ipc_same_gpu is false"
            }
            Denial::NoPeerAccess => {
                "cuDeviceCanAccessPeer says this process's GPU cannot access the peer's"
            }
            Denial::QueryFailed => "cuDeviceCanAccessPeer failed",
            Denial::HostNotCudaAware => "this Open MPI is not CUDA-aware",
        })
    }
}

/// Answer of the glue's access query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Allowed,
    Denied(Denial),
}

/// The access policy of smcuda: same device → the parameter decides; different devices
/// → peer access as the driver reports it (`can_access_peer(local, peer)`, called only
/// then).
pub fn decide_access<E>(
    local: CudaDevice,
    peer: CudaDevice,
    same_gpu_allowed: bool,
    can_access_peer: impl FnOnce(CudaDevice, CudaDevice) -> Result<bool, E>,
) -> Access {
    if local == peer {
        return if same_gpu_allowed {
            Access::Allowed
        } else {
            Access::Denied(Denial::SameDeviceDisallowed)
        };
    }
    match can_access_peer(local, peer) {
        Ok(true) => Access::Allowed,
        Ok(false) => Access::Denied(Denial::NoPeerAccess),
        Err(_) => Access::Denied(Denial::QueryFailed),
    }
}

/// Why a peer ended in [`IpcState::Bad`], for the verbose log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadReason {
    /// [`MAX_TRIES`] requests were answered `NotReady`.
    TooManyTries,
    /// We refused the peer's request.
    Denied(Denial),
    /// The peer refused our request, or gave up.
    PeerRefused,
    /// A local CUDA query failed (e.g. the current device).
    LocalFailure,
}

impl fmt::Display for BadReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadReason::TooManyTries => write!(f, "no answer after {MAX_TRIES} CUDA IPC requests"),
            BadReason::Denied(d) => write!(f, "CUDA IPC refused here: {d}"),
            BadReason::PeerRefused => f.write_str("the peer refused CUDA IPC"),
            BadReason::LocalFailure => f.write_str("local CUDA query failed"),
        }
    }
}

/// What the glue must do, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send this control message to the peer (tag `MCA_BTL_TAG_SMCUDA`-like, reliable).
    Send(CtrlMsg),
    /// Tell the PML to use the RGET path for GPU buffers to this peer. Emitted once.
    EnableIpc,
    /// Log that IPC with this peer is off for good. Emitted once.
    MarkBad(BadReason),
}

/// Constructing a handshake with oneself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SameRank(pub u32);

impl fmt::Display for SameRank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "local rank {} cannot handshake with itself", self.0)
    }
}

impl std::error::Error for SameRank {}

/// The handshake with one peer.
#[derive(Clone, Debug)]
pub struct PeerIpc {
    // INVARIANT: my_rank != peer_rank (checked in `new`), so the tie-break always has a
    // winner.
    my_rank: u32,
    peer_rank: u32,
    state: IpcState,
    // INVARIANT: tries <= MAX_TRIES; a request is only sent after incrementing it below
    // the bound.
    tries: u32,
    peer_device: Option<CudaDevice>,
    // A peer request set aside by the tie-break while we were in `Sent`.
    deferred_req: Option<CudaDevice>,
}

impl PeerIpc {
    /// `my_rank`, `peer_rank`: local (on-node) ranks of the two processes.
    pub fn new(my_rank: u32, peer_rank: u32) -> Result<PeerIpc, SameRank> {
        if my_rank == peer_rank {
            return Err(SameRank(my_rank));
        }
        Ok(PeerIpc {
            my_rank,
            peer_rank,
            state: IpcState::Init,
            tries: 0,
            peer_device: None,
            deferred_req: None,
        })
    }

    #[must_use]
    pub fn state(&self) -> IpcState {
        self.state
    }

    /// Whether the RGET path is on for this peer.
    #[must_use]
    pub fn ipc_enabled(&self) -> bool {
        matches!(self.state, IpcState::Acked | IpcState::Ok)
    }

    /// Requests sent so far.
    #[must_use]
    pub fn tries(&self) -> u32 {
        self.tries
    }

    /// The peer's device, once it has asked us.
    #[must_use]
    pub fn peer_device(&self) -> Option<CudaDevice> {
        self.peer_device
    }

    /// A send to this peer carries a GPU buffer. `local` is our device, `None` while our
    /// CUDA context is not initialised (then nothing is asked yet).
    pub fn on_send_of_device_buffer(&mut self, local: Option<CudaDevice>) -> Vec<Action> {
        let Some(device) = local else {
            return Vec::new();
        };
        if self.state != IpcState::Init {
            return Vec::new();
        }
        if self.tries >= MAX_TRIES {
            return self.give_up(BadReason::TooManyTries);
        }
        self.tries += 1;
        self.state = IpcState::Sent;
        vec![Action::Send(CtrlMsg::Req { device })]
    }

    /// A local CUDA query needed to ask failed (e.g. the current device). Only meaningful
    /// before we ask: once a request is out, the answer decides.
    pub fn on_local_failure(&mut self) -> Vec<Action> {
        if self.state != IpcState::Init {
            return Vec::new();
        }
        self.give_up(BadReason::LocalFailure)
    }

    /// A control message from the peer. `local` as in
    /// [`PeerIpc::on_send_of_device_buffer`]; `access(local, peer)` is called only when a
    /// request must be answered (see [`decide_access`]).
    pub fn on_message(
        &mut self,
        msg: CtrlMsg,
        local: Option<CudaDevice>,
        access: impl FnOnce(CudaDevice, CudaDevice) -> Access,
    ) -> Vec<Action> {
        if matches!(msg, CtrlMsg::Ack | CtrlMsg::Nak) {
            // The peer acknowledged or refused us, so it is not waiting for an answer to
            // a request we set aside.
            self.deferred_req = None;
        }
        match msg {
            CtrlMsg::Req { device } => self.on_request(device, local, access),
            CtrlMsg::Ack => match self.state {
                // Init: our request was abandoned by the tie-break but the peer accepted
                // it after all; agreeing keeps both sides symmetric.
                IpcState::Init | IpcState::Sent => {
                    self.state = IpcState::Ok;
                    vec![Action::EnableIpc]
                }
                IpcState::Acked | IpcState::Ok | IpcState::Bad => Vec::new(),
            },
            CtrlMsg::NotReady => {
                if self.state != IpcState::Sent {
                    return Vec::new();
                }
                self.state = IpcState::Init;
                match self.deferred_req.take() {
                    Some(device) => self.on_request(device, local, access),
                    None => Vec::new(),
                }
            }
            CtrlMsg::Nak => match self.state {
                IpcState::Init | IpcState::Sent => {
                    self.state = IpcState::Bad;
                    vec![Action::MarkBad(BadReason::PeerRefused)]
                }
                // Established sides are never refused: a peer only refuses before it has
                // acknowledged or been acknowledged.
                IpcState::Acked | IpcState::Ok | IpcState::Bad => Vec::new(),
            },
        }
    }

    fn on_request(
        &mut self,
        peer_device: CudaDevice,
        local: Option<CudaDevice>,
        access: impl FnOnce(CudaDevice, CudaDevice) -> Access,
    ) -> Vec<Action> {
        self.peer_device = Some(peer_device);
        match self.state {
            IpcState::Bad => return vec![Action::Send(CtrlMsg::Nak)],
            IpcState::Acked | IpcState::Ok => return vec![Action::Send(CtrlMsg::Ack)],
            // Both asked: the higher rank answers, the lower waits for that answer.
            IpcState::Sent if self.my_rank < self.peer_rank => {
                self.deferred_req = Some(peer_device);
                return Vec::new();
            }
            IpcState::Init | IpcState::Sent => {}
        }
        let Some(local) = local else {
            // Our own request (if any) is being dropped by the lower-ranked peer: abandon
            // it so our next GPU send asks again.
            self.state = IpcState::Init;
            return vec![Action::Send(CtrlMsg::NotReady)];
        };
        match access(local, peer_device) {
            Access::Allowed => {
                self.state = IpcState::Acked;
                vec![Action::EnableIpc, Action::Send(CtrlMsg::Ack)]
            }
            Access::Denied(d) => {
                self.state = IpcState::Bad;
                vec![
                    Action::MarkBad(BadReason::Denied(d)),
                    Action::Send(CtrlMsg::Nak),
                ]
            }
        }
    }

    fn give_up(&mut self, reason: BadReason) -> Vec<Action> {
        self.state = IpcState::Bad;
        vec![Action::MarkBad(reason), Action::Send(CtrlMsg::Nak)]
    }
}
