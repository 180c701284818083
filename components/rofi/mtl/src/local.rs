//! A second provider for the peers on this node (`mtl_rofi_local_provider`), e.g. shm
//! beside tcp;ofi_rxm: what libfabric's lnx provider promises, which 2.1's lnx cannot
//! carry MPI matching through (it passes FI_PEEK/FI_CLAIM on as plain receives).
//!
//! Both providers run host matching (`crate::host`): messages from either go into one
//! matcher, so MPI_ANY_SOURCE receives and probes see every peer, and each peer's
//! messages keep their order because a peer is reached through one provider only
//! (`Engine::add_procs` decides it by locality, the same way on both ends).

use mca::output::Stream;
use mca::{Error, Result, verbose};
use rofi_core::provider::{HostMatching, NameFilter, Requirements, select};
use rofi_core::tag::TagMode;

use crate::engine::LocalRail;
use crate::raw::fabric::{Fabric, Hints, InfoList, Shape};

/// The opened local rail, with what init needs of it.
pub struct Opened {
    pub rail: LocalRail,
    /// Its endpoint name, published in the modex.
    pub name: Vec<u8>,
    pub core_name: String,
    pub inject_size: usize,
}

/// Whether the main provider `main` is already the one asked for (then one suffices).
pub fn is_main(asked: &str, main: &str) -> bool {
    NameFilter::from_params(Some(asked), None).is_ok_and(|f| f.include_rank(main).is_some())
}

/// Opens provider `asked` for this node's `local_ranks` processes, beside `main`.
pub fn open(
    asked: &str,
    main: &str,
    thread_multiple: bool,
    local_ranks: usize,
    event_cnt: usize,
    stream: Stream,
) -> Result<Opened> {
    let refuse = |why: &str| {
        mca::help::show_help(
            "help-mtl-rofi.txt",
            "local provider",
            true,
            &[asked, main, why],
        );
        Error::NOT_AVAILABLE
    };
    let filter = NameFilter::from_params(Some(asked), None).map_err(|e| refuse(&e.to_string()))?;
    let list = InfoList::discover(Hints {
        thread_safe: thread_multiple,
        directed_recv: false,
        host_matching: true,
    })
    .map_err(|e| refuse(&e))?;
    let req = Requirements {
        tag_mode: TagMode::Auto,
        thread_multiple,
        // It carries only the peers on this node.
        single_node: true,
        sep: None,
        host_matching: HostMatching::Always,
    };
    let selection = select(&list.entries(), &filter, &req);
    let Some(chosen) = selection.chosen else {
        return Err(refuse(&selection.report()));
    };
    let info = &list.entries()[chosen.index];
    let shape = Shape {
        cq_size: 0,
        av_count: local_ranks.max(1),
        sep: None,
    };
    let fabric = Fabric::open(&list, chosen.index, shape).map_err(|e| refuse(&e))?;
    let name = match fabric.name() {
        Ok(n) => n,
        Err(e) => {
            fabric.close();
            return Err(refuse(&e));
        }
    };
    verbose!(
        stream,
        1,
        "mtl:rofi: {} [{}] for peers on this node, beside {main}",
        info.name,
        info.fabric
    );
    Ok(Opened {
        rail: LocalRail::new(fabric, info.name.clone(), event_cnt),
        name,
        core_name: info.core_name(),
        inject_size: info.inject_size,
    })
}
