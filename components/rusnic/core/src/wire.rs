//! Wire format, version 2.
//!
//! Every datagram starts with a fixed 32-byte header, followed by optional extensions in
//! a fixed order and then the payload. All multi-byte fields are little-endian and
//! encoded field by field (no struct transmutes, no padding). Unlike the reference's
//! 32/48-byte host-order C structs this format is not wire-compatible with the C usnic
//! BTL; it is versioned so it can evolve.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +---------------+---------------+---------------+---------------+
//! |  magic 0xB5   |  version (1)  |     type      |    channel    |  0
//! +---------------+---------------+---------------+---------------+
//! |     flags     |      tag      |  sack_count   |  reserved (0) |  4
//! +---------------+---------------+---------------+---------------+
//! |                     sender id (u64)                           |  8
//! |                                                               |
//! +-------------------------------+-------------------------------+
//! |           seq (u16)           |           ack (u16)           | 16
//! +-------------------------------+-------------------------------+
//! |         credits (u16)         |       payload_len (u16)       | 20
//! +-------------------------------+-------------------------------+
//! |  crc32c over all bytes but this and auth (HDR_CRC), ^ auth    | 24
//! +---------------------------------------------------------------+
//! |  auth: SipHash-2-4(receiver's key, header + extensions) (u32) | 28
//! +---------------------------------------------------------------+
//! | sack_count x { start seq (u16) | length (u16) }               | 32  (ACK only)
//! +---------------------------------------------------------------+
//! | frag_id (u32) | frag_size (u32) | offset (u32)                |     (CHUNK only)
//! +---------------------------------------------------------------+
//! | put_addr (u64)                                                |     (flag PUT)
//! +---------------------------------------------------------------+
//! | nonce (u32) | probe_size (u32)                                |     (PING, PONG)
//! +---------------------------------------------------------------+
//! | payload (payload_len bytes)                                   |
//! +---------------------------------------------------------------+
//! ```
//!
//! * `type`: 1 ACK (header only), 2 FRAG (a whole upper-layer fragment), 3 CHUNK (a piece
//!   of a fragment), 4 PING, 5 PONG (connectivity check; unsequenced).
//! * `channel`: 0 priority, 1 data; must equal the channel the datagram arrived on.
//! * `flags`: bit 0 ACK (`ack`/`credits` valid), bit 1 PUT (`put_addr` present),
//!   bit 2 ACK_REQ (answer with an ACK now), bit 3 RNR (receiver not ready: back off),
//!   bit 4 HDR_CRC (data types only: the CRC covers the header and extensions, not the
//!   payload; sent only where the datagram service itself cannot alter bytes, and
//!   accepted only where the receiver agreed to that for this peer).
//! * `seq`: sequence number of a FRAG/CHUNK; zero otherwise.
//! * `ack`: the next sequence number the sender of this datagram expects (cumulative:
//!   everything before it arrived). Note: one more than the reference's `ack_seq`.
//! * `credits`: how many sequence numbers starting at `ack` the receiver has buffers for.
//! * SACK blocks: ranges of sequence numbers above `ack` that arrived out of order.
//! * `crc32c`: see [`crate::crc`] for why; a datagram with a wrong CRC is dropped. The
//!   field holds the CRC XORed with `auth`, so damage to the tag is a CRC error too.
//! * `auth`: the low 32 bits of SipHash-2-4 under the receiver's key over the header and
//!   extensions with this field left out and the plain CRC in the CRC field (which binds
//!   the payload it covers); checked right after the CRC, before any field is trusted: a
//!   datagram not made by a job member is dropped as [`DecodeError::Foreign`] (see
//!   [`crate::auth`]).
//!
//! The total length must equal exactly the header, the extensions and `payload_len`.
//! [`decode`] validates every field and returns an error instead of panicking on any input.

use crate::auth::Key;
use crate::crc::Crc32c;
use crate::event::Head;

pub const MAGIC: u8 = 0xB5;
/// 2: the `auth` field (version 1 had none and a 28-byte header).
pub const VERSION: u8 = 2;
/// Fixed header length.
pub const HEADER_LEN: usize = 32;
pub const SACK_BLOCK_LEN: usize = 4;
pub const CHUNK_EXT_LEN: usize = 12;
pub const PUT_EXT_LEN: usize = 8;
pub const PROBE_EXT_LEN: usize = 8;
/// Most SACK blocks one ACK carries.
pub const MAX_SACK_BLOCKS: usize = 8;
/// Largest ACK datagram: both channels must carry at least this.
pub const MAX_ACK_LEN: usize = HEADER_LEN + MAX_SACK_BLOCKS * SACK_BLOCK_LEN;
/// Largest data header (a PUT chunk).
pub const MAX_DATA_HEADER_LEN: usize = HEADER_LEN + CHUNK_EXT_LEN + PUT_EXT_LEN;
/// Size of the small connectivity probe.
pub const SMALL_PROBE_LEN: usize = HEADER_LEN + PROBE_EXT_LEN;

const CRC_OFFSET: usize = 24;
const AUTH_OFFSET: usize = 28;
/// Bytes the CRC and the tag skip (they hold the two checks).
const CHECKS_END: usize = AUTH_OFFSET + 4;
/// Largest header and extensions the shape fields can describe (valid or not).
const MAX_HEADER_LEN: usize = MAX_ACK_LEN + CHUNK_EXT_LEN + PUT_EXT_LEN + PROBE_EXT_LEN;

/// Which of the two per-peer channels a datagram travels on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Channel {
    /// Short queue, small MTU: ACKs, connectivity probes and tiny fragments.
    Priority = 0,
    /// Everything else, including all retransmissions.
    Data = 1,
}

impl Channel {
    pub const ALL: [Channel; 2] = [Channel::Priority, Channel::Data];

    fn from_u8(v: u8) -> Option<Channel> {
        match v {
            0 => Some(Channel::Priority),
            1 => Some(Channel::Data),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Ack = 1,
    Frag = 2,
    Chunk = 3,
    Ping = 4,
    Pong = 5,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        match v {
            1 => Some(Kind::Ack),
            2 => Some(Kind::Frag),
            3 => Some(Kind::Chunk),
            4 => Some(Kind::Ping),
            5 => Some(Kind::Pong),
            _ => None,
        }
    }

    fn is_data(self) -> bool {
        matches!(self, Kind::Frag | Kind::Chunk)
    }
}

pub mod flags {
    pub const ACK: u8 = 0x01;
    pub const PUT: u8 = 0x02;
    pub const ACK_REQ: u8 = 0x04;
    pub const RNR: u8 = 0x08;
    pub const HDR_CRC: u8 = 0x10;
    pub const ALL: u8 = ACK | PUT | ACK_REQ | RNR | HDR_CRC;
}

/// Cumulative acknowledgement and flow-control grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckInfo {
    pub ack: u16,
    pub credits: u16,
}

/// One SACK block: `len` sequence numbers starting at `start` were received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SackBlock {
    pub start: u16,
    pub len: u16,
}

/// Up to [`MAX_SACK_BLOCKS`] blocks, inline (no allocation on the receive path).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sacks {
    blocks: [SackBlock; MAX_SACK_BLOCKS],
    len: u8,
}

impl Sacks {
    /// Adds a block; returns false when full.
    pub fn push(&mut self, b: SackBlock) -> bool {
        let i = usize::from(self.len);
        if i == MAX_SACK_BLOCKS {
            return false;
        }
        self.blocks[i] = b;
        self.len += 1;
        true
    }

    pub fn as_slice(&self) -> &[SackBlock] {
        &self.blocks[..usize::from(self.len)]
    }

    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkInfo {
    /// Sender-chosen id of the fragment, never zero.
    pub frag_id: u32,
    /// Total bytes of the fragment.
    pub frag_size: u32,
    /// Where this chunk's payload starts within the fragment.
    pub offset: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    pub nonce: u32,
    /// Total datagram length of the PING (echoed in the PONG).
    pub size: u32,
}

/// A datagram, decoded (borrowing its payload) or about to be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    pub kind: Kind,
    pub channel: Channel,
    pub sender: u64,
    pub seq: u16,
    pub tag: u8,
    pub ack: Option<AckInfo>,
    pub ack_req: bool,
    pub rnr: bool,
    pub sacks: Sacks,
    pub chunk: Option<ChunkInfo>,
    pub put_addr: Option<u64>,
    pub probe: Option<Probe>,
    /// Whether the CRC covers the payload too (false: flag HDR_CRC, data types only).
    pub payload_crc: bool,
    /// Payload (FRAG/CHUNK data, PING padding).
    pub payload: &'a [u8],
}

impl<'a> Packet<'a> {
    /// A packet of `kind` with every optional part absent.
    #[must_use]
    pub fn new(kind: Kind, channel: Channel, sender: u64) -> Packet<'a> {
        Packet {
            kind,
            channel,
            sender,
            seq: 0,
            tag: 0,
            ack: None,
            ack_req: false,
            rnr: false,
            sacks: Sacks::default(),
            chunk: None,
            put_addr: None,
            probe: None,
            payload_crc: true,
            payload: &[],
        }
    }

    /// Bytes this packet occupies on the wire.
    #[must_use]
    pub fn encoded_len(&self) -> usize {
        self.header_len() + self.payload.len()
    }

    /// [`Packet::encode_header_keyed`] with [`Key::ZERO`] (tests and tools).
    pub fn encode_header(&self, out: &mut Vec<u8>) {
        self.encode_header_keyed(out, &Key::ZERO);
    }

    /// Bytes of the header and extensions (the datagram without its payload).
    #[must_use]
    pub fn header_len(&self) -> usize {
        header_len(self.kind, self.sacks.len(), self.put_addr.is_some())
    }

    /// Appends everything but the payload to `out`, the checksum covering the payload
    /// too unless `payload_crc` is false, tagged for a receiver whose key is `key`: the
    /// datagram is that header followed by `payload` (sent by gather, so the payload is
    /// never copied). [`Packet::encode_keyed`] is the contiguous form.
    pub fn encode_header_keyed(&self, out: &mut Vec<u8>, key: &Key) {
        let start = out.len();
        out.resize(start + self.header_len(), 0);
        self.write_header(&mut out[start..], key);
    }

    /// [`Packet::encode_header_keyed`] into a [`Head`] (inline for every data header and
    /// ACK: nothing allocated per datagram).
    #[must_use]
    pub fn head_keyed(&self, key: &Key) -> Head {
        let mut head = Head::zeroed(self.header_len());
        self.write_header(&mut head, key);
        head
    }

    /// Writes the header into `head`, exactly [`Packet::header_len`] bytes.
    fn write_header(&self, head: &mut [u8], key: &Key) {
        let mut fl = 0u8;
        if self.ack.is_some() {
            fl |= flags::ACK;
        }
        if self.put_addr.is_some() {
            fl |= flags::PUT;
        }
        if self.ack_req {
            fl |= flags::ACK_REQ;
        }
        if self.rnr {
            fl |= flags::RNR;
        }
        if !self.payload_crc {
            fl |= flags::HDR_CRC;
        }
        let ack = self.ack.unwrap_or(AckInfo { ack: 0, credits: 0 });
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            head[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        put(&[
            MAGIC,
            VERSION,
            self.kind as u8,
            self.channel as u8,
            fl,
            self.tag,
            self.sacks.len,
            0,
        ]);
        put(&self.sender.to_le_bytes());
        put(&self.seq.to_le_bytes());
        put(&ack.ack.to_le_bytes());
        put(&ack.credits.to_le_bytes());
        put(&(self.payload.len() as u16).to_le_bytes());
        // The two checks (CRC_OFFSET..CHECKS_END), filled in last.
        put(&[0; CHECKS_END - CRC_OFFSET]);
        for b in self.sacks.as_slice() {
            put(&b.start.to_le_bytes());
            put(&b.len.to_le_bytes());
        }
        if let Some(c) = self.chunk {
            put(&c.frag_id.to_le_bytes());
            put(&c.frag_size.to_le_bytes());
            put(&c.offset.to_le_bytes());
        }
        if let Some(a) = self.put_addr {
            put(&a.to_le_bytes());
        }
        if let Some(p) = self.probe {
            put(&p.nonce.to_le_bytes());
            put(&p.size.to_le_bytes());
        }
        let crc = checksum(head, if self.payload_crc { self.payload } else { &[] });
        let tag = auth_tag(head, crc, key);
        head[CRC_OFFSET..AUTH_OFFSET].copy_from_slice(&(crc ^ tag).to_le_bytes());
        head[AUTH_OFFSET..CHECKS_END].copy_from_slice(&tag.to_le_bytes());
    }

    /// [`Packet::encode_keyed`] with [`Key::ZERO`] (tests and tools).
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_keyed(out, &Key::ZERO);
    }

    /// Appends the encoding to `out`, tagged for a receiver whose key is `key`. The caller
    /// guarantees the packet is well formed (as every packet the core builds is);
    /// [`decode_keyed`] of the result with the same key returns it again.
    pub fn encode_keyed(&self, out: &mut Vec<u8>, key: &Key) {
        self.encode_header_keyed(out, key);
        out.extend_from_slice(self.payload);
    }

    /// Convenience: encode into a fresh buffer ([`Key::ZERO`]).
    #[must_use]
    pub fn to_vec(&self) -> Vec<u8> {
        self.to_vec_keyed(&Key::ZERO)
    }

    /// Convenience: encode into a fresh buffer, tagged for `key`.
    #[must_use]
    pub fn to_vec_keyed(&self, key: &Key) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.encoded_len());
        self.encode_keyed(&mut v, key);
        v
    }
}

/// Header plus extensions for a packet shape (payload excluded).
#[must_use]
pub fn header_len(kind: Kind, sack_count: usize, put: bool) -> usize {
    let mut n = HEADER_LEN + sack_count * SACK_BLOCK_LEN;
    if kind == Kind::Chunk {
        n += CHUNK_EXT_LEN;
    }
    if put {
        n += PUT_EXT_LEN;
    }
    if matches!(kind, Kind::Ping | Kind::Pong) {
        n += PROBE_EXT_LEN;
    }
    n
}

/// The CRC of a header (and extensions) `head` followed by `payload`, the two check
/// fields left out. The `crc32c` field holds it XORed with the tag, so that a tag
/// damaged in flight is a CRC error like any other damage, not a foreign datagram.
fn checksum(head: &[u8], payload: &[u8]) -> u32 {
    // One update over the header gathered without its checks, rather than one per part:
    // each update has a fixed cost that a 32-byte header would pay twice.
    let mut m = [0u8; MAX_HEADER_LEN];
    let rest = &head[CHECKS_END..];
    let gathered = rest.len().min(MAX_HEADER_LEN - CRC_OFFSET);
    m[..CRC_OFFSET].copy_from_slice(&head[..CRC_OFFSET]);
    m[CRC_OFFSET..CRC_OFFSET + gathered].copy_from_slice(&rest[..gathered]);
    let mut c = Crc32c::new();
    c.update(&m[..CRC_OFFSET + gathered]);
    for part in [&rest[gathered..], payload] {
        if !part.is_empty() {
            c.update(part);
        }
    }
    c.finish()
}

/// The `auth` tag of a header (and extensions) `head` whose [`checksum`] is `crc`, for a
/// receiver keyed `key`: over the header with `crc` in its CRC field and the tag left
/// out (the CRC binds the payload it covers).
fn auth_tag(head: &[u8], crc: u32, key: &Key) -> u32 {
    let mut m = [0u8; MAX_HEADER_LEN];
    let n = head.len().min(MAX_HEADER_LEN);
    m[..CRC_OFFSET].copy_from_slice(&head[..CRC_OFFSET]);
    m[CRC_OFFSET..AUTH_OFFSET].copy_from_slice(&crc.to_le_bytes());
    m[AUTH_OFFSET..n - 4].copy_from_slice(&head[CHECKS_END..n]);
    key.tag(&m[..n - 4])
}

/// Why a datagram was rejected. Each maps to a counter in [`crate::Stats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than its header, extensions and payload say.
    Truncated,
    /// Not our protocol.
    BadMagic(u8),
    /// Our protocol, another version.
    BadVersion(u8),
    /// CRC-32C mismatch: corrupted in flight.
    BadCrc,
    /// Well formed with a valid CRC, but its `auth` tag is not the one the receiver's
    /// key gives: not made by a member of the job (or made for another receiver).
    Foreign,
    /// A field holds a value the format forbids (the string names the rule).
    Malformed(&'static str),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Truncated => write!(f, "truncated datagram"),
            DecodeError::BadMagic(m) => write!(f, "bad magic byte {m:#04x}"),
            DecodeError::BadVersion(v) => {
                write!(f, "unsupported wire version {v} (we speak {VERSION})")
            }
            DecodeError::BadCrc => write!(f, "CRC-32C mismatch"),
            DecodeError::Foreign => write!(f, "not tagged with the receiver's key"),
            DecodeError::Malformed(why) => write!(f, "malformed datagram: {why}"),
        }
    }
}

impl std::error::Error for DecodeError {}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

/// [`decode_keyed`] with [`Key::ZERO`] (tests and tools).
pub fn decode(b: &[u8]) -> Result<Packet<'_>, DecodeError> {
    decode_keyed(b, &Key::ZERO)
}

/// Parses and fully validates one datagram sent to the holder of `key`. Never panics.
///
/// Checks in order: length of the fixed header, magic, version, the shape fields needed to
/// know the full length (type, flags, SACK count), exact length, CRC, the `auth` tag, then
/// the semantic rules of each type. Validation that needs connection state (window, MTU,
/// configured limits) is done by the connection.
pub fn decode_keyed<'a>(b: &'a [u8], key: &Key) -> Result<Packet<'a>, DecodeError> {
    decode_split(b, Rest::Tail, key)
}

/// [`decode_keyed`] of a datagram received in two parts: its header and extensions, and
/// its payload (received elsewhere, e.g. straight into its destination).
pub fn decode_parts<'a>(
    head: &'a [u8],
    payload: &'a [u8],
    key: &Key,
) -> Result<Packet<'a>, DecodeError> {
    decode_split(head, Rest::Bytes(payload), key)
}

/// The header of a PUT segment with flag HDR_CRC at the start of a datagram of `len`
/// bytes (`prefix`: its first bytes, e.g. from a peek), validated, with the header's
/// length; its payload is not read (the packet's is empty). `None` for anything else,
/// or when `prefix` does not hold the whole header. Only a header-only CRC can be
/// checked before the payload is read.
#[must_use]
pub fn peek_put<'a>(prefix: &'a [u8], len: usize, key: &Key) -> Option<(usize, Packet<'a>)> {
    let p = decode_split(prefix, Rest::Unread(len), key).ok()?;
    (p.put_addr.is_some() && !p.payload_crc).then(|| (header_len(p.kind, p.sacks.len(), true), p))
}

/// Where the payload is, relative to the bytes `decode_split` reads the header from.
enum Rest<'a> {
    /// Right behind the header, in the same bytes (the whole datagram).
    Tail,
    /// Elsewhere: the bytes are exactly the header and extensions.
    Bytes(&'a [u8]),
    /// Not read yet: the bytes start with the header of a datagram of this length.
    Unread(usize),
}

fn decode_split<'a>(b: &'a [u8], rest: Rest<'a>, key: &Key) -> Result<Packet<'a>, DecodeError> {
    if b.len() < HEADER_LEN {
        return Err(DecodeError::Truncated);
    }
    if b[0] != MAGIC {
        return Err(DecodeError::BadMagic(b[0]));
    }
    if b[1] != VERSION {
        return Err(DecodeError::BadVersion(b[1]));
    }
    let kind = Kind::from_u8(b[2]).ok_or(DecodeError::Malformed("unknown type"))?;
    let channel = Channel::from_u8(b[3]).ok_or(DecodeError::Malformed("unknown channel"))?;
    let fl = b[4];
    if fl & !flags::ALL != 0 {
        return Err(DecodeError::Malformed("unknown flag bits"));
    }
    let tag = b[5];
    let sack_count = usize::from(b[6]);
    if sack_count > MAX_SACK_BLOCKS {
        return Err(DecodeError::Malformed("too many SACK blocks"));
    }
    if b[7] != 0 {
        return Err(DecodeError::Malformed("reserved byte not zero"));
    }
    let put = fl & flags::PUT != 0;
    let payload_len = usize::from(u16_at(b, 22));
    let hlen = header_len(kind, sack_count, put);
    let total = hlen + payload_len;
    if b.len() < hlen {
        return Err(DecodeError::Truncated);
    }
    // From here on `b` is the header and extensions alone.
    let (b, payload, len) = match rest {
        Rest::Tail => (&b[..hlen], Some(&b[hlen..]), b.len()),
        Rest::Bytes(_) if b.len() > hlen => {
            return Err(DecodeError::Malformed("header part longer than the header"));
        }
        Rest::Bytes(p) => (b, Some(p), hlen + p.len()),
        Rest::Unread(len) => (&b[..hlen], None, len),
    };
    if len < total {
        return Err(DecodeError::Truncated);
    }
    if len > total {
        return Err(DecodeError::Malformed("trailing bytes after payload"));
    }
    let payload_crc = fl & flags::HDR_CRC == 0;
    if !payload_crc && !kind.is_data() {
        return Err(DecodeError::Malformed("HDR_CRC on a non-data type"));
    }
    let payload: &[u8] = match payload {
        Some(p) => p,
        None if payload_crc => {
            return Err(DecodeError::Malformed("payload needed to check the CRC"));
        }
        None => &[],
    };
    let auth = u32_at(b, AUTH_OFFSET);
    let crc = checksum(b, if payload_crc { payload } else { &[] });
    if u32_at(b, CRC_OFFSET) ^ auth != crc {
        return Err(DecodeError::BadCrc);
    }
    // Nothing below this line may run for a datagram a job member did not make.
    if auth != auth_tag(b, crc, key) {
        return Err(DecodeError::Foreign);
    }

    let sender = u64_at(b, 8);
    let seq = u16_at(b, 16);
    let ack_field = AckInfo {
        ack: u16_at(b, 18),
        credits: u16_at(b, 20),
    };
    let has_ack = fl & flags::ACK != 0;
    let ack_req = fl & flags::ACK_REQ != 0;
    let rnr = fl & flags::RNR != 0;
    if !has_ack && (ack_field.ack != 0 || ack_field.credits != 0) {
        return Err(DecodeError::Malformed("ack fields set without ACK flag"));
    }
    if rnr && !has_ack {
        return Err(DecodeError::Malformed("RNR without ACK"));
    }
    if put && !kind.is_data() {
        return Err(DecodeError::Malformed("PUT flag on a non-data type"));
    }
    if ack_req && kind != Kind::Ack {
        return Err(DecodeError::Malformed("ACK_REQ on a non-ACK type"));
    }
    if !kind.is_data() && seq != 0 {
        return Err(DecodeError::Malformed(
            "sequence number on an unsequenced type",
        ));
    }
    if (!kind.is_data() || put) && tag != 0 {
        return Err(DecodeError::Malformed("tag on a type without one"));
    }
    if sack_count > 0 && kind != Kind::Ack {
        return Err(DecodeError::Malformed("SACK blocks on a non-ACK type"));
    }

    let mut o = HEADER_LEN;
    let mut sacks = Sacks::default();
    for _ in 0..sack_count {
        let blk = SackBlock {
            start: u16_at(b, o),
            len: u16_at(b, o + 2),
        };
        if blk.len == 0 || blk.len > 0x8000 {
            return Err(DecodeError::Malformed("SACK block length out of range"));
        }
        sacks.push(blk);
        o += SACK_BLOCK_LEN;
    }
    let mut chunk = None;
    if kind == Kind::Chunk {
        let c = ChunkInfo {
            frag_id: u32_at(b, o),
            frag_size: u32_at(b, o + 4),
            offset: u32_at(b, o + 8),
        };
        o += CHUNK_EXT_LEN;
        if c.frag_id == 0 {
            return Err(DecodeError::Malformed("chunk with fragment id 0"));
        }
        if payload_len == 0 {
            return Err(DecodeError::Malformed("empty chunk"));
        }
        if u64::from(c.offset) + payload_len as u64 > u64::from(c.frag_size) {
            return Err(DecodeError::Malformed("chunk extends past its fragment"));
        }
        chunk = Some(c);
    }
    let mut put_addr = None;
    if put {
        put_addr = Some(u64_at(b, o));
        o += PUT_EXT_LEN;
    }
    let mut probe = None;
    if matches!(kind, Kind::Ping | Kind::Pong) {
        let p = Probe {
            nonce: u32_at(b, o),
            size: u32_at(b, o + 4),
        };
        debug_assert_eq!(
            o + PROBE_EXT_LEN,
            hlen,
            "the probe extension ends the header"
        );
        if has_ack {
            return Err(DecodeError::Malformed("ACK flag on a probe"));
        }
        if kind == Kind::Ping && p.size as usize != total {
            return Err(DecodeError::Malformed(
                "ping size does not match its length",
            ));
        }
        if kind == Kind::Pong && (payload_len != 0 || (p.size as usize) < SMALL_PROBE_LEN) {
            return Err(DecodeError::Malformed("bad pong"));
        }
        probe = Some(p);
    }
    if kind == Kind::Ack && (payload_len != 0 || !has_ack) {
        return Err(DecodeError::Malformed(
            "ACK must be header only and carry the ACK flag",
        ));
    }
    Ok(Packet {
        kind,
        channel,
        sender,
        seq,
        tag,
        ack: has_ack.then_some(ack_field),
        ack_req,
        rnr,
        sacks,
        chunk,
        put_addr,
        probe,
        payload_crc,
        payload,
    })
}

#[cfg(test)]
mod tests;
