//! Every tunable of the protocol, with validation.
//!
//! Durations are nanoseconds. Defaults follow the reference where it has one (window 4096,
//! 5 ms retransmit timeout, 768-byte tiny limit, 40 connectivity retries of 250 ms) and
//! RFC 6298 / TCP practice elsewhere.

use crate::wire::{HEADER_LEN, MAX_ACK_LEN, MAX_DATA_HEADER_LEN};

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

/// Protocol configuration, shared by both ends of a connection (exchange it in the modex
/// or use the same MCA values everywhere).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Send window in segments: most unacknowledged segments in flight per peer (≤ 32768,
    /// half the 16-bit sequence space, so wire sequence numbers stay unambiguous).
    pub window: u16,
    /// Receive buffers per peer ("credits"): segments a receiver accepts beyond its
    /// cumulative ACK before the upper layer returns buffers (≤ window).
    pub rx_buffers: u16,
    /// Retransmission timeout before the first RTT sample.
    pub rto_initial: u64,
    /// Lower bound of the adaptive retransmission timeout.
    pub rto_min: u64,
    /// Upper bound of the retransmission timeout, exponential backoff included.
    pub rto_max: u64,
    /// Longest a receiver delays a standalone ACK.
    pub ack_delay: u64,
    /// Send an ACK at the latest after this many in-order segments.
    pub ack_every: u16,
    /// Duplicate ACKs (or segments SACKed above a hole) that trigger fast retransmit.
    pub dup_ack_threshold: u16,
    /// Largest datagram on the priority channel, our header included.
    pub mtu_priority: u16,
    /// Largest datagram on the data channel, our header included.
    pub mtu_data: u16,
    /// Largest fragment payload sent on the priority channel.
    pub tiny_size: u16,
    /// Largest fragment accepted by `send`/`put` (the BTL's eager limit / max send size).
    pub max_fragment_size: u32,
    /// Chunked fragments a receiver reassembles at once per peer.
    pub max_reassemblies: u16,
    /// Fragments queued per peer (not yet fully segmented) before `send` reports busy.
    pub max_queued_fragments: u32,
    /// Probe the path at first contact.
    pub connectivity_check: bool,
    /// Probe rounds before the peer is declared unreachable.
    pub connectivity_retries: u32,
    /// Time between probe rounds.
    pub connectivity_timeout: u64,
    /// First backoff span after the peer signals receiver-not-ready.
    pub backoff_min: u64,
    /// Largest backoff span.
    pub backoff_max: u64,
    /// Tail-loss probing (`crate::tail_probe`): resend the newest unacknowledged segment
    /// after two round trips and `ack_delay` of silence, before the retransmission timeout.
    pub tail_probe: bool,
    /// Time-based loss detection (`crate::rack`): a segment is resent once a segment
    /// transmitted after it on its channel was acknowledged and its round trip plus a
    /// quarter of the minimum round trip passed; this also repairs a lost
    /// retransmission, which otherwise waits for the retransmission timeout.
    pub rack: bool,
    /// Consecutive retransmission timeouts without progress before the peer is declared
    /// unreachable; 0 retries forever.
    pub max_timeouts: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            window: 4096,
            rx_buffers: 256,
            rto_initial: 5 * MS,
            rto_min: MS,
            rto_max: 1_000 * MS,
            // A peer that polls acknowledges within one progress pass (an empty pass
            // flushes delayed ACKs), so this bounds only a peer busy elsewhere; it is also
            // the slack of the tail-loss probe, which decides what a lost message of a
            // ping-pong costs: 50 us made 8-byte latency at 5 % loss 3.3x lossless, 10 us
            // 2.5x (quiet machine, 2026-12-03, docs/rusnic-measurements.md).
            ack_delay: 10 * US,
            ack_every: 16,
            dup_ack_threshold: 3,
            mtu_priority: 768 + HEADER_LEN as u16,
            mtu_data: 1472,
            tiny_size: 768,
            max_fragment_size: 150 * 1024,
            max_reassemblies: 16,
            max_queued_fragments: 4096,
            connectivity_check: true,
            connectivity_retries: 40,
            connectivity_timeout: 250 * MS,
            backoff_min: 100 * US,
            backoff_max: 100 * MS,
            tail_probe: true,
            // On a quiet machine (2026-12-03, 9 rounds) 4 MiB bandwidth at 5 % loss was
            // 0.88-0.94 of lossless with RACK and 0.59 without, at 1 % 0.93-0.97 with and
            // 0.91-0.92 without (docs/rusnic-measurements.md).
            rack: true,
            max_timeouts: 0,
        }
    }
}

/// A rejected configuration; `Display` names the field and the rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub field: &'static str,
    pub reason: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid rusnic setting `{}`: {}",
            self.field, self.reason
        )
    }
}

impl std::error::Error for ConfigError {}

fn check(
    ok: bool,
    field: &'static str,
    reason: impl FnOnce() -> String,
) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError {
            field,
            reason: reason(),
        })
    }
}

impl Config {
    /// Checks every field and the relations between them.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check((1..=32768).contains(&self.window), "window", || {
            format!("{} must be within 1..=32768 segments", self.window)
        })?;
        check(
            self.rx_buffers >= 1 && self.rx_buffers <= self.window,
            "rx_buffers",
            || {
                format!(
                    "{} must be within 1..=window ({})",
                    self.rx_buffers, self.window
                )
            },
        )?;
        check(self.rto_min >= 1, "rto_min", || "must be positive".into())?;
        check(self.rto_min <= self.rto_max, "rto_max", || {
            format!("{} ns is below rto_min ({} ns)", self.rto_max, self.rto_min)
        })?;
        check(
            (self.rto_min..=self.rto_max).contains(&self.rto_initial),
            "rto_initial",
            || format!("{} ns must lie within rto_min..=rto_max", self.rto_initial),
        )?;
        check(self.ack_delay < self.rto_min, "ack_delay", || {
            format!(
                "{} ns must be below rto_min ({} ns) or every delayed ACK causes a retransmission",
                self.ack_delay, self.rto_min
            )
        })?;
        check(self.ack_every >= 1, "ack_every", || {
            "must be at least 1".into()
        })?;
        check(self.dup_ack_threshold >= 1, "dup_ack_threshold", || {
            "must be at least 1".into()
        })?;
        check(
            usize::from(self.mtu_priority) >= MAX_ACK_LEN,
            "mtu_priority",
            || {
                format!(
                    "{} bytes cannot carry a full ACK ({MAX_ACK_LEN} bytes)",
                    self.mtu_priority
                )
            },
        )?;
        check(
            usize::from(self.mtu_data) > MAX_DATA_HEADER_LEN.max(MAX_ACK_LEN),
            "mtu_data",
            || {
                format!(
                    "{} bytes leaves no room for payload after a {MAX_DATA_HEADER_LEN}-byte header",
                    self.mtu_data
                )
            },
        )?;
        check(self.mtu_data >= self.mtu_priority, "mtu_data", || {
            format!(
                "{} is below mtu_priority ({}); retransmissions of priority segments use the data channel",
                self.mtu_data, self.mtu_priority
            )
        })?;
        check(
            usize::from(self.tiny_size) + HEADER_LEN <= usize::from(self.mtu_priority),
            "tiny_size",
            || {
                format!(
                    "{} + {HEADER_LEN}-byte header exceeds mtu_priority ({})",
                    self.tiny_size, self.mtu_priority
                )
            },
        )?;
        check(self.max_fragment_size >= 1, "max_fragment_size", || {
            "must be at least 1".into()
        })?;
        check(
            (1..=1024).contains(&self.max_reassemblies),
            "max_reassemblies",
            || format!("{} must be within 1..=1024", self.max_reassemblies),
        )?;
        check(
            self.max_queued_fragments >= 1,
            "max_queued_fragments",
            || "must be at least 1".into(),
        )?;
        check(
            self.connectivity_retries >= 1,
            "connectivity_retries",
            || "must be at least 1".into(),
        )?;
        check(
            self.connectivity_timeout >= 1,
            "connectivity_timeout",
            || "must be positive".into(),
        )?;
        check(self.backoff_min >= 1, "backoff_min", || {
            "must be positive".into()
        })?;
        check(self.backoff_min <= self.backoff_max, "backoff_max", || {
            format!(
                "{} ns is below backoff_min ({} ns)",
                self.backoff_max, self.backoff_min
            )
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        Config::default().validate().unwrap();
    }

    #[test]
    fn each_rule_names_its_field() {
        type Mutation = Box<dyn Fn(&mut Config)>;
        let cases: Vec<(&str, Mutation)> = vec![
            ("window", Box::new(|c| c.window = 0)),
            ("window", Box::new(|c| c.window = 32769)),
            ("rx_buffers", Box::new(|c| c.rx_buffers = 0)),
            ("rx_buffers", Box::new(|c| c.rx_buffers = c.window + 1)),
            ("rto_min", Box::new(|c| c.rto_min = 0)),
            ("rto_max", Box::new(|c| c.rto_max = c.rto_min - 1)),
            ("rto_initial", Box::new(|c| c.rto_initial = c.rto_max + 1)),
            ("ack_delay", Box::new(|c| c.ack_delay = c.rto_min)),
            ("ack_every", Box::new(|c| c.ack_every = 0)),
            ("dup_ack_threshold", Box::new(|c| c.dup_ack_threshold = 0)),
            ("mtu_priority", Box::new(|c| c.mtu_priority = 59)),
            ("mtu_data", Box::new(|c| c.mtu_data = 48)),
            ("mtu_data", Box::new(|c| c.mtu_data = c.mtu_priority - 1)),
            ("tiny_size", Box::new(|c| c.tiny_size = c.mtu_priority)),
            ("max_fragment_size", Box::new(|c| c.max_fragment_size = 0)),
            ("max_reassemblies", Box::new(|c| c.max_reassemblies = 0)),
            (
                "max_queued_fragments",
                Box::new(|c| c.max_queued_fragments = 0),
            ),
            (
                "connectivity_retries",
                Box::new(|c| c.connectivity_retries = 0),
            ),
            (
                "connectivity_timeout",
                Box::new(|c| c.connectivity_timeout = 0),
            ),
            ("backoff_min", Box::new(|c| c.backoff_min = 0)),
            (
                "backoff_max",
                Box::new(|c| c.backoff_max = c.backoff_min - 1),
            ),
        ];
        for (field, mutate) in cases {
            let mut c = Config::default();
            mutate(&mut c);
            let e = c.validate().unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.to_string().contains(field));
        }
    }
}
