//! Ranking candidates and checking each against what the job needs.

use std::fmt;

use super::probe::{CheckSet, Matching, Unverified};
use super::{NameFilter, NameRejection, ProviderInfo};
use crate::context::{SepError, SepPlan, SepRequest};
use crate::host::wire::HEADER_LEN;
use crate::tag::{TagError, TagLayout, TagMode};

/// What the job needs from a provider.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requirements {
    /// `mtl_rofi_tag_mode`.
    pub tag_mode: TagMode,
    /// MPI_THREAD_MULTIPLE was requested: the domain must be FI_THREAD_SAFE.
    pub thread_multiple: bool,
    /// Every rank of the job is on this node (shm and loopback fabrics suffice).
    pub single_node: bool,
    /// `mtl_rofi_enable_sep`: scalable endpoints with this many contexts.
    pub sep: Option<SepRequest>,
    /// `mtl_rofi_host_matching`.
    pub host_matching: HostMatching,
}

/// When rofi matches MPI messages itself ([`crate::host`]) instead of posting tagged
/// receives to the provider (`mtl_rofi_host_matching`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HostMatching {
    /// For providers with a [`known_defect`] or whose matching probe failed.
    #[default]
    Auto,
    /// For every provider (needs FI_MSG and FI_RMA reads).
    Always,
    /// Never: providers with a defect (known, or found by the probe) are rejected.
    Never,
}

impl HostMatching {
    /// `(MCA enum value, name)` of every setting.
    pub const CHOICES: [(i32, &'static str); 3] = [(0, "auto"), (1, "always"), (2, "never")];

    #[must_use]
    pub const fn from_mca_value(v: i32) -> Option<HostMatching> {
        match v {
            0 => Some(HostMatching::Auto),
            1 => Some(HostMatching::Always),
            2 => Some(HostMatching::Never),
            _ => None,
        }
    }
}

/// Why rofi does not use a provider's tagged matching: a rule for a defect a short
/// probe cannot see, or what the matching probe ([`super::probe`]) found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Defect {
    /// From [`known_defect`].
    Known(&'static str),
    /// These checks of the matching probe failed.
    Probed(CheckSet),
    /// The probe could not run on the provider.
    Unverified(Unverified),
}

impl fmt::Display for Defect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Defect::Known(why) => f.write_str(why),
            Defect::Probed(failed) => {
                write!(
                    f,
                    "rofi's matching probe found its tagged matching wrong: {failed}"
                )
            }
            Defect::Unverified(why) => why.fmt(f),
        }
    }
}

impl Matching {
    /// The defect this probe result means, if any.
    #[must_use]
    pub fn defect(self) -> Option<Defect> {
        match self {
            Matching::Unprobed | Matching::Correct | Matching::CorrectWithSink => None,
            Matching::Failed(set) => Some(Defect::Probed(set)),
            Matching::Unverified(why) => Some(Defect::Unverified(why)),
        }
    }
}

/// A provider whose tagged matching is broken in a way the matching probe cannot see.
/// Everything else is decided by the probe ([`ProviderInfo::matching`]).
#[must_use]
pub fn known_defect(info: &ProviderInfo) -> Option<&'static str> {
    if info.is_rxd() {
        // rxd's tagged receive path, on 1.17 and on 2.1 alike (no release is known to be
        // right). Its defect is intermittent, so a short probe passes it: a probe with
        // FI_PEEK|FI_CLAIM now and then never sees a message that has arrived, so
        // MPI_Improbe loops forever (about one run in four of
        // tests/programs/p2p_status.c; the stock ofi MTL hangs the same way on both
        // versions), a receive in MPI_Barrier after probes segfaults inside rxd
        // (p2p_probe), and a truncated receive is clamped and reported as a success.
        // Host matching uses only untagged messages and RMA reads, which rxd gets right.
        return Some(
            "libfabric's rxd (checked on 1.17 and 2.1) loses tagged messages to \
             FI_PEEK|FI_CLAIM probes now and then (MPI_Improbe would wait forever), crashes \
             receiving after probes and reports truncated receives as complete",
        );
    }
    None
}

/// Whether selection would use this provider's tagged matching natively if the probe
/// finds it correct: the glue probes such a choice before opening it.
#[must_use]
pub fn wants_probe(info: &ProviderInfo, chosen: &Chosen) -> bool {
    !chosen.host_matching && info.matching == Matching::Unprobed
}

/// Default preference tier; lower is preferred. See the module docs for the rationale.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    Hardware,
    Tcp,
    SharedMemory,
    Udp,
    Sockets,
}

impl Tier {
    /// The tier of a provider under the default policy, from its innermost name.
    #[must_use]
    pub fn of(info: &ProviderInfo) -> Tier {
        match info.core_name().as_str() {
            "tcp" | "net" => Tier::Tcp,
            // sm2: libfabric 2's second shared-memory provider.
            "shm" | "sm2" => Tier::SharedMemory,
            "udp" => Tier::Udp,
            "sockets" => Tier::Sockets,
            _ => Tier::Hardware,
        }
    }
}

/// Why a candidate cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    Name(NameRejection),
    /// Not an FI_EP_RDM endpoint with FI_TAGGED: the MTL needs tagged reliable datagrams.
    NotTaggedRdm,
    /// MPI_THREAD_MULTIPLE needs FI_THREAD_SAFE.
    NotThreadSafe,
    /// shm cannot reach ranks on other nodes.
    SharedMemoryMultiNode,
    /// A loopback fabric cannot reach ranks on other nodes.
    LoopbackMultiNode,
    /// The tag mode does not fit this provider.
    Tag(TagError),
    /// Scalable endpoints were requested and this provider cannot give them.
    Sep(SepError),
    /// The provider is broken for tagged matching in the running libfabric (and host
    /// matching is off).
    Defect(Defect),
    /// Host matching runs on one endpoint context; scalable endpoints were requested.
    HostMatchingSep,
    /// Host matching is needed (for `defect`) or asked for, and the provider lacks
    /// what it needs (`lacking`).
    /// (`defect` `None`: asked for by `mtl_rofi_host_matching always`.)
    HostMatchingUnavailable {
        defect: Option<Defect>,
        lacking: &'static str,
    },
    /// Not the provider (or fabric) the spawning process chose
    /// ([`super::inherit::select_inherited`]).
    NotInherited(super::inherit::Inherited),
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Name(n) => n.fmt(f),
            Rejection::NotTaggedRdm => f.write_str("not a tagged FI_EP_RDM endpoint"),
            Rejection::NotThreadSafe => {
                f.write_str("MPI_THREAD_MULTIPLE needs FI_THREAD_SAFE, the provider is not")
            }
            Rejection::SharedMemoryMultiNode => {
                f.write_str("shm reaches only this node and the job spans several")
            }
            Rejection::LoopbackMultiNode => {
                f.write_str("loopback fabric reaches only this node and the job spans several")
            }
            Rejection::Tag(e) => e.fmt(f),
            Rejection::Sep(e) => e.fmt(f),
            Rejection::Defect(why) => {
                write!(
                    f,
                    "{why}; mtl_rofi_host_matching never forbids working around it"
                )
            }
            Rejection::HostMatchingUnavailable { defect, lacking } => {
                match defect {
                    Some(d) => d.fmt(f)?,
                    None => f.write_str(ASKED)?,
                }
                write!(
                    f,
                    "; rofi would match messages itself, but the provider lacks {lacking}"
                )
            }
            Rejection::NotInherited(parent) => write!(
                f,
                "the process that spawned this job chose {parent} \
                 (mtl_rofi_{}), and its jobs must match messages alike",
                super::inherit::PARAM
            ),
            Rejection::HostMatchingSep => f.write_str(
                "host matching (needed for this provider or asked for) uses one endpoint \
                 context, and scalable endpoints were requested",
            ),
        }
    }
}

/// The reason for host matching when no defect calls for it.
const ASKED: &str = "mtl_rofi_host_matching always";

/// What a provider listed without FI_MSG and FI_RMA reads lacks for host matching.
const LACKS_MSG_RMA: &str = "untagged messages or RMA reads (FI_MSG, FI_RMA)";

/// What happened to one candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Chosen,
    /// Usable, but a preferred candidate was chosen.
    Acceptable,
    Rejected(Rejection),
}

/// One line of the selection report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Index into the candidate slice given to [`select`].
    pub index: usize,
    pub name: String,
    pub fabric: String,
    pub outcome: Outcome,
}

/// The candidate to open, with everything derived from it already validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chosen {
    /// Index into the candidate slice given to [`select`].
    pub index: usize,
    pub layout: TagLayout,
    /// Present iff scalable endpoints were requested.
    pub sep: Option<SepPlan>,
    /// rofi matches messages itself ([`crate::host`]).
    pub host_matching: bool,
    /// The provider's defect, if it has one (the reason for host matching).
    pub defect: Option<Defect>,
    /// The provider's own matching, with every receive posted with an overflow sink
    /// behind its buffer (its truncation is wrong: [`Matching::CorrectWithSink`]).
    pub overflow_sink: bool,
}

/// Result of [`select`]: the choice (if any) and a verdict per candidate, in the order
/// they were considered (preference order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    pub chosen: Option<Chosen>,
    pub verdicts: Vec<Verdict>,
}

impl Selection {
    /// The same selection with its choice refused because host matching, which the
    /// choice needs for its defect, is not available on it (libfabric does not list it
    /// with FI_MSG and FI_RMA reads).
    #[must_use]
    pub fn refuse_host_matching(mut self) -> Selection {
        if let Some(c) = self.chosen.take() {
            for v in &mut self.verdicts {
                if v.index == c.index {
                    v.outcome = Outcome::Rejected(Rejection::HostMatchingUnavailable {
                        defect: c.defect,
                        lacking: LACKS_MSG_RMA,
                    });
                }
            }
        }
        self
    }

    /// Multi-line text for show_help / verbose output: one candidate per line.
    #[must_use]
    pub fn report(&self) -> String {
        let mut s = String::new();
        for v in &self.verdicts {
            let what = match &v.outcome {
                Outcome::Chosen => "selected".to_owned(),
                Outcome::Acceptable => "usable, not preferred".to_owned(),
                Outcome::Rejected(r) => format!("rejected: {r}"),
            };
            s.push_str(&format!("  {} [{}]: {what}\n", v.name, v.fabric));
        }
        if self.verdicts.is_empty() {
            s.push_str("  (libfabric returned no tagged RDM provider)\n");
        }
        s
    }
}

fn check(
    info: &ProviderInfo,
    filter: &NameFilter,
    req: &Requirements,
) -> Result<Chosen, Rejection> {
    filter.check(&info.name).map_err(Rejection::Name)?;
    if !(info.ep_rdm && info.tagged) {
        return Err(Rejection::NotTaggedRdm);
    }
    let defect = known_defect(info)
        .map(Defect::Known)
        .or(info.matching.defect());
    let host_matching = match req.host_matching {
        HostMatching::Always => true,
        HostMatching::Auto => defect.is_some(),
        HostMatching::Never => match defect {
            Some(why) => return Err(Rejection::Defect(why)),
            None => false,
        },
    };
    if host_matching && info.inject_size < HEADER_LEN {
        // Every host-matching message starts with an injected header.
        return Err(Rejection::HostMatchingUnavailable {
            defect,
            lacking: "an inject size that holds host matching's headers",
        });
    }
    if host_matching && info.lacks_host_matching {
        return Err(Rejection::HostMatchingUnavailable {
            defect,
            lacking: LACKS_MSG_RMA,
        });
    }
    if host_matching && req.sep.is_some() {
        return Err(Rejection::HostMatchingSep);
    }
    if req.thread_multiple && !info.thread_safe {
        return Err(Rejection::NotThreadSafe);
    }
    if !req.single_node {
        if Tier::of(info) == Tier::SharedMemory {
            return Err(Rejection::SharedMemoryMultiNode);
        }
        if info.is_loopback() {
            return Err(Rejection::LoopbackMultiNode);
        }
    }
    let layout = TagLayout::resolve(req.tag_mode, &info.tag_caps()).map_err(Rejection::Tag)?;
    let sep = match req.sep {
        None => None,
        Some(r) => Some(
            SepPlan::compute(r, info.max_ep_tx_ctx, info.max_ep_rx_ctx).map_err(Rejection::Sep)?,
        ),
    };
    Ok(Chosen {
        index: 0,
        layout,
        sep,
        host_matching,
        defect,
        overflow_sink: !host_matching && info.matching == Matching::CorrectWithSink,
    })
}

/// Pick the most preferred acceptable candidate (see the module docs for the order).
#[must_use]
pub fn select(candidates: &[ProviderInfo], filter: &NameFilter, req: &Requirements) -> Selection {
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    // Stable sort: ties keep libfabric's own order, which lists its best first.
    match filter {
        NameFilter::Include(_) => {
            order.sort_by_key(|&i| {
                filter
                    .include_rank(&candidates[i].name)
                    .unwrap_or(usize::MAX)
            });
        }
        NameFilter::Default | NameFilter::Exclude(_) => {
            // In the tcp tier, rxm over tcp before libfabric 2's tcp with RDM endpoints
            // of its own (listed first there, and less proven under MPI).
            order.sort_by_key(|&i| {
                let c = &candidates[i];
                let tier = Tier::of(c);
                (tier, tier == Tier::Tcp && !c.name.contains(';'))
            });
        }
    }
    let mut chosen = None;
    let mut verdicts = Vec::with_capacity(candidates.len());
    for i in order {
        let info = &candidates[i];
        let outcome = match check(info, filter, req) {
            Err(r) => Outcome::Rejected(r),
            Ok(_) if chosen.is_some() => Outcome::Acceptable,
            Ok(c) => {
                chosen = Some(Chosen { index: i, ..c });
                Outcome::Chosen
            }
        };
        verdicts.push(Verdict {
            index: i,
            name: info.name.clone(),
            fabric: info.fabric.clone(),
            outcome,
        });
    }
    Selection { chosen, verdicts }
}
