//! Deterministic scenarios and a randomized two-sided simulation of the handshake.

use super::*;
use seeded_rng::Rng;

fn allow(_: CudaDevice, _: CudaDevice) -> Access {
    Access::Allowed
}

fn sends(actions: &[Action]) -> Vec<CtrlMsg> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(m) => Some(*m),
            _ => None,
        })
        .collect()
}

#[test]
fn simple_request_and_ack() {
    let mut a = PeerIpc::new(0, 1).unwrap();
    let mut b = PeerIpc::new(1, 0).unwrap();
    let out = a.on_send_of_device_buffer(Some(0));
    assert_eq!(out, [Action::Send(CtrlMsg::Req { device: 0 })]);
    assert_eq!(a.state(), IpcState::Sent);
    assert!(
        a.on_send_of_device_buffer(Some(0)).is_empty(),
        "one request at a time"
    );
    let out = b.on_message(CtrlMsg::Req { device: 0 }, Some(1), allow);
    assert_eq!(out, [Action::EnableIpc, Action::Send(CtrlMsg::Ack)]);
    assert_eq!((b.state(), b.peer_device()), (IpcState::Acked, Some(0)));
    assert_eq!(
        a.on_message(CtrlMsg::Ack, Some(0), allow),
        [Action::EnableIpc]
    );
    assert_eq!(a.state(), IpcState::Ok);
    assert!(a.ipc_enabled() && b.ipc_enabled());
    assert!(a.on_send_of_device_buffer(Some(0)).is_empty());
}

#[test]
fn simultaneous_requests_are_answered_by_the_higher_rank() {
    for deliver_low_first in [false, true] {
        let mut low = PeerIpc::new(2, 5).unwrap();
        let mut high = PeerIpc::new(5, 2).unwrap();
        let req_low = sends(&low.on_send_of_device_buffer(Some(0)))[0];
        let req_high = sends(&high.on_send_of_device_buffer(Some(1)))[0];
        let (to_high, to_low);
        if deliver_low_first {
            to_low = low.on_message(req_high, Some(0), allow);
            to_high = high.on_message(req_low, Some(1), allow);
        } else {
            to_high = high.on_message(req_low, Some(1), allow);
            to_low = low.on_message(req_high, Some(0), allow);
        }
        assert!(
            to_low.is_empty(),
            "the lower rank drops the higher's request"
        );
        assert_eq!(sends(&to_high), [CtrlMsg::Ack]);
        assert_eq!(
            low.on_message(CtrlMsg::Ack, Some(0), allow),
            [Action::EnableIpc]
        );
        assert_eq!((low.state(), high.state()), (IpcState::Ok, IpcState::Acked));
    }
}

#[test]
fn not_ready_peer_is_retried_max_tries_times_then_both_give_up() {
    let mut a = PeerIpc::new(0, 1).unwrap();
    let mut b = PeerIpc::new(1, 0).unwrap();
    for i in 1..=MAX_TRIES {
        let req = sends(&a.on_send_of_device_buffer(Some(0)));
        assert_eq!(req.len(), 1);
        assert_eq!(a.tries(), i);
        let reply = sends(&b.on_message(req[0], None, allow));
        assert_eq!(reply, [CtrlMsg::NotReady]);
        assert_eq!(b.state(), IpcState::Init);
        assert!(a.on_message(reply[0], Some(0), allow).is_empty());
        assert_eq!(a.state(), IpcState::Init);
    }
    let out = a.on_send_of_device_buffer(Some(0));
    assert_eq!(
        out,
        [
            Action::MarkBad(BadReason::TooManyTries),
            Action::Send(CtrlMsg::Nak)
        ]
    );
    assert_eq!(a.tries(), MAX_TRIES);
    let out = b.on_message(CtrlMsg::Nak, Some(1), allow);
    assert_eq!(out, [Action::MarkBad(BadReason::PeerRefused)]);
    // A later request from b is refused, not left unanswered.
    assert!(b.on_send_of_device_buffer(Some(1)).is_empty());
    assert_eq!(
        sends(&a.on_message(CtrlMsg::Req { device: 1 }, Some(0), allow)),
        [CtrlMsg::Nak]
    );
}

#[test]
fn denied_access_is_reported_to_both_sides() {
    let mut a = PeerIpc::new(0, 1).unwrap();
    let mut b = PeerIpc::new(1, 0).unwrap();
    let req = sends(&a.on_send_of_device_buffer(Some(0)))[0];
    let deny = |_, _| Access::Denied(Denial::NoPeerAccess);
    let out = b.on_message(req, Some(1), deny);
    assert_eq!(
        out,
        [
            Action::MarkBad(BadReason::Denied(Denial::NoPeerAccess)),
            Action::Send(CtrlMsg::Nak)
        ]
    );
    a.on_message(CtrlMsg::Nak, Some(0), allow);
    assert_eq!((a.state(), b.state()), (IpcState::Bad, IpcState::Bad));
    assert!(a.on_local_failure().is_empty(), "already final");
    let mut c = PeerIpc::new(3, 4).unwrap();
    assert_eq!(
        c.on_local_failure(),
        [
            Action::MarkBad(BadReason::LocalFailure),
            Action::Send(CtrlMsg::Nak)
        ]
    );
    assert!(BadReason::TooManyTries.to_string().contains('5'));
}

#[test]
fn access_policy_and_construction() {
    let never = |_, _| -> Result<bool, ()> { panic!("same device must not query the driver") };
    assert_eq!(decide_access(1, 1, true, never), Access::Allowed);
    assert_eq!(
        decide_access(1, 1, false, never),
        Access::Denied(Denial::SameDeviceDisallowed)
    );
    assert_eq!(
        decide_access(0, 1, false, |_, _| Ok::<_, ()>(true)),
        Access::Allowed
    );
    assert_eq!(
        decide_access(0, 1, true, |_, _| Ok::<_, ()>(false)),
        Access::Denied(Denial::NoPeerAccess)
    );
    assert_eq!(
        decide_access(0, 1, true, |_, _| Err(())),
        Access::Denied(Denial::QueryFailed)
    );
    assert_eq!(PeerIpc::new(3, 3).unwrap_err(), SameRank(3));
    assert!(
        PeerIpc::new(3, 3)
            .unwrap_err()
            .to_string()
            .contains("itself")
    );
}

#[test]
fn control_messages_round_trip_through_bytes() {
    for m in [
        CtrlMsg::Req { device: 0 },
        CtrlMsg::Req { device: -1 },
        CtrlMsg::Req { device: i32::MAX },
        CtrlMsg::Ack,
        CtrlMsg::NotReady,
        CtrlMsg::Nak,
    ] {
        assert_eq!(CtrlMsg::decode(&m.encode()), Ok(m));
    }
    assert_eq!(CtrlMsg::Ack.encode()[0], 11, "C ipcCtrlMsg numbering");
    assert_eq!(CtrlMsg::decode(&[0; 7]), Err(DecodeError::Length(7)));
    assert_eq!(
        CtrlMsg::decode(&[9, 0, 0, 0, 0, 0, 0, 0]),
        Err(DecodeError::Kind(9))
    );
}

/// One process in the simulation.
struct Side {
    ipc: PeerIpc,
    device: CudaDevice,
    /// Step from which CUDA is initialised (monotonic, as a CUDA context is).
    ready_at: Option<u32>,
    triggers_left: u32,
    reqs_sent: u32,
    enables: u32,
    bads: u32,
}

impl Side {
    fn local(&self, step: u32) -> Option<CudaDevice> {
        self.ready_at.filter(|&r| step >= r).map(|_| self.device)
    }
}

struct World {
    sides: [Side; 2],
    /// In flight: (destination side, message). Delivered in any order.
    wire: Vec<(usize, CtrlMsg)>,
    /// access[requester_device][responder_device], decided by the responder.
    access: [[bool; 2]; 2],
}

impl World {
    fn apply(&mut self, from: usize, actions: Vec<Action>) {
        let s = &mut self.sides[from];
        for a in actions {
            match a {
                Action::Send(m) => {
                    if matches!(m, CtrlMsg::Req { .. }) {
                        s.reqs_sent += 1;
                    }
                    self.wire.push((1 - from, m));
                }
                Action::EnableIpc => s.enables += 1,
                Action::MarkBad(_) => s.bads += 1,
            }
        }
    }
}

/// Run one random schedule to quiescence and check the end state. Returns whether IPC
/// ended enabled, for coverage accounting.
fn simulate(seed: u64) -> (bool, bool) {
    let mut rng = Rng::new(seed);
    let ranks = if rng.percent(50) { (0, 1) } else { (7, 3) };
    let mk = |me, peer, rng: &mut Rng| Side {
        ipc: PeerIpc::new(me, peer).unwrap(),
        device: rng.below(2) as i32,
        ready_at: if rng.percent(85) {
            Some(rng.below(8) as u32)
        } else {
            None
        },
        triggers_left: rng.below(12) as u32,
        reqs_sent: 0,
        enables: 0,
        bads: 0,
    };
    let a = mk(ranks.0, ranks.1, &mut rng);
    let b = mk(ranks.1, ranks.0, &mut rng);
    let mut access = [[true; 2]; 2];
    if rng.percent(50) {
        for row in &mut access {
            for x in row.iter_mut() {
                *x = rng.percent(50);
            }
        }
    }
    let mut w = World {
        sides: [a, b],
        wire: Vec::new(),
        access,
    };
    let both_ready_early = w.sides.iter().all(|s| s.ready_at == Some(0));
    let triggered = w.sides.iter().any(|s| s.triggers_left > 0);
    let mut step = 0u32;
    loop {
        step += 1;
        assert!(step < 10_000, "seed {seed}: no quiescence (livelock)");
        let can_trigger: Vec<usize> = (0..2).filter(|&i| w.sides[i].triggers_left > 0).collect();
        if can_trigger.is_empty() && w.wire.is_empty() {
            break;
        }
        let deliver = !w.wire.is_empty() && (can_trigger.is_empty() || rng.percent(50));
        if deliver {
            let (to, msg) = w.wire.swap_remove(rng.below(w.wire.len() as u64) as usize);
            let local = w.sides[to].local(step);
            let acc = w.access;
            let out = w.sides[to].ipc.on_message(msg, local, |mine, peer| {
                if acc[peer as usize][mine as usize] {
                    Access::Allowed
                } else {
                    Access::Denied(Denial::NoPeerAccess)
                }
            });
            w.apply(to, out);
        } else {
            let i = can_trigger[rng.below(can_trigger.len() as u64) as usize];
            w.sides[i].triggers_left -= 1;
            let local = w.sides[i].local(step);
            let out = w.sides[i].ipc.on_send_of_device_buffer(local);
            w.apply(i, out);
        }
        for s in &w.sides {
            assert!(s.ipc.tries() <= MAX_TRIES, "seed {seed}");
            assert!(s.reqs_sent <= MAX_TRIES, "seed {seed}: too many requests");
            assert_eq!(s.reqs_sent, s.ipc.tries(), "seed {seed}");
        }
    }
    let [a, b] = &w.sides;
    let (sa, sb) = (a.ipc.state(), b.ipc.state());
    assert!(
        sa != IpcState::Sent && sb != IpcState::Sent,
        "seed {seed}: waiting forever: {sa:?} {sb:?}"
    );
    assert_eq!(
        a.ipc.ipc_enabled(),
        b.ipc.ipc_enabled(),
        "seed {seed}: asymmetric IPC {sa:?} {sb:?}"
    );
    assert_eq!(
        sa == IpcState::Bad,
        sb == IpcState::Bad,
        "seed {seed}: one gave up alone {sa:?} {sb:?}"
    );
    for s in [a, b] {
        assert_eq!(
            s.enables,
            u32::from(s.ipc.ipc_enabled()),
            "seed {seed}: EnableIpc once"
        );
        assert_eq!(
            s.bads,
            u32::from(s.ipc.state() == IpcState::Bad),
            "seed {seed}"
        );
    }
    let all_allowed = w.access.iter().flatten().all(|&x| x);
    let none_allowed = w.access.iter().flatten().all(|&x| !x);
    if both_ready_early && triggered {
        if all_allowed {
            assert!(
                a.ipc.ipc_enabled(),
                "seed {seed}: tie-break did not resolve"
            );
        }
        if none_allowed {
            assert_eq!(sa, IpcState::Bad, "seed {seed}");
        }
    }
    (a.ipc.ipc_enabled(), sa == IpcState::Bad)
}

#[test]
fn random_interleavings_end_symmetric_without_deadlock() {
    let (mut enabled, mut bad, mut neither) = (0, 0, 0);
    for seed in 0..20_000 {
        match simulate(seed) {
            (true, _) => enabled += 1,
            (_, true) => bad += 1,
            _ => neither += 1,
        }
    }
    // The schedule generator must reach every outcome often enough to mean something.
    assert!(
        enabled > 1000 && bad > 1000 && neither > 500,
        "{enabled} {bad} {neither}"
    );
}
