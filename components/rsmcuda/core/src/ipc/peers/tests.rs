//! The node-wide handshake over two (and three) simulated processes: control messages
//! delivered in random order, CUDA contexts appearing late, pushes refused for lack of
//! fragments, and the properties the BTL relies on checked at the end of every run.

use super::*;
use crate::ipc::{IpcState, MAX_TRIES};
use seeded_rng::Rng;

fn cfg(my_rank: u32, nranks: u32, host_cuda_aware: bool) -> PeersConfig {
    PeersConfig {
        my_rank,
        nranks,
        same_gpu_allowed: true,
        host_cuda_aware,
    }
}

/// One simulated process: its handshakes, its device (once its context exists) and
/// what it told ob1.
struct Proc {
    peers: IpcPeers,
    device: CudaDevice,
    ready: bool,
    add_ipc: Vec<u32>,
    bad: Vec<(u32, BadReason)>,
    reqs_sent: Vec<u32>,
}

impl Proc {
    fn local(&self) -> Option<CudaDevice> {
        self.ready.then_some(self.device)
    }
}

/// In-flight control messages: (to, bytes on the wire).
type Wire = Vec<(u32, Vec<u8>)>;

/// Carries out a process's outputs; a push fails with `refuse` percent (requeued).
fn flush(me: u32, p: &mut Proc, wire: &mut Wire, rng: &mut Rng, refuse: u64) {
    while let Some(o) = p.peers.pop() {
        match o {
            Output::Send { to, msg } => {
                if rng.percent(refuse) {
                    p.peers.requeue(o);
                    return;
                }
                if matches!(msg, CtrlMsg::Req { .. }) {
                    p.reqs_sent[to as usize] += 1;
                }
                wire.push((to, Envelope { from: me, msg }.encode().to_vec()));
            }
            Output::AddCudaIpc { peer } => p.add_ipc.push(peer),
            Output::Bad { peer, reason } => p.bad.push((peer, reason)),
        }
    }
}

struct Sim {
    procs: Vec<Proc>,
    wire: Wire,
    rng: Rng,
    access: bool,
}

impl Sim {
    fn new(seed: u64, devices: &[CudaDevice], aware: &[bool], access: bool) -> Sim {
        let n = devices.len() as u32;
        let procs = (0..n)
            .map(|r| Proc {
                peers: IpcPeers::new(cfg(r, n, aware[r as usize])),
                device: devices[r as usize],
                ready: false,
                add_ipc: Vec::new(),
                bad: Vec::new(),
                reqs_sent: vec![0; n as usize],
            })
            .collect();
        Sim {
            procs,
            wire: Vec::new(),
            rng: Rng::new(seed),
            access,
        }
    }

    fn step(&mut self) {
        let n = self.procs.len() as u64;
        let me = self.rng.below(n) as usize;
        match self.rng.below(10) {
            0 => self.procs[me].ready = true,
            1..=4 => {
                let to = self.rng.below(n) as u32;
                let local = self.procs[me].local();
                self.procs[me].peers.on_send(to, local);
            }
            _ if !self.wire.is_empty() => {
                let i = self.rng.below(self.wire.len() as u64) as usize;
                let (to, bytes) = self.wire.swap_remove(i);
                let p = &mut self.procs[to as usize];
                let local = p.local();
                let access = self.access;
                p.peers
                    .on_control(&bytes, local, |_, _| Ok::<bool, ()>(access))
                    .expect("well-formed message from a peer");
            }
            _ => {}
        }
        let refuse = 20;
        let p = &mut self.procs[me];
        flush(me as u32, p, &mut self.wire, &mut self.rng, refuse);
    }

    /// Everyone gets a context and keeps sending until nothing moves any more.
    fn settle(&mut self) {
        for p in &mut self.procs {
            p.ready = true;
        }
        for _ in 0..10_000 {
            let n = self.procs.len();
            for me in 0..n {
                for to in 0..n as u32 {
                    let local = self.procs[me].local();
                    self.procs[me].peers.on_send(to, local);
                }
                let p = &mut self.procs[me];
                flush(me as u32, p, &mut self.wire, &mut self.rng, 0);
            }
            if self.wire.is_empty() && self.procs.iter().all(|p| p.peers.pending() == 0) {
                return;
            }
            let (to, bytes) = self.wire.remove(0);
            let p = &mut self.procs[to as usize];
            let local = p.local();
            let access = self.access;
            p.peers
                .on_control(&bytes, local, |_, _| Ok::<bool, ()>(access))
                .unwrap();
            let p = &mut self.procs[to as usize];
            flush(to, p, &mut self.wire, &mut self.rng, 0);
        }
        panic!("the handshake did not settle");
    }

    fn check(&self, seed: u64) {
        let n = self.procs.len() as u32;
        for a in 0..n {
            let pa = &self.procs[a as usize];
            for b in (0..n).filter(|&b| b != a) {
                let pb = &self.procs[b as usize];
                let (ea, eb) = (pa.peers.ipc_enabled(b), pb.peers.ipc_enabled(a));
                assert_eq!(ea, eb, "seed {seed}: {a}<->{b} disagree");
                let state = pa.peers.peer(b).unwrap().state();
                assert_ne!(
                    state,
                    IpcState::Sent,
                    "seed {seed}: {a} waits for {b} forever"
                );
                assert!(
                    pa.reqs_sent[b as usize] <= MAX_TRIES,
                    "seed {seed}: {a} asked {b} {} times",
                    pa.reqs_sent[b as usize]
                );
                let told = pa.add_ipc.iter().filter(|&&p| p == b).count();
                let aware = pa.peers.config().host_cuda_aware;
                assert_eq!(
                    told,
                    usize::from(ea && aware),
                    "seed {seed}: ob1 of {a} told {told} times about {b}"
                );
                if !aware {
                    assert!(
                        pa.add_ipc.is_empty(),
                        "seed {seed}: ADD_CUDA_IPC in a non-CUDA ob1"
                    );
                }
                let bad = pa.bad.iter().filter(|(p, _)| *p == b).count();
                assert!(bad <= 1, "seed {seed}: {a} marked {b} bad {bad} times");
            }
        }
    }
}

#[test]
fn envelope_round_trip_and_malformed_bytes() {
    let e = Envelope {
        from: 7,
        msg: CtrlMsg::Req { device: 3 },
    };
    assert_eq!(Envelope::decode(&e.encode()), Ok(e));
    assert_eq!(
        Envelope::decode(&e.encode()[..5]),
        Err(DecodeError::Length(5))
    );
    let mut bad = e.encode();
    bad[4] = 99;
    assert_eq!(Envelope::decode(&bad), Err(DecodeError::Kind(99)));
}

#[test]
fn a_control_message_from_a_stranger_or_from_ourselves_is_refused() {
    let mut p = IpcPeers::new(cfg(1, 3, true));
    let from_self = Envelope {
        from: 1,
        msg: CtrlMsg::Ack,
    };
    let from_far = Envelope {
        from: 3,
        msg: CtrlMsg::Ack,
    };
    for (env, who) in [(from_self, 1), (from_far, 3)] {
        assert_eq!(
            p.on_control(&env.encode(), Some(0), |_, _| Ok::<bool, ()>(true)),
            Err(ControlError::UnknownSender(who))
        );
    }
    assert!(matches!(
        p.on_control(&[1, 2, 3], Some(0), |_, _| Ok::<bool, ()>(true)),
        Err(ControlError::Decode(DecodeError::Length(3)))
    ));
    assert_eq!(p.pending(), 0);
}

#[test]
fn one_exchange_tells_both_ob1s_once() {
    let mut a = IpcPeers::new(cfg(0, 2, true));
    let mut b = IpcPeers::new(cfg(1, 2, true));
    assert!(a.wants_to_ask(1));
    a.on_send(1, Some(0));
    assert_eq!(
        a.pop(),
        Some(Output::Send {
            to: 1,
            msg: CtrlMsg::Req { device: 0 }
        })
    );
    assert!(!a.wants_to_ask(1), "one request at a time");
    let req = Envelope {
        from: 0,
        msg: CtrlMsg::Req { device: 0 },
    };
    b.on_control(&req.encode(), Some(1), |x, y| {
        assert_eq!((x, y), (1, 0), "asked about (ours, theirs)");
        Ok::<bool, ()>(true)
    })
    .unwrap();
    assert_eq!(b.pop(), Some(Output::AddCudaIpc { peer: 0 }));
    assert_eq!(
        b.pop(),
        Some(Output::Send {
            to: 0,
            msg: CtrlMsg::Ack
        })
    );
    let ack = Envelope {
        from: 1,
        msg: CtrlMsg::Ack,
    };
    a.on_control(&ack.encode(), Some(0), |_, _| Ok::<bool, ()>(true))
        .unwrap();
    assert_eq!(a.pop(), Some(Output::AddCudaIpc { peer: 1 }));
    assert_eq!(a.pop(), None);
    assert!(a.ipc_enabled(1) && b.ipc_enabled(0));
    a.on_send(1, Some(0));
    assert_eq!(a.pending(), 0, "established: nothing more to say");
}

#[test]
fn a_host_without_cuda_support_never_asks_and_refuses_requests() {
    let mut plain = IpcPeers::new(cfg(1, 2, false));
    plain.on_send(0, Some(0));
    assert!(!plain.wants_to_ask(0));
    assert_eq!(plain.pending(), 0);
    let req = Envelope {
        from: 0,
        msg: CtrlMsg::Req { device: 0 },
    };
    // No context either (the usual case there): still a refusal, not NOTREADY.
    plain
        .on_control(&req.encode(), None, |_, _| -> Result<bool, ()> {
            panic!("no driver query in a host without CUDA support")
        })
        .unwrap();
    assert_eq!(
        plain.pop(),
        Some(Output::Bad {
            peer: 0,
            reason: BadReason::Denied(Denial::HostNotCudaAware)
        })
    );
    assert_eq!(
        plain.pop(),
        Some(Output::Send {
            to: 0,
            msg: CtrlMsg::Nak
        })
    );
}

#[test]
fn same_gpu_forbidden_by_parameter_ends_bad_on_both_sides() {
    let mut a = IpcPeers::new(cfg(0, 2, true));
    let mut b = IpcPeers::new(PeersConfig {
        same_gpu_allowed: false,
        ..cfg(1, 2, true)
    });
    a.on_send(1, Some(4));
    let Some(Output::Send { msg, .. }) = a.pop() else {
        panic!("a request")
    };
    b.on_control(&Envelope { from: 0, msg }.encode(), Some(4), |_, _| {
        Ok::<bool, ()>(true)
    })
    .unwrap();
    assert_eq!(
        b.pop(),
        Some(Output::Bad {
            peer: 0,
            reason: BadReason::Denied(Denial::SameDeviceDisallowed)
        })
    );
    let Some(Output::Send { msg, .. }) = b.pop() else {
        panic!("a refusal")
    };
    a.on_control(&Envelope { from: 1, msg }.encode(), Some(4), |_, _| {
        Ok::<bool, ()>(true)
    })
    .unwrap();
    assert_eq!(
        a.pop(),
        Some(Output::Bad {
            peer: 1,
            reason: BadReason::PeerRefused
        })
    );
    assert!(!a.ipc_enabled(1) && !b.ipc_enabled(0));
}

#[test]
fn random_interleavings_of_two_and_three_processes() {
    // (pairs enabled, pairs bad): the schedules must reach both outcomes.
    let (mut enabled, mut bad) = (0, 0);
    for seed in 0..3000u64 {
        let mut rng = Rng::new(seed ^ 0x5eed);
        let n = 2 + rng.below(2) as usize;
        let devices: Vec<CudaDevice> = (0..n).map(|_| rng.below(2) as i32).collect();
        let aware: Vec<bool> = (0..n).map(|_| !rng.percent(15)).collect();
        let access = !rng.percent(20);
        let mut sim = Sim::new(seed, &devices, &aware, access);
        for _ in 0..rng.below(200) {
            sim.step();
        }
        sim.settle();
        sim.check(seed);
        for p in &sim.procs {
            let others = (0..n as u32).filter(|&r| r != p.peers.config().my_rank);
            for r in others {
                if p.peers.ipc_enabled(r) {
                    enabled += 1;
                } else {
                    bad += 1;
                }
            }
        }
        // With every host CUDA-aware and access granted, nothing can end bad except by
        // running out of tries against a peer without a context (and its peer hearing
        // of that).
        if aware.iter().all(|&a| a) && access {
            for (a, p) in sim.procs.iter().enumerate() {
                for (b, reason) in &p.bad {
                    assert!(
                        matches!(reason, BadReason::TooManyTries | BadReason::PeerRefused),
                        "seed {seed}: {a} gave up on {b}: {reason}"
                    );
                }
            }
        }
    }
    assert!(enabled > 1000 && bad > 1000, "enabled {enabled}, bad {bad}");
}
