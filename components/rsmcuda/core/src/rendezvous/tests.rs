use std::collections::HashMap;
use std::time::Duration;

use seeded_rng::Rng;

use super::*;

fn name(job: u32, vpid: u32) -> u64 {
    u64::from(job) << 32 | u64::from(vpid)
}

#[test]
fn the_lower_name_creates_and_both_sides_agree() {
    let (a, b) = (name(7, 0), name(8, 2));
    assert_eq!(role(a, b), Role::Create);
    assert_eq!(role(b, a), Role::Attach);
    assert_eq!(jobid(b), 8);
}

#[test]
fn split_sorts_peers_by_job_contact_and_sizes() {
    let me = name(2, 1);
    let sizes = Some((4096, 32768));
    let peers = [
        Candidate { name: me, sizes },
        Candidate {
            name: name(2, 0),
            sizes,
        },
        Candidate {
            name: name(2, 2),
            sizes: None,
        },
        Candidate {
            name: name(3, 0),
            sizes,
        },
        Candidate {
            name: name(1, 0),
            sizes,
        },
        Candidate {
            name: name(1, 1),
            sizes: Some((8192, 32768)),
        },
        Candidate {
            name: name(4, 0),
            sizes,
        },
    ];
    let s = split(me, (4096, 32768), &peers, &[name(4, 0)]);
    assert_eq!(s.job, [name(2, 0)]);
    assert_eq!(s.silent, [name(2, 2)]);
    assert_eq!(
        s.pairs,
        [(name(1, 0), Role::Attach), (name(3, 0), Role::Create)]
    );
    assert_eq!(s.mismatched, [name(1, 1)]);
}

#[test]
fn give_up_at_the_deadline_and_count_a_late_attach() {
    let t = Duration::from_millis(100);
    let mut r = Rendezvous::new([(1, Role::Create), (2, Role::Attach), (3, Role::Create)], t);
    r.settle(|k| *k == 3, Outcome::Failed);
    let mut polled = Vec::new();
    assert!(!r.round(
        Duration::ZERO,
        |k, _| {
            polled.push(*k);
            Poll::Waiting
        },
        |_, _| unreachable!("before the deadline"),
    ));
    assert_eq!(polled, [1, 2], "a settled meeting is not polled");
    assert!(r.pause() > Duration::ZERO && r.pause() <= Duration::from_millis(5));
    let mut given_up = Vec::new();
    assert!(r.round(
        t,
        |_, _| Poll::Waiting,
        |k, role| {
            given_up.push(*k);
            role == Role::Create
        },
    ));
    assert_eq!(given_up, [1, 2]);
    let out: Vec<_> = r.outcomes().map(|(k, _, o)| (k, o)).collect();
    assert_eq!(
        out,
        [
            (1, Outcome::Ready),
            (2, Outcome::TimedOut),
            (3, Outcome::Failed)
        ]
    );
}

/// The shared state of one pair segment in the model.
#[derive(Default, Clone, Copy)]
struct Seg {
    created: bool,
    attached: bool,
    abandoned: bool,
}

/// Random processes of 2–4 jobs arrive in add_procs at random times (some never: they
/// died in MPI_Init) and meet every peer of another job that lists them (some lists are
/// one-sided). Each runs the protocol: create everything it creates, then rounds until
/// settled. Checked: both sides of every pair end alike (both met, or neither), a pair
/// whose processes both arrive within the timeout of each other meets, and nobody waits
/// longer than the timeout plus one pause.
#[test]
fn random_arrivals_always_settle_alike_and_in_bounded_time() {
    let timeout = Duration::from_millis(20);
    let mut rng = Rng::new(0x5eed_0042);
    for _ in 0..2000 {
        let jobs = rng.range(2, 5) as u32;
        let mut procs: Vec<u64> = Vec::new();
        for j in 1..=jobs {
            for v in 0..rng.range(1, 4) as u32 {
                procs.push(name(j, v));
            }
        }
        // Arrival in µs, or never.
        let arrival: HashMap<u64, Option<u64>> = procs
            .iter()
            .map(|&p| (p, (!rng.percent(10)).then(|| rng.below(40_000))))
            .collect();
        // Who lists whom (mostly both ways).
        let mut lists: HashMap<u64, Vec<u64>> = HashMap::new();
        for &a in &procs {
            for &b in &procs {
                if a < b && jobid(a) != jobid(b) && rng.percent(70) {
                    let one_sided = rng.percent(5);
                    lists.entry(a).or_default().push(b);
                    if !one_sided {
                        lists.entry(b).or_default().push(a);
                    }
                }
            }
        }
        let segs: std::cell::RefCell<HashMap<(u64, u64), Seg>> = Default::default();
        let key = |a: u64, b: u64| (a.min(b), a.max(b));
        struct Run {
            me: u64,
            start: u64,
            next: u64,
            r: Rendezvous<u64>,
            done_at: Option<u64>,
        }
        let mut runs: Vec<Run> = Vec::new();
        for &p in &procs {
            let Some(start) = arrival[&p] else { continue };
            let peers: Vec<Candidate> = lists
                .get(&p)
                .into_iter()
                .flatten()
                .map(|&n| Candidate {
                    name: n,
                    sizes: Some((1, 2)),
                })
                .collect();
            let s = split(p, (1, 2), &peers, &[]);
            runs.push(Run {
                me: p,
                start,
                next: start,
                r: Rendezvous::new(s.pairs, timeout),
                done_at: None,
            });
        }
        // Event loop: the run with the earliest next round goes; creations happen at
        // its first round (before any of its polls).
        let mut started: Vec<bool> = vec![false; runs.len()];
        while let Some(i) = (0..runs.len())
            .filter(|&i| runs[i].done_at.is_none())
            .min_by_key(|&i| runs[i].next)
        {
            let run = &mut runs[i];
            let now = run.next;
            let me = run.me;
            if !started[i] {
                started[i] = true;
                for (peer, role, _) in run.r.items.iter() {
                    if *role == Role::Create {
                        segs.borrow_mut().entry(key(me, *peer)).or_default().created = true;
                    }
                }
            }
            let elapsed = Duration::from_micros(now - run.start);
            let settled = run.r.round(
                elapsed,
                |peer, role| {
                    let mut segs = segs.borrow_mut();
                    let s = segs.entry(key(me, *peer)).or_default();
                    match role {
                        Role::Create => {
                            if s.attached {
                                Poll::Ready
                            } else {
                                Poll::Waiting
                            }
                        }
                        Role::Attach if s.abandoned => Poll::Failed,
                        Role::Attach if s.created => {
                            s.attached = true;
                            Poll::Ready
                        }
                        Role::Attach => Poll::Waiting,
                    }
                },
                |peer, role| {
                    let mut segs = segs.borrow_mut();
                    let s = segs.entry(key(me, *peer)).or_default();
                    match role {
                        Role::Create => {
                            s.abandoned = true;
                            s.attached
                        }
                        Role::Attach => false,
                    }
                },
            );
            if settled {
                run.done_at = Some(now);
            } else {
                run.next = now + run.r.pause().as_micros() as u64;
            }
        }
        let mut met: HashMap<(u64, u64), bool> = HashMap::new();
        for run in runs {
            let waited = Duration::from_micros(run.done_at.unwrap() - run.start);
            assert!(
                waited <= timeout + Duration::from_millis(5),
                "waited {waited:?}"
            );
            for (peer, _, outcome) in run.r.outcomes() {
                let ready = outcome == Outcome::Ready;
                if let Some(other) = met.insert(key(run.me, peer), ready) {
                    assert_eq!(other, ready, "{:x} and {peer:x} disagree", run.me);
                }
                let both_listed = lists.get(&peer).is_some_and(|l| l.contains(&run.me));
                let both_arrived = arrival[&peer].zip(arrival[&run.me]);
                if let (true, Some((a, b))) = (both_listed, both_arrived)
                    && a.abs_diff(b) + 6_000 < timeout.as_micros() as u64
                {
                    assert!(
                        ready,
                        "{:x} and {peer:x} both came but did not meet",
                        run.me
                    );
                }
                if !both_listed || both_arrived.is_none() {
                    assert!(!ready, "{:x} met {peer:x}, which never came", run.me);
                }
            }
        }
    }
}
