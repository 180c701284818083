//! Connectivity check at first contact.
//!
//! Two pings go out: a small one on the priority channel and one of exactly the data
//! channel's MTU on the data channel. The peer answers each with a small PONG echoing the
//! ping's nonce and size. Unanswered pings are resent every `connectivity_timeout`; after
//! `connectivity_retries` rounds the check fails with a clear error instead of leaving the
//! upper layer hanging: "unreachable" if nothing came back, "path MTU smaller than
//! configured" if only the small ping was answered. Data is not held back while the check
//! runs (as in the reference, it runs beside the traffic); on failure the connection fails.

use std::collections::VecDeque;

use crate::event::ConnError;
use crate::time::Instant;
use crate::wire::{Channel, Probe, SMALL_PROBE_LEN};

/// Pongs owed to the peer; more are dropped (the peer resends its ping).
const MAX_PENDING_PONGS: usize = 4;

#[derive(Debug, PartialEq, Eq)]
enum State {
    Idle,
    Probing,
    Verified,
    Failed,
}

/// A probe datagram to build: (channel, total size, nonce).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ProbeOut {
    Ping {
        channel: Channel,
        size: u32,
        nonce: u32,
    },
    Pong {
        size: u32,
        nonce: u32,
    },
}

#[derive(Debug)]
pub(crate) struct Connectivity {
    state: State,
    enabled: bool,
    nonce: u32,
    big_size: u32,
    retries: u32,
    timeout: u64,
    rounds: u32,
    deadline: Option<Instant>,
    small_ok: bool,
    big_ok: bool,
    send_small: bool,
    send_big: bool,
    pongs: VecDeque<Probe>,
}

impl Connectivity {
    pub fn new(enabled: bool, nonce: u32, big_size: u16, retries: u32, timeout: u64) -> Self {
        Connectivity {
            state: State::Idle,
            enabled,
            nonce,
            big_size: u32::from(big_size),
            retries,
            timeout,
            rounds: 0,
            deadline: None,
            small_ok: false,
            big_ok: false,
            send_small: false,
            send_big: false,
            pongs: VecDeque::new(),
        }
    }

    /// First contact with the peer (first send or first datagram from it).
    pub fn first_contact(&mut self) {
        if self.enabled && self.state == State::Idle {
            self.state = State::Probing;
            self.send_small = true;
            self.send_big = true;
        }
    }

    pub fn is_verified(&self) -> bool {
        self.state == State::Verified
    }

    pub fn on_ping(&mut self, p: Probe) {
        if self.pongs.len() < MAX_PENDING_PONGS {
            self.pongs.push_back(p);
        }
    }

    /// Returns true when this pong completes the check.
    pub fn on_pong(&mut self, p: Probe) -> bool {
        if self.state != State::Probing || p.nonce != self.nonce {
            return false;
        }
        if p.size == self.big_size {
            self.big_ok = true;
        } else if p.size as usize == SMALL_PROBE_LEN {
            self.small_ok = true;
        }
        if self.big_ok {
            self.state = State::Verified;
            self.deadline = None;
            self.send_small = false;
            self.send_big = false;
            return true;
        }
        false
    }

    /// Next probe datagram to send, if any.
    pub fn poll(&mut self, now: Instant) -> Option<ProbeOut> {
        if let Some(p) = self.pongs.pop_front() {
            return Some(ProbeOut::Pong {
                size: p.size,
                nonce: p.nonce,
            });
        }
        if self.state != State::Probing {
            return None;
        }
        let out = if self.send_small {
            self.send_small = false;
            (Channel::Priority, SMALL_PROBE_LEN as u32)
        } else if self.send_big {
            self.send_big = false;
            (Channel::Data, self.big_size)
        } else {
            return None;
        };
        if self.deadline.is_none() {
            self.rounds += 1;
            self.deadline = Some(now.plus(self.timeout));
        }
        Some(ProbeOut::Ping {
            channel: out.0,
            size: out.1,
            nonce: self.nonce,
        })
    }

    /// Resends or gives up; returns the failure to report, once.
    pub fn on_timeout(&mut self, now: Instant, peer: u64) -> Option<ConnError> {
        let d = self.deadline?;
        if d > now || self.state != State::Probing {
            return None;
        }
        self.deadline = None;
        if self.rounds >= self.retries {
            self.state = State::Failed;
            return Some(if self.small_ok {
                ConnError::PathMtuTooSmall {
                    peer,
                    configured: self.big_size,
                }
            } else {
                ConnError::PeerUnreachable {
                    peer,
                    attempts: self.rounds,
                }
            });
        }
        self.send_small = !self.small_ok;
        self.send_big = !self.big_ok;
        None
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
}
