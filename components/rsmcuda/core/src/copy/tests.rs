use std::collections::{HashSet, VecDeque};

use super::*;
use seeded_rng::Rng;

/// Fake CUDA events: `record` arms an event; the test completes armed events in any order.
#[derive(Default)]
struct FakeStream {
    armed: HashSet<u32>,
    done: HashSet<u32>,
    broken: HashSet<u32>,
    queries: usize,
}

impl FakeStream {
    fn record(&mut self, ev: u32) {
        assert!(
            !self.armed.contains(&ev),
            "event {ev} re-recorded while in flight"
        );
        self.armed.insert(ev);
        self.done.remove(&ev);
        self.broken.remove(&ev);
    }

    fn complete(&mut self, ev: u32) {
        if self.armed.remove(&ev) {
            self.done.insert(ev);
        }
    }
}

impl EventQuery<u32> for FakeStream {
    type Error = i32;
    fn query(&mut self, ev: &u32) -> Result<bool, i32> {
        self.queries += 1;
        if self.broken.contains(ev) {
            return Err(700);
        }
        Ok(self.done.contains(ev))
    }
}

fn issue(
    ring: &mut EventRing<u32, u64>,
    s: &mut FakeStream,
    token: u64,
) -> Result<u32, OutOfResource> {
    let slot = ring.reserve()?;
    let ev = *slot.event();
    s.record(ev);
    slot.commit(token);
    Ok(ev)
}

#[test]
fn completions_are_reported_in_issue_order() {
    let mut ring = EventRing::new((0..4).collect());
    let mut s = FakeStream::default();
    let evs: Vec<u32> = (0..4)
        .map(|t| issue(&mut ring, &mut s, t).unwrap())
        .collect();
    assert_eq!(issue(&mut ring, &mut s, 99), Err(OutOfResource));
    s.complete(evs[2]);
    s.complete(evs[1]);
    assert_eq!(ring.poll(&mut s), None, "the oldest is not done");
    assert_eq!(s.queries, 1, "only the oldest is queried");
    s.complete(evs[0]);
    assert_eq!(ring.poll(&mut s), Some(Completion::Done(0)));
    assert_eq!(ring.poll(&mut s), Some(Completion::Done(1)));
    assert_eq!(ring.poll(&mut s), Some(Completion::Done(2)));
    assert_eq!(ring.poll(&mut s), None);
    assert_eq!(ring.len(), 1);
    // Slots are reused around the ring.
    let again = issue(&mut ring, &mut s, 4).unwrap();
    assert_eq!(again, evs[0]);
    s.complete(evs[3]);
    s.complete(again);
    assert_eq!(ring.poll(&mut s), Some(Completion::Done(3)));
    assert_eq!(ring.poll(&mut s), Some(Completion::Done(4)));
    assert!(ring.is_empty() && ring.poll(&mut s).is_none());
}

#[test]
fn abandoned_slots_are_not_consumed_and_errors_keep_order() {
    let mut ring: EventRing<u32, u64> = EventRing::new(vec![7, 8]);
    let mut s = FakeStream::default();
    {
        // cuMemcpyAsync failed: the slot goes out of scope uncommitted.
        let _slot = ring.reserve().unwrap();
    }
    assert!(ring.is_empty());
    let e0 = issue(&mut ring, &mut s, 10).unwrap();
    assert_eq!(e0, 7, "the abandoned slot is handed out again");
    let e1 = issue(&mut ring, &mut s, 11).unwrap();
    s.broken.insert(e0);
    s.complete(e1);
    assert_eq!(ring.poll(&mut s), Some(Completion::Failed(10, 700)));
    assert_eq!(ring.poll(&mut s), Some(Completion::Done(11)));
}

#[test]
fn default_capacity_and_teardown() {
    let mut ring: EventRing<u32, u64> = EventRing::new((0..DEFAULT_EVENT_MAX as u32).collect());
    let mut s = FakeStream::default();
    for t in 0..DEFAULT_EVENT_MAX as u64 {
        issue(&mut ring, &mut s, t).unwrap();
    }
    assert_eq!(ring.reserve().unwrap_err(), OutOfResource);
    assert!(OutOfResource.to_string().contains("event_max"));
    s.complete(0);
    assert_eq!(ring.poll(&mut s), Some(Completion::Done(0)));
    let (events, pending) = ring.into_parts();
    assert_eq!(events.len(), DEFAULT_EVENT_MAX);
    assert_eq!(pending, (1..DEFAULT_EVENT_MAX as u64).collect::<Vec<_>>());
    let mut empty: EventRing<u32, u64> = EventRing::new(Vec::new());
    assert!(empty.reserve().is_err(), "no events, no copies");
}

#[test]
fn random_out_of_order_completion_is_reported_in_order() {
    for seed in 0..200 {
        let mut rng = Rng::new(seed);
        let cap = 1 + rng.below(8) as usize;
        let mut ring = EventRing::new((0..cap as u32).collect());
        let mut s = FakeStream::default();
        let mut model: VecDeque<(u64, u32)> = VecDeque::new();
        let mut next = 0u64;
        let mut reported = Vec::new();
        for _ in 0..500 {
            match rng.below(3) {
                0 => match issue(&mut ring, &mut s, next) {
                    Ok(ev) => {
                        model.push_back((next, ev));
                        next += 1;
                    }
                    Err(OutOfResource) => assert_eq!(model.len(), cap, "seed {seed}"),
                },
                1 => {
                    if !model.is_empty() {
                        let i = rng.below(model.len() as u64) as usize;
                        s.complete(model[i].1);
                    }
                }
                _ => {
                    while let Some(c) = ring.poll(&mut s) {
                        let Completion::Done(t) = c else {
                            panic!("seed {seed}: no event was broken");
                        };
                        let (want, ev) = model.pop_front().unwrap();
                        assert_eq!(t, want, "seed {seed}: out of order");
                        assert!(s.done.contains(&ev));
                        reported.push(t);
                    }
                    // Stopped: nothing left, or the oldest is still running.
                    if let Some(&(_, ev)) = model.front() {
                        assert!(!s.done.contains(&ev), "seed {seed}: a done copy was left");
                    }
                }
            }
            assert_eq!(ring.len(), model.len());
            assert!(ring.len() <= cap);
        }
        assert_eq!(reported, (0..reported.len() as u64).collect::<Vec<_>>());
    }
}
