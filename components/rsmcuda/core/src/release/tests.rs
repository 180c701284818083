//! The owner's side (what it checks when, what it announces to whom), the wire format,
//! and the whole protocol against the receiver's cache on the fake GPU.

use std::cell::RefCell;
use std::collections::HashMap;

use super::*;
use crate::cache::fake::FakeGpu;
use crate::cache::{CacheConfig, IpcHandle, RemoteCache};
use crate::ipc::CtrlMsg;
use crate::ipc::peers::Envelope;

const MB: u64 = 1 << 20;

fn region(tag: u8, base: u64, size: u64) -> DeviceRegion {
    DeviceRegion {
        handle: IpcHandle([tag; 64]),
        base,
        size,
    }
}

/// An owner's address space: base → buffer id of the live allocations there; counts
/// the probes (driver calls).
#[derive(Default)]
struct Owner {
    live: RefCell<HashMap<u64, u64>>,
    probes: RefCell<u64>,
}

impl Owner {
    fn probe(&self, base: u64) -> Probe {
        *self.probes.borrow_mut() += 1;
        self.live
            .borrow()
            .get(&base)
            .map_or(Probe::Gone, |&id| Probe::Id(id))
    }
    fn probes(&self) -> u64 {
        *self.probes.borrow()
    }
}

fn drain(x: &mut Exports) -> Vec<(u32, Vec<u64>)> {
    std::iter::from_fn(|| x.next_batch(MAX_PER_MESSAGE))
        .map(|(p, rs)| (p, rs.iter().map(|r| r.base).collect()))
        .collect()
}

#[test]
fn release_messages_round_trip_and_bad_ones_are_refused() {
    let m = ReleaseMsg {
        from: 3,
        regions: vec![region(1, 0x1000, 4096), region(2, 0x20_0000, MB)],
    };
    let b = m.encode();
    assert_eq!(b.len(), HEADER_LEN + 2 * ENTRY_LEN);
    assert!(is_release(&b));
    assert_eq!(ReleaseMsg::decode(&b), Ok(m));
    // A handshake envelope is not one (kinds 10..=13 at the same place).
    for msg in [
        CtrlMsg::Ack,
        CtrlMsg::Nak,
        CtrlMsg::NotReady,
        CtrlMsg::Req { device: 14 },
    ] {
        let e = Envelope { from: 1, msg }.encode();
        assert!(!is_release(&e));
        assert_eq!(ReleaseMsg::decode(&e), Err(ReleaseDecodeError::NotRelease));
    }
    assert_eq!(
        ReleaseMsg::decode(&b[..b.len() - 1]),
        Err(ReleaseDecodeError::Length {
            count: 2,
            len: b.len() - 1
        })
    );
    let empty = ReleaseMsg {
        from: 0,
        regions: vec![],
    }
    .encode();
    assert!(matches!(
        ReleaseMsg::decode(&empty),
        Err(ReleaseDecodeError::Length { count: 0, .. })
    ));
    let mut host = b.clone();
    host[HEADER_LEN..HEADER_LEN + ENTRY_LEN].fill(0);
    assert_eq!(
        ReleaseMsg::decode(&host),
        Err(ReleaseDecodeError::Region(0))
    );
    assert_eq!(max_per_message(4096), MAX_PER_MESSAGE);
    assert_eq!(max_per_message(HEADER_LEN + 3 * ENTRY_LEN + 79), 3);
    assert_eq!(max_per_message(8), 0);
    const { assert!(HEADER_LEN + MAX_PER_MESSAGE * ENTRY_LEN <= 2048) };
}

/// The steady state: the same buffers exported over and over cost no check at all.
#[test]
fn exporting_known_allocations_asks_the_driver_nothing() {
    let owner = Owner::default();
    let mut x = Exports::new(ExportsConfig::new(0, 4));
    for (i, base) in [0x10_0000u64, 0x20_0000].iter().enumerate() {
        owner.live.borrow_mut().insert(*base, i as u64 + 1);
    }
    for round in 0..1000 {
        for (i, base) in [0x10_0000u64, 0x20_0000].iter().enumerate() {
            x.exported(
                Some(1 + round % 3),
                region(i as u8, *base, MB),
                i as u64 + 1,
                |b| owner.probe(b),
            );
        }
    }
    // Only the second allocation's first export checked the first one.
    assert_eq!(owner.probes(), 1);
    assert_eq!((x.tracked(), x.pending(), x.stats().known), (2, 0, 1998));
}

/// A new export checks the others (at most CHECKS_PER_EXPORT), and what was freed is
/// announced to exactly the peers its handle went to.
#[test]
fn a_new_export_finds_freed_allocations_and_tells_their_peers() {
    let owner = Owner::default();
    let mut x = Exports::new(ExportsConfig::new(0, 4));
    let export = |x: &mut Exports, peer, tag: u8, base: u64, id| {
        owner.live.borrow_mut().insert(base, id);
        x.exported(Some(peer), region(tag, base, MB), id, |b| owner.probe(b))
    };
    export(&mut x, 1, 1, 0x10_0000, 1);
    export(&mut x, 2, 1, 0x10_0000, 1);
    export(&mut x, 3, 2, 0x40_0000, 2);
    owner.live.borrow_mut().remove(&0x10_0000);
    assert_eq!(x.pending(), 0, "nobody looked yet");
    export(&mut x, 3, 3, 0x80_0000, 3);
    assert_eq!(
        drain(&mut x),
        vec![(1, vec![0x10_0000]), (2, vec![0x10_0000])]
    );
    assert_eq!(x.stats().freed, 1);
    // Bounded: with 20 allocations tracked a new export checks 8.
    let before = owner.probes();
    for i in 0..20u64 {
        export(&mut x, 1, 10 + i as u8, 0x1000_0000 + i * 2 * MB, 100 + i);
    }
    let per_export = owner.probes() - before;
    assert!(per_export <= 20 * CHECKS_PER_EXPORT as u64, "{per_export}");
    let before = owner.probes();
    export(&mut x, 1, 99, 0x4000_0000, 999);
    assert_eq!(owner.probes() - before, CHECKS_PER_EXPORT as u64);
}

/// A new allocation overlapping a tracked one (at its base or not) means that one was
/// freed: announced without asking the driver.
#[test]
fn an_overlapping_new_allocation_frees_the_old_one_without_a_check() {
    let mut x = Exports::new(ExportsConfig {
        checks_per_export: 0,
        ..ExportsConfig::new(2, 4)
    });
    let never = |_| -> Probe { panic!("no check expected") };
    x.exported(Some(0), region(1, 0x10_0000, MB), 1, never);
    x.exported(Some(1), region(2, 0x30_0000, MB), 2, never);
    // Same base, new id.
    x.exported(Some(3), region(3, 0x10_0000, MB), 3, never);
    // Starting inside the second one.
    x.exported(Some(3), region(4, 0x20_0000, 2 * MB), 4, never);
    assert_eq!(
        drain(&mut x),
        vec![(0, vec![0x10_0000]), (1, vec![0x30_0000])]
    );
    // Starting below the third one and reaching into it.
    x.exported(Some(0), region(5, 0, 0x18_0000), 5, never);
    assert_eq!(drain(&mut x), vec![(3, vec![0x10_0000])]);
    assert_eq!((x.tracked(), x.stats().freed, x.stats().checks), (2, 3, 0));
}

/// Idle progress goes round all tracked allocations, one per call; a probe that cannot
/// say keeps the allocation; an unnamed peer means everyone but us.
#[test]
fn idle_checks_go_round_robin_and_unknown_answers_keep() {
    let owner = Owner::default();
    let mut x = Exports::new(ExportsConfig {
        checks_per_export: 0,
        ..ExportsConfig::new(1, 3)
    });
    for i in 0..5u64 {
        owner.live.borrow_mut().insert(i * 2 * MB, i + 1);
        x.exported(None, region(i as u8, i * 2 * MB, MB), i + 1, |b| {
            owner.probe(b)
        });
    }
    let mut seen = Vec::new();
    let mut calls = 0;
    while seen.len() < 5 {
        calls += 1;
        x.on_idle(|b| {
            seen.push(b);
            Probe::Unknown
        });
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..5).map(|i| i * 2 * MB).collect::<Vec<_>>());
    assert_eq!((x.pending(), calls), (0, 1 + 2 + 4 + 8 + 16), "backing off");
    owner.live.borrow_mut().remove(&(4 * MB));
    // At most one round of checks, backed off to every MAX_IDLE_BACKOFF calls.
    let (before, mut calls) = (owner.probes(), 0);
    while x.pending() == 0 {
        calls += 1;
        x.on_idle(|b| owner.probe(b));
        assert!(calls <= 5 * MAX_IDLE_BACKOFF, "never found");
    }
    assert!(owner.probes() - before <= 5);
    assert_eq!(drain(&mut x), vec![(0, vec![4 * MB]), (2, vec![4 * MB])]);
    assert!(idle_check_due(0) && !idle_check_due(1) && idle_check_due(IDLE_PASSES_PER_CHECK));
}

/// Long-lived buffers only: idle checks settle at one in MAX_IDLE_BACKOFF calls; a new
/// allocation exported starts over at every call.
#[test]
fn idle_checks_back_off_while_everything_is_alive() {
    let owner = Owner::default();
    let mut x = Exports::new(ExportsConfig::new(0, 2));
    owner.live.borrow_mut().insert(0, 1);
    x.exported(Some(1), region(1, 0, MB), 1, |b| owner.probe(b));
    for _ in 0..10_000 {
        x.on_idle(|b| owner.probe(b));
    }
    let settled = owner.probes();
    assert!(
        settled <= 10 + 10_000 / u64::from(MAX_IDLE_BACKOFF),
        "{settled}"
    );
    owner.live.borrow_mut().insert(4 * MB, 2);
    x.exported(Some(1), region(2, 4 * MB, MB), 2, |b| owner.probe(b));
    let before = owner.probes();
    x.on_idle(|b| owner.probe(b));
    assert_eq!(
        owner.probes() - before,
        1,
        "a new allocation: checked at once"
    );
}

#[test]
fn batches_are_bounded_and_an_unsent_batch_goes_first_again() {
    let mut x = Exports::new(ExportsConfig {
        checks_per_export: 0,
        ..ExportsConfig::new(0, 2)
    });
    for i in 0..5u64 {
        x.exported(Some(1), region(i as u8, i * 2 * MB, MB), i, |_| {
            Probe::Unknown
        });
    }
    // Reallocated over all of them.
    x.exported(Some(1), region(9, 0, 10 * MB), 9, |_| Probe::Unknown);
    assert_eq!(x.pending(), 5);
    let (peer, first) = x.next_batch(2).unwrap();
    assert_eq!((peer, first.len()), (1, 2));
    x.unsend(peer, first.clone());
    assert_eq!(x.next_batch(2).unwrap(), (1, first));
    assert_eq!(x.next_batch(10).unwrap().1.len(), 3);
    assert_eq!((x.next_batch(10), x.pending()), (None, 0));
}

#[test]
fn beyond_the_table_limit_the_oldest_is_announced() {
    let mut x = Exports::new(ExportsConfig {
        max_exports: 3,
        checks_per_export: 0,
        ..ExportsConfig::new(0, 2)
    });
    for i in 0..5u64 {
        x.exported(Some(1), region(i as u8, i * 2 * MB, MB), i, |_| {
            Probe::Unknown
        });
    }
    assert_eq!(x.tracked(), 3);
    assert_eq!(drain(&mut x), vec![(1, vec![0, 2 * MB])]);
    assert_eq!(x.stats().overflow, 2);
}

/// The loop of ompi#12971 with every buffer broadcast twice (the case the receiver's
/// cache alone cannot solve: a buffer read twice is kept): 4 owners, each exporting a
/// new allocation (at moving addresses) to the 3 others, the receivers' caches on one
/// fake GPU. After each iteration's frees, and the owners' release notices of what they
/// found so far delivered, the receivers hold at most the mappings of each owner's
/// latest allocation (freed, not yet checked: 3 peers x 4 owners); one idle check per
/// owner brings that to zero. Without the notices they pile up (here until an address
/// comes back: three per owner and receiver).
#[test]
fn the_loop_of_ompi_12971_read_twice_holds_nothing_once_owners_looked() {
    for notices in [true, false] {
        // Each receiver's own process (its mappings) over the owners' allocations.
        let gpus: Vec<FakeGpu> = (0..4).map(|_| FakeGpu::default()).collect();
        let mut caches: Vec<_> = gpus
            .iter()
            .map(|g| RemoteCache::new(g.clone(), CacheConfig::default()))
            .collect();
        let held = || gpus.iter().map(FakeGpu::freed_held).sum::<usize>();
        let owners: Vec<Owner> = (0..4).map(|_| Owner::default()).collect();
        let mut exports: Vec<Exports> = (0..4)
            .map(|r| Exports::new(ExportsConfig::new(r, 4)))
            .collect();
        let deliver = |exports: &mut Vec<Exports>, caches: &mut Vec<RemoteCache<FakeGpu>>| {
            for (owner, x) in exports.iter_mut().enumerate() {
                while let Some((to, regions)) = x.next_batch(MAX_PER_MESSAGE) {
                    let msg = ReleaseMsg::decode(
                        &ReleaseMsg {
                            from: owner as u32,
                            regions,
                        }
                        .encode(),
                    )
                    .unwrap();
                    for r in msg.regions {
                        caches[to as usize].peer_released(msg.from, r.base, &r.handle);
                    }
                }
            }
        };
        let mut id = 0;
        let mut worst = 0;
        for i in 0..200u64 {
            let owner = (i % 4) as u32;
            let base = 0x1_0000_0000 * u64::from(owner + 1) + (i % 3) * 4 * MB;
            let size = MB;
            let handles: Vec<IpcHandle> = gpus.iter().map(|g| g.alloc(owner, base, size)).collect();
            let handle = handles[0];
            assert!(
                handles.iter().all(|h| *h == handle),
                "the same handle for every view"
            );
            id += 1;
            owners[owner as usize].live.borrow_mut().insert(base, id);
            let r = DeviceRegion { handle, base, size };
            for _use in 0..2 {
                for to in (0..4).filter(|&t| t != owner) {
                    exports[owner as usize]
                        .exported(Some(to), r, id, |b| owners[owner as usize].probe(b));
                    let m = caches[to as usize]
                        .lookup(owner, base, size, &handle)
                        .unwrap();
                    caches[to as usize].release(m.id).unwrap();
                }
            }
            for g in &gpus {
                g.free(&handle);
            }
            owners[owner as usize].live.borrow_mut().remove(&base);
            if notices {
                deliver(&mut exports, &mut caches);
            }
            worst = worst.max(held());
        }
        if notices {
            assert!(worst <= 3 * 4, "held {worst} mappings of freed allocations");
            for (o, x) in exports.iter_mut().enumerate() {
                x.on_idle(|b| owners[o].probe(b));
            }
            deliver(&mut exports, &mut caches);
            assert_eq!(held(), 0, "every owner looked once more");
        } else {
            // One per receiver, owner and address, until the address comes back.
            assert_eq!(worst, 3 * 4 * 3, "without notices they pile up");
        }
    }
}
