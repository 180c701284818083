//! What the hand-driven scenario tests (connection.rs, foreign.rs) share: time units,
//! two peer identities and a small configuration whose windows, MTUs and timers are
//! easy to reason about datagram by datagram.

use rusnic_core::Config;

pub const US: u64 = 1_000;
pub const MS: u64 = 1_000_000;
pub const A: u64 = 0xA;
pub const B: u64 = 0xB;

pub fn cfg() -> Config {
    Config {
        window: 64,
        rx_buffers: 32,
        rto_initial: MS,
        rto_min: 200 * US,
        rto_max: 50 * MS,
        ack_delay: 50 * US,
        ack_every: 4,
        mtu_priority: 300,
        mtu_data: 1000,
        tiny_size: 200,
        max_fragment_size: 10_000,
        connectivity_check: false,
        ..Config::default()
    }
}
