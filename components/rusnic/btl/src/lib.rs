//! `rusnic`: the usNIC-style BTL. Reliability, ordering and flow control come from the
//! sans-IO `rusnic-core`; this crate is the glue: MCA parameters, the datagram backends
//! (native UDP sockets or libfabric FI_EP_DGRAM), the clock, the modex and ob1's calls.
//!
//! Selected with `--mca pml ob1 --mca btl self,rusnic`.

mod backend;
mod engine;
mod help;
mod iface;
mod modex;
mod module;
mod params;
mod put;
mod raw;
mod raw_crc;
mod raw_ob1;
mod raw_put;
mod regions;
mod stats;

use std::hash::{BuildHasher, Hasher};

use mca::btl::{BtlComponent, BtlDefaults};
use mca::params::Registrar;
use mca::{Result, sys, verbose};
use rusnic_core::Key;

use crate::backend::{Backend, OfiBackend, UdpBackend};
use crate::engine::Engine;
use crate::help::stream;
use crate::modex::Contact;
use crate::module::Rusnic;
use crate::params::BackendKind;

struct Component;

mca::declare_btl_component!(mca_btl_rusnic_component, "rusnic", Component);

fn component_raw() -> *const sys::mca_base_component_t {
    <Component as mca::component::Exported>::raw()
}

impl mca::component::Component for Component {
    fn register(reg: &mut Registrar) -> Result<()> {
        params::register(reg);
        stats::register(component_raw())
    }

    fn close() -> Result<()> {
        help::close_stream();
        Ok(())
    }
}

/// A random 16-bit initial sequence number (std's per-process random hash keys).
fn random_isn() -> u16 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish() as u16
}

/// This process's secret for the datagram tag, published in the modex. From the
/// kernel's random pool; where /dev/urandom cannot be read (a chroot without /dev),
/// from std's `RandomState`, whose keys come from the same pool (getrandom) and differ
/// per process, hashed with the time and pid so two draws differ.
fn random_key() -> Key {
    use std::io::Read;
    let mut b = [0u8; Key::LEN];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if read.is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        for (i, half) in b.chunks_exact_mut(8).enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(nanos ^ i as u64);
            h.write_u32(std::process::id());
            half.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    Key::from_bytes(b)
}

impl BtlComponent for Component {
    type Module = Rusnic;

    fn defaults() -> BtlDefaults {
        BtlDefaults {
            eager_limit: params::DEFAULT_EAGER,
            rndv_eager_limit: params::DEFAULT_EAGER,
            max_send_size: params::DEFAULT_MAX_SEND,
            exclusivity: sys::MCA_BTL_EXCLUSIVITY_DEFAULT,
            latency: 2,
            bandwidth: 10_000,
            flags: sys::MCA_BTL_FLAGS_SEND
                | sys::MCA_BTL_FLAGS_SEND_INPLACE
                | sys::MCA_BTL_FLAGS_PUT
                | sys::MCA_BTL_FLAGS_SINGLE_ADD_PROCS,
            put_limit: 0,
            get_limit: 0,
            rdma_pipeline_send_length: params::DEFAULT_MAX_SEND,
            rdma_pipeline_frag_size: params::DEFAULT_MAX_SEND,
            min_rdma_pipeline_size: usize::MAX,
        }
    }

    /// Every peer at once (`SINGLE_ADD_PROCS`: ob1 then adds the whole job before the
    /// first message, so that no datagram comes from a process rusnic does not know) in
    /// the world model only. With the flag ob1 makes 5.0's instance create
    /// MPI_COMM_WORLD and MPI_COMM_SELF for a program that uses MPI Sessions alone, and
    /// 5.0.7 destroys them after the PML is gone (SIGSEGV in MPI_Session_finalize).
    /// Without it, ob1 adds peers as communicators first use them, and rusnic adds a
    /// process of its own job that sends first itself (`Rusnic::progress`).
    fn module_flags(flags: u32) -> u32 {
        let startup = mca::proc::startup();
        verbose!(
            stream(),
            1,
            "btl:rusnic: {}",
            match startup {
                mca::proc::Startup::MpiInit => "MPI_Init: ob1 adds every peer at once",
                mca::proc::Startup::Other =>
                    "not MPI_Init (MPI Sessions): peers are added as they are first used",
                mca::proc::Startup::Tool => "no MPI library state (a tool)",
            }
        );
        match startup {
            mca::proc::Startup::Other => flags & !sys::MCA_BTL_FLAGS_SINGLE_ADD_PROCS,
            mca::proc::Startup::MpiInit | mca::proc::Startup::Tool => flags,
        }
    }

    /// A fragment's size travels as 32 bits in chunk headers and the contact.
    const MAX_FRAGMENT: usize = u32::MAX as usize;

    fn init(_progress_threads: bool, _mpi_threads: bool) -> Result<Vec<Rusnic>> {
        if let Some(f) = raw_crc::hardware_crc32c() {
            // Every datagram is checksummed twice (send, receive): the instruction is
            // several times faster than the core's portable tables.
            rusnic_core::crc::install_accelerator(f);
        }
        let p = params::get();
        let local_id = mca::proc::my_name_hash();
        let isn = random_isn();
        let key = random_key();
        let kind = p.backend_kind();
        let mut contact = Contact {
            backend: kind as u8,
            isn,
            mtu_priority: 0,
            mtu_data: 0,
            max_fragment_size: 0,
            payload_crc: params::get().payload_crc() as u8,
            ports: [0, 0],
            addrs: Vec::new(),
            key,
        };
        // Installed beside Open MPI's own BTLs, rusnic stays out of jobs that did not
        // ask for it: a module that reaches peers is progressed by ob1 even while
        // another BTL carries all the traffic.
        let made = if mca::selection::competes("btl", "rusnic", p.auto_select.enabled()) {
            open_module(local_id, &mut contact)
        } else {
            verbose!(
                stream(),
                1,
                "btl:rusnic: not named in the btl list and btl_rusnic_auto_select is off: \
                 no module"
            );
            None
        };
        // Always publish, even without a module: peers then see "no contact" at once
        // instead of waiting for a key that never comes.
        // SAFETY: our exported component structure.
        unsafe { mca::proc::modex_send(component_raw(), &contact.encode())? };
        Ok(made.into_iter().collect())
    }

    fn progress() -> usize {
        module::with_live(Rusnic::progress).unwrap_or(0)
    }
}

/// Opens the backend on the selected interfaces and fills in our contact; None (after
/// saying why) when this process cannot use the component.
fn open_module(local_id: u64, contact: &mut Contact) -> Option<Rusnic> {
    let p = params::get();
    let all = match raw::interfaces() {
        Ok(a) => a,
        Err(e) => {
            help::show("no interfaces", &[&format!("getifaddrs failed: {e}")]);
            return None;
        }
    };
    let parse = |s: Option<String>| iface::parse_list(&s.unwrap_or_default()).unwrap_or_default();
    let mut selected = iface::select(&all, &parse(p.if_include.get()), &parse(p.if_exclude.get()));
    if selected.is_empty() {
        let have: Vec<String> = all
            .iter()
            .map(|a| format!("{} {}/{}", a.name, a.addr, a.prefix))
            .collect();
        help::show(
            "no interfaces",
            &[&format!(
                "no IPv4 interface is up and selected by btl_rusnic_if_include/if_exclude \
                 (this host has: {})",
                have.join(", ")
            )],
        );
        return None;
    }
    let range = match (p.port_min.get(), p.port_max.get()) {
        (0, _) => None,
        (lo, hi) => Some((lo as u16, hi as u16)),
    };
    let cfg = match p.core_config(params::DEFAULT_MAX_SEND) {
        Ok(c) => c,
        Err(e) => {
            help::show_invalid(&e);
            return None;
        }
    };
    let backend: Box<dyn Backend> = match p.backend_kind() {
        BackendKind::UdpNative => match UdpBackend::open(
            range,
            usize::from(cfg.mtu_priority),
            usize::from(cfg.mtu_data),
            p.socket_buffer.get(),
            p.recv_batch.get() as usize,
        ) {
            Ok(b) => Box::new(b),
            Err(e) => {
                help::show("no ports", &[&format!("{range:?}"), &e.to_string()]);
                return None;
            }
        },
        BackendKind::Ofi => {
            // A datagram endpoint is bound to one address: prefer a real network over
            // loopback so peers on other hosts can reach it.
            let chosen = selected
                .iter()
                .find(|a| !a.addr.is_loopback())
                .or_else(|| selected.first())
                .cloned()
                .expect("selected is not empty");
            let provider = p.ofi_provider.get().unwrap_or_else(|| "udp".into());
            match OfiBackend::open(
                &provider,
                chosen.addr,
                range,
                usize::from(cfg.mtu_priority),
                usize::from(cfg.mtu_data),
                p.effective_credits(usize::from(cfg.mtu_data)) as usize * 4,
            ) {
                Ok(b) => {
                    selected = vec![chosen];
                    Box::new(b)
                }
                Err(e) => {
                    help::show("no ports", &[&format!("{range:?}"), &e.to_string()]);
                    return None;
                }
            }
        }
    };
    let mtu = backend.max_datagram();
    contact.mtu_priority = cfg.mtu_priority;
    contact.mtu_data = u16::try_from(mtu).unwrap_or(u16::MAX);
    let (eager, max_send) = mca::btl::effective_limits::<Component>()
        .unwrap_or((params::DEFAULT_EAGER, params::DEFAULT_MAX_SEND));
    contact.max_fragment_size = u32::try_from(eager.max(max_send)).unwrap_or(u32::MAX);
    contact.ports = backend.ports();
    contact.addrs = selected.iter().map(|a| (a.addr, a.prefix)).collect();
    verbose!(
        stream(),
        10,
        "btl:rusnic: ports {:?} on {:?}, mtu {mtu}",
        contact.ports,
        contact.addrs
    );
    let faults = p.fault_config().map(|f| {
        let seed = (p.fault_seed.get() as u64) ^ local_id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (seed, f)
    });
    let engine = Engine::new((local_id, contact.key), backend, faults);
    Some(Rusnic::new(engine, selected, contact.clone(), local_id))
}
