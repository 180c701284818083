//! Native Linux UDP: two non-blocking sockets, batched `sendmmsg`/`recvmmsg`.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

use rusnic_core::{Channel, Transmit};

use super::{Backend, index};
use crate::raw::{self, RecvSlots, SendScratch};
use crate::raw_put::Placement;

pub struct UdpBackend {
    sockets: [UdpSocket; 2],
    slots: [RecvSlots; 2],
    sending: SendScratch,
    mtu: usize,
}

fn bind_one(port: u16) -> io::Result<UdpSocket> {
    let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// Binds the two channel sockets: ephemeral ports when `range` is None, else the first
/// two free ports of the range (several processes per node share it).
fn bind_pair(range: Option<(u16, u16)>) -> io::Result<[UdpSocket; 2]> {
    let Some((lo, hi)) = range else {
        return Ok([bind_one(0)?, bind_one(0)?]);
    };
    let mut got = Vec::with_capacity(2);
    for port in lo..=hi {
        match bind_one(port) {
            Ok(s) => got.push(s),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => continue,
            Err(e) => return Err(e),
        }
        if got.len() == 2 {
            let data = got.pop().expect("two sockets");
            let prio = got.pop().expect("two sockets");
            return Ok([prio, data]);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("fewer than two free UDP ports in {lo}-{hi}"),
    ))
}

impl UdpBackend {
    /// `mtu_priority`/`mtu_data`: largest datagrams; `buffer`: kernel socket buffer bytes.
    pub fn open(
        range: Option<(u16, u16)>,
        mtu_priority: usize,
        mtu_data: usize,
        buffer: usize,
        batch: usize,
    ) -> io::Result<UdpBackend> {
        let sockets = bind_pair(range)?;
        for s in &sockets {
            raw::size_buffers(s.as_raw_fd(), buffer);
        }
        // One spare byte per slot: an oversized datagram then arrives longer than the
        // channel MTU and the core rejects it as malformed instead of a CRC error.
        Ok(UdpBackend {
            sockets,
            slots: [
                RecvSlots::new(batch, mtu_priority + 1),
                RecvSlots::new(batch, mtu_data + 1),
            ],
            sending: SendScratch::default(),
            mtu: mtu_data,
        })
    }
}

impl Backend for UdpBackend {
    fn ports(&self) -> [u16; 2] {
        let port = |s: &UdpSocket| s.local_addr().map_or(0, |a| a.port());
        [port(&self.sockets[0]), port(&self.sockets[1])]
    }

    fn max_datagram(&self) -> usize {
        self.mtu
    }

    fn send(&mut self, channel: Channel, batch: &[(SocketAddrV4, Transmit)]) -> usize {
        let fd = self.sockets[index(channel)].as_raw_fd();
        raw::send_batch(fd, batch, &mut self.sending)
    }

    fn recv_batch(&self) -> usize {
        self.slots[0].count()
    }

    fn recv(&mut self, channel: Channel, f: &mut dyn FnMut(&[u8])) -> usize {
        let i = index(channel);
        let fd = self.sockets[i].as_raw_fd();
        self.slots[i].receive(fd, f)
    }

    fn receives_in_place(&self) -> bool {
        true
    }

    fn peek(&mut self, channel: Channel, buf: &mut [u8]) -> Option<usize> {
        raw::peek(self.sockets[index(channel)].as_raw_fd(), buf)
    }

    fn recv_placed(&mut self, channel: Channel, head: &mut [u8], dest: &Placement) -> bool {
        let fd = self.sockets[index(channel)].as_raw_fd();
        raw::recv_split(fd, head, dest) == Some(head.len() + dest.len())
    }
}
