//! Ranking candidates and checking each against what the job needs.

use std::fmt;

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
    /// The running libfabric's `(major, minor)`, for providers broken in some versions;
    /// `None`: unknown, assume none is.
    pub libfabric: Option<(u32, u32)>,
    /// `mtl_rofi_host_matching`.
    pub host_matching: HostMatching,
}

/// When rofi matches MPI messages itself ([`crate::host`]) instead of posting tagged
/// receives to the provider (`mtl_rofi_host_matching`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HostMatching {
    /// For providers whose tag matching has a [`known_defect`] in the running libfabric.
    #[default]
    Auto,
    /// For every provider (needs FI_MSG and FI_RMA reads).
    Always,
    /// Never: providers with a known matching defect are rejected.
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

/// Why a provider cannot carry MPI matching in the running libfabric, if it cannot.
/// (The shm findings are reproduced by tests/libfabric/shm_matching.c on 1.17 and 2.1;
/// rxd's by the MPI programs of tests/rofi.rs and tests/libfabric2.rs under the stock
/// ofi MTL.)
#[must_use]
pub fn known_defect(info: &ProviderInfo, libfabric: Option<(u32, u32)>) -> Option<&'static str> {
    if info.is_rxd() {
        // rxd's tagged receive path, on 1.17 and on 2.1 alike (not version-gated: no
        // release is known to be right): a probe with FI_PEEK|FI_CLAIM now and then never
        // sees a message that has arrived, so MPI_Improbe loops forever (about one run in
        // four of tests/programs/p2p_status.c; the stock ofi MTL hangs the same way on
        // both versions), a receive in MPI_Barrier after probes segfaults inside rxd
        // (p2p_probe), and a truncated receive is clamped and reported as a success.
        // Host matching uses only untagged messages and RMA reads, which rxd gets right.
        return Some(
            "libfabric's rxd (checked on 1.17 and 2.1) loses tagged messages to \
             FI_PEEK|FI_CLAIM probes now and then (MPI_Improbe would wait forever), crashes \
             receiving after probes and reports truncated receives as complete",
        );
    }
    if info.is_lnx() {
        // lnx (2.1.0, shm linked with tcp;ofi_rxm) passes FI_PEEK and FI_CLAIM on as
        // plain receives: a probe takes the message into no buffer (FI_ETRUNC) and it is
        // gone. Its truncated receives lose the CQ data and length as shm's do.
        // Reproduced by tests/libfabric/shm_matching.c on provider "lnx".
        return Some(
            "libfabric's lnx (checked on 2.1) treats FI_PEEK and FI_CLAIM as plain \
             receives (a probe would consume the message) and loses the CQ data and length \
             of truncated receives",
        );
    }
    let version = libfabric?;
    if Tier::of(info) != Tier::SharedMemory {
        return None;
    }
    if version < (1, 19) {
        // libfabric < 1.19's shm (prov/shm/src/smr_ep.c, smr_match_tagged) matches a
        // posted receive against an unexpected message with the ignore mask left in the
        // unexpected entry by whichever receive used that entry before, not the posted
        // receive's: a receive that needs ignore bits (every MPI receive ignores the
        // synchronous-send bit; MPI_ANY_TAG ignores the tag) misses messages that
        // arrived first (a hang) or takes one with another tag. It also ignores FI_PEEK
        // and FI_CLAIM (a probe consumes the message). 1.19 moved shm to util_srx.
        return Some(
            "libfabric < 1.19's shm matches unexpected tagged messages with a stale ignore \
             mask and has no FI_PEEK/FI_CLAIM (MPI_Ssend, MPI_ANY_TAG and probes would hang \
             or match wrongly)",
        );
    }
    // From 1.19 (checked on 2.1.0) shm matches correctly, but the error entry of a
    // truncated tagged receive says FI_REMOTE_CQ_DATA with data 0, and the CQ data is
    // where the tagged path carries the sender's rank: a truncated message would report
    // MPI_SOURCE 0. Host matching sends the source in its own header. A layout with the
    // source in the tag (ofi_tag_1) does not step around it: tried natively on 2.1.0,
    // truncated receives complete with length 0 and an MPI_Mrecv that truncates
    // segfaults inside shm (tests/programs/p2p_status.c, p2p_cancel_trunc.c).
    Some(
        "libfabric's shm (checked up to 2.1) loses the remote CQ data of a truncated \
         tagged receive (MPI_SOURCE of a truncated message would be wrong)",
    )
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
            "shm" => Tier::SharedMemory,
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
    Defect(&'static str),
    /// Host matching runs on one endpoint context; scalable endpoints were requested.
    HostMatchingSep,
    /// Host matching is needed (for `defect`) or asked for, and the provider lacks
    /// what it needs (`lacking`).
    HostMatchingUnavailable {
        defect: &'static str,
        lacking: &'static str,
    },
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
            Rejection::HostMatchingUnavailable { defect, lacking } => write!(
                f,
                "{defect}; rofi would match messages itself, but the provider lacks {lacking}"
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
    /// The provider's [`known_defect`], if it has one (the reason for host matching).
    pub defect: Option<&'static str>,
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
                        defect: c.defect.unwrap_or(ASKED),
                        lacking: "untagged messages or RMA reads (FI_MSG, FI_RMA)",
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
    let defect = known_defect(info, req.libfabric);
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
            defect: defect.unwrap_or(ASKED),
            lacking: "an inject size that holds host matching's headers",
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
            order.sort_by_key(|&i| Tier::of(&candidates[i]));
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
