//! Datagram services behind one trait: the protocol needs two unreliable channels
//! (priority and data) to each peer, addressed by IPv4 socket address, and nothing else.

mod raw_ofi;
mod udp;

use std::net::SocketAddrV4;

use rusnic_core::Channel;

pub use raw_ofi::OfiBackend;
pub use udp::UdpBackend;

/// A datagram service with one endpoint per channel.
pub trait Backend: Send {
    /// The ports the priority and data endpoints listen on (published in the modex).
    fn ports(&self) -> [u16; 2];
    /// Largest datagram the data channel carries.
    fn max_datagram(&self) -> usize;
    /// Sends datagrams on `channel`, each given as a destination and the two parts
    /// (header, payload) that follow each other on the wire; returns how many were taken.
    /// The rest hit a full queue and must be offered again later.
    fn send(&mut self, channel: Channel, batch: &[(SocketAddrV4, [&[u8]; 2])]) -> usize;
    /// Receives what arrived on `channel` (a bounded batch), calling `f` per datagram.
    fn recv(&mut self, channel: Channel, f: &mut dyn FnMut(&[u8])) -> usize;
    /// Most datagrams one `recv` returns: fewer means the queue was empty at that moment.
    fn recv_batch(&self) -> usize;
}

/// Channel index in `[priority, data]` arrays.
pub fn index(channel: Channel) -> usize {
    match channel {
        Channel::Priority => 0,
        Channel::Data => 1,
    }
}
