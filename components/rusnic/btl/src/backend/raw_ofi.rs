//! Raw: libfabric `FI_EP_DGRAM` (the `udp` provider here; usnic, efa or verbs-UD on
//! real fabrics). One fabric/domain/AV, and per channel an endpoint with its own
//! completion queue and a ring of posted receive buffers. Every `unsafe` of the ofi
//! backend is in this file.

use std::collections::HashMap;
use std::ffi::{CString, c_void};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};

use fabric_sys as fi;
use rusnic_core::{Channel, Transmit};

use super::{Backend, index};

/// Completions read per `fi_cq_read` call.
const CQ_BATCH: usize = 32;

fn err(what: &str, rc: i64) -> io::Error {
    // SAFETY: fi_strerror returns a static NUL-terminated string for any code.
    let text = unsafe { std::ffi::CStr::from_ptr(fi::fi_strerror(-rc as i32)) };
    io::Error::other(format!("{what}: {} ({rc})", text.to_string_lossy()))
}

fn check(what: &str, rc: i32) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(err(what, i64::from(rc)))
    }
}

fn sockaddr(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*addr.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// One channel: endpoint, its CQ, and receive buffers posted with their index as context.
struct Lane {
    ep: *mut fi::fid_ep,
    cq: *mut fi::fid_cq,
    port: u16,
    rx: Vec<Vec<u8>>,
    /// Send buffers the provider may still read, by context id.
    tx: HashMap<usize, Vec<u8>>,
    next_tx: usize,
}

pub struct OfiBackend {
    fabric: *mut fi::fid_fabric,
    domain: *mut fi::fid_domain,
    av: *mut fi::fid_av,
    lanes: Vec<Lane>,
    peers: HashMap<SocketAddrV4, fi::fi_addr_t>,
    mtu: usize,
    info: *mut fi::fi_info,
}

// SAFETY: the provider objects are used from one thread at a time (the engine lock)
// and the udp provider is FI_THREAD_SAFE anyway.
unsafe impl Send for OfiBackend {}

/// Tag bit set on send contexts so send and receive completions cannot be confused.
const TX_BIT: usize = 1 << (usize::BITS - 1);

impl OfiBackend {
    /// Opens the provider on `ip` with the two channel endpoints on ports from `range`
    /// (or ephemeral ones). `mtu` is lowered to the provider's max_msg_size.
    pub fn open(
        provider: &str,
        ip: Ipv4Addr,
        range: Option<(u16, u16)>,
        mtu_priority: usize,
        mtu: usize,
        rx_depth: usize,
    ) -> io::Result<OfiBackend> {
        let mut me = OfiBackend {
            fabric: std::ptr::null_mut(),
            domain: std::ptr::null_mut(),
            av: std::ptr::null_mut(),
            lanes: Vec::new(),
            peers: HashMap::new(),
            mtu,
            info: std::ptr::null_mut(),
        };
        me.info = find_info(provider, ip)?;
        // SAFETY: `info` is a valid list head from fi_getinfo (freed in Drop); the out
        // pointers are ours; attributes are zero-initialised plain C structs.
        unsafe {
            let info = &*me.info;
            me.mtu = me.mtu.min((*info.ep_attr).max_msg_size);
            if mtu_priority > me.mtu {
                return Err(io::Error::other(format!(
                    "provider {provider} carries at most {} bytes, below the priority channel's {mtu_priority}",
                    me.mtu
                )));
            }
            check(
                "fi_fabric",
                fi::fi_fabric(info.fabric_attr, &mut me.fabric, std::ptr::null_mut()),
            )?;
            check(
                "fi_domain",
                fi::fi_domain(me.fabric, me.info, &mut me.domain, std::ptr::null_mut()),
            )?;
            let mut av_attr: fi::fi_av_attr = std::mem::zeroed();
            av_attr.type_ = fi::FI_AV_MAP;
            av_attr.count = 1024;
            check(
                "fi_av_open",
                fi::fi_av_open(me.domain, &mut av_attr, &mut me.av, std::ptr::null_mut()),
            )?;
            let mut next_port = range.map(|r| r.0);
            for size in [mtu_priority, me.mtu] {
                let lane = loop {
                    match me.open_lane(ip, next_port.unwrap_or(0), size, rx_depth) {
                        Ok(l) => break l,
                        Err(e) => match (next_port, range) {
                            (Some(p), Some((_, hi))) if p < hi => next_port = Some(p + 1),
                            _ => return Err(e),
                        },
                    }
                };
                next_port = next_port.map(|p| p + 1);
                me.lanes.push(lane);
            }
        }
        Ok(me)
    }

    /// Creates, binds, enables one endpoint on `ip:port` and posts its receives.
    unsafe fn open_lane(
        &mut self,
        ip: Ipv4Addr,
        port: u16,
        size: usize,
        rx_depth: usize,
    ) -> io::Result<Lane> {
        // SAFETY: `self.info` and the domain/AV are valid (opened in `open`);
        // fi_dupinfo copies the info so we may point its src_addr at our port; every
        // out pointer is a local; the rx buffers are owned by the lane, whose Vec
        // storage never moves while posted (we never push to `rx` after).
        unsafe {
            let info = fi::fi_dupinfo(self.info);
            if info.is_null() {
                return Err(io::Error::other("fi_dupinfo failed"));
            }
            let src = (*info).src_addr as *mut libc::sockaddr_in;
            if !src.is_null() && (*info).src_addrlen >= size_of::<libc::sockaddr_in>() {
                *src = sockaddr(SocketAddrV4::new(ip, port));
            }
            let mut lane = Lane {
                ep: std::ptr::null_mut(),
                cq: std::ptr::null_mut(),
                port,
                rx: (0..rx_depth).map(|_| vec![0u8; size + 1]).collect(),
                tx: HashMap::new(),
                next_tx: 0,
            };
            let mut cq_attr: fi::fi_cq_attr = std::mem::zeroed();
            cq_attr.size = rx_depth * 4;
            cq_attr.format = fi::FI_CQ_FORMAT_MSG;
            cq_attr.wait_obj = fi::FI_WAIT_NONE;
            let opened = (|| -> io::Result<()> {
                check(
                    "fi_cq_open",
                    fi::fi_cq_open(
                        self.domain,
                        &mut cq_attr,
                        &mut lane.cq,
                        std::ptr::null_mut(),
                    ),
                )?;
                check(
                    "fi_endpoint",
                    fi::fi_endpoint(self.domain, info, &mut lane.ep, std::ptr::null_mut()),
                )?;
                check(
                    "fi_ep_bind(cq)",
                    fi::fi_ep_bind(lane.ep, &raw mut (*lane.cq).fid, fi::FI_SEND | fi::FI_RECV),
                )?;
                check(
                    "fi_ep_bind(av)",
                    fi::fi_ep_bind(lane.ep, &raw mut (*self.av).fid, 0),
                )?;
                check("fi_enable", fi::fi_enable(lane.ep))?;
                let mut name: libc::sockaddr_in = std::mem::zeroed();
                let mut len = size_of::<libc::sockaddr_in>();
                check(
                    "fi_getname",
                    fi::fi_getname(&raw mut (*lane.ep).fid, (&raw mut name).cast(), &mut len),
                )?;
                lane.port = u16::from_be(name.sin_port);
                for i in 0..lane.rx.len() {
                    post(&mut lane, i)?;
                }
                Ok(())
            })();
            fi::fi_freeinfo(info);
            if let Err(e) = opened {
                close_lane(&mut lane);
                return Err(e);
            }
            Ok(lane)
        }
    }

    fn fi_addr(&mut self, to: SocketAddrV4) -> Option<fi::fi_addr_t> {
        if let Some(a) = self.peers.get(&to) {
            return Some(*a);
        }
        let sin = sockaddr(to);
        let mut out: fi::fi_addr_t = 0;
        // SAFETY: the AV is open; one sockaddr_in in, one fi_addr_t out.
        let n = unsafe {
            fi::fi_av_insert(
                self.av,
                (&raw const sin).cast(),
                1,
                &mut out,
                0,
                std::ptr::null_mut(),
            )
        };
        (n == 1).then(|| {
            self.peers.insert(to, out);
            out
        })
    }
}

/// Posts receive buffer `i` of `lane` (context = the index).
///
/// # Safety
/// The lane's endpoint must be enabled and `lane.rx[i]` must stay allocated and
/// untouched until its completion is read.
unsafe fn post(lane: &mut Lane, i: usize) -> io::Result<()> {
    let buf = &mut lane.rx[i];
    // SAFETY: caller contract; the buffer outlives the posted receive.
    let rc = unsafe {
        fi::fi_recv(
            lane.ep,
            buf.as_mut_ptr().cast(),
            buf.len(),
            std::ptr::null_mut(),
            u64::MAX, // FI_ADDR_UNSPEC
            i as *mut c_void,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(err("fi_recv", rc as i64))
    }
}

/// Closes what a lane opened.
///
/// # Safety
/// Each pointer is NULL or an object we opened and nobody uses any more.
unsafe fn close_lane(lane: &mut Lane) {
    // SAFETY: caller contract; endpoints close before the CQ they are bound to.
    unsafe {
        if !lane.ep.is_null() {
            fi::fi_close(&raw mut (*lane.ep).fid);
            lane.ep = std::ptr::null_mut();
        }
        if !lane.cq.is_null() {
            fi::fi_close(&raw mut (*lane.cq).fid);
            lane.cq = std::ptr::null_mut();
        }
    }
}

/// The provider's FI_EP_DGRAM info whose source address is `ip`.
fn find_info(provider: &str, ip: Ipv4Addr) -> io::Result<*mut fi::fi_info> {
    // A library older than our headers would be handed structures larger than it knows.
    fi::check_runtime_version().map_err(io::Error::other)?;
    let prov = CString::new(provider).map_err(|_| io::Error::other("bad provider name"))?;
    // SAFETY: hints from fi_allocinfo are freed with fi_freeinfo, which also frees the
    // strdup'ed provider name; the list from fi_getinfo is ours until freed.
    unsafe {
        let hints = fi::fi_allocinfo();
        if hints.is_null() {
            return Err(io::Error::other("fi_allocinfo failed"));
        }
        (*hints).caps = fi::FI_MSG;
        (*hints).mode = 0;
        (*hints).addr_format = fi::FI_SOCKADDR_IN;
        (*(*hints).ep_attr).type_ = fi::FI_EP_DGRAM;
        (*(*hints).fabric_attr).prov_name = libc::strdup(prov.as_ptr());
        let mut list: *mut fi::fi_info = std::ptr::null_mut();
        let rc = fi::fi_getinfo(
            fi::API_VERSION,
            std::ptr::null(),
            std::ptr::null(),
            0,
            hints,
            &mut list,
        );
        fi::fi_freeinfo(hints);
        if rc != 0 {
            return Err(err(
                &format!("fi_getinfo(provider {provider}, FI_EP_DGRAM)"),
                i64::from(rc),
            ));
        }
        let mut cur = list;
        let mut found: *mut fi::fi_info = std::ptr::null_mut();
        while !cur.is_null() {
            let src = (*cur).src_addr as *const libc::sockaddr_in;
            if !src.is_null()
                && (*cur).src_addrlen >= size_of::<libc::sockaddr_in>()
                && i32::from((*src).sin_family) == libc::AF_INET
                && Ipv4Addr::from(u32::from_be((*src).sin_addr.s_addr)) == ip
            {
                found = fi::fi_dupinfo(cur);
                break;
            }
            cur = (*cur).next;
        }
        fi::fi_freeinfo(list);
        if found.is_null() {
            return Err(io::Error::other(format!(
                "provider {provider} offers no FI_EP_DGRAM endpoint on {ip}"
            )));
        }
        Ok(found)
    }
}

impl Backend for OfiBackend {
    fn ports(&self) -> [u16; 2] {
        [self.lanes[0].port, self.lanes[1].port]
    }

    fn max_datagram(&self) -> usize {
        self.mtu
    }

    fn send(&mut self, channel: Channel, batch: &[(SocketAddrV4, Transmit)]) -> usize {
        let mut sent = 0;
        for (to, datagram) in batch {
            let Some(dest) = self.fi_addr(*to) else {
                // Not insertable: count it as sent and let the protocol report the peer.
                sent += 1;
                continue;
            };
            let lane = &mut self.lanes[index(channel)];
            let id = lane.next_tx;
            lane.next_tx = (lane.next_tx + 1) & !TX_BIT;
            // The provider keeps the buffer until completion: one contiguous copy (the
            // datagrams here are at most 1472 bytes).
            let buf = datagram.to_vec();
            // SAFETY: the endpoint is enabled; the buffer is kept in `lane.tx` until
            // its send completion is read, so the provider may read it until then.
            let rc = unsafe {
                fi::fi_send(
                    lane.ep,
                    buf.as_ptr().cast(),
                    buf.len(),
                    std::ptr::null_mut(),
                    dest,
                    (id | TX_BIT) as *mut c_void,
                )
            };
            if rc == -(fi::FI_EAGAIN as isize) {
                break;
            }
            if rc == 0 {
                lane.tx.insert(id, buf);
            }
            sent += 1;
        }
        sent
    }

    fn recv_batch(&self) -> usize {
        CQ_BATCH
    }

    fn recv(&mut self, channel: Channel, f: &mut dyn FnMut(&[u8])) -> usize {
        let lane = &mut self.lanes[index(channel)];
        // SAFETY: an all-zero completion entry is valid plain data.
        let mut entries: [fi::fi_cq_msg_entry; CQ_BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: the CQ is open and in MSG format; `entries` holds CQ_BATCH entries.
        let n = unsafe { fi::fi_cq_read(lane.cq, entries.as_mut_ptr().cast(), CQ_BATCH) };
        if n == -(fi::FI_EAVAIL as isize) {
            // SAFETY: reading the error entry only fills the local struct.
            let mut e: fi::fi_cq_err_entry = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            unsafe { fi::fi_cq_readerr(lane.cq, &mut e, 0) };
            let ctx = e.op_context as usize;
            if ctx & TX_BIT != 0 {
                lane.tx.remove(&(ctx & !TX_BIT));
            } else if ctx < lane.rx.len() {
                // A failed receive (truncation): repost; the protocol never saw it.
                // SAFETY: the buffer's completion has been consumed.
                let _ = unsafe { post(lane, ctx) };
            }
            return 0;
        }
        if n <= 0 {
            return 0;
        }
        let mut received = 0;
        for e in &entries[..n as usize] {
            let ctx = e.op_context as usize;
            if ctx & TX_BIT != 0 {
                lane.tx.remove(&(ctx & !TX_BIT));
                continue;
            }
            if ctx >= lane.rx.len() {
                continue;
            }
            let len = e.len.min(lane.rx[ctx].len());
            f(&lane.rx[ctx][..len]);
            received += 1;
            // SAFETY: the completion for buffer `ctx` was read; it is free to repost.
            let _ = unsafe { post(lane, ctx) };
        }
        received
    }
}

impl Drop for OfiBackend {
    fn drop(&mut self) {
        // SAFETY: objects we opened, closed once in dependency order.
        unsafe {
            for lane in &mut self.lanes {
                close_lane(lane);
            }
            if !self.av.is_null() {
                fi::fi_close(&raw mut (*self.av).fid);
            }
            if !self.domain.is_null() {
                fi::fi_close(&raw mut (*self.domain).fid);
            }
            if !self.fabric.is_null() {
                fi::fi_close(&raw mut (*self.fabric).fid);
            }
            if !self.info.is_null() {
                fi::fi_freeinfo(self.info);
            }
        }
    }
}
