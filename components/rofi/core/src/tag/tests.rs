//! Exhaustive tests of every layout: boundary values of every field, ANY_SOURCE/ANY_TAG,
//! synchronous or not, acknowledgements, and the provider's reserved bits.

use super::*;
use seeded_rng::Rng;

const FMT_AAAA: u64 = 0xAAAA_AAAA_AAAA_AAAA;
const FMT_5555: u64 = 0x5555_5555_5555_5555;
const FMT_48BIT: u64 = 0x0000_FFFF_FFFF_FFFF;

/// Every layout the tests exercise: each kind with no, one and (where it fits) 16 reserved bits.
fn layouts() -> Vec<TagLayout> {
    let mut v = Vec::new();
    for kind in [LayoutKind::Tag1, LayoutKind::Tag2, LayoutKind::Full] {
        for fmt in [FMT_AAAA, FMT_5555, FMT_48BIT, u64::MAX] {
            if let Ok(l) = TagLayout::with_kind(kind, fmt) {
                v.push(l);
            }
        }
    }
    assert_eq!(
        v.len(),
        11,
        "tag_1 with 16 reserved bits must be the only rejection"
    );
    v
}

#[derive(Clone, Copy, Debug)]
struct Send {
    cid: u32,
    src: u32,
    tag: i32,
    sync: bool,
    bits: u64,
}

#[derive(Clone, Copy, Debug)]
struct Recv {
    cid: u32,
    src: Option<u32>,
    tag: Option<i32>,
    m: u64,
    ig: u64,
}

fn cids(l: &TagLayout) -> Vec<u32> {
    vec![0, 1, l.max_contextid()]
}

fn sources(l: &TagLayout) -> Vec<u32> {
    match l.max_source() {
        Some(max) => vec![0, 1, max],
        None => vec![0, 1, 262_144, i32::MAX as u32],
    }
}

fn tags(l: &TagLayout) -> Vec<i32> {
    vec![0, 1, l.max_tag(), -1, -27, l.min_tag(), l.min_tag() + 1]
}

fn all_sends(l: &TagLayout) -> Vec<Send> {
    let mut v = Vec::new();
    for cid in cids(l) {
        for src in sources(l) {
            for tag in tags(l) {
                for sync in [false, true] {
                    let bits = l.send_bits(cid, src, tag, sync).unwrap();
                    v.push(Send {
                        cid,
                        src,
                        tag,
                        sync,
                        bits,
                    });
                }
            }
        }
    }
    v
}

fn all_recvs(l: &TagLayout) -> Vec<Recv> {
    let mut v = Vec::new();
    for cid in cids(l) {
        let srcs = std::iter::once(None).chain(sources(l).into_iter().map(Some));
        for src in srcs {
            let tgs = std::iter::once(None).chain(tags(l).into_iter().map(Some));
            for tag in tgs {
                let (m, ig) = l.recv_match(cid, src, tag).unwrap();
                v.push(Recv {
                    cid,
                    src,
                    tag,
                    m,
                    ig,
                });
            }
        }
    }
    v
}

/// MPI semantics: what a receive should take.
fn should_match(r: &Recv, s: &Send) -> bool {
    r.cid == s.cid
        && r.src.is_none_or(|x| x == s.src)
        && match r.tag {
            None => s.tag >= 0,
            Some(t) => t == s.tag,
        }
}

/// What the provider does: tag match, plus the directed-receive address in the full layout.
fn provider_matches(l: &TagLayout, r: &Recv, s: &Send, bits: u64) -> bool {
    let addr_ok = !l.source_in_cq_data() || r.src.is_none_or(|x| x == s.src);
    addr_ok && matches(r.m, r.ig, bits)
}

#[test]
fn every_receive_matches_exactly_the_sends_it_should() {
    for l in layouts() {
        let sends = all_sends(&l);
        let recvs = all_recvs(&l);
        for r in &recvs {
            for s in &sends {
                assert_eq!(
                    provider_matches(&l, r, s, s.bits),
                    should_match(r, s),
                    "{l:?}\n recv {r:?}\n send {s:?}"
                );
            }
        }
    }
}

#[test]
fn any_tag_never_matches_a_negative_tag() {
    for l in layouts() {
        for s in all_sends(&l).iter().filter(|s| s.tag < 0) {
            for src in [None, Some(s.src)] {
                let (m, ig) = l.recv_match(s.cid, src, None).unwrap();
                assert!(!matches(m, ig, s.bits), "{l:?} {s:?}");
            }
        }
    }
}

#[test]
fn receives_never_match_acks_and_ack_receives_match_only_their_ack() {
    for l in layouts() {
        let sends = all_sends(&l);
        let recvs = all_recvs(&l);
        for s in &sends {
            let ack = l.ack_bits(s.bits);
            assert!(l.is_sync_ack(ack) && !l.is_sync_send(ack));
            assert_eq!(l.tag_of(ack), s.tag);
            assert_eq!(l.cid_of(ack), s.cid);
            for r in &recvs {
                assert!(
                    !matches(r.m, r.ig, ack),
                    "{l:?} recv {r:?} took ack of {s:?}"
                );
            }
            // The sender's exact-match ACK receive, directed at the receiver in full mode.
            let ack_m = l.ack_match_bits(s.bits);
            for t in &sends {
                let same_peer = !l.source_in_cq_data() || s.src == t.src;
                let hit = same_peer && matches(ack_m, 0, l.ack_bits(t.bits));
                let expect = s.cid == t.cid && s.src == t.src && s.tag == t.tag;
                assert_eq!(hit, expect, "{l:?} ack recv of {s:?} vs ack of {t:?}");
                assert!(!matches(ack_m, 0, t.bits), "ACK receive took data {t:?}");
            }
        }
    }
}

#[test]
fn different_cids_never_cross_match() {
    for l in layouts() {
        let sends = all_sends(&l);
        for r in all_recvs(&l) {
            for s in sends.iter().filter(|s| s.cid != r.cid) {
                assert!(!matches(r.m, r.ig, s.bits));
                assert!(!matches(r.m, r.ig, l.ack_bits(s.bits)));
            }
        }
    }
}

#[test]
fn decoders_invert_the_encoder() {
    for l in layouts() {
        for s in all_sends(&l) {
            assert_eq!(l.tag_of(s.bits), s.tag, "{l:?} {s:?}");
            assert_eq!(l.cid_of(s.bits), s.cid);
            assert_eq!(l.is_sync_send(s.bits), s.sync);
            assert!(!l.is_sync_ack(s.bits));
            match l.max_source() {
                Some(_) => {
                    assert_eq!(l.source_of(s.bits), Some(s.src));
                    assert_eq!(l.source_of_completion(s.bits, 0xdead), s.src);
                    assert_eq!(l.cq_data(s.src), None);
                }
                None => {
                    assert_eq!(l.source_of(s.bits), None);
                    let data = l.cq_data(s.src).unwrap();
                    assert_eq!(l.source_of_completion(s.bits, data), s.src);
                }
            }
            // Reserved high bits are never set.
            let reserved = !(u64::MAX >> (64 - l.cid_bits() - l.cid_mask().trailing_zeros()));
            assert_eq!(s.bits & reserved, 0, "{l:?} {s:?}");
        }
    }
}

#[test]
fn tag2_sign_extends_where_c_does_not() {
    let l = TagLayout::with_kind(LayoutKind::Tag2, FMT_AAAA).unwrap();
    let bits = l.send_bits(3, 5, -27, false).unwrap();
    assert_eq!(bits & l.tag_mask(), 0xFFFE5);
    assert_eq!(l.tag_of(bits), -27);
    assert_eq!(
        l.tag_of(l.send_bits(3, 5, l.min_tag(), false).unwrap()),
        -524_288
    );
}

#[test]
fn out_of_range_values_are_rejected_not_truncated() {
    for l in layouts() {
        let bad_cids = [l.max_contextid() + 1, u32::MAX];
        for cid in bad_cids {
            let e = l.send_bits(cid, 0, 0, false).unwrap_err();
            assert!(matches!(e, TagError::CidOutOfRange { .. }), "{e}");
            assert!(l.recv_match(cid, None, None).is_err());
        }
        if let Some(max) = l.max_source() {
            assert_eq!(max, (1 << 18) - 1);
            for src in [max + 1, u32::MAX] {
                let e = l.send_bits(0, src, 0, true).unwrap_err();
                assert!(matches!(e, TagError::SourceOutOfRange { .. }), "{e}");
                assert!(l.recv_match(0, Some(src), None).is_err());
            }
        } else {
            assert!(l.send_bits(0, u32::MAX, 0, false).is_ok());
        }
        match l.kind() {
            LayoutKind::Tag2 => {
                assert_eq!((l.min_tag(), l.max_tag()), (-(1 << 19), (1 << 19) - 1));
                for tag in [l.max_tag() + 1, l.min_tag() - 1, i32::MIN, i32::MAX] {
                    let e = l.send_bits(0, 0, tag, false).unwrap_err();
                    assert!(matches!(e, TagError::TagOutOfRange { .. }), "{e}");
                    assert!(l.recv_match(0, None, Some(tag)).is_err());
                    assert!(e.to_string().contains("ofi_tag_2"));
                }
            }
            _ => {
                assert_eq!((l.min_tag(), l.max_tag()), (i32::MIN, i32::MAX));
                let b = l.send_bits(0, 0, i32::MIN, false).unwrap();
                assert_eq!(l.tag_of(b), i32::MIN);
            }
        }
    }
}

#[test]
fn mem_tag_format_reduces_only_the_cid_range() {
    let full = |fmt| TagLayout::with_kind(LayoutKind::Full, fmt);
    let t1 = |fmt| TagLayout::with_kind(LayoutKind::Tag1, fmt);
    let t2 = |fmt| TagLayout::with_kind(LayoutKind::Tag2, fmt);
    assert_eq!(full(FMT_AAAA).unwrap().cid_bits(), 30);
    assert_eq!(full(FMT_5555).unwrap().cid_bits(), 29);
    assert_eq!(full(FMT_48BIT).unwrap().cid_bits(), 14);
    assert_eq!(t1(FMT_AAAA).unwrap().max_contextid(), 4095);
    assert_eq!(t1(FMT_5555).unwrap().max_contextid(), 2047);
    assert_eq!(t2(FMT_48BIT).unwrap().max_contextid(), 255);
    assert_eq!(t2(FMT_AAAA).unwrap().max_contextid(), (1 << 24) - 1);
    // Positions do not move: the same CID packs identically with and without reservation.
    let a = t1(FMT_AAAA).unwrap().send_bits(7, 9, 11, true).unwrap();
    let b = t1(FMT_5555).unwrap().send_bits(7, 9, 11, true).unwrap();
    assert_eq!(a, b);
    // Exactly MIN_CID_BITS left is fine; one fewer is an error naming the provider format.
    assert_eq!(t1(u64::MAX >> 4).unwrap().cid_bits(), 8);
    for (kind, fmt) in [
        (LayoutKind::Tag1, FMT_48BIT),
        (LayoutKind::Tag1, u64::MAX >> 5),
        (LayoutKind::Tag2, u64::MAX >> 17),
        (LayoutKind::Full, u64::MAX >> 23),
        (LayoutKind::Full, 0),
    ] {
        let e = TagLayout::with_kind(kind, fmt).unwrap_err();
        assert!(
            matches!(e, TagError::NotEnoughCidBits { .. }),
            "{kind} {fmt:#x}"
        );
        assert!(e.to_string().contains("mem_tag_format"));
    }
    assert!(TagLayout::with_kind(LayoutKind::Tag2, u64::MAX >> 16).is_ok());
    assert!(TagLayout::with_kind(LayoutKind::Full, u64::MAX >> 22).is_ok());
}

#[test]
fn resolve_follows_the_provider() {
    let caps = |cq, dr| TagCaps {
        cq_data_size: cq,
        directed_recv: dr,
        unknown_sender_matches_any: false,
        mem_tag_format: FMT_AAAA,
    };
    let kind = |mode, c: TagCaps| TagLayout::resolve(mode, &c).map(|l| l.kind());
    assert_eq!(kind(TagMode::Auto, caps(8, true)), Ok(LayoutKind::Full));
    assert_eq!(kind(TagMode::Auto, caps(4, true)), Ok(LayoutKind::Full));
    assert_eq!(kind(TagMode::Auto, caps(2, true)), Ok(LayoutKind::Tag1));
    assert_eq!(kind(TagMode::Auto, caps(8, false)), Ok(LayoutKind::Tag1));
    assert_eq!(kind(TagMode::OfiTag1, caps(8, true)), Ok(LayoutKind::Tag1));
    assert_eq!(kind(TagMode::OfiTag2, caps(0, false)), Ok(LayoutKind::Tag2));
    assert_eq!(
        kind(TagMode::OfiTagFull, caps(8, true)),
        Ok(LayoutKind::Full)
    );
    for c in [caps(0, true), caps(8, false), caps(3, true)] {
        let e = TagLayout::resolve(TagMode::OfiTagFull, &c).unwrap_err();
        assert!(matches!(e, TagError::FullModeUnsupported { .. }));
        assert!(e.to_string().contains("FI_DIRECTED_RECV"));
    }
}

/// A provider that takes an unknown sender for anyone (libfabric's sockets) cannot match
/// the source by address: auto falls back to the source in the tag, a forced full
/// layout is refused with that reason.
#[test]
fn an_unknown_sender_matching_any_receive_rules_out_the_full_layout() {
    let caps = TagCaps {
        cq_data_size: 8,
        directed_recv: true,
        unknown_sender_matches_any: true,
        mem_tag_format: FMT_AAAA,
    };
    assert!(!caps.supports_full());
    let kind = |mode| TagLayout::resolve(mode, &caps).map(|l| l.kind());
    assert_eq!(kind(TagMode::Auto), Ok(LayoutKind::Tag1));
    assert_eq!(kind(TagMode::OfiTag2), Ok(LayoutKind::Tag2));
    let e = TagLayout::resolve(TagMode::OfiTagFull, &caps).unwrap_err();
    assert!(
        e.to_string().contains("not yet in the address vector")
            && e.to_string().contains("sockets"),
        "{e}"
    );
}

#[test]
fn modes_parse_from_mca_strings_and_values() {
    for m in TagMode::ALL {
        assert_eq!(m.name().parse::<TagMode>(), Ok(m));
        assert_eq!(m.to_string().to_uppercase().parse::<TagMode>(), Ok(m));
        assert_eq!(m.mca_value().to_string().parse::<TagMode>(), Ok(m));
        assert_eq!(TagMode::from_mca_value(m.mca_value()), Some(m));
    }
    assert_eq!(TagMode::default(), TagMode::Auto);
    assert!("ofi_tag_3".parse::<TagMode>().is_err());
    assert!("".parse::<TagMode>().is_err());
    assert!("0".parse::<TagMode>().is_err());
}

#[test]
fn folding_keeps_internal_tags_negative_and_in_range() {
    let l = TagLayout::with_kind(LayoutKind::Tag2, FMT_AAAA).unwrap();
    let span = -(l.min_tag() as i64);
    for tag in [
        -1,
        -27,
        l.min_tag(),
        l.min_tag() - 1,
        -(i32::MAX / 2) + 1,
        i32::MIN,
    ] {
        let f = l.fold_negative_tag(tag);
        assert!(f < 0 && f >= l.min_tag(), "{tag} -> {f}");
        assert_eq!((tag as i64 - f as i64) % span, 0, "{tag} -> {f}");
        let (m, ig) = l.recv_match(0, None, None).unwrap();
        assert!(!matches(m, ig, l.send_bits(0, 0, f, false).unwrap()));
    }
    assert_eq!(l.fold_negative_tag(5), 5);
    assert_eq!(l.fold_negative_tag(l.min_tag() - 1), -1);
    let t1 = TagLayout::with_kind(LayoutKind::Tag1, FMT_AAAA).unwrap();
    assert_eq!(t1.fold_negative_tag(i32::MIN), i32::MIN);
}

#[test]
fn random_values_round_trip_and_match_only_themselves() {
    let mut rng = Rng::new(0x5EED_0001);
    for l in layouts() {
        for _ in 0..2000 {
            let cid = rng.below(l.max_contextid() as u64 + 1) as u32;
            let src = rng.below(l.max_source().unwrap_or(i32::MAX as u32) as u64 + 1) as u32;
            let span = l.max_tag() as i64 - l.min_tag() as i64 + 1;
            let tag = (l.min_tag() as i64 + rng.below(span as u64) as i64) as i32;
            let sync = rng.percent(50);
            let bits = l.send_bits(cid, src, tag, sync).unwrap();
            assert_eq!(l.tag_of(bits), tag);
            assert_eq!(l.cid_of(bits), cid);
            assert_eq!(l.is_sync_send(bits), sync);
            let (m, ig) = l.recv_match(cid, Some(src), Some(tag)).unwrap();
            assert!(matches(m, ig, bits));
            // A neighbour in any one field must not match.
            let other_tag = if tag == l.max_tag() { tag - 1 } else { tag + 1 };
            assert!(!matches(
                m,
                ig,
                l.send_bits(cid, src, other_tag, sync).unwrap()
            ));
            let other_cid = if cid == 0 { 1 } else { cid - 1 };
            assert!(!matches(
                m,
                ig,
                l.send_bits(other_cid, src, tag, sync).unwrap()
            ));
        }
    }
}
