//! The Linux calls std does not wrap: interface enumeration, socket buffer sizes and
//! batched datagram I/O (`sendmmsg`/`recvmmsg`). Every `unsafe` of the crate's native
//! backend lives here.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::RawFd;

use rusnic_core::Transmit;

/// One IPv4 address of a local interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfAddr {
    pub name: String,
    pub addr: Ipv4Addr,
    pub prefix: u8,
    pub up: bool,
}

/// Every IPv4 address of every interface (`getifaddrs`).
pub fn interfaces() -> io::Result<Vec<IfAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` walks the list getifaddrs returned; entries stay valid until
        // freeifaddrs. ifa_addr/ifa_netmask are NULL or point to sockaddrs whose family
        // field tells their real type.
        unsafe {
            let ifa = &*cur;
            if !ifa.ifa_addr.is_null()
                && i32::from((*ifa.ifa_addr).sa_family) == libc::AF_INET
                && !ifa.ifa_name.is_null()
            {
                let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                let addr = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                let prefix = if ifa.ifa_netmask.is_null() {
                    32
                } else {
                    let mask = &*(ifa.ifa_netmask as *const libc::sockaddr_in);
                    u32::from_be(mask.sin_addr.s_addr).count_ones() as u8
                };
                out.push(IfAddr {
                    name: std::ffi::CStr::from_ptr(ifa.ifa_name)
                        .to_string_lossy()
                        .into_owned(),
                    addr,
                    prefix,
                    up: ifa.ifa_flags & libc::IFF_UP as u32 != 0,
                });
            }
            cur = ifa.ifa_next;
        }
    }
    // SAFETY: the list from getifaddrs, freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

fn set_int_option(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: fd is an open socket; the option value is a plain int we pass by pointer.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&raw const value).cast(),
            size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the kernel send and receive buffers to `bytes`, beyond `rmem_max`/`wmem_max`
/// when we are privileged (the FORCE variants), else as far as the limits allow: the
/// receive buffer must hold a peer's whole credit grant or the kernel drops datagrams
/// the protocol then has to retransmit.
pub fn size_buffers(fd: RawFd, bytes: usize) {
    let value = i32::try_from(bytes / 2).unwrap_or(i32::MAX / 2);
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if set_int_option(fd, libc::SOL_SOCKET, force, value).is_err() {
            let _ = set_int_option(fd, libc::SOL_SOCKET, plain, value);
        }
    }
}

fn sockaddr_of(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*addr.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// `sendmmsg`'s headers, kept between calls so a send allocates nothing: refilled by
/// every `send_batch`, their pointers are never read after it returns.
#[derive(Default)]
pub struct SendScratch {
    names: Vec<libc::sockaddr_in>,
    iovs: Vec<[libc::iovec; 2]>,
    msgs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers inside point into the scratch's own heap buffers and are only
// dereferenced (by the kernel) during the `send_batch` call that set them.
unsafe impl Send for SendScratch {}

fn iovec_of(bytes: &[u8]) -> libc::iovec {
    libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    }
}

/// Sends `batch` (destination, datagram) with as few `sendmmsg` calls as possible, each
/// datagram gathered from its header and payload by the kernel (no copy here).
/// Returns how many datagrams the kernel took; the rest hit a full socket buffer
/// (`EAGAIN`) and should be retried later. Other per-datagram errors (unreachable
/// port after a peer exited) count as sent: the protocol recovers or reports.
pub fn send_batch(
    fd: RawFd,
    batch: &[(SocketAddrV4, Transmit)],
    scratch: &mut SendScratch,
) -> usize {
    const MAX: usize = 64;
    let SendScratch { names, iovs, msgs } = scratch;
    let mut sent = 0;
    while sent < batch.len() {
        let part = &batch[sent..batch.len().min(sent + MAX)];
        names.clear();
        iovs.clear();
        msgs.clear();
        names.extend(part.iter().map(|(a, _)| sockaddr_of(*a)));
        iovs.extend(
            part.iter()
                .map(|(_, t)| [iovec_of(&t.head), iovec_of(t.body.as_slice())]),
        );
        // `names` and `iovs` are complete: their buffers stay put while `msgs` points in.
        msgs.extend((0..part.len()).map(|i| {
            // SAFETY: an all-zero msghdr is a valid empty header.
            let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
            hdr.msg_name = (&raw mut names[i]).cast();
            hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            hdr.msg_iov = iovs[i].as_mut_ptr();
            // An empty payload part is left out rather than passed as a 0-length iovec.
            hdr.msg_iovlen = if iovs[i][1].iov_len == 0 { 1 } else { 2 };
            libc::mmsghdr {
                msg_hdr: hdr,
                msg_len: 0,
            }
        }));
        // The raw system call, as for recvmmsg below: no cancellation-point bracketing.
        // SAFETY: every header points into `names`/`iovs`, which are not touched until
        // the call returns, and the iovecs point at the batch's bytes (only read by the
        // kernel); each header's iovec count is at most the 2 of its array.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_sendmmsg,
                fd,
                msgs.as_mut_ptr(),
                msgs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if rc < 0 {
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => return sent,
                // The first datagram failed for a reason retrying cannot fix (an ICMP
                // error queued by an earlier send): skip it, the protocol retransmits.
                _ => sent += 1,
            }
        } else {
            sent += rc as usize;
            if (rc as usize) < part.len() {
                // A short count means the next datagram would block or failed; try
                // once more from there, and stop if nothing moves.
                continue;
            }
        }
    }
    sent
}

/// Reusable receive slots for `recvmmsg`. No source addresses are asked for: a datagram
/// is known by its sender id and tag, never by where it came from, and an empty poll
/// (progress polls empty sockets constantly) then has nothing to reset.
pub struct RecvSlots {
    bufs: Vec<Vec<u8>>,
    /// Never read from Rust: the headers in `msgs` point into it.
    _iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers inside only point into the slots' own heap buffers, which
// move with the struct (Vec heap storage never moves when the Vec does).
unsafe impl Send for RecvSlots {}

impl RecvSlots {
    /// `count` slots of `size` bytes each.
    pub fn new(count: usize, size: usize) -> RecvSlots {
        let mut bufs: Vec<Vec<u8>> = (0..count).map(|_| vec![0u8; size]).collect();
        let mut iovs: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        let msgs = (0..count)
            .map(|i| {
                // SAFETY: an all-zero msghdr is a valid empty header (no name wanted).
                let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
                hdr.msg_iov = &raw mut iovs[i];
                hdr.msg_iovlen = 1;
                libc::mmsghdr {
                    msg_hdr: hdr,
                    msg_len: 0,
                }
            })
            .collect();
        RecvSlots {
            bufs,
            _iovs: iovs,
            msgs,
        }
    }

    /// Slots, the most datagrams one `receive` returns.
    pub fn count(&self) -> usize {
        self.msgs.len()
    }

    /// Receives up to the slot count without blocking and calls `f` for each datagram.
    /// A datagram longer than a slot arrives truncated (MSG_TRUNC is not requested): the
    /// core then rejects it as malformed.
    pub fn receive(&mut self, fd: RawFd, f: &mut dyn FnMut(&[u8])) -> usize {
        // Only `msg_len` and `msg_flags` are written by the kernel, and only those of the
        // datagrams it returns, which are read below: nothing to reset before a call.
        // The raw system call, not glibc's wrapper: that one is a thread cancellation
        // point and brackets the call with two cancellation-state switches, a visible
        // share of an empty poll's cost (and progress polls empty sockets constantly).
        // SAFETY: every header points into this struct's own iovec/buffer storage, which
        // is alive and not otherwise borrowed during the call; the arguments are
        // recvmmsg's, with a null timeout.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_recvmmsg,
                fd,
                self.msgs.as_mut_ptr(),
                self.msgs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut::<libc::timespec>(),
            )
        };
        if rc <= 0 {
            return 0;
        }
        let n = rc as usize;
        for i in 0..n {
            let len = (self.msgs[i].msg_len as usize).min(self.bufs[i].len());
            f(&self.bufs[i][..len]);
        }
        n
    }
}

/// The first `buf.len()` bytes of the next datagram, left in the queue, and its full
/// length; None when the queue is empty (or on an error: the batch receive reports it).
pub fn peek(fd: RawFd, buf: &mut [u8]) -> Option<usize> {
    // SAFETY: `buf` is a valid writable buffer of its length; MSG_TRUNC makes recv return
    // the datagram's real length (UDP), MSG_PEEK leaves it queued.
    let rc = unsafe {
        libc::recv(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_PEEK | libc::MSG_TRUNC | libc::MSG_DONTWAIT,
        )
    };
    usize::try_from(rc).ok()
}

/// Receives the next datagram in two parts: its first `head.len()` bytes into `head`,
/// the rest into `dest`. Returns the datagram's length, or None when nothing was read.
pub fn recv_split(fd: RawFd, head: &mut [u8], dest: &crate::raw_put::Placement) -> Option<usize> {
    let mut iov = [
        libc::iovec {
            iov_base: head.as_mut_ptr().cast(),
            iov_len: head.len(),
        },
        libc::iovec {
            iov_base: dest.ptr().cast(),
            iov_len: dest.len(),
        },
    ];
    // SAFETY: an all-zero msghdr is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = iov.len();
    // SAFETY: the first iovec is `head`; the second is a `Placement`, which only
    // exists for memory inside a region open for PUT data (see `raw_put`); the header
    // and iovec array outlive the call.
    let rc = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    usize::try_from(rc).ok()
}
