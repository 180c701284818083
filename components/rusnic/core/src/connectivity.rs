//! Connectivity check at first contact.
//!
//! Two pings go out: a small one on the priority channel and one of exactly the data
//! channel's MTU on the data channel. The peer answers each with a small PONG echoing the
//! ping's nonce and size. Each round resends both every `connectivity_timeout` until the
//! large one is answered. The check fails with a clear error instead of leaving the upper
//! layer hanging, on evidence only:
//! - "path MTU smaller than configured" after `connectivity_retries` rounds in which the
//!   peer answered the round's small ping and not its large one: it was reading its
//!   sockets, so the large datagrams did not reach it;
//! - "unreachable" after `connectivity_retries` rounds without any answer ever.
//!
//! A peer that answered once and then falls silent is alive but not making progress
//! calls (descheduled on a loaded node, or waiting in a runtime call that makes none,
//! as Open MPI 5's PMIx fence in `MPI_Comm_disconnect` does): its silent rounds are
//! evidence of neither, so the check goes on probing and never declares it lost.
//! Data is not held back while the check runs (as in the reference, it runs beside the
//! traffic); on failure the connection fails.

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
    /// Rounds in which the small ping was answered and the large one was not.
    small_only_rounds: u32,
    deadline: Option<Instant>,
    small_ok: bool,
    /// The current round's small ping was answered.
    small_this_round: bool,
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
            small_only_rounds: 0,
            deadline: None,
            small_ok: false,
            small_this_round: false,
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
            self.small_this_round = true;
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
            self.small_this_round = false;
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
        if self.small_this_round {
            self.small_only_rounds += 1;
        }
        let verdict = if self.small_only_rounds >= self.retries {
            Some(ConnError::PathMtuTooSmall {
                peer,
                configured: self.big_size,
            })
        } else if !self.small_ok && self.rounds >= self.retries {
            Some(ConnError::PeerUnreachable {
                peer,
                attempts: self.rounds,
            })
        } else {
            None
        };
        if verdict.is_some() {
            self.state = State::Failed;
            return verdict;
        }
        // Both again: a round's evidence is what answers that round's pings.
        self.send_small = true;
        self.send_big = true;
        None
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RETRIES: u32 = 5;
    const TIMEOUT: u64 = 1_000;
    const BIG: u16 = 9000;
    const NONCE: u32 = 42;

    fn check() -> Connectivity {
        let mut c = Connectivity::new(true, NONCE, BIG, RETRIES, TIMEOUT);
        c.first_contact();
        c
    }

    /// One round at `now`: sends its pings, hands back the pongs that `answer` lets
    /// through (small, big), then lets the round's timer expire.
    fn round(c: &mut Connectivity, now: &mut u64, answer: (bool, bool)) -> Option<ConnError> {
        while let Some(out) = c.poll(Instant(*now)) {
            let ProbeOut::Ping { size, nonce, .. } = out else {
                panic!("{out:?}");
            };
            let small = size as usize == SMALL_PROBE_LEN;
            if (small && answer.0) || (!small && answer.1) {
                c.on_pong(Probe { nonce, size });
            }
        }
        if c.is_verified() {
            return None;
        }
        *now += TIMEOUT;
        c.on_timeout(Instant(*now), 7)
    }

    #[test]
    fn large_pings_lost_while_small_ones_are_answered_is_a_path_mtu_problem() {
        let (mut c, mut now) = (check(), 0);
        for _ in 1..RETRIES {
            assert_eq!(round(&mut c, &mut now, (true, false)), None);
        }
        assert!(matches!(
            round(&mut c, &mut now, (true, false)),
            Some(ConnError::PathMtuTooSmall { peer: 7, .. })
        ));
    }

    #[test]
    fn never_answered_is_unreachable() {
        let (mut c, mut now) = (check(), 0);
        for _ in 1..RETRIES {
            assert_eq!(round(&mut c, &mut now, (false, false)), None);
        }
        assert!(matches!(
            round(&mut c, &mut now, (false, false)),
            Some(ConnError::PeerUnreachable { peer: 7, .. })
        ));
    }

    /// A peer that answered a small ping, then stopped making progress calls for a long
    /// time (a runtime fence), is not declared lost, and passes once it answers again.
    #[test]
    fn a_silent_peer_that_answered_before_is_not_lost() {
        let (mut c, mut now) = (check(), 0);
        assert_eq!(round(&mut c, &mut now, (true, false)), None);
        for _ in 0..100 * RETRIES {
            assert_eq!(round(&mut c, &mut now, (false, false)), None);
        }
        // Small-only rounds still need RETRIES of their own to blame the MTU.
        for _ in 0..RETRIES - 2 {
            assert_eq!(round(&mut c, &mut now, (true, false)), None);
        }
        assert_eq!(round(&mut c, &mut now, (true, true)), None);
        assert!(c.is_verified());
    }

    /// Each round resends the small ping too, so that its answer is that round's.
    #[test]
    fn every_round_sends_both_pings() {
        let (mut c, mut now) = (check(), 0);
        assert_eq!(round(&mut c, &mut now, (true, false)), None);
        let mut sizes = Vec::new();
        while let Some(ProbeOut::Ping { size, .. }) = c.poll(Instant(now)) {
            sizes.push(size);
        }
        assert_eq!(sizes, vec![SMALL_PROBE_LEN as u32, u32::from(BIG)]);
    }
}
