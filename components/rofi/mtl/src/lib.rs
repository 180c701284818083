//! `rofi`: the OFI MTL in Rust. MPI point-to-point matching on libfabric tagged
//! messages (FI_EP_RDM), selected with `--mca pml cm --mca mtl rofi`.
//!
//! The protocol (tag layouts, provider choice, synchronous-send ACKs, completion
//! meaning) is `rofi_core`; this crate opens the provider, posts what the core plans
//! and feeds completions back. Raw pointers stay in `raw`.

mod engine;
mod host;
mod host_state;
mod local;
mod params;
mod progress;
mod raw;
mod recv;
mod request;
mod send;
mod shared_probe;
mod stats;

use mca::component::Component;
use mca::convertor::Convertor;
use mca::mtl::{Comm, Mtl, MtlComponent, MtlLimits, MtlModule, SendMode, Status};
use mca::output::{ComponentStream, Stream};
use mca::params::Registrar;
use mca::{Error, Result, sys, verbose};
use rofi_core::provider::inherit::{Inherited, select_inherited};
use rofi_core::provider::probe::{Matching, ProbeConfig, Unverified, verdict};
use rofi_core::provider::{
    HostMatching, ProviderInfo, Requirements, Selection, select, wants_probe,
};
use rofi_core::sync::SendLimits;

use engine::Engine;
use raw::Owned;
use raw::fabric::{Fabric, Hints, InfoList, Shape};
use raw::slot::Slot;
use request::RequestState;
use rofi_core::context::ContextMap;

/// The component type behind `mca_mtl_rofi_component`.
pub struct Rofi;
mca::declare_mtl_component!(mca_mtl_rofi_component, "rofi", Rofi);

/// The module: the engine is process-wide because opal_progress callbacks carry no
/// context.
pub struct RofiModule;

static STREAM: ComponentStream = ComponentStream::new();

fn stream() -> Stream {
    STREAM.get(|| params::get().map_or(0, |p| p.verbose.get()))
}

fn engine() -> Result<&'static Engine> {
    raw::running::engine().ok_or(Error::NOT_AVAILABLE)
}

mca::progress_fn!(
    fn rofi_progress() {
        raw::running::engine().map_or(0, Engine::progress)
    }
);

impl Component for Rofi {
    fn register(reg: &mut Registrar) -> Result<()> {
        params::register(reg);
        stats::register();
        Ok(())
    }

    fn close() -> Result<()> {
        STREAM.close();
        Ok(())
    }
}

/// On `shm`, has mpirun remove our endpoint's region from /dev/shm when this process
/// terminates. libfabric unlinks it when the endpoint closes, or from its SIGTERM/SIGINT
/// handlers; a process leaving through `MPI_Abort` (`_exit`) or SIGKILL did neither,
/// and its region stayed. It cannot be unlinked early instead: processes that join later
/// (`MPI_Comm_spawn`) open it by name.
fn register_shm_cleanup(core_name: &str, endpoint_name: &[u8]) {
    if core_name != "shm" {
        return;
    }
    let Some(path) = rofi_core::provider::shm_region_path(endpoint_name) else {
        verbose!(
            stream(),
            1,
            "mtl:rofi: no shm region in endpoint name {:?}",
            String::from_utf8_lossy(endpoint_name)
        );
        return;
    };
    match mca::proc::register_cleanup(&path) {
        Ok(()) => verbose!(stream(), 10, "mtl:rofi: {path} removed at exit by mpirun"),
        Err(e) => verbose!(
            stream(),
            1,
            "mtl:rofi: cannot register {path} for removal at exit: {e}"
        ),
    }
}

fn env_number(name: &str) -> Option<usize> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// Every rank on this node (shm and loopback suffice)?
fn single_node() -> bool {
    match (
        env_number("OMPI_COMM_WORLD_SIZE"),
        env_number("OMPI_COMM_WORLD_LOCAL_SIZE"),
    ) {
        (Some(world), Some(local)) => world == local,
        _ => true,
    }
}

/// Discovers providers and lets the core choose; the list stays alive for opening.
fn choose(thread_multiple: bool) -> Result<(InfoList, Selection)> {
    let p = params::get().ok_or(Error::NOT_AVAILABLE)?;
    let local_ranks = env_number("OMPI_COMM_WORLD_LOCAL_SIZE").unwrap_or(1);
    let sep = p
        .sep(u32::try_from(local_ranks).unwrap_or(u32::MAX))
        .map_err(|e| {
            // Registration refused the combinations that can fail here.
            verbose!(stream(), 1, "mtl:rofi: {e}");
            Error::BAD_PARAM
        })?;
    let req = Requirements {
        tag_mode: p.tag_mode(),
        thread_multiple,
        single_node: single_node(),
        sep,
        // Two providers side by side share rofi's own matching (`local`).
        host_matching: if p.local_provider().is_some() {
            HostMatching::Always
        } else {
            p.host_matching()
        },
    };
    // A spawned process chooses as the process that spawned it did.
    let inherited = p.inherited();
    let req = inherited.as_ref().map_or(req, |i| i.requirements(&req));
    if !p.rxm_dyn_rbuf.enabled() {
        raw::env::disable_rxm_dyn_rbuf();
    }
    let discover = |directed_recv, host_matching| {
        InfoList::discover(Hints {
            thread_safe: thread_multiple,
            directed_recv,
            host_matching,
        })
        .map_err(|e| {
            verbose!(stream(), 1, "mtl:rofi: {e}");
            Error::NOT_AVAILABLE
        })
    };
    let always = req.host_matching == HostMatching::Always;
    let mut last = None;
    // FI_DIRECTED_RECV first (the full layout needs it); without it the layouts that
    // carry the source in the tag still work.
    for directed_recv in [true, false] {
        let list = discover(directed_recv, always)?;
        // Entries that need host matching and are not listed with what it needs: passed
        // over for the next candidate (sm2 of libfabric 2.1 loses remote CQ data and has
        // neither FI_MSG nor reads).
        let mut lacking: Vec<ProbeKey> = Vec::new();
        loop {
            let selection = select_probed(&list, p, &req, inherited.as_ref(), &lacking);
            match selection.chosen {
                // Host matching needs untagged messages and reads: ask again for those
                // (asking always would hide providers without them from tagged use).
                Some(c) if c.host_matching && !always => {
                    let with_msg = discover(directed_recv, true)?;
                    let again = select_probed(&with_msg, p, &req, inherited.as_ref(), &lacking);
                    if again.chosen.is_some_and(|c| c.host_matching) {
                        return Ok((with_msg, again));
                    }
                    let key = probe_key(&list.entries()[c.index]);
                    if lacking.contains(&key) {
                        // Not expected (selection rejects what `lacking` names); refuse
                        // rather than ask forever.
                        last = Some((list, selection.refuse_host_matching()));
                        break;
                    }
                    lacking.push(key);
                }
                Some(_) => return Ok((list, selection)),
                None => {
                    last = Some((list, selection));
                    break;
                }
            }
        }
    }
    last.ok_or(Error::NOT_AVAILABLE)
}

/// What the matching probe found per provider in this process, by (name, fabric,
/// domain): query() and init() both choose, from lists discovered with different hints,
/// and a provider is probed once.
static PROBED: std::sync::Mutex<Vec<(ProbeKey, Matching)>> = std::sync::Mutex::new(Vec::new());

/// A provider entry's (name, fabric, domain).
type ProbeKey = (String, String, String);

fn probe_key(info: &ProviderInfo) -> ProbeKey {
    (info.name.clone(), info.fabric.clone(), info.domain.clone())
}

/// `list`'s entries with what the probe found for them, and which of them libfabric
/// does not offer for host matching (`lacking`).
fn probed_entries(list: &InfoList, lacking: &[ProbeKey]) -> Vec<ProviderInfo> {
    let probed = PROBED.lock().unwrap_or_else(|e| e.into_inner());
    let mut entries = list.entries();
    for e in &mut entries {
        let key = probe_key(e);
        if let Some((_, m)) = probed.iter().find(|(k, _)| *k == key) {
            e.matching = *m;
        }
        e.lacks_host_matching = lacking.contains(&key);
    }
    entries
}

/// Selects from `list`; a choice whose tagged matching would be used natively and has
/// not been checked is probed first and selection runs again with the finding (which may
/// then give it host matching, or, under `never`, pass it over for the next candidate,
/// probed in turn). Ends: every round probes another candidate. With an inherited
/// choice the spawning process's verdict stands: no probe.
fn select_probed(
    list: &InfoList,
    p: &params::Params,
    req: &Requirements,
    inherited: Option<&Inherited>,
    lacking: &[ProbeKey],
) -> Selection {
    if let Some(i) = inherited {
        let mut entries = list.entries();
        for e in &mut entries {
            e.lacks_host_matching = lacking.contains(&probe_key(e));
        }
        return select_inherited(&entries, i, req);
    }
    loop {
        let entries = probed_entries(list, lacking);
        let selection = select(&entries, &p.filter(), req);
        match selection.chosen {
            Some(c) if p.matching_probe.enabled() && wants_probe(&entries[c.index], &c) => {
                let matching = probe(list, c.index, &entries[c.index], p);
                PROBED
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((probe_key(&entries[c.index]), matching));
            }
            _ => return selection,
        }
    }
}

/// What the matching probe finds on entry `index` of `list`: run here, or taken from
/// local rank 0 of this job, which ran it for the node (`shared_probe`).
fn probe(list: &InfoList, index: usize, info: &ProviderInfo, p: &params::Params) -> Matching {
    let cfg = probe_config(info, p);
    shared_probe::probe_once_per_node(info, cfg, || probe_here(list, index, info, cfg))
}

/// How the probe fits `info`.
fn probe_config(info: &ProviderInfo, p: &params::Params) -> ProbeConfig {
    ProbeConfig {
        cq_data: info.cq_data_size >= 4,
        // rofi posts receives smaller than this into bounce buffers on ofi_rxm (see
        // `min_landing` in init), so smaller truncations never reach the provider.
        trunc_room: if info.name.to_ascii_lowercase().contains("ofi_rxm") {
            p.rxm_min_recv.get()
        } else {
            4
        },
    }
}

/// Runs the probe in this process and says what it found (and how long it took) at
/// verbose 1.
fn probe_here(list: &InfoList, index: usize, info: &ProviderInfo, cfg: ProbeConfig) -> Matching {
    let started = std::time::Instant::now();
    let report = raw::probe::run(list, index, info, cfg);
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let (major, minor) = raw::fabric::runtime_version();
    let (matching, found) = match report {
        raw::probe::Report::Ran { results, skipped } => {
            let v = verdict(&results);
            let not_run = if skipped.is_empty() {
                String::new()
            } else {
                let names: Vec<&str> = skipped.iter().map(|c| c.name()).collect();
                format!(
                    " ({} not run after a failed matching check)",
                    names.join(", ")
                )
            };
            let matching = Matching::of_results(&results);
            let found = match &v {
                Ok(()) => format!("all {} checks passed", results.len()),
                Err(failed) => {
                    let outcome = if matching == Matching::CorrectWithSink {
                        ", the overflow checks passed: rofi uses its tagged matching with \
                         an overflow sink behind every receive and truncates itself"
                            .to_owned()
                    } else {
                        format!("{not_run}, rofi will not use its tagged matching")
                    };
                    let lines: Vec<String> =
                        failed.iter().map(|f| format!("    FAIL {f}")).collect();
                    format!(
                        "{} of {} checks failed{outcome}:\n{}",
                        failed.len(),
                        results.len(),
                        lines.join("\n")
                    )
                }
            };
            (matching, found)
        }
        raw::probe::Report::NoLoopback(why) => (
            Matching::Unverified(Unverified::NoLoopback),
            format!("could not open a loopback pair of endpoints ({why}): unverified"),
        ),
    };
    verbose!(
        stream(),
        1,
        "mtl:rofi: matching probe of {} [{}] on libfabric {major}.{minor} ({ms:.1} ms): {found}",
        info.name,
        info.fabric
    );
    matching
}

fn decline(selection: &Selection) -> Error {
    let p = params::get();
    // Asked for a provider or for scalable endpoints: say why nothing fits.
    let asked = p.is_some_and(|p| p.include.get().is_some() || p.enable_sep.enabled());
    if asked || stream().enabled(1) {
        mca::help::show_help(
            "help-mtl-rofi.txt",
            "no provider",
            true,
            &[&selection.report()],
        );
    }
    Error::NOT_AVAILABLE
}

impl MtlComponent for Rofi {
    type Module = RofiModule;

    fn query() -> Result<i32> {
        let p = params::get().ok_or(Error::NOT_AVAILABLE)?;
        // Installed beside Open MPI's own MTLs, rofi stays out of jobs that did not
        // ask for it: opening a provider costs start-up time, and cm winning over ob1
        // would change how every default job runs.
        if !mca::selection::competes("mtl", "rofi", p.auto_select.enabled()) {
            verbose!(
                stream(),
                1,
                "mtl:rofi: not named in the mtl list and mtl_rofi_auto_select is off: \
                 not competing"
            );
            return Err(Error::NOT_AVAILABLE);
        }
        let (_, selection) = choose(false)?;
        if selection.chosen.is_none() {
            return Err(decline(&selection));
        }
        Ok(p.priority.get())
    }

    fn init(_progress_threads: bool, mpi_threads: bool) -> Result<(RofiModule, MtlLimits)> {
        let p = params::get().ok_or(Error::NOT_AVAILABLE)?;
        let (list, selection) = choose(mpi_threads)?;
        let Some(chosen) = selection.chosen else {
            return Err(decline(&selection));
        };
        let info = &list.entries()[chosen.index];
        verbose!(
            stream(),
            1,
            "mtl:rofi: provider selection\n{}",
            selection.report().trim_end()
        );
        if let Some(i) = p.inherited() {
            verbose!(
                stream(),
                1,
                "mtl:rofi: chose as {} ({i}; mtl_rofi_{}), without a matching probe",
                if raw::env::choice_is_own() {
                    "this process did in an earlier MPI Session"
                } else {
                    "the process that spawned this job did"
                },
                rofi_core::provider::inherit::PARAM
            );
        }
        let universe = env_number("OMPI_UNIVERSE_SIZE")
            .filter(|&n| n > 0)
            .or_else(|| env_number("OMPI_COMM_WORLD_SIZE"))
            .unwrap_or(1);
        if let Some(plan) = chosen.sep
            && let Some(asked) = plan.clamped_from
        {
            mca::help::show_help(
                "help-mtl-rofi.txt",
                "contexts reduced",
                true,
                &[
                    &asked.to_string(),
                    &info.name,
                    &info.max_ep_tx_ctx.min(info.max_ep_rx_ctx).to_string(),
                    &env_number("OMPI_COMM_WORLD_LOCAL_SIZE")
                        .unwrap_or(1)
                        .to_string(),
                    &plan.num_ctxts.to_string(),
                ],
            );
        }
        let contexts = ContextMap::of_plan(chosen.sep.as_ref());
        let shape = Shape {
            cq_size: 0,
            av_count: universe,
            sep: chosen
                .sep
                .map(|plan| (contexts.num_ctxts(), plan.rx_ctx_bits)),
        };
        let fabric = Fabric::open(&list, chosen.index, shape).map_err(|e| {
            mca::help::show_help("help-mtl-rofi.txt", "init failed", true, &[&info.name, &e]);
            Error::NOT_AVAILABLE
        })?;
        let name = fabric.name().map_err(|e| {
            mca::help::show_help("help-mtl-rofi.txt", "init failed", true, &[&info.name, &e]);
            Error::NOT_AVAILABLE
        })?;
        let local = match p.local_provider() {
            Some(asked) if !local::is_main(&asked, &info.name) => {
                let local_ranks = env_number("OMPI_COMM_WORLD_LOCAL_SIZE").unwrap_or(1);
                let event_cnt = p.progress_event_cnt.get() as usize;
                match local::open(
                    &asked,
                    &info.name,
                    mpi_threads,
                    local_ranks,
                    event_cnt,
                    stream(),
                ) {
                    Ok(l) => Some(l),
                    Err(e) => {
                        fabric.close();
                        return Err(e);
                    }
                }
            }
            _ => None,
        };
        raw::modex::send(&raw::modex::Published {
            name: name.clone(),
            local: local.as_ref().map(|l| l.name.clone()),
            ctxts: contexts.num_ctxts(),
            choice: Inherited::of(info, &chosen),
        })?;
        register_shm_cleanup(&info.core_name(), &name);
        if let Some(l) = &local {
            register_shm_cleanup(&l.core_name, &l.name);
        }
        let layout = chosen.layout;
        let host = if chosen.host_matching {
            // Both rails carry the same messages: the smaller inject size bounds them.
            let inject_size = local
                .as_ref()
                .map_or(info.inject_size, |l| l.inject_size.min(info.inject_size));
            let rails: &[raw::procs::Rail] = if local.is_some() {
                &[raw::procs::Rail::Main, raw::procs::Rail::Local]
            } else {
                &[raw::procs::Rail::Main]
            };
            let Some(h) = host_state::Host::new(inject_size, p.host_eager_size.get(), rails) else {
                let why = format!(
                    "host matching needs an inject size of at least {} bytes, the provider has {}",
                    rofi_core::host::wire::HEADER_LEN,
                    inject_size
                );
                mca::help::show_help(
                    "help-mtl-rofi.txt",
                    "init failed",
                    true,
                    &[&info.name, &why],
                );
                return Err(Error::NOT_AVAILABLE);
            };
            Some(h)
        } else {
            None
        };
        let sink = if chosen.overflow_sink {
            match raw::sink::Sink::get() {
                Ok(sink) => Some(sink),
                Err(why) => {
                    mca::help::show_help(
                        "help-mtl-rofi.txt",
                        "init failed",
                        true,
                        &[&info.name, &why],
                    );
                    return Err(Error::NOT_AVAILABLE);
                }
            }
        } else {
            None
        };
        let limits = SendLimits {
            // 0 where injected sends would wait for our next progress call (sockets).
            inject_size: info.usable_inject_size() as u64,
            max_msg_size: info.max_msg_size,
        };
        let engine = Engine::new(engine::Setup {
            fabric,
            contexts,
            layout,
            limits,
            provider: info.name.clone(),
            stream: stream(),
            event_cnt: p.progress_event_cnt.get() as usize,
            min_landing: if info.name.to_ascii_lowercase().contains("ofi_rxm") {
                p.rxm_min_recv.get()
            } else {
                0
            },
            sink,
            isend_inject: p.isend_inject.enabled(),
            bsend_copy: p.bsend_copy.enabled(),
            host,
            local: local.map(|l| l.rail),
            choice: Inherited::of(info, &chosen),
        });
        verbose!(
            stream(),
            1,
            "mtl:rofi: using {} [{}], {}, max tag {}, max cid {}, inject {} B, \
             threads {}, {} progress, {}",
            info.name,
            info.fabric,
            match &engine.host {
                Some(h) => format!(
                    "host matching (eager up to {} B, then fi_read){}",
                    h.eager_max,
                    // Host matching uses no tags: say so when one was asked for.
                    if p.tag_mode() == rofi_core::tag::TagMode::Auto {
                        String::new()
                    } else {
                        format!(", mtl_rofi_tag_mode {} unused", p.tag_mode().name())
                    }
                ),
                None if engine.sink.is_some() => format!(
                    "tag layout {}, an overflow sink behind every receive (the provider's \
                     truncation is wrong: rofi truncates)",
                    layout.kind()
                ),
                None => format!("tag layout {}", layout.kind()),
            },
            max_tag(&engine, layout),
            max_contextid(&engine, layout),
            info.usable_inject_size(),
            if mpi_threads {
                "FI_THREAD_SAFE"
            } else {
                "FI_THREAD_DOMAIN"
            },
            if info.manual_progress {
                "manual"
            } else {
                "auto"
            },
            match chosen.sep {
                None => "one endpoint".to_owned(),
                Some(plan) => format!(
                    "scalable endpoint with {} context(s){}",
                    contexts.num_ctxts(),
                    if plan.grouping {
                        ", thread grouping"
                    } else {
                        ""
                    }
                ),
            }
        );
        let limits = MtlLimits {
            max_contextid: max_contextid(&engine, layout),
            max_tag: max_tag(&engine, layout),
            // Communicators made from groups (MPI Sessions): a message carries the id
            // its receiver matches on (`Comm::remote_context_id`).
            flags: mca::mtl::FLAG_EXTENDED_CIDS,
        };
        stats::reset();
        let started = match raw::running::start(Box::new(engine)) {
            Ok(started) => started,
            Err(refused) => {
                refused.shut_down();
                return Err(Error::ERROR);
            }
        };
        // Chosen and opened: the jobs this process spawns choose the same
        // (rofi_core::provider::inherit).
        raw::env::hand_on_choice(&started.choice.encode());
        let posted = if started.host.is_some() {
            started.host_start()
        } else {
            Ok(())
        };
        if let Err(e) = posted.and_then(|()| mca::progress::register(rofi_progress)) {
            // cm calls no finalize after a failed init: a later one starts afresh.
            raw::running::stop();
            return Err(e);
        }
        Ok((RofiModule, limits))
    }
}

/// The largest tag: the layout's, or any `int` with host matching (its header has 32
/// bits for it).
fn max_tag(engine: &Engine, layout: rofi_core::tag::TagLayout) -> i32 {
    if engine.host.is_some() {
        i32::MAX
    } else {
        layout.max_tag()
    }
}

/// The largest communicator id, likewise (32 header bits with host matching).
fn max_contextid(engine: &Engine, layout: rofi_core::tag::TagLayout) -> i32 {
    if engine.host.is_some() {
        i32::MAX
    } else {
        layout.max_contextid().min(i32::MAX as u32) as i32
    }
}

impl MtlModule for RofiModule {
    type Request = Owned<RequestState>;

    fn add_procs(_mtl: &Mtl<Self>, procs: &[*mut sys::ompi_proc_t]) -> Result<()> {
        engine()?.add_procs(procs)
    }

    fn del_procs(_mtl: &Mtl<Self>, procs: &[*mut sys::ompi_proc_t]) -> Result<()> {
        engine()?.del_procs(procs);
        Ok(())
    }

    /// A communicator made from a group (MPI Sessions) has an index per process: this
    /// process's is published for the peers' first messages (`Comm::remote_context_id`).
    fn add_comm(_mtl: &Mtl<Self>, comm: Comm) -> Result<()> {
        comm.publish_index().inspect_err(|e| {
            verbose!(
                stream(),
                1,
                "mtl:rofi: could not publish this process's index of a communicator: {e}"
            );
        })
    }

    fn finalize(_mtl: &Mtl<Self>) -> Result<()> {
        let e = engine()?;
        let _ = mca::progress::unregister(rofi_progress);
        if e.stream.enabled(1) {
            let summary = stats::snapshot()
                .iter()
                .map(|(n, v)| format!("{}={v}", n.trim_start_matches("mtl_rofi_")))
                .collect::<Vec<_>>()
                .join(" ");
            verbose!(e.stream, 1, "mtl:rofi: finalize: {summary}");
            if e.per_ctx.len() > 1 {
                let per: Vec<String> = e
                    .per_ctx
                    .iter()
                    .map(|n| n.load(std::sync::atomic::Ordering::Relaxed).to_string())
                    .collect();
                verbose!(
                    e.stream,
                    1,
                    "mtl:rofi: completions per context: {}",
                    per.join("/")
                );
            }
            if let Some(l) = &e.local {
                let main: usize = e
                    .per_ctx
                    .iter()
                    .map(|n| n.load(std::sync::atomic::Ordering::Relaxed))
                    .sum();
                verbose!(
                    e.stream,
                    1,
                    "mtl:rofi: completions: {main} through {}, {} through {} (this node)",
                    e.provider,
                    l.completions.load(std::sync::atomic::Ordering::Relaxed),
                    l.provider
                );
            }
        }
        raw::running::stop();
        Ok(())
    }

    fn send(
        _mtl: &Mtl<Self>,
        comm: Comm,
        dest: i32,
        tag: i32,
        convertor: &mut Convertor,
        mode: SendMode,
    ) -> Result<()> {
        engine()?.send(comm, dest, tag, convertor, mode)
    }

    fn isend(
        _mtl: &Mtl<Self>,
        comm: Comm,
        dest: i32,
        tag: i32,
        convertor: &mut Convertor,
        mode: SendMode,
        _blocking: bool,
        request: Slot,
    ) -> Result<()> {
        engine()?.isend(comm, dest, tag, convertor, mode, request)
    }

    fn irecv(
        _mtl: &Mtl<Self>,
        comm: Comm,
        src: i32,
        tag: i32,
        convertor: &mut Convertor,
        request: Slot,
    ) -> Result<()> {
        engine()?.irecv(comm, src, tag, convertor, request)
    }

    fn iprobe(_mtl: &Mtl<Self>, comm: Comm, src: i32, tag: i32) -> Result<Option<Status>> {
        engine()?.iprobe(comm, src, tag)
    }

    fn improbe(
        _mtl: &Mtl<Self>,
        comm: Comm,
        src: i32,
        tag: i32,
    ) -> Result<Option<(*mut sys::ompi_message_t, Status)>> {
        engine()?.improbe(comm, src, tag)
    }

    fn imrecv(
        _mtl: &Mtl<Self>,
        convertor: &mut Convertor,
        message: *mut sys::ompi_message_t,
        request: Slot,
    ) -> Result<()> {
        engine()?.imrecv(convertor, message, request)
    }

    fn cancel(_mtl: &Mtl<Self>, request: Slot, _flag: i32) -> Result<()> {
        engine()?.cancel(request)
    }
}
