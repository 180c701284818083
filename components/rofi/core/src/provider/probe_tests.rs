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
        let truncated = m.len > r.len;
        let payload = (r.len >= 4).then_some(m.payload);
        self.cq.push_back(Completion {
            slot: Some(r.slot),
            tag: m.tag,
            len: m.len.min(r.len),
            data: if truncated && self.d.trunc_loses_data {
                Some(0)
            } else {
                m.data
            },
            payload,
            error: truncated.then_some((ErrKind::Truncated, m.len - r.len)),
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

/// Runs every check against a fresh model (a fresh endpoint pair per check).
fn probe(d: Defects, cfg: ProbeConfig) -> Result<(), Vec<Failure>> {
    let results: Vec<_> = Check::ALL
        .iter()
        .map(|&check| {
            let mut model = Model::new(d, cfg);
            let mut run = CheckRun::new(check, cfg);
            let mut steps = 0;
            while let Some(step) = run.step() {
                let seen = model.step(step);
                run.observe(&seen);
                steps += 1;
                assert!(steps < 1000, "{check:?} does not end");
            }
            (check, run.result())
        })
        .collect();
    verdict(&results)
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
        assert_eq!(Matching::of_verdict(&v), Matching::Correct);
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
            "peek_claim",
            "truncation_posted",
            "truncation_unexpected"
        ]
    );
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
    assert!(
        f[4].why.contains("data 0x0; wanted FI_ETRUNC"),
        "{}",
        f[4].why
    );
}

#[test]
fn libfabric_2_1_shm_fails_only_truncation() {
    let d = Defects {
        trunc_loses_data: true,
        ..Defects::default()
    };
    let v = probe(d, ProbeConfig::default());
    assert_eq!(failed(&v), ["truncation_posted", "truncation_unexpected"]);
    // Without CQ data in use, losing it is no defect.
    let no_data = ProbeConfig {
        cq_data: false,
        ..ProbeConfig::default()
    };
    assert_eq!(probe(d, no_data), Ok(()));
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
        [
            "peek",
            "peek_claim",
            "truncation_posted",
            "truncation_unexpected"
        ]
    );
}

#[test]
fn missing_completions_fail_every_check_without_hanging() {
    let d = Defects {
        silent: true,
        ..Defects::default()
    };
    let v = probe(d, ProbeConfig::default());
    assert_eq!(failed(&v).len(), 7);
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
    let v = probe(SHM_1_17, ProbeConfig::default());
    let Matching::Failed(set) = Matching::of_verdict(&v) else {
        panic!("{v:?}")
    };
    let text = set.to_string();
    assert!(
        text.starts_with("ignore_after_exact (receives with ignore bits miss"),
        "{text}"
    );
    assert!(text.contains("peek_claim (FI_PEEK|FI_CLAIM does not claim"));
    // The two truncation checks share one explanation.
    assert!(
        text.ends_with("truncation_posted, truncation_unexpected (truncated receives lose their tag or CQ data, or break the endpoint (MPI_SOURCE, MPI_TAG))"),
        "{text}"
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
fn only_the_truncation_checks_wait_for_the_others_to_pass() {
    let after: Vec<&str> = Check::ALL
        .iter()
        .filter(|c| !c.runs_after_a_failure())
        .map(|c| c.name())
        .collect();
    assert_eq!(after, ["truncation_posted", "truncation_unexpected"]);
}
