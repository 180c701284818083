use super::*;

fn samples() -> Vec<Vec<u8>> {
    let payload: Vec<u8> = (0..200u8).collect();
    let mut out = Vec::new();

    let mut ack = Packet::new(Kind::Ack, Channel::Priority, 0x0102_0304_0506_0708);
    ack.ack = Some(AckInfo {
        ack: 65535,
        credits: 300,
    });
    ack.rnr = true;
    ack.ack_req = true;
    ack.sacks.push(SackBlock { start: 2, len: 3 });
    ack.sacks.push(SackBlock {
        start: 9,
        len: 0x8000,
    });
    out.push(ack.to_vec());

    let mut frag = Packet::new(Kind::Frag, Channel::Data, 7);
    frag.seq = 65534;
    frag.tag = 0x41;
    frag.ack = Some(AckInfo { ack: 1, credits: 2 });
    frag.payload = &payload;
    out.push(frag.to_vec());

    let mut chunk = Packet::new(Kind::Chunk, Channel::Data, 7);
    chunk.seq = 3;
    chunk.put_addr = Some(0xdead_beef_0000_1000);
    chunk.chunk = Some(ChunkInfo {
        frag_id: 9,
        frag_size: 1000,
        offset: 800,
    });
    chunk.payload = &payload;
    out.push(chunk.to_vec());

    let pad = vec![0u8; 100];
    let mut ping = Packet::new(Kind::Ping, Channel::Data, 7);
    ping.probe = Some(Probe {
        nonce: 5,
        size: (SMALL_PROBE_LEN + pad.len()) as u32,
    });
    ping.payload = &pad;
    out.push(ping.to_vec());

    let mut pong = Packet::new(Kind::Pong, Channel::Priority, 7);
    pong.probe = Some(Probe {
        nonce: 5,
        size: 136,
    });
    out.push(pong.to_vec());

    let mut empty = Packet::new(Kind::Frag, Channel::Priority, 0);
    empty.seq = 1;
    out.push(empty.to_vec());

    let mut header_only = chunk;
    header_only.payload_crc = false;
    out.push(header_only.to_vec());
    out
}

#[test]
fn hdr_crc_covers_the_header_only_and_only_on_data() {
    let payload = vec![0x5au8; 300];
    let mut p = Packet::new(Kind::Frag, Channel::Data, 7);
    p.seq = 9;
    p.tag = 3;
    p.payload = &payload;
    p.payload_crc = false;
    let b = p.to_vec();
    assert_eq!(b[4] & flags::HDR_CRC, flags::HDR_CRC);
    assert_eq!(decode(&b).unwrap(), p);
    // A payload byte changed goes unnoticed: that is the flag's meaning...
    let mut v = b.clone();
    *v.last_mut().unwrap() ^= 1;
    let got = decode(&v).unwrap();
    assert!(!got.payload_crc && got.payload != p.payload);
    // ...while the header (here the tag) is still covered.
    let mut v = b.clone();
    v[5] ^= 1;
    assert_eq!(decode(&v), Err(DecodeError::BadCrc));
    // Only data types may carry it.
    let mut ack = Packet::new(Kind::Ack, Channel::Priority, 7);
    ack.ack = Some(AckInfo { ack: 1, credits: 1 });
    let a = edited(&ack.to_vec(), |b| b[4] |= flags::HDR_CRC);
    assert!(malformed(decode(&a)));
}

#[test]
fn round_trip_every_kind() {
    for bytes in samples() {
        let p = decode(&bytes).expect("valid sample");
        assert_eq!(p.encoded_len(), bytes.len());
        assert_eq!(p.to_vec(), bytes, "re-encoding is byte-identical");
    }
}

#[test]
fn layout_is_little_endian_at_documented_offsets() {
    let mut p = Packet::new(Kind::Frag, Channel::Data, 0x1122_3344_5566_7788);
    p.seq = 0xA1B2;
    p.ack = Some(AckInfo {
        ack: 0xC3D4,
        credits: 0xE5F6,
    });
    p.tag = 0x99;
    p.payload = b"xyz";
    let b = p.to_vec();
    assert_eq!(&b[..8], &[MAGIC, VERSION, 2, 1, flags::ACK, 0x99, 0, 0]);
    assert_eq!(&b[8..16], &0x1122_3344_5566_7788u64.to_le_bytes());
    assert_eq!(&b[16..24], &[0xB2, 0xA1, 0xD4, 0xC3, 0xF6, 0xE5, 3, 0]);
    assert_eq!(&b[32..], b"xyz");
    let field = u32::from_le_bytes([b[24], b[25], b[26], b[27]]);
    let tag = u32::from_le_bytes([b[28], b[29], b[30], b[31]]);
    let mut c = Crc32c::new();
    c.update(&b[..24]);
    c.update(&b[32..]);
    let crc = c.finish();
    assert_eq!(
        field,
        crc ^ tag,
        "the CRC field holds the CRC XORed with the tag"
    );
    let mut m = b[..24].to_vec();
    m.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(tag, Key::ZERO.tag(&m), "the tag covers the header and CRC");
}

/// Re-seals a hand-edited datagram with a valid CRC only: its tag stays as it was.
fn reseal_crc(b: &mut [u8]) {
    let tag = u32_at(b, AUTH_OFFSET);
    let crc = checksum(b, &[]) ^ tag;
    b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Re-seal a hand-edited datagram so that neither the CRC nor the tag (for
/// [`Key::ZERO`]) masks the rule under test.
fn reseal(b: &mut [u8]) {
    if let Some(kind) = Kind::from_u8(b[2]) {
        let hlen = header_len(kind, usize::from(b[6]), b[4] & flags::PUT != 0);
        if hlen <= b.len() {
            let tag = auth_tag(&b[..hlen], checksum(b, &[]), &Key::ZERO);
            b[AUTH_OFFSET..CHECKS_END].copy_from_slice(&tag.to_le_bytes());
        }
    }
    reseal_crc(b);
}

fn edited(base: &[u8], f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut b = base.to_vec();
    f(&mut b);
    reseal(&mut b);
    b
}

fn malformed(r: Result<Packet<'_>, DecodeError>) -> bool {
    matches!(r, Err(DecodeError::Malformed(_)))
}

#[test]
fn every_rejection_path() {
    let s = samples();
    let (ack, frag, chunk, ping, pong) = (&s[0], &s[1], &s[2], &s[3], &s[4]);

    assert_eq!(decode(&[]), Err(DecodeError::Truncated));
    assert_eq!(decode(&frag[..HEADER_LEN - 1]), Err(DecodeError::Truncated));
    assert_eq!(decode(&frag[..frag.len() - 1]), Err(DecodeError::Truncated));
    assert_eq!(decode(&ack[..HEADER_LEN + 2]), Err(DecodeError::Truncated));
    assert_eq!(
        decode(&edited(frag, |b| b[0] = 0x45)),
        Err(DecodeError::BadMagic(0x45))
    );
    // Version 1 (before the auth tag) is refused as such.
    assert_eq!(
        decode(&edited(frag, |b| b[1] = 1)),
        Err(DecodeError::BadVersion(1))
    );
    assert!(malformed(decode(&edited(frag, |b| b[2] = 0))));
    assert!(malformed(decode(&edited(frag, |b| b[2] = 6))));
    assert!(malformed(decode(&edited(frag, |b| b[3] = 2))));
    assert!(malformed(decode(&edited(frag, |b| b[4] |= 0x20))));
    assert!(malformed(decode(&edited(ack, |b| b[6] = 9))));
    assert!(malformed(decode(&edited(frag, |b| b[7] = 1))));
    assert!(malformed(decode(&edited(frag, |b| b.push(0)))));
    // Corruption anywhere, header or payload, is caught by the CRC.
    for i in 0..frag.len() {
        if i == 0 || i == 1 {
            continue; // magic/version are checked first, by design
        }
        let mut b = frag.clone();
        b[i] ^= 0x20;
        assert!(decode(&b).is_err(), "flip at {i} accepted");
    }
    let mut b = frag.clone();
    b[40] ^= 1;
    assert_eq!(decode(&b), Err(DecodeError::BadCrc));

    // Flag rules.
    assert!(malformed(decode(&edited(frag, |b| b[4] = 0)))); // ack fields without ACK flag
    assert!(malformed(decode(&edited(frag, |b| b[4] = flags::RNR))));
    assert!(malformed(decode(&edited(frag, |b| b[4] |= flags::ACK_REQ))));
    assert!(malformed(decode(&edited(ack, |b| b[4] &= !flags::ACK))));
    // PUT on an ACK: length grows by the extension, so append it to stay length-correct.
    assert!(malformed(decode(&edited(ack, |b| {
        b[4] |= flags::PUT;
        b.extend_from_slice(&[0; PUT_EXT_LEN]);
    }))));
    // Unsequenced types must have seq 0 and no tag.
    assert!(malformed(decode(&edited(ack, |b| b[16] = 1))));
    assert!(malformed(decode(&edited(pong, |b| b[5] = 1))));
    // A PUT has no AM tag.
    assert!(malformed(decode(&edited(chunk, |b| b[5] = 3))));
    // SACK block rules.
    assert!(malformed(decode(&edited(ack, |b| {
        b[HEADER_LEN + 2] = 0;
        b[HEADER_LEN + 3] = 0;
    }))));
    assert!(malformed(
        decode(&edited(ack, |b| b[HEADER_LEN + 7] = 0x90))
    ));
    // SACK on a data type.
    assert!(malformed(decode(&edited(frag, |b| {
        b[6] = 1;
        b.splice(HEADER_LEN..HEADER_LEN, [1, 0, 1, 0]);
    }))));
    // Chunk rules.
    let ext = HEADER_LEN;
    assert!(malformed(decode(
        &edited(chunk, |b| b[ext..ext + 4].fill(0))
    )));
    assert!(malformed(decode(&edited(chunk, |b| b[ext + 4..ext + 8]
        .copy_from_slice(&900u32.to_le_bytes())))));
    assert!(malformed(decode(&edited(chunk, |b| b[ext + 8..ext + 12]
        .copy_from_slice(&u32::MAX.to_le_bytes())))));
    let mut empty_chunk = Packet::new(Kind::Chunk, Channel::Data, 1);
    empty_chunk.chunk = Some(ChunkInfo {
        frag_id: 1,
        frag_size: 10,
        offset: 0,
    });
    assert!(malformed(decode(&empty_chunk.to_vec())));
    // Probe rules.
    assert!(malformed(decode(&edited(ping, |b| b[HEADER_LEN + 4] ^= 1))));
    assert!(malformed(decode(&edited(pong, |b| b
        [HEADER_LEN + 4..HEADER_LEN + 8]
        .fill(0)))));
    assert!(malformed(decode(&edited(pong, |b| {
        b[4] = flags::ACK;
    }))));
}

#[test]
fn header_lengths() {
    assert_eq!(MAX_ACK_LEN, 64);
    assert_eq!(MAX_DATA_HEADER_LEN, 52);
    assert_eq!(header_len(Kind::Frag, 0, false), 32);
    assert_eq!(header_len(Kind::Frag, 0, true), 40);
    assert_eq!(header_len(Kind::Ping, 0, false), SMALL_PROBE_LEN);
}

#[test]
fn header_then_payload_is_the_contiguous_encoding() {
    let payload: Vec<u8> = (0..300u32).map(|i| (i * 13) as u8).collect();
    let mut chunk = Packet::new(Kind::Chunk, Channel::Data, 7);
    chunk.seq = 3;
    chunk.ack = Some(AckInfo { ack: 4, credits: 5 });
    chunk.chunk = Some(ChunkInfo {
        frag_id: 9,
        frag_size: 1000,
        offset: 100,
    });
    chunk.payload = &payload;
    let mut gathered = Vec::new();
    chunk.encode_header(&mut gathered);
    assert_eq!(gathered.len(), header_len(Kind::Chunk, 0, false));
    gathered.extend_from_slice(&payload);
    assert_eq!(gathered, chunk.to_vec());
    assert_eq!(decode(&gathered), Ok(chunk));
}

fn key(n: u8) -> Key {
    Key::from_bytes([n; Key::LEN])
}

#[test]
fn only_the_receivers_key_is_accepted() {
    let (ours, theirs) = (key(1), key(2));
    for sample in samples() {
        let p = decode(&sample).expect("valid sample");
        let mine = p.to_vec_keyed(&ours);
        assert_eq!(decode_keyed(&mine, &ours), Ok(p), "right key");
        assert_eq!(decode_keyed(&mine, &theirs), Err(DecodeError::Foreign));
        assert_eq!(decode_keyed(&sample, &ours), Err(DecodeError::Foreign));
        assert_eq!(decode(&mine), Err(DecodeError::Foreign), "nor the zero key");
    }
}

#[test]
fn the_tag_covers_every_header_byte() {
    // An outsider who edits a member's datagram and fixes its CRC (valid format, valid
    // CRC) still lacks the tag: another sender id, sequence number, ACK, PUT address...
    let ours = key(7);
    let s = samples();
    for sample in [&s[0], &s[1], &s[2], &s[3], &s[4]] {
        let p = decode(sample).expect("valid sample");
        let b = p.to_vec_keyed(&ours);
        let hlen = header_len(p.kind, p.sacks.len(), p.put_addr.is_some());
        // The fields that do not change the datagram's shape: sender id, seq, ack,
        // credits and every extension (SACK blocks, chunk, PUT address, probe).
        for i in (8..22).chain(CHECKS_END..hlen) {
            let mut e = b.clone();
            e[i] ^= 0x01;
            reseal_crc(&mut e);
            let r = decode_keyed(&e, &ours);
            assert!(
                r == Err(DecodeError::Foreign),
                "byte {i} of a {:?} edited: {r:?}",
                p.kind
            );
        }
    }
}

#[test]
fn guessed_tags_are_refused() {
    // A blind forger must guess 32 bits: none of 65536 tries on one datagram passes.
    let ours = key(9);
    let mut p = Packet::new(Kind::Frag, Channel::Data, 7);
    p.seq = 5;
    p.ack = Some(AckInfo { ack: 1, credits: 2 });
    p.payload = b"forged";
    let mut b = p.to_vec();
    let crc = checksum(&b[..HEADER_LEN], p.payload);
    let right = auth_tag(&b[..HEADER_LEN], crc, &ours);
    let mut rng = crate::fault::Rng::new(42);
    let seal = |b: &mut Vec<u8>, tag: u32| {
        b[CRC_OFFSET..AUTH_OFFSET].copy_from_slice(&(crc ^ tag).to_le_bytes());
        b[AUTH_OFFSET..CHECKS_END].copy_from_slice(&tag.to_le_bytes());
    };
    for _ in 0..65536 {
        let guess = rng.next_u64() as u32;
        if guess == right {
            continue;
        }
        seal(&mut b, guess); // the forger knows the format: the CRC is right
        assert_eq!(decode_keyed(&b, &ours), Err(DecodeError::Foreign));
    }
    seal(&mut b, right);
    assert!(decode_keyed(&b, &ours).is_ok());
}

#[test]
fn a_damaged_tag_is_a_crc_error_not_a_foreign_datagram() {
    let ours = key(3);
    for sample in samples() {
        let p = decode(&sample).expect("valid sample");
        let b = p.to_vec_keyed(&ours);
        for i in CRC_OFFSET..CHECKS_END {
            for bit in 0..8 {
                let mut e = b.clone();
                e[i] ^= 1 << bit;
                assert_eq!(
                    decode_keyed(&e, &ours),
                    Err(DecodeError::BadCrc),
                    "byte {i}"
                );
            }
        }
    }
}
