//! Datagram services behind one trait: the protocol needs two unreliable channels
//! (priority and data) to each peer, addressed by IPv4 socket address, and nothing else.

mod raw_ofi;
mod udp;

use std::net::SocketAddrV4;

use rusnic_core::{Channel, Transmit};

use crate::raw_put::Placement;

pub use raw_ofi::OfiBackend;
pub use udp::UdpBackend;

/// A datagram service with one endpoint per channel.
pub trait Backend: Send {
    /// The ports the priority and data endpoints listen on (published in the modex).
    fn ports(&self) -> [u16; 2];
    /// Largest datagram the data channel carries.
    fn max_datagram(&self) -> usize;
    /// Sends datagrams on `channel`, each given as a destination and the datagram (its
    /// header and payload follow each other on the wire); returns how many were taken.
    /// The rest hit a full queue and must be offered again later.
    fn send(&mut self, channel: Channel, batch: &[(SocketAddrV4, Transmit)]) -> usize;
    /// Receives what arrived on `channel` (a bounded batch), calling `f` per datagram.
    fn recv(&mut self, channel: Channel, f: &mut dyn FnMut(&[u8])) -> usize;
    /// Most datagrams one `recv` returns: fewer means the queue was empty at that moment.
    fn recv_batch(&self) -> usize;
    /// Whether `peek` and `recv_placed` work (PUT payloads received in place).
    fn receives_in_place(&self) -> bool {
        false
    }
    /// The first `buf.len()` bytes and the length of the next datagram on `channel`,
    /// left queued; None when the queue is empty (or the backend cannot peek).
    fn peek(&mut self, channel: Channel, buf: &mut [u8]) -> Option<usize> {
        let _ = (channel, buf);
        None
    }
    /// Receives the datagram `peek` saw: its header into `head`, its payload into
    /// `dest`. False when nothing was read.
    fn recv_placed(&mut self, channel: Channel, head: &mut [u8], dest: &Placement) -> bool {
        let _ = (channel, head, dest);
        false
    }
}

/// Channel index in `[priority, data]` arrays.
pub fn index(channel: Channel) -> usize {
    match channel {
        Channel::Priority => 0,
        Channel::Data => 1,
    }
}
