//! Choosing the libfabric provider: name filters, capability checks, default preference.
//!
//! The glue runs `fi_getinfo` with hints asking for FI_EP_RDM + FI_TAGGED, converts each
//! returned `fi_info` into a [`ProviderInfo`], and calls [`select`]. The answer says which
//! entry to open, with its [`crate::tag::TagLayout`] and scalable-endpoint plan already
//! validated, and why every other entry was passed over — so "no provider fits" is a
//! message that names the reason for each candidate, not a silent fallback.
//!
//! # Default policy (no include or exclude list)
//! The C MTL excludes `shm,sockets,tcp,udp,rstream,usnic` by default, which leaves nothing on
//! a machine with only software providers. We exclude nothing and instead *order*
//! the candidates, stable within a tier (libfabric already lists its best first):
//!
//! | tier | providers | why |
//! |---|---|---|
//! | 0 | anything not listed below (psm2, psm3, opx, cxi, efa, verbs;ofi_rxm, …) | real hardware |
//! | 1 | `tcp;ofi_rxm`, `net;ofi_rxm`, then `tcp`, `net` | the maintained software path; any job shape |
//! | 2 | `shm`, `sm2` (single-node jobs only) | fallback when no network provider is present |
//! | 3 | `udp;ofi_rxd` | reliability in software over datagrams: works, slower |
//! | 4 | `sockets` | deprecated upstream; last, but the only one here allowing SEP |
//!
//! `tcp;ofi_rxm` ranks above `shm` even on one node so that a program selects the same
//! provider (and tag layout) on one node as on many; `--mca mtl_rofi_provider_include shm`
//! opts into shared memory. Loopback-only fabrics (`lo`, 127.0.0.0/8, ::1) are rejected for
//! multi-node jobs, and `shm` is rejected for them whatever the lists say, because neither
//! can reach another node and failing here gives a clearer message than `fi_av_insert`.
//!
//! With an include list, its order is the preference order (`include=shm,tcp` prefers
//! shm). With an exclude list, the default order applies to what is left.

mod filter;
pub mod inherit;
pub mod probe;
mod select;
pub mod shared;

#[cfg(test)]
mod tests;

pub use filter::{FilterError, NameFilter, NameRejection};
pub use probe::Matching;
pub use select::{
    Chosen, Defect, HostMatching, Outcome, Rejection, Requirements, Selection, Tier, Verdict,
    known_defect, select, wants_probe,
};

use crate::tag::TagCaps;

/// Where libfabric's `shm` provider keeps the region of the endpoint named `name` (what
/// `fi_getname` returns, e.g. `fi_shm://4242:0:0` and a NUL): the part after `://` is
/// the POSIX shared-memory object, `/dev/shm/4242:0:0`. `None` for anything else.
#[must_use]
pub fn shm_region_path(name: &[u8]) -> Option<String> {
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    let name = std::str::from_utf8(&name[..end]).ok()?;
    let region = name.split_once("://").map_or(name, |(_, rest)| rest);
    let valid = !region.is_empty() && !region.contains('/') && region != "." && region != "..";
    valid.then(|| format!("/dev/shm/{region}"))
}

/// The parts of one `fi_info` entry that selection looks at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderInfo {
    /// `fabric_attr->prov_name`, e.g. `"tcp;ofi_rxm"` (layered providers joined by `;`).
    pub name: String,
    /// `fabric_attr->name`, e.g. `"192.0.2.0/24"`; only used for messages and loopback.
    pub fabric: String,
    /// `domain_attr->name`, e.g. `"eth0"`, `"lo"`.
    pub domain: String,
    /// `ep_attr->type == FI_EP_RDM`.
    pub ep_rdm: bool,
    /// `caps & FI_TAGGED`.
    pub tagged: bool,
    /// `caps & FI_DIRECTED_RECV`.
    pub directed_recv: bool,
    /// `domain_attr->cq_data_size`.
    pub cq_data_size: usize,
    /// `tx_attr->inject_size`: blocking sends up to this size use `fi_tinject`.
    pub inject_size: usize,
    /// `ep_attr->max_msg_size`.
    pub max_msg_size: u64,
    /// `ep_attr->mem_tag_format`.
    pub mem_tag_format: u64,
    /// `domain_attr->max_ep_tx_ctx`.
    pub max_ep_tx_ctx: usize,
    /// `domain_attr->max_ep_rx_ctx`.
    pub max_ep_rx_ctx: usize,
    /// `domain_attr->threading == FI_THREAD_SAFE`.
    pub thread_safe: bool,
    /// `domain_attr->data_progress == FI_PROGRESS_MANUAL`: only our `fi_cq_read`
    /// calls move data (rofi asks for it; reported at verbose 1).
    pub manual_progress: bool,
    /// What rofi's matching probe found (set by the glue; [`probe`]).
    pub matching: Matching,
    /// libfabric does not offer this entry with untagged messages and RMA reads, which
    /// host matching needs (set by the glue after asking for them).
    pub lacks_host_matching: bool,
}

impl ProviderInfo {
    /// What the tag layout needs to know about this provider.
    #[must_use]
    pub fn tag_caps(&self) -> TagCaps {
        TagCaps {
            cq_data_size: self.cq_data_size,
            directed_recv: self.directed_recv,
            unknown_sender_matches_any: self.unknown_sender_matches_any(),
            mem_tag_format: self.mem_tag_format,
        }
    }

    /// Whether a message from a sender missing from the address vector matches receives
    /// directed at any address. So in libfabric's `sockets` (1.17 to 2.1 at least): a
    /// message's source is looked up in the AV when it arrives, a sender not found gets
    /// `FI_ADDR_NOTAVAIL`, which is the same value as the wildcard `FI_ADDR_UNSPEC`, and
    /// it keeps that address in the unexpected queue after the sender is inserted.
    /// Under Open MPI 5 a parent's first messages reach a spawned child before the child
    /// has added the parents, and with the full layout a receive for parent 0 took
    /// parent 1's message (wrong status, wrong data). `tcp;ofi_rxm` and `shm` keep such
    /// a sender apart until it is inserted.
    #[must_use]
    pub fn unknown_sender_matches_any(&self) -> bool {
        self.core_name() == "sockets"
    }

    /// The innermost provider of a layered name (`"tcp;ofi_rxm"` → `"tcp"`), lower-cased.
    #[must_use]
    pub fn core_name(&self) -> String {
        self.name
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    }

    /// Whether a message posted with `fi_tinject` goes on its way without any later call
    /// from us. Not so for `sockets` under manual progress: every send waits on the
    /// endpoint's transmit ring until the sender's next `fi_cq_read` writes it to the
    /// socket, so an injected send would complete its MPI request while its bytes wait
    /// for a progress call the sender may never make. Open MPI counts on completed
    /// sends being delivered: `MPI_Comm_spawn` broadcasts the other job's process names
    /// inside each job, then blocks in `PMIx_Connect` without progress, and the ranks
    /// waiting for the broadcast hung. Where this is false the glue posts every send
    /// with a completion (inject size 0), so a completed send has been written out.
    #[must_use]
    pub fn inject_leaves_on_post(&self) -> bool {
        !(self.manual_progress && self.core_name() == "sockets")
    }

    /// The inject size sends may use: the provider's, or 0 (never inject) where an
    /// injected send would not leave on its own ([`Self::inject_leaves_on_post`]).
    #[must_use]
    pub fn usable_inject_size(&self) -> usize {
        if self.inject_leaves_on_post() {
            self.inject_size
        } else {
            0
        }
    }

    /// Whether libfabric's reliable-datagram utility provider (`ofi_rxd`) is one of
    /// this entry's layers.
    #[must_use]
    pub fn is_rxd(&self) -> bool {
        self.name
            .split(';')
            .any(|layer| layer.trim().eq_ignore_ascii_case("ofi_rxd"))
    }

    /// Whether this is libfabric's link provider (`lnx`: shm for this node's peers and
    /// another provider for the rest behind one endpoint; named `shm+tcp;ofi_rxm:lnx`).
    #[must_use]
    pub fn is_lnx(&self) -> bool {
        self.name
            .rsplit(':')
            .next()
            .is_some_and(|last| last.trim().eq_ignore_ascii_case("lnx"))
            || self.fabric == "ofi_lnx_fabric"
    }

    /// Whether this entry only reaches this host (loopback interface).
    #[must_use]
    pub fn is_loopback(&self) -> bool {
        self.domain == "lo"
            || self.fabric.starts_with("127.")
            || self.fabric.starts_with("::1/")
            || self.fabric == "::1"
    }
}
