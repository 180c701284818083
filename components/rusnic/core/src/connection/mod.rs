//! One reliable, ordered connection to one peer.
//!
//! # Driving contract
//!
//! A `Connection` does no I/O and never reads a clock. The glue owns the fabric, the
//! clock and the upper-layer callbacks, and drives it like this:
//!
//! 1. **Inputs**, in any order, each with the current time:
//!    * [`Connection::handle_datagram`]`(now, channel, bytes)` for every datagram that
//!      arrived from this peer (the glue demultiplexes by sender, or uses [`crate::Endpoint`]);
//!    * [`Connection::handle_timeout`]`(now)` once `now` reaches [`Connection::next_timeout`];
//!    * commands: [`Connection::send`], [`Connection::put`] (queue a fragment; never
//!      fails for lack of window, credit or transmit slots) and
//!      [`Connection::repost_rx_buffers`] (the upper layer is done with deliveries).
//! 2. **Outputs**, polled after every input, in this order:
//!    * [`Connection::poll_transmit`]`(now)` until `None`: datagrams to send. A glue out of
//!      transmit slots simply stops polling; everything stays queued inside;
//!    * [`Connection::poll_event`] until `None`: deliveries, PUT writes, send
//!      completions, errors;
//!    * [`Connection::next_timeout`]: when to call `handle_timeout` next.
//!
//! Ordering: all fragments to a peer share one sequence space across both channels and
//! are delivered strictly in sequence order, so reordering between or within channels
//! never reorders delivery (ob1 matching relies on it).
//!
//! Flow control: each `Deliver` or `Put` event holds one of the `rx_buffers` receive
//! buffers of this connection until the glue calls `repost_rx_buffers`. The receiver's
//! ACKs grant the sender exactly the buffers that are free, so a receiver whose upper
//! layer stalls is never overrun (see [`crate::flow`]).

mod rx;
mod tx;

use std::collections::VecDeque;
use std::sync::Arc;

use crate::auth::Key;
use crate::config::{Config, ConfigError};
use crate::connectivity::Connectivity;
use crate::event::{ConnError, Event, SendError, Shared};
use crate::fault::Rng;
use crate::flow::{Backoff, Persist};
use crate::rack::reorder_window;
use crate::reassembly::Reassembly;
use crate::rto::RttEstimator;
use crate::seq;
use crate::stats::Stats;
use crate::tail_probe::{TailProbe, probe_timeout};
use crate::time::{Instant, min_deadline};
use crate::window::recv::RecvWindow;
use crate::window::send::{ResendCause, SendWindow};
use crate::wire::{CHUNK_EXT_LEN, Channel, HEADER_LEN, PUT_EXT_LEN};

/// How long a send ring that a burst grew stays grown once nothing is in flight (ns):
/// long beside the gaps inside a bandwidth run (so it does not shrink and regrow between
/// messages), short beside a job's idle phases (so a peer talked to once gives the
/// memory back).
pub(crate) const RING_IDLE_NS: u64 = 1_000_000_000;

/// Identity and initial state of a connection, as exchanged in the modex.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionParams {
    /// Our sender id, carried in every header we send.
    pub local_id: u64,
    /// The peer's sender id; datagrams carrying another are counted and dropped.
    pub peer_id: u64,
    /// Our initial sequence number (random, published in the modex).
    pub local_isn: u16,
    /// The peer's initial sequence number.
    pub peer_isn: u16,
    /// Seed for the backoff jitter and probe nonce (any value; distinct per peer is best).
    pub seed: u64,
}

/// A fragment accepted by `send`/`put` and not yet fully cut into segments.
#[derive(Debug)]
struct OutFrag {
    id: u64,
    tag: u8,
    /// The fragment is `data[..len]`.
    data: Shared,
    len: usize,
    put_addr: Option<u64>,
    /// Next byte to segment.
    offset: usize,
    /// Nonzero for a chunked fragment.
    frag_id: u32,
    /// Channel of a single-segment fragment.
    channel: Channel,
}

/// When the receiver owes the peer an ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AckDue {
    None,
    At(Instant),
    Now,
}

#[derive(Debug)]
pub struct Connection {
    cfg: Config,
    local_id: u64,
    peer_id: u64,
    /// Set once; then nothing flows.
    failed: bool,
    /// In its [`crate::Endpoint`]'s list of connections with work (kept by the Endpoint).
    pub(crate) listed: bool,
    /// Data segments we send carry a CRC over their payload too (else flag HDR_CRC).
    send_payload_crc: bool,
    /// Data segments from the peer must carry a CRC over their payload.
    require_payload_crc: bool,
    /// Our key: datagrams to us must be tagged with it ([`crate::auth`]).
    rx_key: Key,
    /// The peer's key: what we send it is tagged with it.
    tx_key: Key,

    // ---- sender ----
    /// Fragments waiting to be segmented.
    queue: VecDeque<OutFrag>,
    /// Id for the next chunked fragment (never 0).
    next_frag_id: u32,
    /// Segments in flight.
    snd: SendWindow,
    /// The peer's grant: we may send sequence numbers below this.
    credit_limit: u64,
    rtt: RttEstimator,
    /// Earliest moment a segment's retransmission timer may expire (may be early).
    rto_deadline: Option<Instant>,
    /// Timer expiries since the last progress (for `max_timeouts`).
    consecutive_timeouts: u32,
    backoff: Backoff,
    persist: Persist,
    tail: TailProbe,
    /// When an outstanding segment is deemed lost by RACK unless it arrives first.
    rack_deadline: Option<Instant>,
    /// When the send ring, grown by a burst and empty since, goes back to its starting
    /// size unless traffic filled it again meanwhile.
    ring_idle_deadline: Option<Instant>,
    /// A window probe (ACK with ACK_REQ) is due.
    probe_due: bool,
    /// What queued the latest resend (`last_resend_cause`).
    last_resend_cause: Option<ResendCause>,

    // ---- receiver ----
    rcv: RecvWindow,
    reasm: Reassembly,
    /// Deliveries handed out whose buffer the glue has not reposted.
    in_glue: u32,
    ack_due: AckDue,
    /// In-order segments since we last sent an ACK.
    unacked: u32,
    /// We dropped data for lack of resources: tell the sender to back off.
    rnr_due: bool,
    /// The grant (`rcv.nxt + credits`) in our last ACK.
    last_adv_limit: u64,

    // ---- both ----
    check: Connectivity,
    events: VecDeque<Event>,
    stats: Stats,
    rng: Rng,
}

impl Connection {
    /// Creates a connection; fails only if `cfg` is invalid.
    pub fn new(cfg: Config, p: ConnectionParams) -> Result<Connection, ConfigError> {
        cfg.validate()?;
        let mut rng = Rng::new(p.seed ^ p.local_id.rotate_left(17) ^ p.peer_id);
        let snd_start = seq::initial(p.local_isn);
        let rcv_start = seq::initial(p.peer_isn);
        let nonce = rng.next_u64() as u32;
        Ok(Connection {
            local_id: p.local_id,
            peer_id: p.peer_id,
            failed: false,
            listed: false,
            send_payload_crc: true,
            require_payload_crc: true,
            rx_key: Key::ZERO,
            tx_key: Key::ZERO,
            queue: VecDeque::new(),
            next_frag_id: 1,
            snd: SendWindow::new(cfg.window, snd_start),
            credit_limit: snd_start + u64::from(cfg.rx_buffers),
            rtt: RttEstimator::new(cfg.rto_initial, cfg.rto_min, cfg.rto_max),
            rto_deadline: None,
            consecutive_timeouts: 0,
            backoff: Backoff::new(cfg.backoff_min, cfg.backoff_max),
            persist: Persist::default(),
            tail: TailProbe::default(),
            rack_deadline: None,
            ring_idle_deadline: None,
            probe_due: false,
            last_resend_cause: None,
            rcv: RecvWindow::new(cfg.window, cfg.rx_buffers, rcv_start),
            reasm: Reassembly::new(cfg.max_reassemblies),
            in_glue: 0,
            ack_due: AckDue::None,
            unacked: 0,
            rnr_due: false,
            last_adv_limit: rcv_start + u64::from(cfg.rx_buffers),
            check: Connectivity::new(
                cfg.connectivity_check,
                nonce,
                cfg.mtu_data,
                cfg.connectivity_retries,
                cfg.connectivity_timeout,
            ),
            events: VecDeque::new(),
            stats: Stats::default(),
            rng,
            cfg,
        })
    }

    /// Queues a fragment for the active-message `tag` at the peer. `id` comes back in
    /// `SendComplete` once the peer acknowledged every byte.
    pub fn send(&mut self, id: u64, tag: u8, data: &[u8]) -> Result<(), SendError> {
        self.enqueue(id, tag, Arc::new(data.to_vec()), data.len(), None)
    }

    /// [`Connection::send`] of `data[..len]` from a buffer the caller shares instead of
    /// one the core copies: the datagrams refer to it until the peer acknowledged them.
    /// The caller cannot change its bytes meanwhile (the `Arc` is shared). A `len` past
    /// the buffer is cut to it.
    pub fn send_shared(
        &mut self,
        id: u64,
        tag: u8,
        data: Shared,
        len: usize,
    ) -> Result<(), SendError> {
        let len = len.min(data.bytes().len());
        self.enqueue(id, tag, data, len, None)
    }

    /// Queues an emulated PUT of `data` to `remote_addr` in the peer's memory.
    /// `SendComplete { id }` follows once the last byte is acknowledged.
    pub fn put(&mut self, id: u64, remote_addr: u64, data: &[u8]) -> Result<(), SendError> {
        self.enqueue(
            id,
            0,
            Arc::new(data.to_vec()),
            data.len(),
            Some(remote_addr),
        )
    }

    /// [`Connection::put`] of `data[..len]` from a buffer the caller shares, as
    /// [`Connection::send_shared`].
    pub fn put_shared(
        &mut self,
        id: u64,
        remote_addr: u64,
        data: Shared,
        len: usize,
    ) -> Result<(), SendError> {
        let len = len.min(data.bytes().len());
        self.enqueue(id, 0, data, len, Some(remote_addr))
    }

    fn enqueue(
        &mut self,
        id: u64,
        tag: u8,
        data: Shared,
        len: usize,
        put_addr: Option<u64>,
    ) -> Result<(), SendError> {
        if self.failed {
            return Err(SendError::Failed);
        }
        if len > self.cfg.max_fragment_size as usize {
            return Err(SendError::TooLarge {
                len,
                max: self.cfg.max_fragment_size,
            });
        }
        if self.queue.len() >= self.cfg.max_queued_fragments as usize {
            return Err(SendError::Busy);
        }
        let put_ext = if put_addr.is_some() { PUT_EXT_LEN } else { 0 };
        let tiny = put_addr.is_none() && len <= usize::from(self.cfg.tiny_size);
        let fits_one = HEADER_LEN + put_ext + len <= usize::from(self.cfg.mtu_data);
        let frag_id = if tiny || fits_one {
            0
        } else {
            let id = self.next_frag_id;
            self.next_frag_id = self.next_frag_id.checked_add(1).unwrap_or(1);
            id
        };
        self.queue.push_back(OutFrag {
            id,
            tag,
            data,
            len,
            put_addr,
            offset: 0,
            frag_id,
            channel: if tiny {
                Channel::Priority
            } else {
                Channel::Data
            },
        });
        self.check.first_contact();
        Ok(())
    }

    /// The upper layer finished with `n` `Deliver`/`Put` events: their receive buffers are
    /// free again and may be granted to the peer.
    pub fn repost_rx_buffers(&mut self, n: u32) {
        self.in_glue -= n.min(self.in_glue);
        // Announce a meaningful reopening at once rather than at the next data segment:
        // the sender may be blocked on exactly these buffers.
        let step = u64::from((self.cfg.rx_buffers / 4).max(1));
        if self.rx_limit() >= self.last_adv_limit + step {
            self.ack_due = AckDue::Now;
        }
    }

    /// The keys of the `auth` tag ([`crate::auth`]): `ours` checks what arrives (our
    /// own secret, published to the job), `peers` tags what we send (the peer's). Both
    /// are [`Key::ZERO`] until set, which any process can compute: a glue facing an
    /// open network sets them before the first datagram.
    pub fn set_keys(&mut self, ours: Key, peers: Key) {
        self.rx_key = ours;
        self.tx_key = peers;
    }

    /// Whether data segments checksum their payload (the default, both ways true).
    /// `send = false` leaves payload integrity to the datagram service (a loopback copies
    /// memory to memory); `require = false` accepts such segments from the peer, which
    /// are otherwise counted as malformed and dropped. The header is always checksummed.
    pub fn set_payload_crc(&mut self, send: bool, require: bool) {
        self.send_payload_crc = send;
        self.require_payload_crc = require;
    }

    /// Whether data segments from the peer must checksum their payload
    /// (see [`Connection::set_payload_crc`]).
    #[must_use]
    pub fn requires_payload_crc(&self) -> bool {
        self.require_payload_crc
    }

    /// Gives back the buffer of a delivered fragment once the upper layer is done with
    /// it, so that a later reassembly can reuse it instead of allocating (optional).
    pub fn recycle_buffer(&mut self, buf: Vec<u8>) {
        self.reasm.recycle(buf);
    }

    /// Sends a pending delayed ACK at the next `poll_transmit` instead of at its deadline.
    /// For a glue that has just drained its receive queue: nothing more is about to
    /// arrive to coalesce with, and waiting only risks the peer's retransmission timer
    /// (a progress engine that yields the CPU may not come back within `ack_delay`).
    pub fn flush_delayed_ack(&mut self) {
        if let AckDue::At(_) = self.ack_due {
            self.ack_due = AckDue::Now;
        }
    }

    /// The fabric reported receiver-not-ready for this peer (EFA-style RNR): back off.
    pub fn on_peer_rnr(&mut self, now: Instant) {
        self.backoff.on_rnr(now, &mut self.rng);
        self.stats.num_backoffs += 1;
    }

    /// Drives timers. Call when `now >= next_timeout()` (calling early is harmless).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.failed {
            return;
        }
        if let Some(err) = self.check.on_timeout(now, self.peer_id) {
            self.fail(err);
            return;
        }
        if let AckDue::At(t) = self.ack_due
            && t <= now
        {
            self.ack_due = AckDue::Now;
        }
        self.backoff.on_timeout(now);
        if self.persist.on_timeout(now, self.cfg.rto_max) {
            self.probe_due = true;
        }
        if self.tail.on_timeout(now) && self.snd.tail_probe() {
            self.stats.num_tail_probes += 1;
        }
        if self.rack_deadline.is_some_and(|d| d <= now) {
            self.rack_detect(now);
        }
        if self.ring_idle_deadline.is_some_and(|d| d <= now) {
            self.ring_idle_deadline = None;
            self.snd.shrink_if_empty();
        }
        if self.rto_deadline.is_some_and(|d| d <= now) {
            let (expired, next) = self.snd.expire(now, self.rtt.rto());
            if expired > 0 {
                self.stats.num_timeout_retrans += expired;
                self.rtt.on_timeout();
                self.consecutive_timeouts += 1;
                if self.cfg.max_timeouts > 0 && self.consecutive_timeouts >= self.cfg.max_timeouts {
                    self.fail(ConnError::PeerUnreachable {
                        peer: self.peer_id,
                        attempts: self.consecutive_timeouts,
                    });
                    return;
                }
            }
            self.rto_deadline = next;
        }
    }

    /// Next event from the connection, in the order they occurred.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Nothing to hand up and no timer, right after `poll_transmit` found nothing to send:
    /// then only an input (a datagram, a send, a repost) can give it work again.
    pub(crate) fn quiescent(&self) -> bool {
        self.events.is_empty() && self.next_timeout().is_none()
    }

    /// The tail-loss probe timeout now (`crate::tail_probe`).
    fn pto(&self) -> Option<u64> {
        if !self.cfg.tail_probe {
            return None;
        }
        probe_timeout(self.rtt.srtt(), self.cfg.ack_delay, self.rtt.rto())
    }

    /// Time-based loss detection (`crate::rack`): queues what a later transmission proves
    /// lost and arms the reordering timer for what it will prove lost.
    fn rack_detect(&mut self, now: Instant) {
        if !self.cfg.rack {
            return;
        }
        let reo_wnd = reorder_window(self.rtt.min_rtt(), self.rtt.srtt());
        let (lost, next) = self.snd.rack_detect(now, reo_wnd);
        self.stats.num_rack_retrans += lost;
        self.rack_deadline = next;
    }

    /// When `handle_timeout` must be called next; `None` when no timer runs.
    pub fn next_timeout(&self) -> Option<Instant> {
        if self.failed {
            return None;
        }
        let ack = match self.ack_due {
            AckDue::At(t) => Some(t),
            _ => None,
        };
        [
            self.check.deadline(),
            self.rto_deadline,
            self.backoff.deadline(),
            self.persist.deadline(),
            self.tail.deadline(),
            self.rack_deadline,
            self.ring_idle_deadline,
        ]
        .into_iter()
        .fold(ack, min_deadline)
    }

    fn fail(&mut self, err: ConnError) {
        self.failed = true;
        self.events.push_back(Event::Error(err));
        let mut ids = self.snd.abandon();
        ids.extend(self.queue.drain(..).map(|f| f.id));
        self.events
            .extend(ids.into_iter().map(|id| Event::SendFailed { id }));
        self.rto_deadline = None;
        self.rack_deadline = None;
        self.ring_idle_deadline = None;
        self.persist.disarm();
    }

    /// Receive buffers granted beyond the cumulative ACK, `rx_buffers` minus deliveries
    /// the glue still holds: chunks copied into reassembly hold none.
    fn rx_limit(&self) -> u64 {
        self.rcv.nxt + u64::from(self.cfg.rx_buffers) - u64::from(self.in_glue)
    }

    fn chunk_payload(&self, put: bool) -> usize {
        let ext = CHUNK_EXT_LEN + if put { PUT_EXT_LEN } else { 0 };
        usize::from(self.cfg.mtu_data) - HEADER_LEN - ext
    }

    // ---- introspection (monitoring, and the simulator's invariant checks) ----

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn peer_id(&self) -> u64 {
        self.peer_id
    }

    pub fn local_id(&self) -> u64 {
        self.local_id
    }

    pub fn is_failed(&self) -> bool {
        self.failed
    }

    /// The connectivity check passed.
    pub fn is_verified(&self) -> bool {
        self.check.is_verified()
    }

    /// Nothing queued, in flight or owed: safe to tear down.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.snd.in_flight() == 0 && self.events.is_empty()
    }

    /// Fragments accepted by `send`/`put` and not yet fully segmented.
    pub fn queued_fragments(&self) -> usize {
        self.queue.len()
    }

    /// Slots of the send and receive rings (memory per peer: the send ring grows with
    /// what is in flight and shrinks after `RING_IDLE_NS` without any).
    pub fn ring_slots(&self) -> (usize, usize) {
        (self.snd.ring_capacity(), self.rcv.ring_capacity())
    }

    /// Unacknowledged segments (≤ `window`).
    pub fn in_flight(&self) -> u64 {
        self.snd.in_flight()
    }

    /// Segments waiting to be sent again (≤ `window`).
    pub fn resend_backlog(&self) -> usize {
        self.snd.resend_len()
    }

    /// Out-of-order segments holding receive buffers inside the core.
    pub fn rx_held(&self) -> u32 {
        self.rcv.held()
    }

    /// Deliveries the glue has not reposted.
    pub fn rx_in_glue(&self) -> u32 {
        self.in_glue
    }

    /// Span of the receive window in use (≤ `window`).
    pub fn rx_span(&self) -> u64 {
        self.rcv.span()
    }

    /// Fragments in reassembly (≤ `max_reassemblies`) and their bytes.
    pub fn reassembly_usage(&self) -> (usize, usize) {
        (self.reasm.active(), self.reasm.bytes())
    }

    /// What queued the latest retransmission `poll_transmit` returned (for simulations
    /// that tell which mechanism's resends were spurious).
    pub fn last_resend_cause(&self) -> Option<ResendCause> {
        self.last_resend_cause
    }

    /// Current retransmission timeout, backoff included.
    pub fn rto(&self) -> u64 {
        self.rtt.rto()
    }

    /// Smoothed round-trip time, once measured.
    pub fn srtt(&self) -> Option<u64> {
        self.rtt.srtt()
    }

    /// In backoff after a receiver-not-ready signal.
    pub fn in_backoff(&self, now: Instant) -> bool {
        self.backoff.active(now)
    }

    /// Events waiting in `poll_event`.
    pub fn pending_events(&self) -> usize {
        self.events.len()
    }
}
