//! libfabric objects and calls: the only place rofi touches `fabric_sys`.
//!
//! Every function here keeps libfabric's own contract (pointers it hands out stay
//! valid until closed, contexts must outlive their operation); what a completion
//! means is decided elsewhere.

use std::ffi::{CStr, c_char, c_void};
use std::ptr;

use fabric_sys as fi;
use rofi_core::provider::ProviderInfo;

use super::context::OpContext;

/// `FI_ADDR_UNSPEC`: any source (not bound: it is a cast macro).
pub const ADDR_ANY: u64 = u64::MAX;
/// `-FI_EAGAIN` as posting calls return it.
pub const EAGAIN: isize = -(fi::FI_EAGAIN as isize);
const EAVAIL: isize = -(fi::FI_EAVAIL as isize);

/// The libfabric version whose semantics we ask for: 1.5 on 1.x (as the C MTL
/// does), the headers' own on 2.x (`fabric_sys::API_VERSION`).
const API_VERSION: u32 = fi::API_VERSION;

/// What a discovery asks of providers.
#[derive(Debug, Clone, Copy)]
pub struct Hints {
    pub thread_safe: bool,
    pub directed_recv: bool,
    /// Untagged messages and RMA reads too (host matching, `crate::host`).
    pub host_matching: bool,
}

/// The list `fi_getinfo` returned; freed on drop.
#[derive(Debug)]
pub struct InfoList {
    head: *mut fi::fi_info,
}

// SAFETY: the list is plain heap data owned by this value; libfabric has no thread
// affinity for it.
unsafe impl Send for InfoList {}
// SAFETY: as above; shared access only reads it.
unsafe impl Sync for InfoList {}

fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: libfabric attribute strings are NUL-terminated and live with their info.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The running libfabric's `(major, minor)` (not the headers').
pub fn runtime_version() -> (u32, u32) {
    fi::version_parts(fi::runtime_version())
}

/// libfabric's message for an error number (positive or negative).
pub fn strerror(code: isize) -> String {
    // SAFETY: fi_strerror returns a static NUL-terminated string for any number.
    text(unsafe { fi::fi_strerror(code.unsigned_abs() as i32) })
}

impl InfoList {
    /// Tagged reliable-datagram providers (empty list when none fits, not an error).
    pub fn discover(h: Hints) -> Result<InfoList, String> {
        // A library older than our headers would be handed structures larger than it
        // knows: decline, saying so even without verbose output (once per process).
        if let Err(why) = fi::check_runtime_version() {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| eprintln!("mtl:rofi: declining: {why}"));
            return Err(why);
        }
        // SAFETY: fi_allocinfo returns a zeroed info with every attribute allocated.
        let hints = unsafe { fi::fi_allocinfo() };
        if hints.is_null() {
            return Err("fi_allocinfo failed".into());
        }
        // SAFETY: every attribute pointer of a fi_allocinfo result is valid.
        unsafe {
            (*hints).mode = fi::FI_CONTEXT | fi::FI_CONTEXT2;
            // No FI_LOCAL_COMM | FI_REMOTE_COMM: shm has only the first, and asking for both
            // hides it; the core refuses local-only providers for multi-node jobs.
            (*hints).caps = fi::FI_TAGGED;
            if h.directed_recv {
                (*hints).caps |= fi::FI_DIRECTED_RECV;
            }
            if h.host_matching {
                (*hints).caps |= fi::FI_MSG | fi::FI_RMA | fi::FI_READ | fi::FI_REMOTE_READ;
            }
            (*(*hints).ep_attr).type_ = fi::FI_EP_RDM;
            (*(*hints).tx_attr).msg_order = fi::FI_ORDER_SAS;
            (*(*hints).rx_attr).msg_order = fi::FI_ORDER_SAS;
            (*(*hints).domain_attr).threading = if h.thread_safe {
                fi::FI_THREAD_SAFE
            } else {
                fi::FI_THREAD_DOMAIN
            };
            (*(*hints).domain_attr).resource_mgmt = fi::FI_RM_ENABLED;
            // rofi drives progress itself (opal_progress). Left unspecified, sockets
            // takes FI_PROGRESS_AUTO: its own thread then moves every byte while
            // fi_cq_read only reads the queue, so that thread and the spinning MPI thread
            // fight for the CPU (one core, where mpirun binds the rank) and every message
            // waits for the scheduler: ~4 ms per self-send instead of ~8 us. rxm, rxd and
            // shm pick manual progress unasked.
            fi::set_data_progress(&mut *(*hints).domain_attr, fi::FI_PROGRESS_MANUAL);
        }
        let mut head = ptr::null_mut();
        // SAFETY: valid hints and out-pointer; the result is owned by the InfoList.
        let rc =
            unsafe { fi::fi_getinfo(API_VERSION, ptr::null(), ptr::null(), 0, hints, &mut head) };
        // SAFETY: hints came from fi_allocinfo and is not used again.
        unsafe { fi::fi_freeinfo(hints) };
        if rc == -(fi::FI_ENODATA as i32) {
            return Ok(InfoList {
                head: ptr::null_mut(),
            });
        }
        if rc != 0 {
            return Err(format!("fi_getinfo: {}", strerror(rc as isize)));
        }
        Ok(InfoList { head })
    }

    fn nth(&self, index: usize) -> *mut fi::fi_info {
        let mut cursor = self.head;
        for _ in 0..index {
            if cursor.is_null() {
                break;
            }
            // SAFETY: walking the list fi_getinfo returned.
            cursor = unsafe { (*cursor).next };
        }
        cursor
    }

    /// Every entry, converted for the core's selection.
    pub fn entries(&self) -> Vec<ProviderInfo> {
        let mut out = Vec::new();
        let mut cursor = self.head;
        while !cursor.is_null() {
            // SAFETY: a list entry from fi_getinfo: every attribute pointer is valid.
            unsafe {
                let i = &*cursor;
                let (fab, dom, ep, tx) =
                    (&*i.fabric_attr, &*i.domain_attr, &*i.ep_attr, &*i.tx_attr);
                out.push(ProviderInfo {
                    name: text(fab.prov_name),
                    fabric: text(fab.name),
                    domain: text(dom.name),
                    ep_rdm: ep.type_ == fi::FI_EP_RDM,
                    tagged: i.caps & fi::FI_TAGGED != 0,
                    directed_recv: i.caps & fi::FI_DIRECTED_RECV != 0,
                    cq_data_size: dom.cq_data_size,
                    inject_size: tx.inject_size,
                    max_msg_size: ep.max_msg_size as u64,
                    mem_tag_format: ep.mem_tag_format,
                    max_ep_tx_ctx: dom.max_ep_tx_ctx,
                    max_ep_rx_ctx: dom.max_ep_rx_ctx,
                    thread_safe: dom.threading == fi::FI_THREAD_SAFE,
                    manual_progress: fi::data_progress(dom) == fi::FI_PROGRESS_MANUAL,
                    // Filled in from the matching probe (`select_probed` in lib.rs).
                    matching: Default::default(),
                    // Learnt by asking again with FI_MSG and FI_RMA (`choose` in lib.rs).
                    lacks_host_matching: false,
                });
                cursor = i.next;
            }
        }
        out
    }
}

impl Drop for InfoList {
    fn drop(&mut self) {
        if !self.head.is_null() {
            // SAFETY: the list came from fi_getinfo and is freed once.
            unsafe { fi::fi_freeinfo(self.head) };
        }
    }
}

/// One error completion, with the provider's explanation.
#[derive(Debug, Clone)]
pub struct ErrorEntry {
    pub context: *mut OpContext,
    pub err: i32,
    pub bits: u64,
    pub data: u64,
    pub len: usize,
    pub olen: usize,
    pub message: String,
}

/// A success completion (`fi_cq_tagged_entry`), laid out as libfabric writes it.
pub type Entry = fi::fi_cq_tagged_entry;

/// An empty entry for the read buffer.
pub fn empty_entry() -> Entry {
    Entry {
        op_context: ptr::null_mut(),
        flags: 0,
        len: 0,
        buf: ptr::null_mut(),
        data: 0,
        tag: 0,
    }
}

/// What one `fi_cq_read` produced.
#[derive(Debug)]
pub enum CqRead {
    Entries(usize),
    Error(ErrorEntry),
    Empty,
    Failed(String),
}

/// One transmit/receive context pair and the CQ both report to. Without a scalable
/// endpoint there is one, whose `tx` and `rx` are the endpoint itself.
#[derive(Debug)]
struct Ctx {
    tx: *mut fi::fid_ep,
    rx: *mut fi::fid_ep,
    cq: *mut fi::fid_cq,
}

/// The opened fabric: one domain, one endpoint (plain or scalable), its address vector,
/// and one context (with its own CQ) per scalable-endpoint context.
#[derive(Debug)]
pub struct Fabric {
    fabric: *mut fi::fid_fabric,
    domain: *mut fi::fid_domain,
    ep: *mut fi::fid_ep,
    av: *mut fi::fid_av,
    // INVARIANT: after a successful `open`, at least one context, every pointer open.
    ctxs: Vec<Ctx>,
    /// `Some(rx_ctx_bits)` for a scalable endpoint.
    sep_bits: Option<u32>,
    closed: std::sync::atomic::AtomicBool,
}

// SAFETY: the domain is FI_THREAD_SAFE when MPI threads are enabled; otherwise
// (FI_THREAD_DOMAIN) the MPI threading level serialises every call into the MTL.
unsafe impl Send for Fabric {}
// SAFETY: as above.
unsafe impl Sync for Fabric {}

fn check(rc: i32, what: &str) -> Result<(), String> {
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("{what}: {}", strerror(rc as isize)))
    }
}

/// How to open the endpoint.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub cq_size: usize,
    pub av_count: usize,
    /// A scalable endpoint with this many contexts and `rx_ctx_bits`.
    pub sep: Option<(u32, u32)>,
}

impl Fabric {
    /// Opens entry `index` of `list`: fabric, domain, endpoint bound to an AV, and the
    /// contexts with their CQs.
    pub fn open(list: &InfoList, index: usize, shape: Shape) -> Result<Fabric, String> {
        let info = list.nth(index);
        if info.is_null() {
            return Err("the chosen provider vanished from the list".into());
        }
        let mut f = Fabric {
            fabric: ptr::null_mut(),
            domain: ptr::null_mut(),
            ep: ptr::null_mut(),
            av: ptr::null_mut(),
            ctxs: Vec::new(),
            sep_bits: shape.sep.map(|(_, bits)| bits),
            closed: std::sync::atomic::AtomicBool::new(false),
        };
        // On error the partly opened objects are closed by `close` via Drop of `f`.
        // SAFETY: `info` is a live entry of a list only this process reads (adjusting
        // its context counts is how a scalable endpoint is sized); out-pointers are
        // ours; each object is opened from the one before it, as libfabric requires.
        unsafe {
            if let Some((n, _)) = shape.sep {
                (*(*info).ep_attr).tx_ctx_cnt = n as usize;
                (*(*info).ep_attr).rx_ctx_cnt = n as usize;
                // Sends name the peer's receive context (fi_rx_addr).
                (*info).caps |= fi::FI_NAMED_RX_CTX;
            }
            check(
                fi::fi_fabric((*info).fabric_attr, &mut f.fabric, ptr::null_mut()),
                "fi_fabric",
            )?;
            check(
                fi::fi_domain(f.fabric, info, &mut f.domain, ptr::null_mut()),
                "fi_domain",
            )?;
            let mut av_attr: fi::fi_av_attr = std::mem::zeroed();
            av_attr.type_ = fi::FI_AV_UNSPEC;
            av_attr.count = shape.av_count;
            if let Some((n, bits)) = shape.sep {
                av_attr.rx_ctx_bits = bits as i32;
                av_attr.count = shape.av_count.saturating_mul(n as usize);
                check(
                    fi::fi_scalable_ep(f.domain, info, &mut f.ep, ptr::null_mut()),
                    "fi_scalable_ep",
                )?;
            } else {
                check(
                    fi::fi_endpoint(f.domain, info, &mut f.ep, ptr::null_mut()),
                    "fi_endpoint",
                )?;
            }
            check(
                fi::fi_av_open(f.domain, &mut av_attr, &mut f.av, ptr::null_mut()),
                "fi_av_open",
            )?;
            let mut cq_attr: fi::fi_cq_attr = std::mem::zeroed();
            cq_attr.format = fi::FI_CQ_FORMAT_TAGGED;
            cq_attr.size = shape.cq_size;
            match shape.sep {
                None => {
                    f.ctxs.push(Ctx {
                        tx: f.ep,
                        rx: f.ep,
                        cq: ptr::null_mut(),
                    });
                    let c = &mut f.ctxs[0];
                    check(
                        fi::fi_cq_open(f.domain, &mut cq_attr, &mut c.cq, ptr::null_mut()),
                        "fi_cq_open",
                    )?;
                    check(fi::fi_ep_bind(f.ep, &mut (*f.av).fid, 0), "fi_ep_bind(av)")?;
                    check(
                        fi::fi_ep_bind(f.ep, &mut (*c.cq).fid, fi::FI_TRANSMIT | fi::FI_RECV),
                        "fi_ep_bind(cq)",
                    )?;
                    check(fi::fi_enable(f.ep), "fi_enable")?;
                }
                Some((n, _)) => {
                    check(
                        fi::fi_scalable_ep_bind(f.ep, &mut (*f.av).fid, 0),
                        "fi_scalable_ep_bind(av)",
                    )?;
                    check(fi::fi_enable(f.ep), "fi_enable(scalable endpoint)")?;
                    for i in 0..n as i32 {
                        f.ctxs.push(Ctx {
                            tx: ptr::null_mut(),
                            rx: ptr::null_mut(),
                            cq: ptr::null_mut(),
                        });
                        let c = f.ctxs.last_mut().expect("just pushed");
                        check(
                            fi::fi_tx_context(f.ep, i, ptr::null_mut(), &mut c.tx, ptr::null_mut()),
                            "fi_tx_context",
                        )?;
                        check(
                            fi::fi_rx_context(f.ep, i, ptr::null_mut(), &mut c.rx, ptr::null_mut()),
                            "fi_rx_context",
                        )?;
                        check(
                            fi::fi_cq_open(f.domain, &mut cq_attr, &mut c.cq, ptr::null_mut()),
                            "fi_cq_open",
                        )?;
                        check(
                            fi::fi_ep_bind(c.tx, &mut (*c.cq).fid, fi::FI_TRANSMIT),
                            "fi_ep_bind(tx context, cq)",
                        )?;
                        check(
                            fi::fi_ep_bind(c.rx, &mut (*c.cq).fid, fi::FI_RECV),
                            "fi_ep_bind(rx context, cq)",
                        )?;
                        check(fi::fi_enable(c.tx), "fi_enable(tx context)")?;
                        check(fi::fi_enable(c.rx), "fi_enable(rx context)")?;
                    }
                }
            }
        }
        Ok(f)
    }

    /// Contexts opened (1 without a scalable endpoint).
    pub fn num_ctxts(&self) -> u32 {
        self.ctxs.len() as u32
    }

    /// The address of receive context `rx` of the peer at `addr` (`addr` itself without
    /// a scalable endpoint).
    pub fn rx_addr(&self, addr: u64, rx: u32) -> u64 {
        match self.sep_bits {
            None => addr,
            // SAFETY: pure bit arithmetic on its arguments.
            Some(bits) => unsafe { fi::fi_rx_addr(addr, rx as i32, bits as i32) },
        }
    }

    /// The endpoint's address, as peers insert it into their AV.
    pub fn name(&self) -> Result<Vec<u8>, String> {
        let mut buf = vec![0u8; fi::FI_NAME_MAX as usize];
        let mut len = buf.len();
        // SAFETY: open endpoint; `buf` has `len` writable bytes.
        let mut rc =
            unsafe { fi::fi_getname(&mut (*self.ep).fid, buf.as_mut_ptr().cast(), &mut len) };
        // A linked provider (lnx) wraps several addresses in one, past FI_NAME_MAX: the
        // call has set `len` to the size it needs.
        if rc == -(fi::FI_ETOOSMALL as i32) && len > buf.len() {
            buf.resize(len, 0);
            // SAFETY: as above, with the buffer grown to the `len` asked for.
            rc = unsafe { fi::fi_getname(&mut (*self.ep).fid, buf.as_mut_ptr().cast(), &mut len) };
        }
        check(rc, "fi_getname")?;
        buf.truncate(len);
        Ok(buf)
    }

    /// Inserts `count` addresses of `name_len` bytes each (concatenated in `names`).
    pub fn av_insert(&self, names: &[u8], count: usize) -> Result<Vec<u64>, String> {
        let mut out = vec![ADDR_ANY; count];
        if count == 0 {
            return Ok(out);
        }
        // SAFETY: `names` holds `count` provider addresses; `out` has room for `count`.
        let rc = unsafe {
            fi::fi_av_insert(
                self.av,
                names.as_ptr().cast(),
                count,
                out.as_mut_ptr(),
                0,
                ptr::null_mut(),
            )
        };
        if rc < 0 {
            return Err(format!("fi_av_insert: {}", strerror(rc as isize)));
        }
        if rc as usize != count {
            return Err(format!("fi_av_insert inserted {rc} of {count} addresses"));
        }
        Ok(out)
    }

    /// `fi_tsend[data]` of `len` bytes at `buf`.
    ///
    /// # Safety
    /// `buf` must stay readable and `ctx` alive and unmoved until the completion.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn tsend(
        &self,
        c: u32,
        buf: *const u8,
        len: usize,
        dest: u64,
        bits: u64,
        data: Option<u64>,
        ctx: *mut OpContext,
    ) -> isize {
        // SAFETY: caller contract; the endpoint is open.
        unsafe {
            match data {
                Some(d) => fi::fi_tsenddata(
                    self.ctxs[c as usize].tx,
                    buf.cast(),
                    len,
                    ptr::null_mut(),
                    d,
                    dest,
                    bits,
                    ctx.cast(),
                ),
                None => fi::fi_tsend(
                    self.ctxs[c as usize].tx,
                    buf.cast(),
                    len,
                    ptr::null_mut(),
                    dest,
                    bits,
                    ctx.cast(),
                ),
            }
        }
    }

    /// `fi_tinject[data]`: the bytes are copied before it returns; no completion.
    pub fn tinject(&self, c: u32, bytes: &[u8], dest: u64, bits: u64, data: Option<u64>) -> isize {
        let tx = self.ctxs[c as usize].tx;
        let buf: *const c_void = if bytes.is_empty() {
            ptr::null()
        } else {
            bytes.as_ptr().cast()
        };
        // SAFETY: inject reads `bytes` before returning; the endpoint is open.
        unsafe {
            match data {
                Some(d) => fi::fi_tinjectdata(tx, buf, bytes.len(), d, dest, bits),
                None => fi::fi_tinject(tx, buf, bytes.len(), dest, bits),
            }
        }
    }

    /// `fi_trecvmsg` of up to `len` bytes at `buf` with `flags` (FI_PEEK, FI_CLAIM, ...).
    ///
    /// # Safety
    /// `buf` must stay writable and `ctx` alive and unmoved until the completion.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn trecv(
        &self,
        c: u32,
        buf: *mut u8,
        len: usize,
        src: u64,
        bits: u64,
        ignore: u64,
        ctx: *mut OpContext,
        flags: u64,
    ) -> isize {
        // SAFETY: caller contract.
        unsafe { self.trecv_sink(c, (buf, len), None, src, (bits, ignore), ctx, flags) }
    }

    /// [`Self::trecv`] with `sink` (a buffer nothing reads: `raw::sink`) posted behind
    /// `buf` as a second iov entry, so that a longer message is not truncated.
    ///
    /// # Safety
    /// As [`Self::trecv`]; the sink lives as long as the process.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn trecv_sink(
        &self,
        c: u32,
        (buf, len): (*mut u8, usize),
        sink: Option<(*mut u8, usize)>,
        src: u64,
        (bits, ignore): (u64, u64),
        ctx: *mut OpContext,
        flags: u64,
    ) -> isize {
        let mut iov = [fi::iovec {
            iov_base: ptr::null_mut(),
            iov_len: 0,
        }; 2];
        let mut count = 0;
        for (p, n) in [(buf, len)].into_iter().chain(sink) {
            // A zero-length buffer is left out (a receive of 0 bytes with a sink has
            // the sink alone); without a sink a null buffer posts no iov (probes).
            if !p.is_null() && (n > 0 || sink.is_none()) {
                iov[count] = fi::iovec {
                    iov_base: p.cast(),
                    iov_len: n,
                };
                count += 1;
            }
        }
        // One descriptor per iov entry, none registered: lnx (2.1) reads `desc[0]` even
        // for providers that need no registration, so `desc` itself is never null.
        let mut no_desc: [*mut std::ffi::c_void; 2] = [ptr::null_mut(); 2];
        let msg = fi::fi_msg_tagged {
            msg_iov: if count == 0 {
                ptr::null()
            } else {
                iov.as_ptr()
            },
            desc: no_desc.as_mut_ptr(),
            iov_count: count,
            addr: src,
            tag: bits,
            ignore,
            context: ctx.cast(),
            data: 0,
        };
        // SAFETY: caller contract; the message description is read during the call.
        unsafe { fi::fi_trecvmsg(self.ctxs[c as usize].rx, &msg, flags | fi::FI_COMPLETION) }
    }

    /// `fi_inject` of an untagged message: the bytes are copied before it returns.
    pub fn inject(&self, c: u32, bytes: &[u8], dest: u64) -> isize {
        // SAFETY: inject reads `bytes` before returning; the endpoint is open.
        unsafe {
            fi::fi_inject(
                self.ctxs[c as usize].tx,
                bytes.as_ptr().cast(),
                bytes.len(),
                dest,
            )
        }
    }

    /// `fi_send` of an untagged message of `len` bytes at `buf`.
    ///
    /// # Safety
    /// `buf` must stay readable and `ctx` alive and unmoved until the completion.
    pub unsafe fn send(
        &self,
        c: u32,
        buf: *const u8,
        len: usize,
        dest: u64,
        ctx: *mut OpContext,
    ) -> isize {
        // SAFETY: caller contract; the endpoint is open.
        unsafe {
            fi::fi_send(
                self.ctxs[c as usize].tx,
                buf.cast(),
                len,
                ptr::null_mut(),
                dest,
                ctx.cast(),
            )
        }
    }

    /// `fi_recv` of an untagged message from anyone into `len` bytes at `buf`.
    ///
    /// # Safety
    /// `buf` must stay writable and `ctx` alive and unmoved until the completion.
    pub unsafe fn recv(&self, c: u32, buf: *mut u8, len: usize, ctx: *mut OpContext) -> isize {
        // SAFETY: caller contract; the endpoint is open.
        unsafe {
            fi::fi_recv(
                self.ctxs[c as usize].rx,
                buf.cast(),
                len,
                ptr::null_mut(),
                ADDR_ANY,
                ctx.cast(),
            )
        }
    }

    /// `fi_read` of `len` bytes at `remote` (registered under `key`) of the peer at
    /// `src` into `buf`.
    ///
    /// # Safety
    /// `buf` must stay writable and `ctx` alive and unmoved until the completion.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn read(
        &self,
        c: u32,
        buf: *mut u8,
        len: usize,
        src: u64,
        remote: u64,
        key: u64,
        ctx: *mut OpContext,
    ) -> isize {
        // SAFETY: caller contract; the endpoint is open.
        unsafe {
            fi::fi_read(
                self.ctxs[c as usize].tx,
                buf.cast(),
                len,
                ptr::null_mut(),
                src,
                remote,
                key,
                ctx.cast(),
            )
        }
    }

    /// Registers `len` bytes at `buf` for remote reads, asking for `key`.
    ///
    /// # Safety
    /// The bytes must stay valid until the returned registration is dropped.
    pub unsafe fn register(&self, buf: *const u8, len: usize, key: u64) -> Result<Mr, String> {
        let mut mr = ptr::null_mut();
        // SAFETY: open domain; caller contract for the memory; `mr` is ours.
        let rc = unsafe {
            fi::fi_mr_reg(
                self.domain,
                buf.cast(),
                len,
                fi::FI_REMOTE_READ,
                0,
                key,
                0,
                &mut mr,
                ptr::null_mut(),
            )
        };
        check(rc, "fi_mr_reg")?;
        // SAFETY: `mr` was just opened.
        let key = unsafe { fi::fi_mr_key(mr) };
        // The hints ask for no MR mode bits, so remote addresses are offsets into the
        // region (no FI_MR_VIRT_ADDR): a peer reads from offset 0.
        Ok(Mr { fid: mr, key })
    }

    /// `fi_cancel` of the receive posted on context `c` with `ctx`.
    pub fn cancel(&self, c: u32, ctx: *mut OpContext) -> isize {
        // SAFETY: cancel only compares the context pointer with posted operations.
        unsafe {
            let rx = self.ctxs[c as usize].rx;
            fi::fi_cancel(&raw mut (*rx).fid, ctx.cast())
        }
    }

    /// Reads up to `entries.len()` completions of context `c`.
    pub fn cq_read(&self, c: u32, entries: &mut [Entry]) -> CqRead {
        let cq = self.ctxs[c as usize].cq;
        // SAFETY: the CQ is open with FI_CQ_FORMAT_TAGGED; the buffer holds that many.
        let n = unsafe { fi::fi_cq_read(cq, entries.as_mut_ptr().cast(), entries.len()) };
        if n > 0 {
            return CqRead::Entries(n as usize);
        }
        if n == EAGAIN || n == 0 {
            return CqRead::Empty;
        }
        if n != EAVAIL {
            return CqRead::Failed(format!("fi_cq_read: {}", strerror(n)));
        }
        // SAFETY: zeroed is a valid error entry (no err_data buffer offered).
        let mut e: fi::fi_cq_err_entry = unsafe { std::mem::zeroed() };
        // SAFETY: open CQ; `e` is ours.
        let rc = unsafe { fi::fi_cq_readerr(cq, &mut e, 0) };
        if rc == EAGAIN {
            // Another thread took the error entry.
            return CqRead::Empty;
        }
        if rc < 0 {
            return CqRead::Failed(format!("fi_cq_readerr: {}", strerror(rc)));
        }
        let mut buf = [0 as c_char; 256];
        // SAFETY: open CQ; the error entry is the one just read; `buf` is ours.
        let msg = unsafe {
            fi::fi_cq_strerror(cq, e.prov_errno, e.err_data, buf.as_mut_ptr(), buf.len())
        };
        CqRead::Error(ErrorEntry {
            context: e.op_context.cast(),
            err: e.err,
            bits: e.tag,
            data: e.data,
            len: e.len,
            olen: e.olen,
            message: text(msg),
        })
    }

    /// Closes everything opened, endpoint first; later calls do nothing. No operation
    /// may be posted afterwards (the MTL is finalized).
    pub fn close(&self) {
        if self.closed.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        // Every libfabric object starts with its `fid`, so the object pointer is its fid.
        // Contexts before the scalable endpoint, endpoints before what they are bound to.
        let mut fids: Vec<*mut fi::fid> = Vec::new();
        if self.sep_bits.is_some() {
            for c in &self.ctxs {
                fids.extend([c.tx.cast(), c.rx.cast()]);
            }
        }
        fids.extend([self.ep.cast(), self.av.cast()]);
        fids.extend(self.ctxs.iter().map(|c| c.cq.cast()));
        fids.extend([self.domain.cast(), self.fabric.cast()]);
        for f in fids.into_iter().filter(|f| !f.is_null()) {
            // SAFETY: each open object is closed once (guarded by `closed`).
            unsafe { fi::fi_close(f) };
        }
    }
}

/// A memory registration, closed on drop (before the fabric is closed: rofi drops
/// every pending send at the latest when its peer's Fin arrives or at finalize).
#[derive(Debug)]
pub struct Mr {
    fid: *mut fi::fid_mr,
    /// The key peers read with (the one asked for unless the provider picks keys).
    pub key: u64,
}

// SAFETY: a registration handle has no thread affinity; it is only closed, once.
unsafe impl Send for Mr {}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: an open registration from `register`, closed once.
        unsafe { fi::fi_close(&raw mut (*self.fid).fid) };
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        self.close();
    }
}
