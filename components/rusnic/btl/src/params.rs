//! Every `btl_rusnic_*` MCA parameter, and how they become a core [`Config`].
//!
//! Durations are given in the unit a user thinks in (µs or ms) and converted to the
//! core's nanoseconds here; cross-field rules are the core's own `Config::validate`,
//! so a bad combination is reported in the same show_help as a bad single value.

use std::sync::OnceLock;

use mca::params::{Level, Param, Registrar, StringParam};
use rusnic_core::Config;
use rusnic_core::fault::FaultConfig;
use rusnic_core::wire::{HEADER_LEN, MAX_ACK_LEN};

use crate::iface;

/// Which datagrams checksum their payload (`btl_rusnic_payload_crc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadCrc {
    /// Every data segment.
    Always = 0,
    /// All but those to peers on this node, which travel through the loopback: the
    /// kernel copies them memory to memory (and skips UDP checksums there itself).
    OffNode = 1,
}

/// Which datagram service carries the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// Linux UDP sockets with sendmmsg/recvmmsg.
    UdpNative = 0,
    /// libfabric FI_EP_DGRAM (the `udp` provider here).
    Ofi = 1,
}

pub struct Params {
    pub verbose: Param<i32>,
    pub auto_select: Param<bool>,
    pub backend: Param<i32>,
    pub ofi_provider: StringParam,
    pub if_include: StringParam,
    pub if_exclude: StringParam,
    pub port_min: Param<i32>,
    pub port_max: Param<i32>,
    pub mtu: Param<usize>,
    pub priority_limit: Param<usize>,
    pub window: Param<i32>,
    pub credits: Param<i32>,
    pub rto_initial_us: Param<i32>,
    pub rto_min_us: Param<i32>,
    pub rto_max_us: Param<i32>,
    pub ack_delay_us: Param<i32>,
    pub ack_every: Param<i32>,
    pub tail_probe: Param<bool>,
    pub rack: Param<bool>,
    pub dup_ack_threshold: Param<i32>,
    pub max_reassemblies: Param<i32>,
    pub max_queued: Param<i32>,
    pub connectivity_check: Param<bool>,
    pub connectivity_retries: Param<i32>,
    pub connectivity_timeout_ms: Param<i32>,
    pub backoff_min_us: Param<i32>,
    pub backoff_max_us: Param<i32>,
    pub max_timeouts: Param<i32>,
    pub socket_buffer: Param<usize>,
    pub recv_batch: Param<i32>,
    pub finalize_flush_ms: Param<i32>,
    pub stats: Param<i32>,
    pub fault_seed: Param<i32>,
    pub fault_drop: Param<i32>,
    pub fault_duplicate: Param<i32>,
    pub fault_reorder: Param<i32>,
    pub fault_corrupt: Param<i32>,
    pub payload_crc: Param<i32>,
}

static PARAMS: OnceLock<Params> = OnceLock::new();

/// The registered parameters (register runs before every other entry point).
pub fn get() -> &'static Params {
    PARAMS
        .get()
        .expect("register runs before any other entry point")
}

/// Default eager limit (also the rendezvous eager limit) in bytes.
pub const DEFAULT_EAGER: usize = 64 << 10;
/// Default pipeline fragment (`max_send_size`) in bytes.
pub const DEFAULT_MAX_SEND: usize = 256 << 10;

/// Default data-channel MTU: the largest UDP datagram. On the loopback (one 64 KiB
/// packet) it carries a 64 KiB eager fragment in one datagram and a pipeline fragment
/// in four, instead of 8 and 30 at 9000 bytes: per-datagram costs (system calls,
/// headers, ACK bookkeeping) were most of the bandwidth path's CPU time.
pub const DEFAULT_MTU: usize = 65507;

/// Most credits the ofi backend grants (see [`Params::effective_credits`]).
pub const OFI_MAX_CREDITS: i32 = 64;

const PPM: &str = "in parts per million of sent datagrams (0 = off; for tests)";

pub fn register(reg: &mut Registrar) {
    let ifspec = |v: &str| iface::parse_list(v).map(drop);
    let p = Params {
        verbose: reg.int(
            "verbose",
            0,
            0..=100,
            Level::DEV_BASIC,
            "Verbosity of the rusnic BTL (10: per-peer setup, 50: per-fragment)",
        ),
        auto_select: reg.bool(
            "auto_select",
            false,
            Level::USER_BASIC,
            "Open a module in jobs whose btl list does not name rusnic (no list, or an \
             exclude list such as Debian's ^uct,openib,ofi). Off by default: an installed \
             rusnic then leaves every job that does not ask for it exactly as it was",
        ),
        backend: reg.enumeration(
            "backend",
            BackendKind::UdpNative as i32,
            &[(0, "udp-native"), (1, "ofi")],
            Level::USER_BASIC,
            "Datagram service: Linux UDP sockets with batched sendmmsg/recvmmsg and a \
             configurable MTU, or libfabric FI_EP_DGRAM through the 'udp' provider \
             (datagrams capped at the provider's max_msg_size, 1472 here)",
        ),
        ofi_provider: reg.string(
            "ofi_provider",
            Some("udp"),
            Level::USER_DETAIL,
            "libfabric provider of the ofi backend (an FI_EP_DGRAM provider: udp here; \
             usnic, efa or verbs;ofi_rxd-free verbs UD on real fabrics)",
            |v| {
                if v.is_empty() || v.len() > 64 {
                    Err("must name one provider".into())
                } else {
                    Ok(())
                }
            },
        ),
        if_include: reg.string(
            "if_include",
            None,
            Level::USER_BASIC,
            "Comma-separated interface names or IPv4 CIDRs to use (e.g. 'eth0,10.1.0.0/16'); \
             exclusive with if_exclude",
            ifspec,
        ),
        if_exclude: reg.string(
            "if_exclude",
            None,
            Level::USER_BASIC,
            "Comma-separated interface names or IPv4 CIDRs not to use; exclusive with if_include",
            ifspec,
        ),
        port_min: reg.int(
            "port_min",
            0,
            0..=65535,
            Level::USER_DETAIL,
            "Lowest UDP port the two channel sockets may bind (0: ports chosen by the kernel)",
        ),
        port_max: reg.int(
            "port_max",
            0,
            0..=65535,
            Level::USER_DETAIL,
            "Highest UDP port the channel sockets may bind (with port_min > 0; each process \
             takes the first two free ports of the range)",
        ),
        mtu: reg.size(
            "mtu",
            DEFAULT_MTU,
            512..=65507,
            Level::USER_BASIC,
            "Largest data-channel datagram in bytes, protocol header included (loopback and \
             jumbo-frame networks allow large values; the ofi backend caps it at the \
             provider's max_msg_size). Must be equal in every process",
        ),
        priority_limit: reg.size(
            "priority_limit",
            768,
            0..=8192,
            Level::TUNER_BASIC,
            "Largest fragment sent on the priority channel (ACKs and tiny messages)",
        ),
        window: reg.int(
            "window",
            4096,
            1..=32768,
            Level::TUNER_BASIC,
            "Send window: most unacknowledged segments in flight per peer",
        ),
        credits: reg.int(
            "credits",
            256,
            1..=32768,
            Level::TUNER_BASIC,
            "Receive buffers granted to each peer beyond the cumulative ACK (<= window; the ofi \
             backend grants at most 64, as its provider's sockets keep the kernel's default \
             buffer size; the native backend at most socket_buffer / (2 * mtu), but 64 or more)",
        ),
        rto_initial_us: reg.int(
            "rto_initial",
            5000,
            1..=60_000_000,
            Level::TUNER_DETAIL,
            "Retransmission timeout in microseconds before the first round-trip sample \
             (clamped into rto_min..rto_max)",
        ),
        rto_min_us: reg.int(
            "rto_min",
            1000,
            1..=60_000_000,
            Level::TUNER_DETAIL,
            "Lower bound of the adaptive retransmission timeout (microseconds)",
        ),
        rto_max_us: reg.int(
            "rto_max",
            20_000,
            1..=60_000_000,
            Level::TUNER_DETAIL,
            "Upper bound of the retransmission timeout with backoff (microseconds); low by \
             default because these are LAN fabrics where a lost tail segment must not stall \
             a rank for seconds (the reference retransmits after a fixed 5 ms)",
        ),
        ack_delay_us: reg.int(
            "ack_delay",
            10,
            0..=1_000_000,
            Level::TUNER_DETAIL,
            "Longest delay of a standalone ACK in microseconds (must be below rto_min)",
        ),
        ack_every: reg.int(
            "ack_every",
            16,
            1..=32768,
            Level::TUNER_DETAIL,
            "Send an ACK at the latest after this many in-order segments",
        ),
        tail_probe: reg.bool(
            "tail_probe",
            true,
            Level::TUNER_DETAIL,
            "Tail-loss probing: after two smoothed round trips plus ack_delay without an \
             ACK, send the newest unacknowledged segment again, so a lost last datagram \
             costs that instead of the retransmission timeout (rto_min at least); false: \
             only the timeout recovers it",
        ),
        rack: reg.bool(
            "rack",
            true,
            Level::TUNER_DETAIL,
            "Time-based loss detection (RACK): resend a segment once a segment sent after \
             it on the same channel was acknowledged and its round trip plus a quarter of \
             the smallest round trip passed; repairs a lost retransmission without the \
             retransmission timeout (4 MiB bandwidth under 5 % loss 0.88-0.94 of lossless \
             with it, 0.59 without). false: only duplicate ACKs and SACK counts (a hole \
             with dup_ack_threshold segments SACKed above it) detect loss, once per hole",
        ),
        dup_ack_threshold: reg.int(
            "dup_ack_threshold",
            3,
            1..=1000,
            Level::TUNER_DETAIL,
            "Duplicate ACKs (or segments SACKed above a hole) that trigger a fast retransmit",
        ),
        max_reassemblies: reg.int(
            "max_reassemblies",
            16,
            1..=1024,
            Level::TUNER_DETAIL,
            "Chunked fragments reassembled at once per peer",
        ),
        max_queued: reg.int(
            "max_queued",
            65536,
            1..=i32::MAX,
            Level::TUNER_DETAIL,
            "Fragments queued per peer in the protocol core; beyond it the BTL queues them itself",
        ),
        connectivity_check: reg.bool(
            "connectivity_check",
            true,
            Level::USER_ALL,
            "Probe each peer at first contact (small and MTU-sized pings) and report an \
             unreachable peer or a too small path MTU instead of hanging",
        ),
        connectivity_retries: reg.int(
            "connectivity_retries",
            40,
            1..=100_000,
            Level::USER_ALL,
            "Probe rounds before a peer is declared unreachable",
        ),
        connectivity_timeout_ms: reg.int(
            "connectivity_timeout",
            250,
            1..=3_600_000,
            Level::USER_ALL,
            "Milliseconds between connectivity probe rounds",
        ),
        backoff_min_us: reg.int(
            "backoff_min",
            100,
            1..=60_000_000,
            Level::TUNER_ALL,
            "First receiver-not-ready backoff span in microseconds (randomised in [b/2, b])",
        ),
        backoff_max_us: reg.int(
            "backoff_max",
            100_000,
            1..=60_000_000,
            Level::TUNER_ALL,
            "Largest receiver-not-ready backoff span in microseconds",
        ),
        max_timeouts: reg.int(
            "max_timeouts",
            0,
            0..=1_000_000,
            Level::TUNER_ALL,
            "Consecutive retransmission timeouts without progress before a peer is declared \
             unreachable (0: retry forever)",
        ),
        socket_buffer: reg.size(
            "socket_buffer",
            16 << 20,
            64 << 10..=1 << 30,
            Level::TUNER_DETAIL,
            "Kernel send/receive buffer of each UDP socket in bytes (udp-native backend)",
        ),
        recv_batch: reg.int(
            "recv_batch",
            32,
            1..=1024,
            Level::TUNER_ALL,
            "Datagrams received per channel per progress call",
        ),
        finalize_flush_ms: reg.int(
            "finalize_flush",
            500,
            0..=600_000,
            Level::TUNER_ALL,
            "Milliseconds finalize keeps retransmitting unacknowledged data before it gives up",
        ),
        stats: reg.int(
            "stats",
            0,
            0..=86_400,
            Level::TUNER_BASIC,
            "Seconds between protocol statistics lines on stderr (0: only MPI_T pvars)",
        ),
        fault_seed: reg.int(
            "fault_seed",
            1,
            0..=i32::MAX,
            Level::DEV_DETAIL,
            "Seed of the in-process fault injector (combined with the rank)",
        ),
        fault_drop: reg.int(
            "fault_drop",
            0,
            0..=1_000_000,
            Level::DEV_DETAIL,
            &format!("Datagrams dropped before sending, {PPM}"),
        ),
        fault_duplicate: reg.int(
            "fault_duplicate",
            0,
            0..=1_000_000,
            Level::DEV_DETAIL,
            &format!("Datagrams sent twice, {PPM}"),
        ),
        fault_reorder: reg.int(
            "fault_reorder",
            0,
            0..=1_000_000,
            Level::DEV_DETAIL,
            &format!("Datagrams held back behind the next one, {PPM}"),
        ),
        fault_corrupt: reg.int(
            "fault_corrupt",
            0,
            0..=1_000_000,
            Level::DEV_DETAIL,
            &format!(
                "Datagrams with 1-3 bits flipped (caught by the CRC; forces payload CRCs on), \
                 {PPM}"
            ),
        ),
        payload_crc: reg.enumeration(
            "payload_crc",
            PayloadCrc::OffNode as i32,
            &[(0, "always"), (1, "off-node")],
            Level::USER_DETAIL,
            "Which data segments carry a CRC-32C over their payload (headers always do): \
             'always', or 'off-node' (all but those to peers on this node, which the kernel \
             copies memory to memory through the loopback). Must be the same on every process",
        ),
    };
    if p.if_include.get().is_some_and(|s| !s.trim().is_empty())
        && p.if_exclude.get().is_some_and(|s| !s.trim().is_empty())
    {
        reg.reject(format!(
            "{} and {} are mutually exclusive: set only one",
            reg.full_name("if_include"),
            reg.full_name("if_exclude")
        ));
    }
    let (lo, hi) = (p.port_min.get(), p.port_max.get());
    let ports = 0..=65535;
    if !ports.contains(&lo) || !ports.contains(&hi) {
        // Already reported as out of range.
    } else if lo > 0 && hi < lo + 1 {
        reg.reject(format!(
            "{} = {hi} must be at least {} + 1 = {} (each process binds two ports)",
            reg.full_name("port_max"),
            reg.full_name("port_min"),
            lo + 1
        ));
    } else if lo == 0 && hi != 0 {
        reg.reject(format!(
            "{} is set but {} is 0: set both",
            reg.full_name("port_max"),
            reg.full_name("port_min")
        ));
    }
    // The core's cross-field rules, once every value is in range (narrowing an
    // out-of-range one would only report it again, clamped).
    if !reg.has_problems()
        && let Err(e) = p.core_config(DEFAULT_MAX_SEND)
    {
        reg.reject(e);
    }
    let _ = PARAMS.set(p);
}

fn us(v: i32) -> u64 {
    u64::try_from(v).unwrap_or(0) * 1_000
}

impl Params {
    pub fn payload_crc(&self) -> PayloadCrc {
        if self.payload_crc.get() == PayloadCrc::Always as i32 {
            PayloadCrc::Always
        } else {
            PayloadCrc::OffNode
        }
    }

    pub fn backend_kind(&self) -> BackendKind {
        if self.backend.get() == BackendKind::Ofi as i32 {
            BackendKind::Ofi
        } else {
            BackendKind::UdpNative
        }
    }

    /// The core configuration for fragments of up to `max_fragment` bytes and a data
    /// MTU of `self.mtu` (the ofi backend lowers it with [`Params::core_config_mtu`]).
    pub fn core_config(&self, max_fragment: usize) -> Result<Config, String> {
        self.core_config_mtu(max_fragment, self.mtu.get())
    }

    pub fn core_config_mtu(&self, max_fragment: usize, mtu: usize) -> Result<Config, String> {
        let tiny = self.priority_limit.get();
        let mtu_priority = (tiny + HEADER_LEN).max(MAX_ACK_LEN);
        let cfg = Config {
            window: u16::try_from(self.window.get()).unwrap_or(u16::MAX),
            rx_buffers: u16::try_from(self.effective_credits(mtu)).unwrap_or(u16::MAX),
            // Clamped so lowering rto_max alone (below the initial default) just works.
            rto_initial: us(self.rto_initial_us.get()).clamp(
                us(self.rto_min_us.get()),
                us(self.rto_max_us.get()).max(us(self.rto_min_us.get())),
            ),
            rto_min: us(self.rto_min_us.get()),
            rto_max: us(self.rto_max_us.get()),
            ack_delay: us(self.ack_delay_us.get()),
            ack_every: u16::try_from(self.ack_every.get()).unwrap_or(u16::MAX),
            dup_ack_threshold: u16::try_from(self.dup_ack_threshold.get()).unwrap_or(u16::MAX),
            mtu_priority: u16::try_from(mtu_priority).unwrap_or(u16::MAX),
            mtu_data: u16::try_from(mtu).unwrap_or(u16::MAX),
            tiny_size: u16::try_from(tiny).unwrap_or(u16::MAX),
            max_fragment_size: u32::try_from(max_fragment).unwrap_or(u32::MAX),
            max_reassemblies: u16::try_from(self.max_reassemblies.get()).unwrap_or(u16::MAX),
            max_queued_fragments: u32::try_from(self.max_queued.get()).unwrap_or(1),
            connectivity_check: self.connectivity_check.enabled(),
            connectivity_retries: u32::try_from(self.connectivity_retries.get()).unwrap_or(1),
            connectivity_timeout: us(self.connectivity_timeout_ms.get()) * 1_000,
            backoff_min: us(self.backoff_min_us.get()),
            backoff_max: us(self.backoff_max_us.get()),
            max_timeouts: u32::try_from(self.max_timeouts.get()).unwrap_or(0),
            tail_probe: self.tail_probe.enabled(),
            rack: self.rack.enabled(),
        };
        cfg.validate().map_err(|e| {
            format!(
                "{e} (from the btl_rusnic_* parameters; see ompi_info --param btl rusnic --level 9)"
            )
        })?;
        Ok(cfg)
    }

    /// Credits as granted: the ofi backend's provider sockets keep the kernel's default
    /// receive buffer (about 200 KiB here), which overflows beyond ~64 MTU-sized
    /// datagrams in flight per peer, turning every grant above it into retransmissions.
    /// The native backend grants at most half its socket buffer's worth of `mtu`-sized
    /// datagrams (the kernel charges more than the payload per datagram), for the same
    /// reason: 256 grants of 64 KiB datagrams would overflow the 16 MiB default.
    pub fn effective_credits(&self, mtu: usize) -> i32 {
        match self.backend_kind() {
            BackendKind::Ofi => self.credits.get().min(OFI_MAX_CREDITS),
            BackendKind::UdpNative => {
                let fit = self.socket_buffer.get() / (2 * mtu.max(1));
                let fit = i32::try_from(fit).unwrap_or(i32::MAX).max(OFI_MAX_CREDITS);
                self.credits.get().min(fit)
            }
        }
    }

    /// The in-process fault injector's rates, or None when every rate is zero.
    pub fn fault_config(&self) -> Option<FaultConfig> {
        let rate = |p: &Param<i32>| f64::from(p.get()) / 1e6;
        let cfg = FaultConfig {
            drop: rate(&self.fault_drop),
            duplicate: rate(&self.fault_duplicate),
            reorder: rate(&self.fault_reorder),
            corrupt: rate(&self.fault_corrupt),
            truncate: 0.0,
        };
        (cfg != FaultConfig::default()).then_some(cfg)
    }
}
