//! rofi's MCA parameters (`mtl_rofi_*`), registered once per process.

use std::sync::OnceLock;

use mca::params::{Level, Param, Registrar, StringParam};
use rofi_core::context::{SepError, SepRequest, sep_request};
use rofi_core::provider::inherit::{self, Inherited};
use rofi_core::provider::{HostMatching, NameFilter};
use rofi_core::tag::TagMode;

#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub priority: Param<i32>,
    pub auto_select: Param<bool>,
    pub verbose: Param<i32>,
    pub include: StringParam,
    pub exclude: StringParam,
    pub tag_mode: Param<i32>,
    pub progress_event_cnt: Param<i32>,
    pub rxm_dyn_rbuf: Param<bool>,
    pub rxm_min_recv: Param<usize>,
    pub isend_inject: Param<bool>,
    pub bsend_copy: Param<bool>,
    pub enable_sep: Param<bool>,
    pub thread_grouping: Param<bool>,
    pub num_ctxts: Param<i32>,
    pub host_matching: Param<i32>,
    pub host_eager_size: Param<usize>,
    pub local_provider: StringParam,
    pub matching_probe: Param<bool>,
    pub inherited_choice: StringParam,
}

static PARAMS: OnceLock<Params> = OnceLock::new();

/// The registered parameters; `None` before registration.
pub fn get() -> Option<&'static Params> {
    PARAMS.get()
}

impl Params {
    pub fn tag_mode(&self) -> TagMode {
        TagMode::from_mca_value(self.tag_mode.get()).unwrap_or_default()
    }

    /// The scalable-endpoint request (validated at registration, so the error cannot
    /// happen later), for a node with `local_ranks` processes of the job.
    pub fn sep(&self, local_ranks: u32) -> Result<Option<SepRequest>, SepError> {
        sep_request(
            self.enable_sep.enabled(),
            self.thread_grouping.enabled(),
            self.num_ctxts.get(),
            local_ranks,
        )
    }

    pub fn host_matching(&self) -> HostMatching {
        HostMatching::from_mca_value(self.host_matching.get()).unwrap_or_default()
    }

    /// `mtl_rofi_local_provider`, when set to a name.
    pub fn local_provider(&self) -> Option<String> {
        self.local_provider
            .get()
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
    }

    /// The choice of the process that spawned this one (validated at registration).
    pub fn inherited(&self) -> Option<Inherited> {
        Inherited::parse(self.inherited_choice.get().as_deref())
            .ok()
            .flatten()
    }

    /// The include/exclude lists (validated at registration).
    pub fn filter(&self) -> NameFilter {
        NameFilter::from_params(self.include.get().as_deref(), self.exclude.get().as_deref())
            .unwrap_or(NameFilter::Default)
    }
}

pub fn register(reg: &mut Registrar) {
    let priority = reg.int(
        "priority",
        25,
        0..=100,
        Level::DEV_ALL,
        "Selection priority of the rofi MTL once it competes (named in the mtl list, \
         or mtl_rofi_auto_select); cm takes its MTL's priority, so above ob1's 20 a job \
         given only --mca mtl rofi runs cm",
    );
    let auto_select = reg.bool(
        "auto_select",
        false,
        Level::USER_BASIC,
        "Compete in the MTL selection of jobs that do not name rofi (--mca mtl rofi, \
         OMPI_MCA_mtl, a parameter file). Off by default: an installed rofi then leaves \
         every job that does not ask for it exactly as it was",
    );
    let verbose = reg.int(
        "verbose",
        0,
        0..=100,
        Level::USER_ALL,
        "Verbosity of the rofi MTL: 1 = provider selection and a counter summary at \
         finalize, 10 = every error completion with the provider's message",
    );
    let include = reg.string(
        "provider_include",
        None,
        Level::USER_BASIC,
        "Comma-separated libfabric providers rofi may use, in order of preference; \
         case-insensitive prefixes of layered names (\"tcp\" matches \"tcp;ofi_rxm\"). \
         Mutually exclusive with mtl_rofi_provider_exclude. Unset: every provider, \
         preferring hardware, then tcp;ofi_rxm, tcp, then shm or sm2 (single-node jobs), \
         udp;ofi_rxd, sockets; a provider rofi cannot use is passed over for the next",
        |_| Ok(()),
    );
    let exclude = reg.string(
        "provider_exclude",
        None,
        Level::USER_BASIC,
        "Comma-separated libfabric providers rofi must not use (same matching as \
         mtl_rofi_provider_include, with which it is mutually exclusive). Unset: none",
        |_| Ok(()),
    );
    if let Err(e) = NameFilter::from_params(include.get().as_deref(), exclude.get().as_deref()) {
        reg.reject(e.to_string());
    }
    let modes: Vec<(i32, &str)> = TagMode::ALL
        .iter()
        .map(|m| (m.mca_value(), m.name()))
        .collect();
    let tag_mode = reg.enumeration(
        "tag_mode",
        TagMode::Auto.mca_value(),
        &modes,
        Level::TUNER_ALL,
        "How MPI matching data is laid out in libfabric tags: ofi_tag_1 = 12-bit \
         communicator id, 18-bit source, 32-bit tag; ofi_tag_2 = 24-bit id, 18-bit source, \
         20-bit tag; ofi_tag_full = 30-bit id, 32-bit tag, source in remote CQ data (needs \
         FI_DIRECTED_RECV and 4 bytes of CQ data, and not sockets, which takes a sender \
         missing from its address vector for anyone); auto = ofi_tag_full when the \
         provider allows it, else ofi_tag_1",
    );
    let progress_event_cnt = reg.int(
        "progress_event_cnt",
        100,
        1..=4096,
        Level::TUNER_ALL,
        "Completion-queue entries read per fi_cq_read call during progress",
    );
    let rxm_dyn_rbuf = reg.bool(
        "rxm_dyn_rbuf",
        true,
        Level::TUNER_ALL,
        "Keep ofi_rxm's dynamic receive buffers (libfabric's default). When false, rofi \
         sets FI_OFI_RXM_ENABLE_DYN_RBUF=0 before libfabric loads its providers (unless \
         the variable is set already); note that libfabric 1.17's FI_PEEK then misses \
         messages, so MPI_Probe hangs",
    );
    let rxm_min_recv = reg.size(
        "rxm_min_recv",
        16384,
        0..=(1 << 24),
        Level::TUNER_ALL,
        "On ofi_rxm providers, receives with less room than this many bytes are posted \
         with a bounce buffer of this size and copied out: libfabric 1.17's tcp;ofi_rxm \
         stalls a connection when an eager message is truncated by the provider. Keep it \
         at least the provider's eager size (FI_OFI_RXM_BUFFER_SIZE, 16384 by default); \
         0 posts user buffers as they are",
    );
    let isend_inject = reg.bool(
        "isend_inject",
        true,
        Level::TUNER_ALL,
        "Nonblocking sends that fit the provider's inject size use fi_tinject and complete \
         at once (the C MTL injects only in blocking sends); false posts them with a \
         completion",
    );
    let bsend_copy = reg.bool(
        "bsend_copy",
        true,
        Level::TUNER_ALL,
        "Persistent buffered sends (MPI_Bsend_init): on every MPI_Start rofi packs the \
         user's current data into its own copy and completes the send when it is posted. \
         Open MPI 4.1.4's cm PML mishandles a restart of such a request: before the \
         previous start is complete it packs the byte count as element count (4x a MPI_INT \
         buffer: crash, MPI_ERR_BUFFER or an oversized message), after it, it resends the \
         previous start's data. Costs one copy per start, held in the attached buffer (on \
         the heap when it has no room beside the PML's own) until the provider is done \
         (with host matching: the eager message's completion, or the receiver's read of \
         a large one). false: cm's behaviour",
    );
    let enable_sep = reg.bool(
        "enable_sep",
        false,
        Level::TUNER_BASIC,
        "Open a scalable endpoint (fi_scalable_ep) with mtl_rofi_num_ctxts transmit/receive \
         contexts, each with its own completion queue. Only providers with more than one \
         context per endpoint can (here: sockets); with it set, the others are passed \
         over and rofi declines when none is left",
    );
    let thread_grouping = reg.bool(
        "thread_grouping",
        false,
        Level::TUNER_BASIC,
        "Spread communicators over the scalable endpoint's contexts (communicator id \
         modulo the receiver's context count, the same on every member), so threads \
         using different communicators use different contexts. Needs \
         mtl_rofi_enable_sep=1; without it, every communicator uses context 0",
    );
    let num_ctxts = reg.int(
        "num_ctxts",
        1,
        1..=4096,
        Level::TUNER_BASIC,
        "Contexts of the scalable endpoint (mtl_rofi_enable_sep). More than the provider \
         allows per endpoint is an error; more than this process's share of them (the \
         provider's count divided by the job's processes on the node) is reduced to the \
         share with a warning",
    );
    if let Err(e @ SepError::GroupingNeedsSep) = sep_request(
        enable_sep.enabled(),
        thread_grouping.enabled(),
        num_ctxts.get(),
        1,
    ) {
        reg.reject(e.to_string());
    }
    let host_matching = reg.enumeration(
        "host_matching",
        0,
        &HostMatching::CHOICES,
        Level::TUNER_ALL,
        "Match MPI messages in rofi instead of the provider's tagged receive queues: \
         eager messages up to the inject size and rendezvous reads (fi_read) for larger \
         ones, over untagged messages. auto = only for providers whose tag matching is \
         wrong: rxd (a known intermittent defect) and those failing rofi's matching probe \
         (mtl_rofi_matching_probe); always = every provider with FI_MSG and FI_RMA; never \
         = reject broken providers instead",
    );
    let host_eager_size = reg.size(
        "host_eager_size",
        16384,
        0..=(1 << 20),
        Level::TUNER_ALL,
        "With host matching: the size of each of the 128 posted receive buffers, header \
         included; messages that fit are sent eagerly (injected when they fit the \
         provider's inject size, else sent and held until their completion), larger ones \
         are read by the receiver (fi_read). Never less than the inject size",
    );
    let local_provider = reg.string(
        "local_provider",
        None,
        Level::USER_BASIC,
        "A second libfabric provider for the peers on this node (e.g. \"shm\"), opened \
         beside the one chosen for the others (e.g. tcp;ofi_rxm): each peer's messages \
         go through the provider of its locality, and rofi matches them itself on both \
         (mtl_rofi_host_matching), so MPI_ANY_SOURCE, probes and per-peer order hold \
         across them. Same name matching as mtl_rofi_provider_include. Unset: one \
         provider for every peer",
        |v| {
            if v.contains(',') {
                Err("it names one provider".to_owned())
            } else {
                Ok(())
            }
        },
    );
    if local_provider.get().is_some_and(|n| !n.trim().is_empty())
        && HostMatching::from_mca_value(host_matching.get()) == Some(HostMatching::Never)
    {
        reg.reject(
            "mtl_rofi_local_provider needs rofi's own matching on both providers, and \
             mtl_rofi_host_matching is never"
                .to_owned(),
        );
    }
    let matching_probe = reg.bool(
        "matching_probe",
        true,
        Level::TUNER_ALL,
        "Before using a provider's tagged matching, check it once per process on a \
         loopback pair of its endpoints (ignore masks, FI_PEEK, FI_CLAIM, remote CQ data, \
         truncation; a few ms, up to about a second when a completion never comes); a \
         provider that fails gets host matching (see mtl_rofi_host_matching), and the \
         failed checks are said at mtl_rofi_verbose 1. false: trust the provider",
    );
    let inherited_choice = reg.string(
        inherit::PARAM,
        None,
        Level::DEV_ALL,
        "Set by rofi, not by users: the provider, fabric and matching (`host|shm|shm`, \
         `tagged|tcp;ofi_rxm|192.0.2.0/24`) that a process chose, which it puts in its \
         environment (OMPI_MCA_mtl_rofi_inherited_choice) for the jobs it spawns \
         (MPI_Comm_spawn copies OMPI_MCA_ variables into them, where mpirun's -x \
         variables such as FI_PROVIDER may not reach them). A process started with it \
         chooses exactly that, without a matching probe, so that parent and children \
         match messages alike",
        |v| {
            Inherited::parse(Some(v))
                .map(drop)
                .map_err(|e| e.to_string())
        },
    );
    let _ = PARAMS.set(Params {
        priority,
        auto_select,
        verbose,
        include,
        exclude,
        tag_mode,
        progress_event_cnt,
        rxm_dyn_rbuf,
        rxm_min_recv,
        isend_inject,
        bsend_copy,
        enable_sep,
        thread_grouping,
        num_ctxts,
        host_matching,
        host_eager_size,
        local_provider,
        matching_probe,
        inherited_choice,
    });
}
