//! The probe's script run against a small model of a provider, correct or with the
//! defects libfabric's providers were found to have (tests/libfabric/shm_matching.c).

use std::collections::VecDeque;

use super::*;

/// Defects the model can have.
#[derive(Clone, Copy, Default)]
struct Defects {
    /// 1.17's shm: an unexpected message is matched with the ignore mask of the
    /// previous matching receive, not the posted one's.
    stale_ignore: bool,
    /// 1.17's shm, 2.1's lnx: FI_PEEK and FI_CLAIM are plain receives into no buffer.
    peek_receives: bool,
    /// 1.17's and 2.1's shm, lnx: a truncation error entry has data 0.
    trunc_loses_data: bool,
    /// A provider whose completions never come (a hang the probe must bound).
    silent: bool,
    /// Peeks that find nothing before messages "arrive" (a loaded machine).
    late_peeks: u32,
    /// A receive's overflow sink is ignored: the message is truncated to the buffer.
    sink_ignored: bool,
}

struct Msg {
    tag: u64,
    payload: u32,
    len: usize,
    data: Option<u64>,
    claimed: bool,
}

struct PostedRecv {
    slot: u8,
    tag: u64,
    ignore: u64,
    len: usize,
    sink: bool,
}

/// Tagged matching in memory, answering the probe's steps as a provider would.
struct Model {
    d: Defects,
    cfg: ProbeConfig,
    unexpected: Vec<Msg>,
    posted: Vec<PostedRecv>,
    cq: VecDeque<Completion>,
    last_ignore: u64,
}

impl Model {
    fn new(d: Defects, cfg: ProbeConfig) -> Model {
        Model {
            d,
            cfg,
            unexpected: Vec::new(),
            posted: Vec::new(),
            cq: VecDeque::new(),
            last_ignore: 0,
        }
    }

    fn deliver(&mut self, r: &PostedRecv, m: Msg) {
        let room = if r.sink && !self.d.sink_ignored {
            usize::MAX
        } else {
            r.len
        };
        let truncated = m.len > room;
        let payload = (r.len >= 4).then_some(m.payload);
        self.cq.push_back(Completion {
            slot: Some(r.slot),
            tag: m.tag,
            len: m.len.min(room),
            data: if truncated && self.d.trunc_loses_data {
                Some(0)
            } else {
                m.data
            },
            payload,
            error: truncated.then_some((ErrKind::Truncated, m.len - room)),
        });
    }

    fn matches(tag: u64, ignore: u64, m: &Msg) -> bool {
        (m.tag | ignore) == (tag | ignore)
    }

    fn step(&mut self, s: Step) -> Observed {
        match s {
            Step::Send {
                tag,
                payload,
                len,
                data,
            } => {
                let m = Msg {
                    tag,
                    payload,
                    len,
                    data: data.filter(|_| self.cfg.cq_data),
                    claimed: false,
                };
                if let Some(i) = self
                    .posted
                    .iter()
                    .position(|r| Self::matches(r.tag, r.ignore, &m))
                {
                    let r = self.posted.remove(i);
                    self.last_ignore = r.ignore;
                    self.deliver(&r, m);
                } else {
                    self.unexpected.push(m);
                }
                Observed::Posted
            }
            Step::Recv {
                slot,
                tag,
                ignore,
                len,
                flags,
            } => {
                let r = PostedRecv {
                    slot,
                    tag,
                    ignore,
                    len,
                    sink: flags.sink,
                };
                let mask = if self.d.stale_ignore {
                    self.last_ignore
                } else {
                    ignore
                };
                // A claimed message is left for the FI_CLAIM receive alone.
                let real = !self.d.peek_receives;
                let want_claimed = real && flags.claim && !flags.peek;
                let found = self
                    .unexpected
                    .iter()
                    .position(|m| Self::matches(tag, mask, m) && m.claimed == want_claimed);
                if real && flags.peek && self.d.late_peeks > 0 {
                    self.d.late_peeks -= 1;
                    self.cq.push_back(Completion {
                        slot: Some(slot),
                        tag: 0,
                        len: 0,
                        data: None,
                        payload: None,
                        error: Some((ErrKind::NoMessage, 0)),
                    });
                    return Observed::Posted;
                }
                match (real && flags.peek, found) {
                    (true, Some(i)) => {
                        let m = &mut self.unexpected[i];
                        m.claimed |= flags.claim;
                        self.cq.push_back(Completion {
                            slot: Some(slot),
                            tag: m.tag,
                            len: m.len,
                            data: m.data,
                            payload: None,
                            error: None,
                        });
                    }
                    (true, None) => self.cq.push_back(Completion {
                        slot: Some(slot),
                        tag: 0,
                        len: 0,
                        data: None,
                        payload: None,
                        error: Some((ErrKind::NoMessage, 0)),
                    }),
                    (false, Some(i)) => {
                        let m = self.unexpected.remove(i);
                        self.last_ignore = ignore;
                        self.deliver(&r, m);
                    }
                    (false, None) => self.posted.push(r),
                }
                Observed::Posted
            }
            Step::Settle => Observed::Quiet,
            Step::Expect(_) => match self.cq.pop_front() {
                Some(c) if !self.d.silent => Observed::Completion(c),
                _ => Observed::Quiet,
            },
        }
    }
}

/// Runs the checks that run (as the glue does: [`Check::runs_given`]), each against a
/// fresh model (a fresh endpoint pair per check).
fn results(d: Defects, cfg: ProbeConfig) -> Vec<(Check, Option<Result<(), String>>)> {
    let mut results = Vec::new();
    for check in Check::ALL {
        if !check.runs_given(&results) {
            continue;
        }
        let mut model = Model::new(d, cfg);
        let mut run = CheckRun::new(check, cfg);
        let mut steps = 0;
        while let Some(step) = run.step() {
            let seen = model.step(step);
            run.observe(&seen);
            steps += 1;
            assert!(steps < 1000, "{check:?} does not end");
        }
        results.push((check, run.result()));
    }
    results
}

fn probe(d: Defects, cfg: ProbeConfig) -> Result<(), Vec<Failure>> {
    verdict(&results(d, cfg))
}

fn matching(d: Defects, cfg: ProbeConfig) -> Matching {
    Matching::of_results(&results(d, cfg))
}

fn failed(v: &Result<(), Vec<Failure>>) -> Vec<&'static str> {
    match v {
        Ok(()) => Vec::new(),
        Err(f) => f.iter().map(|f| f.check.name()).collect(),
    }
}

const SHM_1_17: Defects = Defects {
    stale_ignore: true,
    peek_receives: true,
    trunc_loses_data: true,
    silent: false,
    late_peeks: 0,
    sink_ignored: false,
};

#[test]
fn a_correct_provider_passes_every_check() {
    for cfg in [
        ProbeConfig::default(),
        ProbeConfig {
            cq_data: false,
            trunc_room: 16384,
        },
    ] {
        let v = probe(Defects::default(), cfg);
        assert_eq!(v, Ok(()), "{cfg:?}");
        assert_eq!(matching(Defects::default(), cfg), Matching::Correct);
        // Truncation is right: the overflow checks are not needed, so not run.
        let ran: Vec<Check> = results(Defects::default(), cfg)
            .into_iter()
            .map(|(c, _)| c)
            .collect();
        assert_eq!(ran, Check::ALL[..7]);
    }
}

#[test]
fn libfabric_1_17_shm_fails_all_but_remote_cq_data() {
    let v = probe(SHM_1_17, ProbeConfig::default());
    assert_eq!(
        failed(&v),
        [
            "ignore_after_exact",
            "exact_after_any",
            "peek",
            "peek_claim"
        ]
    );
    // Wrong in matching: its truncation path is not driven (nor the overflow sink).
    let ran: Vec<Check> = results(SHM_1_17, ProbeConfig::default())
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    assert_eq!(ran, Check::ALL[..5]);
    let f = v.unwrap_err();
    // What was seen is said: the hang bounded, the wrong message named.
    assert!(
        f[0].why
            .contains("timed out waiting for the completion of tag 0x142")
    );
    assert!(f[1].why.contains("with tag 0x20"), "{}", f[1].why);
    assert!(
        f[1].why
            .contains("wanted a completion for receive 0 with tag 0x21")
    );
    assert!(f[2].why.contains("FI_ETRUNC"), "{}", f[2].why);
}

#[test]
fn libfabric_2_1_shm_fails_only_truncation() {
    let d = Defects {
        trunc_loses_data: true,
        ..Defects::default()
    };
    let v = probe(d, ProbeConfig::default());
    assert_eq!(failed(&v), ["truncation_posted", "truncation_unexpected"]);
    assert!(
        v.unwrap_err()[0].why.contains("data 0x0; wanted FI_ETRUNC"),
        "the lost CQ data is named"
    );
    // The overflow checks ran and passed: its matching is kept, with a sink.
    assert_eq!(
        matching(d, ProbeConfig::default()),
        Matching::CorrectWithSink
    );
    assert_eq!(Matching::CorrectWithSink.defect(), None);
    // Without CQ data in use, losing it is no defect.
    let no_data = ProbeConfig {
        cq_data: false,
        ..ProbeConfig::default()
    };
    assert_eq!(probe(d, no_data), Ok(()));
    assert_eq!(matching(d, no_data), Matching::Correct);
}

#[test]
fn a_provider_that_truncates_past_the_sink_is_failed() {
    let d = Defects {
        trunc_loses_data: true,
        sink_ignored: true,
        ..Defects::default()
    };
    let v = probe(d, ProbeConfig::default());
    assert_eq!(
        failed(&v),
        [
            "truncation_posted",
            "truncation_unexpected",
            "overflow_posted",
            "overflow_unexpected"
        ]
    );
    let Matching::Failed(set) = matching(d, ProbeConfig::default()) else {
        panic!("{v:?}")
    };
    assert!(
        set.to_string().ends_with(
            "overflow_unexpected (an overflow sink behind the receive buffer does not keep \
             the provider from truncating, so rofi cannot truncate in its place)"
        ),
        "{set}"
    );
    // A sink that is ignored by a provider that truncates correctly is never needed.
    let right = Defects {
        sink_ignored: true,
        ..Defects::default()
    };
    assert_eq!(matching(right, ProbeConfig::default()), Matching::Correct);
}

#[test]
fn libfabric_2_1_lnx_fails_peek_claim_and_truncation() {
    let d = Defects {
        peek_receives: true,
        trunc_loses_data: true,
        ..Defects::default()
    };
    assert_eq!(
        failed(&probe(d, ProbeConfig::default())),
        ["peek", "peek_claim"]
    );
}

#[test]
fn missing_completions_fail_every_check_without_hanging() {
    let d = Defects {
        silent: true,
        ..Defects::default()
    };
    let v = probe(d, ProbeConfig::default());
    // The five matching checks; truncation is not driven after them.
    assert_eq!(failed(&v).len(), 5);
}

#[test]
fn a_refused_post_fails_its_check_and_ends_it() {
    let mut run = CheckRun::new(Check::Peek, ProbeConfig::default());
    run.observe(&Observed::PostFailed(
        "fi_tinject: Resource temporarily unavailable".into(),
    ));
    assert_eq!(run.step(), None);
    let r = run.result().unwrap().unwrap_err();
    assert!(r.contains("the send of tag 0x77 failed: fi_tinject"), "{r}");
    // Unfinished checks count as failed.
    let v = verdict(&[(Check::Peek, None)]);
    assert_eq!(v.unwrap_err()[0].why, "did not finish");
}

#[test]
fn the_reason_names_each_failed_check_and_what_mpi_would_get_wrong() {
    let Matching::Failed(set) = matching(SHM_1_17, ProbeConfig::default()) else {
        panic!("1.17's shm passed")
    };
    let text = set.to_string();
    assert!(
        text.starts_with("ignore_after_exact (receives with ignore bits miss"),
        "{text}"
    );
    assert!(text.contains("peek_claim (FI_PEEK|FI_CLAIM does not claim"));
    // The two truncation checks share one explanation.
    let trunc = CheckSet::of(&[Check::TruncationPosted, Check::TruncationUnexpected]);
    assert_eq!(
        trunc.to_string(),
        "truncation_posted, truncation_unexpected (truncated receives lose their tag or CQ data, or break the endpoint (MPI_SOURCE, MPI_TAG))"
    );
    assert!(!text.contains("remote_cq_data"));
    assert_eq!(CheckSet::default().to_string(), "");
    assert!(CheckSet::of(&[Check::Peek]).contains(Check::Peek));
    assert!(!CheckSet::of(&[Check::Peek]).contains(Check::PeekClaim));
}

#[test]
fn a_peek_before_the_message_arrived_is_repeated_a_bounded_number_of_times() {
    let late = |n| Defects {
        late_peeks: n,
        ..Defects::default()
    };
    assert_eq!(probe(late(3), ProbeConfig::default()), Ok(()));
    assert_eq!(probe(late(PEEK_RETRIES), ProbeConfig::default()), Ok(()));
    let v = probe(late(PEEK_RETRIES + 1), ProbeConfig::default());
    assert_eq!(failed(&v), ["peek", "peek_claim"]);
    assert!(
        v.unwrap_err()[0]
            .why
            .contains("got an FI_ENOMSG error entry for receive 2"),
    );
}

#[test]
fn truncation_waits_for_matching_and_the_sink_for_a_truncation_failure() {
    let pass = |c: Check| (c, Some(Ok(())));
    let fail = |c: Check| (c, Some(Err("x".to_owned())));
    let matching_ok: Vec<_> = Check::ALL[..5].iter().map(|&c| pass(c)).collect();
    assert!(Check::Peek.runs_given(&[fail(Check::IgnoreAfterExact)]));
    assert!(!Check::TruncationPosted.runs_given(&[fail(Check::IgnoreAfterExact)]));
    assert!(Check::TruncationPosted.runs_given(&matching_ok));
    assert!(!Check::OverflowPosted.runs_given(&matching_ok));
    let mut trunc_failed = matching_ok.clone();
    trunc_failed.push(pass(Check::TruncationPosted));
    trunc_failed.push(fail(Check::TruncationUnexpected));
    assert!(Check::OverflowPosted.runs_given(&trunc_failed));
    // An unfinished check counts as failed.
    assert!(!Check::TruncationPosted.runs_given(&[(Check::Peek, None)]));
}
