//! rusnic protocol core: reliable, ordered, windowed delivery over unreliable datagrams
//! (sans-IO).
//!
//! This crate is the usNIC-style reliability layer of the `rusnic` BTL with no I/O, no
//! clock, no threads and no `unsafe`. The glue feeds it datagrams, time and send requests
//! and polls it for datagrams to transmit, events for the upper layer and its next timer;
//! see [`Connection`] for the driving contract, the README for the protocol, and [`wire`]
//! for the wire format.
//!
//! Module map: [`seq`] sequence arithmetic, [`wire`] encoding, [`crc`] checksum, [`auth`]
//! the keyed tag that keeps datagrams from outside the job out,
//! `window` send/receive windows, [`rto`] timeout estimation, [`flow`] credits and
//! backoff, `reassembly`, `connectivity`, [`Connection`] and [`Endpoint`], [`Stats`],
//! [`Config`], and [`fault`] for seeded fault injection.

#![forbid(unsafe_code)]

pub mod auth;
pub mod config;
mod connection;
mod connectivity;
pub mod crc;
mod early;
mod endpoint;
mod event;
pub mod fault;
pub mod flow;
mod rack;
mod rangeset;
mod reassembly;
mod ring;
pub mod rto;
pub mod seq;
mod stats;
mod tail_probe;
pub mod time;
mod window;
pub mod wire;

pub use auth::Key;
pub use config::{Config, ConfigError};
pub use connection::{Connection, ConnectionParams};
pub use endpoint::Endpoint;
pub use event::{Body, ConnError, Event, Payload, PutTarget, SendError, Shared, Transmit};
pub use stats::Stats;
pub use time::Instant;
pub use window::send::ResendCause;
pub use wire::Channel;
