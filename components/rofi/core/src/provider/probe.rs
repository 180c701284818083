//! The matching probe: does a provider's tagged matching do what MPI needs of it?
//!
//! A provider's tag matching is used natively only if it passes these checks, run by the
//! glue on a loopback pair of endpoints of the chosen provider (one process, manual
//! progress, every wait bounded). They are the checks of tests/libfabric/shm_matching.c,
//! which found libfabric 1.17's shm wrong in all matching, 2.1's shm wrong only in
//! truncation and 2.1's lnx wrong in FI_PEEK/FI_CLAIM and truncation; a probe replaces
//! the provider-name and version rules that recorded those findings, so a fixed (or a
//! newly broken) libfabric is seen as what it is.
//!
//! This module is sans-IO: [`script`] says what to post and what to expect, the glue
//! performs each [`Step`] and reports what it saw as an [`Observed`], a [`CheckRun`]
//! judges it, and [`verdict`] turns the results into `Ok(())` or the failed checks.
//! A check that passes consumes every message it sent and completes every receive it
//! posted, so the glue may run the next check on the same endpoints.
//! The glue owns the clock (how long to settle and to wait), the endpoints and the
//! buffers.

use std::fmt;

/// One property of tagged matching that MPI relies on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Check {
    /// A receive with ignore bits takes an unexpected message, after exact receives
    /// (every MPI receive ignores the synchronous-send bit; MPI_ANY_TAG ignores the tag).
    IgnoreAfterExact,
    /// Of two unexpected messages, an exact receive takes the one it names, after a
    /// receive that ignored every bit.
    ExactAfterAny,
    /// FI_PEEK finds an unexpected message without taking it, and reports FI_ENOMSG for
    /// one that is not there (MPI_Iprobe).
    Peek,
    /// FI_PEEK|FI_CLAIM, then an FI_CLAIM receive takes the message, and no other
    /// receive gets it (MPI_Improbe, MPI_Mrecv).
    PeekClaim,
    /// The remote CQ data of a send arrives (rofi's full layout carries the source there).
    RemoteCqData,
    /// A message longer than a posted receive: an FI_ETRUNC error entry with the tag and
    /// the remote CQ data (what MPI_Status is made of); the endpoint still works.
    TruncationPosted,
    /// The same for a receive posted after the message arrived.
    TruncationUnexpected,
    /// Run only where a truncation check failed: a message longer than a posted
    /// receive whose buffer is followed by an overflow sink arrives whole (its full
    /// length, tag and remote CQ data, the first bytes in the buffer), so the provider
    /// never truncates and rofi truncates itself with everything MPI_Status needs.
    OverflowPosted,
    /// The same for a receive posted after the message arrived.
    OverflowUnexpected,
}

/// What a check is about: the provider's matching, its truncation, or whether an
/// overflow sink keeps truncation away from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Matching,
    Truncation,
    Overflow,
}

impl Check {
    /// Every check, in the order they are run.
    pub const ALL: [Check; 9] = [
        Check::IgnoreAfterExact,
        Check::ExactAfterAny,
        Check::Peek,
        Check::PeekClaim,
        Check::RemoteCqData,
        Check::TruncationPosted,
        Check::TruncationUnexpected,
        Check::OverflowPosted,
        Check::OverflowUnexpected,
    ];

    /// The name shm_matching.c prints for it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Check::IgnoreAfterExact => "ignore_after_exact",
            Check::ExactAfterAny => "exact_after_any",
            Check::Peek => "peek",
            Check::PeekClaim => "peek_claim",
            Check::RemoteCqData => "remote_cq_data",
            Check::TruncationPosted => "truncation_posted",
            Check::TruncationUnexpected => "truncation_unexpected",
            Check::OverflowPosted => "overflow_posted",
            Check::OverflowUnexpected => "overflow_unexpected",
        }
    }

    /// What would go wrong in MPI if this check fails.
    #[must_use]
    pub const fn consequence(self) -> &'static str {
        match self {
            Check::IgnoreAfterExact => {
                "receives with ignore bits miss unexpected messages (MPI_Ssend, MPI_ANY_TAG hang)"
            }
            Check::ExactAfterAny => "receives take messages with another tag",
            Check::Peek => "FI_PEEK takes or misses messages (MPI_Iprobe)",
            Check::PeekClaim => "FI_PEEK|FI_CLAIM does not claim (MPI_Improbe, MPI_Mrecv)",
            Check::RemoteCqData => "remote CQ data is lost (MPI_SOURCE)",
            Check::TruncationPosted | Check::TruncationUnexpected => {
                "truncated receives lose their tag or CQ data, or break the endpoint (MPI_SOURCE, MPI_TAG)"
            }
            Check::OverflowPosted | Check::OverflowUnexpected => {
                "an overflow sink behind the receive buffer does not keep the provider from \
                 truncating, so rofi cannot truncate in its place"
            }
        }
    }

    #[must_use]
    pub const fn kind(self) -> Kind {
        match self {
            Check::TruncationPosted | Check::TruncationUnexpected => Kind::Truncation,
            Check::OverflowPosted | Check::OverflowUnexpected => Kind::Overflow,
            _ => Kind::Matching,
        }
    }

    /// Whether the check runs, given the results of the checks run before it. The
    /// matching checks always run. The truncation checks run only if every matching
    /// check passed: the verdict is "wrong" either way, and a provider already found
    /// wrong in matching is not driven down its truncation path, where 2.1's lnx
    /// crashes inside libfabric (`smr_unexp_start`, truncating a large unexpected
    /// message; a crash cannot be reported as a failed check). The overflow checks run
    /// only if, on top of that, a truncation check failed: they decide whether rofi
    /// can keep the provider's matching and truncate itself.
    #[must_use]
    pub fn runs_given(self, before: &[(Check, Option<Result<(), String>>)]) -> bool {
        let failed = |kind: Kind| {
            before
                .iter()
                .any(|(c, r)| c.kind() == kind && !matches!(r, Some(Ok(()))))
        };
        match self.kind() {
            Kind::Matching => true,
            Kind::Truncation => !failed(Kind::Matching),
            Kind::Overflow => !failed(Kind::Matching) && failed(Kind::Truncation),
        }
    }

    const fn bit(self) -> u16 {
        1 << self as u16
    }
}

/// A set of checks (the failed ones), small and `Copy` so that selection results can
/// carry it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CheckSet(u16);

impl CheckSet {
    #[must_use]
    pub fn of(checks: &[Check]) -> CheckSet {
        CheckSet(checks.iter().fold(0, |m, c| m | c.bit()))
    }

    #[must_use]
    pub const fn contains(self, c: Check) -> bool {
        self.0 & c.bit() != 0
    }

    #[must_use]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The checks in the set, in run order.
    pub fn iter(self) -> impl Iterator<Item = Check> {
        Check::ALL.into_iter().filter(move |c| self.contains(*c))
    }
}

impl fmt::Display for CheckSet {
    /// `peek (FI_PEEK takes ...), truncation_posted (...)`; the two truncation (and the
    /// two overflow) checks share their consequence, said once.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let checks: Vec<Check> = self.iter().collect();
        for (i, c) in checks.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(c.name())?;
            let next_same = checks
                .get(i + 1)
                .is_some_and(|n| n.consequence() == c.consequence());
            if !next_same {
                write!(f, " ({})", c.consequence())?;
            }
        }
        Ok(())
    }
}

/// Why a provider's matching could not be checked (the probe could not run on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unverified {
    /// A loopback pair of endpoints could not be opened or connected.
    NoLoopback,
}

impl fmt::Display for Unverified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unverified::NoLoopback => f.write_str(
                "its tagged matching is unverified: rofi's matching probe could not open a \
                 loopback pair of endpoints on it",
            ),
        }
    }
}

/// What the probe concluded about one provider, as selection uses it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Matching {
    /// Not probed (probing off, or not needed): trust the provider.
    #[default]
    Unprobed,
    /// Every check passed: native matching is correct.
    Correct,
    /// Matching is correct but truncation is not, and a receive with an overflow sink
    /// behind its buffer is never truncated: native matching, every receive posted with
    /// the sink, rofi truncating itself.
    CorrectWithSink,
    /// These checks failed.
    Failed(CheckSet),
    /// The probe could not run.
    Unverified(Unverified),
}

impl Matching {
    /// From the results of the checks that ran.
    #[must_use]
    pub fn of_results(results: &[(Check, Option<Result<(), String>>)]) -> Matching {
        let failed: Vec<Check> = results
            .iter()
            .filter(|(_, r)| !matches!(r, Some(Ok(()))))
            .map(|(c, _)| *c)
            .collect();
        let passed = |c: Check| {
            results
                .iter()
                .any(|(r, res)| *r == c && res == &Some(Ok(())))
        };
        if failed.is_empty() {
            Matching::Correct
        } else if failed.iter().all(|c| c.kind() == Kind::Truncation)
            && passed(Check::OverflowPosted)
            && passed(Check::OverflowUnexpected)
        {
            Matching::CorrectWithSink
        } else {
            Matching::Failed(CheckSet::of(&failed))
        }
    }
}

/// Receive flags (`fi_trecvmsg`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvFlags {
    pub peek: bool,
    pub claim: bool,
    /// Posted with the overflow sink behind the buffer.
    pub sink: bool,
}

/// One thing for the glue to do. Endpoint A sends, endpoint B receives; a check after a
/// failed one runs on a fresh pair, so a failure's leftovers cannot decide another check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A sends `len` bytes (at least 4: the first four are `payload`, little-endian)
    /// with `tag`, and with `data` as remote CQ data when given. Answered by
    /// [`Observed::Posted`] or [`Observed::PostFailed`].
    Send {
        tag: u64,
        payload: u32,
        len: usize,
        data: Option<u64>,
    },
    /// B posts a receive with context `slot` into that slot's buffer of `len` bytes
    /// (`len` 0: no buffer, as probes post). Answered like `Send`.
    Recv {
        slot: u8,
        tag: u64,
        ignore: u64,
        len: usize,
        flags: RecvFlags,
    },
    /// Drive both endpoints a moment so what was sent arrives unmatched. Answered by
    /// [`Observed::Quiet`], or the completion that came instead (a failure).
    Settle,
    /// Wait (bounded) for B's next completion and compare it. `Expect::Quiet` waits a
    /// shorter while and wants none.
    Expect(Expect),
}

/// What B's next completion must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// A success completion of the receive in `slot` with `tag`; with `payload`, the
    /// buffer's first four bytes; with `len`, that length; with `data`, FI_REMOTE_CQ_DATA
    /// and that data.
    Received {
        slot: u8,
        tag: u64,
        payload: Option<u32>,
        len: Option<usize>,
        data: Option<u64>,
    },
    /// A completion of the FI_PEEK in `slot` for a message with `tag` (and `len`). An
    /// FI_ENOMSG instead means the message has not arrived yet (a loaded machine): the
    /// settle before the peek and the peek are done again, up to [`PEEK_RETRIES`] times.
    Peeked {
        slot: u8,
        tag: u64,
        len: Option<usize>,
    },
    /// An FI_ENOMSG error entry for the probe in `slot`.
    NoMessage { slot: u8 },
    /// An FI_ETRUNC error entry for `slot` with `tag` and (when given) the remote CQ
    /// data. The length is shown, not required: tcp;ofi_rxm reports none for a posted
    /// receive, and rofi reports the receive buffer's size as MPI does.
    Truncated {
        slot: u8,
        tag: u64,
        data: Option<u64>,
    },
    /// No completion at all.
    Quiet,
}

/// What an error entry's `err` means here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrKind {
    Truncated,
    NoMessage,
    /// Another error number (positive).
    Other(i32),
}

/// A completion B's CQ gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The slot whose context it names (`None`: a context the probe did not post).
    pub slot: Option<u8>,
    pub tag: u64,
    pub len: usize,
    /// FI_REMOTE_CQ_DATA was set: its data.
    pub data: Option<u64>,
    /// The slot buffer's first four bytes (`None` without a buffer of 4 bytes).
    pub payload: Option<u32>,
    /// `Some` for an error entry: its kind and `olen`; its `data` is then the entry's
    /// data field whatever the flags say.
    pub error: Option<(ErrKind, usize)>,
}

/// What the glue saw doing a [`Step`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    /// A send or receive was posted.
    Posted,
    /// A send or receive was refused (or a send met FI_EAGAIN until the bound): why.
    PostFailed(String),
    /// Nothing completed (a Settle, an `Expect::Quiet`, or a wait that ran out).
    Quiet,
    Completion(Completion),
}

/// How the probe fits the provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeConfig {
    /// The provider has 4 bytes of remote CQ data (checks needing it are skipped or run
    /// without data otherwise: rofi's layouts then carry no source in it).
    pub cq_data: bool,
    /// The receive size of the truncation checks: 4, or more where rofi posts small
    /// receives into larger bounce buffers (ofi_rxm: `mtl_rofi_rxm_min_recv`), so that
    /// what is checked is a truncation rofi can meet.
    pub trunc_room: usize,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            cq_data: true,
            trunc_room: 4,
        }
    }
}

/// How often a peek that found nothing is repeated before its check fails.
pub const PEEK_RETRIES: u32 = 50;

/// Rounds of the two ignore-mask checks: 1.17's shm fails in the first; more rounds
/// (shm_matching.c runs 8) cost a settle each.
const ROUNDS: u32 = 3;

fn recv(slot: u8, tag: u64, ignore: u64, len: usize) -> Step {
    Step::Recv {
        slot,
        tag,
        ignore,
        len,
        flags: RecvFlags::default(),
    }
}

fn send(tag: u64, payload: u32) -> Step {
    Step::Send {
        tag,
        payload,
        len: 4,
        data: None,
    }
}

fn got(slot: u8, tag: u64, payload: u32) -> Step {
    Step::Expect(Expect::Received {
        slot,
        tag,
        payload: Some(payload),
        len: None,
        data: None,
    })
}

/// A message of `room` + 60 bytes with `tag`, `payload` and remote CQ data, sent after
/// receive `posted` (or before it, `unexpected`, given time to arrive unmatched), then
/// `expect`; then a small message on the next tag (and payload) shows the endpoint
/// still carries messages.
fn longer_than_room(
    s: &mut Vec<Step>,
    (tag, payload, data): (u64, u32, Option<u64>),
    posted: Step,
    unexpected: bool,
    expect: Expect,
    room: usize,
) {
    let big = Step::Send {
        tag,
        payload,
        len: room + 60,
        data,
    };
    if unexpected {
        s.extend([big, Step::Settle, posted]);
    } else {
        s.extend([posted, big]);
    }
    s.push(Step::Expect(expect));
    let (next, next_payload) = (tag + 1, payload + 1);
    s.extend([
        send(next, next_payload),
        recv(1, next, 0, 4),
        got(1, next, next_payload),
    ]);
}

/// The steps of `check`.
#[must_use]
pub fn script(check: Check, cfg: ProbeConfig) -> Vec<Step> {
    let mut s = Vec::new();
    let data = |d: u64| cfg.cq_data.then_some(d);
    match check {
        Check::IgnoreAfterExact => {
            for r in 0..ROUNDS {
                s.extend([recv(0, 0x1, 0, 4), send(0x1, r), got(0, 0x1, r)]);
                s.extend([send(0x142, 1000 + r), Step::Settle]);
                s.extend([recv(0, 0x42, 0x100, 4), got(0, 0x142, 1000 + r)]);
            }
        }
        Check::ExactAfterAny => {
            for r in 0..ROUNDS {
                s.extend([recv(0, 0, u64::MAX, 4), send(0x9, r), got(0, 0x9, r)]);
                s.extend([send(0x20, 2000 + r), send(0x21, 3000 + r), Step::Settle]);
                s.extend([recv(0, 0x21, 0, 4), got(0, 0x21, 3000 + r)]);
                s.extend([recv(0, 0x20, 0, 4), got(0, 0x20, 2000 + r)]);
            }
        }
        Check::Peek => {
            let peek = RecvFlags {
                peek: true,
                claim: false,
                sink: false,
            };
            s.extend([send(0x77, 77), Step::Settle]);
            s.push(Step::Recv {
                slot: 2,
                tag: 0x77,
                ignore: 0,
                len: 0,
                flags: peek,
            });
            s.push(Step::Expect(Expect::Peeked {
                slot: 2,
                tag: 0x77,
                len: Some(4),
            }));
            // Peeking must not have taken it.
            s.extend([recv(0, 0x77, 0, 4), got(0, 0x77, 77)]);
            s.push(Step::Recv {
                slot: 2,
                tag: 0x78,
                ignore: 0,
                len: 0,
                flags: peek,
            });
            s.push(Step::Expect(Expect::NoMessage { slot: 2 }));
        }
        Check::PeekClaim => {
            s.extend([send(0x55, 55), Step::Settle]);
            s.push(Step::Recv {
                slot: 2,
                tag: 0x55,
                ignore: 0,
                len: 0,
                flags: RecvFlags {
                    peek: true,
                    claim: true,
                    sink: false,
                },
            });
            s.push(Step::Expect(Expect::Peeked {
                slot: 2,
                tag: 0x55,
                len: None,
            }));
            // Claimed: an ordinary receive of the same tag must not take it.
            s.extend([recv(1, 0x55, 0, 4), Step::Expect(Expect::Quiet)]);
            // The claiming receive uses the context of the FI_PEEK|FI_CLAIM.
            s.push(Step::Recv {
                slot: 2,
                tag: 0x55,
                ignore: 0,
                len: 4,
                flags: RecvFlags {
                    peek: false,
                    claim: true,
                    sink: false,
                },
            });
            s.push(got(2, 0x55, 55));
            // The ordinary receive takes the next message, leaving nothing posted for
            // the next check.
            s.extend([send(0x55, 56), got(1, 0x55, 56)]);
        }
        Check::RemoteCqData => {
            if !cfg.cq_data {
                // Nothing to check: rofi puts nothing in CQ data on this provider.
                return s;
            }
            s.push(recv(0, 0x33, 0, 4));
            s.push(Step::Send {
                tag: 0x33,
                payload: 5,
                len: 4,
                data: Some(0xdead_beef),
            });
            s.push(Step::Expect(Expect::Received {
                slot: 0,
                tag: 0x33,
                payload: Some(5),
                len: Some(4),
                data: Some(0xdead_beef),
            }));
        }
        Check::OverflowPosted | Check::OverflowUnexpected => {
            let room = cfg.trunc_room.max(4);
            let posted = Step::Recv {
                slot: 0,
                tag: 0x46,
                ignore: 0,
                len: room,
                flags: RecvFlags {
                    sink: true,
                    ..RecvFlags::default()
                },
            };
            let whole = Expect::Received {
                slot: 0,
                tag: 0x46,
                payload: Some(46),
                len: Some(room + 60),
                data: data(0xf00d),
            };
            let unexpected = check == Check::OverflowUnexpected;
            longer_than_room(
                &mut s,
                (0x46, 46, data(0xf00d)),
                posted,
                unexpected,
                whole,
                room,
            );
        }
        Check::TruncationPosted | Check::TruncationUnexpected => {
            let room = cfg.trunc_room.max(4);
            let truncated = Expect::Truncated {
                slot: 0,
                tag: 0x44,
                data: data(0xfeed),
            };
            let unexpected = check == Check::TruncationUnexpected;
            let posted = recv(0, 0x44, 0, room);
            longer_than_room(
                &mut s,
                (0x44, 44, data(0xfeed)),
                posted,
                unexpected,
                truncated,
                room,
            );
        }
    }
    s
}

/// One check being run: hands out its steps and judges what the glue saw.
#[derive(Clone, Debug)]
pub struct CheckRun {
    pub check: Check,
    steps: Vec<Step>,
    next: usize,
    failure: Option<String>,
    peek_retries: u32,
}

impl CheckRun {
    #[must_use]
    pub fn new(check: Check, cfg: ProbeConfig) -> CheckRun {
        CheckRun {
            check,
            steps: script(check, cfg),
            next: 0,
            failure: None,
            peek_retries: 0,
        }
    }

    /// The step to do next; `None` when the check is over (done, or failed: the rest
    /// is skipped, its endpoints are closed with whatever is still posted).
    #[must_use]
    pub fn step(&self) -> Option<Step> {
        if self.failure.is_some() {
            return None;
        }
        self.steps.get(self.next).copied()
    }

    /// Records what doing [`Self::step`] produced.
    pub fn observe(&mut self, seen: &Observed) {
        let Some(step) = self.step() else { return };
        self.next += 1;
        if let (Step::Expect(Expect::Peeked { slot, .. }), Observed::Completion(c)) = (step, seen)
            && c.error.is_some_and(|(k, _)| k == ErrKind::NoMessage)
            && c.slot == Some(slot)
            && self.peek_retries < PEEK_RETRIES
        {
            // Not arrived yet: settle and peek again (the script puts a Settle and the
            // peek right before this step).
            self.peek_retries += 1;
            let peek = self.next - 2;
            self.next = if peek > 0 && self.steps[peek - 1] == Step::Settle {
                peek - 1
            } else {
                peek
            };
            return;
        }
        if let Err(why) = judge(&step, seen) {
            self.failure = Some(why);
        }
    }

    /// `Ok(())` once every step passed, the reason after a failure; `None` while steps
    /// remain.
    #[must_use]
    pub fn result(&self) -> Option<Result<(), String>> {
        match &self.failure {
            Some(why) => Some(Err(why.clone())),
            None if self.next >= self.steps.len() => Some(Ok(())),
            None => None,
        }
    }
}

fn describe(c: &Completion) -> String {
    let mut s = match c.error {
        None => "a completion".to_owned(),
        Some((ErrKind::Truncated, _)) => "an FI_ETRUNC error entry".to_owned(),
        Some((ErrKind::NoMessage, _)) => "an FI_ENOMSG error entry".to_owned(),
        Some((ErrKind::Other(e), _)) => format!("an error entry (err {e})"),
    };
    s.push_str(&match c.slot {
        Some(slot) => format!(" for receive {slot}"),
        None => " for no receive of the probe".to_owned(),
    });
    s.push_str(&format!(" with tag {:#x}, length {}", c.tag, c.len));
    if let Some((_, olen)) = c.error {
        s.push_str(&format!(" (olen {olen})"));
    }
    match c.data {
        Some(d) => s.push_str(&format!(", data {d:#x}")),
        None => s.push_str(", no CQ data"),
    }
    if let Some(p) = c.payload
        && c.error.is_none()
    {
        s.push_str(&format!(", payload {p}"));
    }
    s
}

fn judge(step: &Step, seen: &Observed) -> Result<(), String> {
    let what = |s: &Step| match s {
        Step::Send { tag, .. } => format!("the send of tag {tag:#x}"),
        Step::Recv { tag, flags, .. } => format!(
            "the {}receive of tag {tag:#x}",
            match (flags.peek, flags.claim) {
                (true, true) => "FI_PEEK|FI_CLAIM ",
                (true, false) => "FI_PEEK ",
                (false, true) => "FI_CLAIM ",
                (false, false) => "",
            }
        ),
        _ => String::new(),
    };
    match (step, seen) {
        (Step::Send { .. } | Step::Recv { .. }, Observed::Posted) => Ok(()),
        (Step::Send { .. } | Step::Recv { .. }, Observed::PostFailed(why)) => {
            Err(format!("{} failed: {why}", what(step)))
        }
        (Step::Settle | Step::Expect(Expect::Quiet), Observed::Quiet) => Ok(()),
        (Step::Settle, Observed::Completion(c)) => Err(format!(
            "{} arrived before any receive could match it",
            describe(c)
        )),
        (Step::Expect(Expect::Quiet), Observed::Completion(c)) => Err(format!(
            "{}: a receive took a message already claimed",
            describe(c)
        )),
        (Step::Expect(e), Observed::Quiet) => Err(format!(
            "timed out waiting for {}",
            match e {
                Expect::Received { tag, .. } => format!("the completion of tag {tag:#x}"),
                Expect::Peeked { tag, .. } => format!("the FI_PEEK of tag {tag:#x}"),
                Expect::NoMessage { .. } => "FI_ENOMSG".to_owned(),
                Expect::Truncated { .. } => "the truncated receive's error entry".to_owned(),
                Expect::Quiet => String::new(),
            }
        )),
        (Step::Expect(e), Observed::Completion(c)) => expect(e, c),
        (step, seen) => Err(format!("the glue answered {step:?} with {seen:?}")),
    }
}

fn expect(e: &Expect, c: &Completion) -> Result<(), String> {
    let ok = match *e {
        Expect::Received {
            slot,
            tag,
            payload,
            len,
            data,
        } => {
            c.error.is_none()
                && c.slot == Some(slot)
                && c.tag == tag
                && payload.is_none_or(|p| c.payload == Some(p))
                && len.is_none_or(|l| c.len == l)
                && data.is_none_or(|d| c.data == Some(d))
        }
        Expect::Peeked { slot, tag, len } => {
            c.error.is_none()
                && c.slot == Some(slot)
                && c.tag == tag
                && len.is_none_or(|l| c.len == l)
        }
        Expect::NoMessage { slot } => {
            c.error.is_some_and(|(k, _)| k == ErrKind::NoMessage) && c.slot == Some(slot)
        }
        Expect::Truncated { slot, tag, data } => {
            c.error.is_some_and(|(k, _)| k == ErrKind::Truncated)
                && c.slot == Some(slot)
                && c.tag == tag
                && data.is_none_or(|d| c.data == Some(d))
        }
        Expect::Quiet => false,
    };
    if ok {
        return Ok(());
    }
    let wanted = match *e {
        Expect::Received {
            slot,
            tag,
            payload,
            data,
            ..
        } => format!(
            "a completion for receive {slot} with tag {tag:#x}{}{}",
            payload.map_or(String::new(), |p| format!(", payload {p}")),
            data.map_or(String::new(), |d| format!(", data {d:#x}"))
        ),
        Expect::Peeked { slot, tag, .. } => {
            format!("a completion for the FI_PEEK {slot} of tag {tag:#x}")
        }
        Expect::NoMessage { slot } => format!("FI_ENOMSG for receive {slot}"),
        Expect::Truncated { slot, tag, data } => format!(
            "FI_ETRUNC for receive {slot} with tag {tag:#x}{}",
            data.map_or(String::new(), |d| format!(", data {d:#x}"))
        ),
        Expect::Quiet => "no completion".to_owned(),
    };
    Err(format!("got {}; wanted {wanted}", describe(c)))
}

/// A check that failed, with what was seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub check: Check,
    pub why: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.check.name(), self.why)
    }
}

/// `Ok(())` when every check passed (native matching is correct), else the failed
/// checks in run order. A check that never finished (`None`) counts as failed.
pub fn verdict(results: &[(Check, Option<Result<(), String>>)]) -> Result<(), Vec<Failure>> {
    let failed: Vec<Failure> = results
        .iter()
        .filter_map(|(check, r)| match r {
            Some(Ok(())) => None,
            Some(Err(why)) => Some(Failure {
                check: *check,
                why: why.clone(),
            }),
            None => Some(Failure {
                check: *check,
                why: "did not finish".to_owned(),
            }),
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed)
    }
}

#[cfg(test)]
#[path = "probe_tests.rs"]
mod tests;
