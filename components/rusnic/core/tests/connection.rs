//! Hand-driven scenarios for one pair of connections: each test controls exactly which
//! datagrams arrive, so a behaviour can be pinned down precisely.

use rusnic_core::wire::{self, HEADER_LEN, Kind};
use std::sync::Arc;

use rusnic_core::{
    Channel, Config, ConnError, Connection, ConnectionParams, Endpoint, Event, Instant, Key,
    PutTarget, SendError, Shared, Transmit,
};

mod scenario;

use scenario::{A, B, MS, US, cfg, deliver, drain, pair_with_isns};

fn pair_with(c: Config) -> (Connection, Connection) {
    pair_with_isns(c, 65530, 7)
}

fn events(c: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

fn kinds(ts: &[Transmit]) -> Vec<Kind> {
    ts.iter()
        .map(|t| wire::decode(&t.to_vec()).unwrap().kind)
        .collect()
}

#[test]
fn tiny_goes_priority_large_is_chunked_on_data() {
    let (mut a, mut b) = pair_with(cfg());
    a.send(1, 0x41, b"hello").unwrap();
    a.send(2, 0x42, &[7u8; 2500]).unwrap();
    let ts = drain(&mut a, 0);
    assert_eq!(ts[0].channel, Channel::Priority);
    assert_eq!(
        kinds(&ts),
        vec![Kind::Frag, Kind::Chunk, Kind::Chunk, Kind::Chunk]
    );
    assert!(
        ts[1..]
            .iter()
            .all(|t| t.channel == Channel::Data && t.len() <= 1000)
    );
    deliver(&mut b, &ts, 10 * US);
    assert_eq!(
        events(&mut b),
        vec![
            Event::Deliver {
                tag: 0x41,
                data: b"hello".to_vec()
            },
            Event::Deliver {
                tag: 0x42,
                data: vec![7u8; 2500]
            }
        ]
    );
}

#[test]
fn reordered_and_duplicated_datagrams_deliver_once_in_order() {
    let (mut a, mut b) = pair_with(cfg());
    for i in 0..6u8 {
        a.send(u64::from(i), i, &[i; 300]).unwrap();
    }
    let mut ts = drain(&mut a, 0);
    ts.reverse();
    let dup = ts[2].clone();
    ts.push(dup);
    deliver(&mut b, &ts, 10 * US);
    let got: Vec<u8> = events(&mut b)
        .into_iter()
        .map(|e| match e {
            Event::Deliver { tag, .. } => tag,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(got, vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(b.stats().num_oow_low_recvs + b.stats().num_dup_recvs, 1);
}

#[test]
fn one_loss_is_fast_retransmitted_alone() {
    let (mut a, mut b) = pair_with(cfg());
    for i in 0..10u8 {
        a.send(u64::from(i), 1, &[i; 300]).unwrap();
    }
    let ts = drain(&mut a, 0);
    assert_eq!(ts.len(), 10);
    let lost = ts[2].clone();
    for (i, t) in ts.iter().enumerate() {
        if i != 2 {
            b.handle_datagram(Instant(10 * US), t.channel, &t.to_vec());
            let acks = drain(&mut b, 10 * US);
            deliver(&mut a, &acks, 20 * US);
        }
    }
    let resent = drain(&mut a, 20 * US);
    assert_eq!(resent.len(), 1, "only the hole is resent");
    let (resent_bytes, lost_bytes) = (resent[0].to_vec(), lost.to_vec());
    let (p, q) = (
        wire::decode(&resent_bytes).unwrap(),
        wire::decode(&lost_bytes).unwrap(),
    );
    assert_eq!((p.seq, p.payload), (q.seq, q.payload));
    assert_eq!(a.stats().num_fast_retrans, 1);
    assert_eq!(a.stats().num_timeout_retrans, 0);
    deliver(&mut b, &resent, 30 * US);
    assert_eq!(events(&mut b).len(), 10);
    deliver(&mut a, &drain(&mut b, 30 * US), 40 * US);
    assert_eq!(events(&mut a).len(), 10, "ten completions");
    assert_eq!(a.in_flight(), 0);
}

#[test]
fn retransmission_timeout_backs_off_exponentially() {
    let (mut a, _b) = pair_with(cfg());
    a.send(1, 1, b"x").unwrap();
    assert_eq!(drain(&mut a, 0).len(), 1); // lost
    let t1 = a.next_timeout().unwrap();
    assert_eq!(t1, Instant(MS), "rto_initial");
    a.handle_timeout(t1);
    assert_eq!(drain(&mut a, t1.0).len(), 1);
    assert_eq!(a.rto(), 2 * MS);
    let t2 = a.next_timeout().unwrap();
    assert_eq!(t2.0 - t1.0, 2 * MS);
    a.handle_timeout(t2);
    drain(&mut a, t2.0);
    assert_eq!(a.next_timeout().unwrap().0 - t2.0, 4 * MS);
    assert_eq!(a.stats().num_timeout_retrans, 2);
    assert_eq!(
        a.srtt(),
        None,
        "Karn: no sample from retransmitted segments"
    );
}

#[test]
fn rtt_is_measured_from_clean_round_trips() {
    let (mut a, mut b) = pair_with(cfg());
    for i in 0..4 {
        a.send(i, 1, b"x").unwrap();
    }
    let ts = drain(&mut a, 0);
    deliver(&mut b, &ts, 100 * US);
    let acks = drain(&mut b, 100 * US); // ack_every = 4: immediate
    assert_eq!(kinds(&acks), vec![Kind::Ack]);
    deliver(&mut a, &acks, 300 * US);
    assert_eq!(a.srtt(), Some(300 * US));
}

#[test]
fn a_flushed_delayed_ack_goes_out_at_once() {
    let (mut a, mut b) = pair_with(cfg());
    a.send(1, 1, b"x").unwrap();
    deliver(&mut b, &drain(&mut a, 0), 10 * US);
    assert!(drain(&mut b, 10 * US).is_empty(), "ACK delayed");
    b.flush_delayed_ack();
    assert_eq!(kinds(&drain(&mut b, 11 * US)), vec![Kind::Ack]);
    b.flush_delayed_ack();
    assert!(
        drain(&mut b, 12 * US).is_empty(),
        "nothing owed, nothing sent"
    );
}

#[test]
fn delayed_ack_is_bounded_by_time_and_piggybacks() {
    let (mut a, mut b) = pair_with(cfg());
    a.send(1, 1, b"x").unwrap();
    deliver(&mut b, &drain(&mut a, 0), 10 * US);
    assert!(
        drain(&mut b, 10 * US).is_empty(),
        "one segment: ACK delayed"
    );
    assert_eq!(b.next_timeout(), Some(Instant(60 * US)));
    // Data going back before the deadline carries the ACK instead.
    b.send(9, 2, b"reply").unwrap();
    let back = drain(&mut b, 20 * US);
    assert_eq!(kinds(&back), vec![Kind::Frag]);
    assert!(wire::decode(&back[0].to_vec()).unwrap().ack.is_some());
    deliver(&mut a, &back, 30 * US);
    assert_eq!(a.in_flight(), 0);
    assert!(
        b.next_timeout().is_none_or(|t| t > Instant(60 * US)),
        "no standalone ACK left due"
    );
    // Without reverse traffic the deadline produces a standalone ACK.
    a.send(2, 1, b"y").unwrap();
    deliver(&mut b, &drain(&mut a, 40 * US), 50 * US);
    let t = b.next_timeout().unwrap();
    assert_eq!(t, Instant(100 * US));
    b.handle_timeout(t);
    assert_eq!(kinds(&drain(&mut b, t.0)), vec![Kind::Ack]);
}

#[test]
fn stalled_receiver_bounds_the_sender_to_posted_buffers() {
    let mut c = cfg();
    c.rx_buffers = 4;
    let (mut a, mut b) = pair_with(c);
    for i in 0..20 {
        a.send(i, 1, &[1; 50]).unwrap();
    }
    let mut now = 0;
    let mut total = 0;
    // The receiver's upper layer never returns buffers.
    for _ in 0..20 {
        let ts = drain(&mut a, now);
        total += ts.len();
        deliver(&mut b, &ts, now + 5 * US);
        deliver(&mut a, &drain(&mut b, now + 5 * US), now + 10 * US);
        now += 10 * MS;
        a.handle_timeout(Instant(now));
        b.handle_timeout(Instant(now));
    }
    assert_eq!(
        events(&mut b).len(),
        4,
        "exactly the posted buffers were used"
    );
    assert_eq!(b.rx_in_glue(), 4);
    assert_eq!(b.stats().num_rx_overruns, 0);
    assert!(a.stats().num_window_probes > 0, "closed window probed");
    assert!(total < 40, "probes back off instead of flooding: {total}");
    // Reposting reopens the window with an immediate update.
    b.repost_rx_buffers(4);
    let upd = drain(&mut b, now);
    assert_eq!(kinds(&upd), vec![Kind::Ack]);
    deliver(&mut a, &upd, now);
    assert_eq!(drain(&mut a, now).len(), 4);
}

#[test]
fn put_completes_after_the_last_byte_is_acked() {
    let (mut a, mut b) = pair_with(cfg());
    let data: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    a.put(77, 0x1000, &data).unwrap();
    let ts = drain(&mut a, 0);
    assert!(ts.len() >= 4);
    assert!(events(&mut a).is_empty());
    deliver(&mut b, &ts, 10 * US);
    let mut rebuilt = vec![0u8; data.len()];
    for e in events(&mut b) {
        match e {
            Event::Put {
                remote_addr,
                offset,
                data: d,
            } => {
                assert_eq!(remote_addr, 0x1000);
                rebuilt[offset as usize..offset as usize + d.len()].copy_from_slice(&d);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(rebuilt, data);
    deliver(&mut a, &drain(&mut b, 10 * US), 20 * US);
    assert_eq!(events(&mut a), vec![Event::SendComplete { id: 77 }]);
}

/// Memory for `handle_datagram_into`: one region, and a switch that closes it.
struct Region {
    base: u64,
    bytes: Vec<u8>,
    open: bool,
    writes: usize,
}

impl PutTarget for Region {
    fn place(&mut self, addr: u64, data: &[u8]) -> bool {
        let Some(off) = addr.checked_sub(self.base).map(|o| o as usize) else {
            return false;
        };
        if !self.open || off + data.len() > self.bytes.len() {
            return false;
        }
        self.bytes[off..off + data.len()].copy_from_slice(data);
        self.writes += 1;
        true
    }
}

#[test]
fn put_from_a_shared_buffer_lands_in_the_target_on_arrival() {
    let (mut a, mut b) = pair_with(cfg());
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    let shared: Shared = Arc::new(data.clone());
    a.put_shared(5, 0x2000, shared.clone(), data.len()).unwrap();
    let mut ts = drain(&mut a, 0);
    assert!(ts.len() >= 4, "chunked");
    ts.reverse(); // arrival order does not matter: each chunk lands where it belongs
    let mut mem = Region {
        base: 0x2000,
        bytes: vec![0; 3000],
        open: false,
        writes: 0,
    };
    for t in &ts {
        b.handle_datagram_into(Instant(10 * US), t.channel, &t.to_vec(), &mut mem);
    }
    // A closed region takes nothing, and nothing is acknowledged.
    assert_eq!(mem.writes, 0);
    assert_eq!(b.stats().num_badfrag_recvs, ts.len() as u64);
    deliver(&mut a, &drain(&mut b, 10 * US), 20 * US);
    assert!(events(&mut a).is_empty(), "no completion for refused bytes");
    mem.open = true;
    for t in &ts {
        b.handle_datagram_into(Instant(30 * US), t.channel, &t.to_vec(), &mut mem);
    }
    assert_eq!(mem.bytes, data);
    assert_eq!(mem.writes, ts.len());
    assert!(events(&mut b).is_empty(), "placed data makes no events");
    deliver(&mut a, &drain(&mut b, 30 * US), 40 * US);
    assert_eq!(events(&mut a), vec![Event::SendComplete { id: 5 }]);
    drop(ts);
    assert_eq!(
        Arc::strong_count(&shared),
        1,
        "the core let go of the lent buffer once the put completed"
    );
    // The end of a put is acknowledged at once, not after the delayed-ACK time: the
    // sender's completion, and the PML's FIN behind it, wait for it.
    a.put(6, 0x2000, &data[..100]).unwrap();
    for t in drain(&mut a, 50 * US) {
        b.handle_datagram_into(Instant(60 * US), t.channel, &t.to_vec(), &mut mem);
    }
    assert_eq!(kinds(&drain(&mut b, 60 * US)), vec![Kind::Ack]);
}

#[test]
fn header_only_crc_is_accepted_only_where_agreed() {
    let (mut a, mut b) = pair_with(cfg());
    a.set_payload_crc(false, true);
    let data = vec![0x77u8; 500];
    a.send(1, 9, &data).unwrap();
    let ts = drain(&mut a, 0);
    assert_eq!(kinds(&ts), vec![Kind::Frag]);
    assert!(!wire::decode(&ts[0].to_vec()).unwrap().payload_crc);
    deliver(&mut b, &ts, 10 * US);
    assert!(events(&mut b).is_empty(), "b requires payload CRCs");
    assert_eq!(b.stats().num_malformed_recvs, 1);
    b.set_payload_crc(true, false);
    deliver(&mut b, &ts, 20 * US);
    assert_eq!(events(&mut b), vec![Event::Deliver { tag: 9, data }]);
    // b's own segments still carry full CRCs, which a accepts in any case.
    b.send(2, 1, b"back").unwrap();
    let back = drain(&mut b, 20 * US);
    assert!(
        back.iter()
            .all(|t| wire::decode(&t.to_vec()).unwrap().payload_crc)
    );
    deliver(&mut a, &back, 30 * US);
    assert!(events(&mut a).contains(&Event::Deliver {
        tag: 1,
        data: b"back".to_vec()
    }));
}

/// A glue that receives PUT payloads straight into their destination: it peeks the
/// header, asks the endpoint, receives the payload in place, then hands both parts in.
#[test]
fn placed_puts_can_be_received_in_two_parts_after_a_header_peek() {
    let c = cfg();
    let mut ea = Endpoint::new(c.clone(), A).unwrap();
    let mut eb = Endpoint::new(c.clone(), B).unwrap();
    ea.add_peer(B, 1, 2);
    eb.add_peer(A, 2, 1);
    ea.set_payload_crc(B, false, true);
    let data: Vec<u8> = (0..2500u32).map(|i| (i * 13) as u8).collect();
    ea.put(B, 1, 0x4000, &data).unwrap();
    let ts: Vec<Transmit> = std::iter::from_fn(|| ea.poll_transmit(Instant(0)))
        .map(|(_, t)| t)
        .collect();
    assert!(ts.len() >= 3);
    let mut mem = Region {
        base: 0x4000,
        bytes: vec![0; 2500],
        open: true,
        writes: 0,
    };
    let peeked = |t: &Transmit| {
        let whole = t.to_vec();
        wire::peek_put(&whole[..64.min(whole.len())], whole.len(), &Key::ZERO).map(|(hlen, p)| {
            (
                hlen,
                p.put_addr.unwrap() + u64::from(p.chunk.unwrap().offset),
            )
        })
    };
    // B still requires payload CRCs from A: nothing may be placed before receipt.
    let whole = ts[0].to_vec();
    let (hlen, head) =
        wire::peek_put(&whole[..64], whole.len(), &Key::ZERO).expect("a HDR_CRC PUT");
    assert_eq!(hlen, ts[0].head.len());
    assert_eq!(head.put_addr, wire::decode(&whole).unwrap().put_addr);
    assert!(!eb.accepts_placed_put(Channel::Data, whole.len(), &head));
    eb.set_payload_crc(A, true, false);
    for t in &ts {
        let (hlen, at) = peeked(t).expect("every segment of the put");
        let whole = t.to_vec();
        let (_, head) = wire::peek_put(&whole[..64], whole.len(), &Key::ZERO).unwrap();
        assert!(eb.accepts_placed_put(t.channel, whole.len(), &head));
        // "Receive" the payload straight into place, then hand in both parts.
        let off = (at - 0x4000) as usize;
        let n = whole.len() - hlen;
        mem.bytes[off..off + n].copy_from_slice(&whole[hlen..]);
        let placed = mem.bytes[off..off + n].to_vec();
        eb.handle_datagram_parts_into(
            Instant(5),
            t.channel,
            Some(A),
            (&whole[..hlen], &placed),
            &mut mem,
        );
    }
    assert_eq!(mem.bytes, data);
    // Now in the window: a duplicate must not be placed again.
    let whole = ts[0].to_vec();
    let (_, head) = wire::peek_put(&whole[..64], whole.len(), &Key::ZERO).unwrap();
    assert!(!eb.accepts_placed_put(Channel::Data, whole.len(), &head));
    // A header that does not check out, or a segment with a payload CRC, is not peekable.
    let mut bad = whole.clone();
    bad[5] ^= 1;
    assert!(wire::peek_put(&bad[..64], bad.len(), &Key::ZERO).is_none());
    ea.set_payload_crc(B, true, true);
    ea.put(B, 2, 0x4000, &data[..100]).unwrap();
    let (_, t) = ea.poll_transmit(Instant(0)).unwrap();
    let full = t.to_vec();
    assert!(wire::peek_put(&full[..64.min(full.len())], full.len(), &Key::ZERO).is_none());
}

#[test]
fn send_queue_limits_are_errors_window_limits_are_not() {
    let mut c = cfg();
    c.max_queued_fragments = 3;
    c.window = 2;
    c.rx_buffers = 2;
    let (mut a, _) = pair_with(c);
    assert_eq!(
        a.send(0, 0, &[0; 10_001]),
        Err(SendError::TooLarge {
            len: 10_001,
            max: 10_000
        })
    );
    for i in 0..3 {
        a.send(i, 0, b"x").unwrap();
    }
    assert_eq!(a.send(3, 0, b"x"), Err(SendError::Busy));
    assert_eq!(drain(&mut a, 0).len(), 2, "window of 2");
    a.send(3, 0, b"x").unwrap();
    a.send(4, 0, b"x").unwrap();
    assert_eq!(a.queued_fragments(), 3);
}

#[test]
fn bad_datagrams_are_counted_and_dropped() {
    let (mut a, mut b) = pair_with(cfg());
    a.send(1, 1, b"hello").unwrap();
    let t = drain(&mut a, 0).remove(0);
    // Wrong channel for this header.
    b.handle_datagram(Instant(1), Channel::Data, &t.to_vec());
    // Corrupted.
    let mut bad = t.to_vec();
    bad[HEADER_LEN + 2] ^= 1; // payload: bytes 28..32 are the auth tag
    b.handle_datagram(Instant(1), t.channel, &bad);
    // Truncated.
    b.handle_datagram(Instant(1), t.channel, &t.to_vec()[..20]);
    // Someone else's.
    let mut other = Connection::new(
        cfg(),
        ConnectionParams {
            local_id: 0xC,
            peer_id: B,
            local_isn: 0,
            peer_isn: 0,
            seed: 0,
        },
    )
    .unwrap();
    other.send(1, 1, b"hi").unwrap();
    let o = drain(&mut other, 0).remove(0);
    b.handle_datagram(Instant(1), o.channel, &o.to_vec());
    let s = b.stats();
    assert_eq!(
        (
            s.num_malformed_recvs,
            s.num_crc_errors,
            s.num_truncated_recvs,
            s.num_unk_recvs
        ),
        (1, 1, 1, 1)
    );
    assert!(events(&mut b).is_empty());
    b.handle_datagram(Instant(1), t.channel, &t.to_vec());
    assert_eq!(events(&mut b).len(), 1);
}

#[test]
fn endpoint_demultiplexes_and_rejects_spoofed_senders() {
    let c = cfg();
    let mut ea = Endpoint::new(c.clone(), A).unwrap();
    let mut eb = Endpoint::new(c.clone(), B).unwrap();
    ea.add_peer(B, 1, 2);
    eb.add_peer(A, 2, 1);
    ea.send(B, 5, 9, b"payload").unwrap();
    assert_eq!(ea.send(0x99, 5, 9, b"x"), Err(SendError::UnknownPeer));
    let (peer, t) = ea.poll_transmit(Instant(0)).unwrap();
    assert_eq!(peer, B);
    eb.handle_datagram(Instant(1), t.channel, Some(0xC), &t.to_vec()); // fabric says: from C
    assert_eq!(eb.stats().num_unk_recvs, 1);
    eb.handle_datagram(Instant(1), t.channel, Some(A), &t.to_vec());
    assert_eq!(
        eb.poll_event(),
        Some((
            A,
            Event::Deliver {
                tag: 9,
                data: b"payload".to_vec()
            }
        ))
    );
    let mut ec = Endpoint::new(c, 0xC).unwrap();
    ec.handle_datagram(Instant(1), t.channel, None, &t.to_vec()); // no connection to A
    assert_eq!(ec.stats().num_unk_recvs, 1);
}

#[test]
fn retransmission_limit_reports_unreachable_and_fails_sends() {
    let mut c = cfg();
    c.max_timeouts = 3;
    let (mut a, _) = pair_with(c);
    a.send(1, 1, b"x").unwrap();
    a.send(2, 1, &[0; 5000]).unwrap();
    let mut now = 0;
    drain(&mut a, now);
    while let Some(t) = a.next_timeout() {
        now = t.0;
        a.handle_timeout(t);
        drain(&mut a, now);
    }
    let ev = events(&mut a);
    assert!(
        matches!(
            ev[0],
            Event::Error(ConnError::PeerUnreachable {
                peer: B,
                attempts: 3
            })
        ),
        "{ev:?}"
    );
    assert!(ev.contains(&Event::SendFailed { id: 1 }) && ev.contains(&Event::SendFailed { id: 2 }));
    assert_eq!(a.send(3, 1, b"x"), Err(SendError::Failed));
    if let Event::Error(e) = &ev[0] {
        assert!(e.to_string().contains("unreachable"));
    }
}

#[test]
fn connectivity_check_pings_at_mtu_and_verifies() {
    let mut c = cfg();
    c.connectivity_check = true;
    let (mut a, mut b) = pair_with(c);
    a.send(1, 1, b"x").unwrap();
    let ts = drain(&mut a, 0);
    let sizes: Vec<(Kind, usize)> = ts
        .iter()
        .map(|t| (wire::decode(&t.to_vec()).unwrap().kind, t.len()))
        .collect();
    assert_eq!(
        sizes,
        vec![(Kind::Ping, 40), (Kind::Ping, 1000), (Kind::Frag, 33)]
    );
    deliver(&mut b, &ts, 10 * US);
    let back = drain(&mut b, 10 * US);
    deliver(&mut a, &back, 20 * US);
    assert!(a.is_verified());
    assert!(events(&mut a).contains(&Event::PathVerified));
}

#[test]
fn peer_rnr_pauses_data_until_timer() {
    let (mut a, _) = pair_with(cfg());
    a.on_peer_rnr(Instant(0));
    a.send(1, 1, b"x").unwrap();
    assert!(drain(&mut a, 0).is_empty(), "backing off");
    let t = a.next_timeout().unwrap();
    assert!(t.0 > 0 && t.0 <= cfg().backoff_min);
    a.handle_timeout(t);
    assert_eq!(drain(&mut a, t.0).len(), 1);
    assert_eq!(a.stats().num_backoffs, 1);
}

#[test]
fn full_32768_segment_window_is_acknowledged_across_the_wrap() {
    let mut c = cfg();
    c.window = 32768;
    c.rx_buffers = 32768;
    c.max_queued_fragments = 40_000;
    c.ack_every = u16::MAX;
    c.ack_delay = 100 * US;
    let (mut a, mut b) = pair_with(c);
    for i in 0..40_000 {
        a.send(i, 1, &[]).unwrap();
    }
    let ts = drain(&mut a, 0);
    assert_eq!(ts.len(), 32768, "exactly one full window");
    deliver(&mut b, &ts, 10 * US);
    assert_eq!(events(&mut b).len(), 32768);
    b.repost_rx_buffers(32768);
    let acks = drain(&mut b, 10 * US);
    let ack_bytes = acks[0].to_vec();
    let p = wire::decode(&ack_bytes).unwrap();
    assert_eq!(p.ack.unwrap().ack, 65530u16.wrapping_add(32768));
    deliver(&mut a, &acks, 20 * US);
    assert_eq!(
        a.in_flight(),
        0,
        "an ACK half the sequence space ahead is not mistaken for an old one"
    );
    assert_eq!(events(&mut a).len(), 32768);
    assert_eq!(drain(&mut a, 20 * US).len(), 40_000 - 32768);
}

#[test]
fn shared_sends_gather_the_callers_buffer_without_copying_it() {
    let (mut a, mut b) = pair_with(cfg());
    // 2500 of 3000 bytes: three chunks of one fragment, the tail of the buffer unsent.
    let buf: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    let shared = std::sync::Arc::new(buf.clone());
    a.send_shared(1, 9, shared.clone(), 2500).unwrap();
    let ts = drain(&mut a, 0);
    assert_eq!(kinds(&ts), vec![Kind::Chunk; 3]);
    for t in &ts {
        let body = t.body.as_slice();
        assert!(!body.is_empty());
        let off = body.as_ptr() as usize - shared.as_ptr() as usize;
        assert!(
            off + body.len() <= 2500,
            "payload is a range of the caller's buffer"
        );
        assert!(t.head.len() < 100, "the header alone is encoded");
    }
    deliver(&mut b, &ts, 10 * US);
    assert_eq!(
        events(&mut b),
        vec![Event::Deliver {
            tag: 9,
            data: buf[..2500].to_vec()
        }]
    );
    // The core keeps the buffer until acknowledged, then lets go of it.
    assert!(std::sync::Arc::strong_count(&shared) > 1);
    let acks = drain(&mut b, 10 * US);
    deliver(&mut a, &acks, 20 * US);
    drop(ts);
    assert_eq!(events(&mut a), vec![Event::SendComplete { id: 1 }]);
    assert_eq!(std::sync::Arc::strong_count(&shared), 1);
    // A length past the buffer is cut to it.
    a.send_shared(2, 9, std::sync::Arc::new(vec![5; 10]), 99)
        .unwrap();
    let ts = drain(&mut a, 30 * US);
    deliver(&mut b, &ts, 40 * US);
    assert_eq!(
        events(&mut b),
        vec![Event::Deliver {
            tag: 9,
            data: vec![5; 10]
        }]
    );
}

/// A peer that sends before we added it (a process of another job adds us at its own
/// pace): its datagrams are kept and delivered once it is added, even if it never sends
/// again (it may be waiting in a runtime call that makes no progress calls).
#[test]
fn datagrams_from_a_peer_not_yet_added_are_delivered_once_it_is() {
    let c = cfg();
    let mut ea = Endpoint::new(c.clone(), A).unwrap();
    let mut eb = Endpoint::new(c, B).unwrap();
    ea.add_peer(B, 1, 2);
    ea.send(B, 5, 9, b"early").unwrap();
    let mut sent = Vec::new();
    while let Some((_, t)) = ea.poll_transmit(Instant(0)) {
        sent.push(t);
    }
    assert!(!sent.is_empty());
    for t in &sent {
        eb.handle_datagram(Instant(1), t.channel, None, &t.to_vec());
    }
    assert_eq!(eb.poll_event(), None);
    assert_eq!(eb.stats().num_early_kept, sent.len() as u64);
    eb.add_peer(A, 2, 1);
    eb.replay_early(Instant(2), A);
    assert_eq!(
        eb.poll_event(),
        Some((
            A,
            Event::Deliver {
                tag: 9,
                data: b"early".to_vec()
            }
        ))
    );
    assert_eq!(eb.stats().num_early_replayed, sent.len() as u64);
    // Replayed once: a second replay and the sender's own resend deliver nothing more.
    eb.replay_early(Instant(3), A);
    for t in &sent {
        eb.handle_datagram(Instant(4), t.channel, None, &t.to_vec());
    }
    assert_eq!(eb.poll_event(), None);
}
