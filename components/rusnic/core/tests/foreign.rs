//! Datagrams from outside the job: each process checks every datagram against its own
//! key (published to the job's members only) before anything in it is trusted. An
//! outsider who knows the wire format, a member's sender id and the sequence numbers
//! in use still cannot make a datagram that reaches the window, the ACK logic or a
//! registered region; a member's datagram replayed verbatim passes the check and is
//! then ignored by the receive window.

use rusnic_core::fault::Rng;
use rusnic_core::wire::{self, Kind};
use rusnic_core::{Channel, Endpoint, Event, Instant, Key, PutTarget};

mod scenario;

use scenario::{A, B, US, cfg};

const REGION: u64 = 0x7000_0000;

fn key(n: u8) -> Key {
    Key::from_bytes([n; Key::LEN])
}

/// A and B, each with its own secret and the other's from the "modex". ISNs: A sends
/// from 1, B from 2.
fn members() -> (Endpoint, Endpoint) {
    let mut a = Endpoint::new_keyed(cfg(), A, key(0xA1)).unwrap();
    let mut b = Endpoint::new_keyed(cfg(), B, key(0xB1)).unwrap();
    a.add_peer_keyed(B, 1, 2, key(0xB1));
    b.add_peer_keyed(A, 2, 1, key(0xA1));
    (a, b)
}

/// Someone outside the job posing as A: same id, same ISNs, but a key it guessed.
fn outsider(guess: Key) -> Endpoint {
    let mut o = Endpoint::new_keyed(cfg(), A, guess).unwrap();
    o.add_peer_keyed(B, 1, 2, guess);
    o
}

/// An open region of B's memory.
struct Region {
    bytes: Vec<u8>,
    writes: usize,
}

impl PutTarget for Region {
    fn place(&mut self, addr: u64, data: &[u8]) -> bool {
        let Some(off) = addr.checked_sub(REGION).map(|o| o as usize) else {
            return false;
        };
        if off + data.len() > self.bytes.len() {
            return false;
        }
        self.bytes[off..off + data.len()].copy_from_slice(data);
        self.writes += 1;
        true
    }
}

fn transmits(e: &mut Endpoint, now: u64) -> Vec<(Channel, Vec<u8>)> {
    std::iter::from_fn(|| e.poll_transmit(Instant(now)))
        .map(|(_, t)| (t.channel, t.to_vec()))
        .collect()
}

fn events(e: &mut Endpoint) -> Vec<Event> {
    std::iter::from_fn(|| e.poll_event())
        .map(|(_, ev)| ev)
        .collect()
}

#[test]
fn a_members_datagrams_are_accepted() {
    let (mut a, mut b) = members();
    a.send(B, 1, 9, b"hello").unwrap();
    for (ch, d) in transmits(&mut a, 0) {
        b.handle_datagram(Instant(10 * US), ch, None, &d);
    }
    assert_eq!(
        events(&mut b),
        vec![Event::Deliver {
            tag: 9,
            data: b"hello".to_vec()
        }]
    );
    assert_eq!(b.stats().num_foreign_recvs, 0);
    assert_eq!(b.stats().num_frag_recvs, 1);
}

#[test]
fn an_outsiders_datagrams_are_dropped_before_anything_is_looked_at() {
    let (mut a, mut b) = members();
    // B has data in flight to A, which a forged ACK would like to complete.
    b.send(A, 50, 3, &[7u8; 100]).unwrap();
    let from_b = transmits(&mut b, 0);
    assert_eq!(from_b.len(), 1);
    let in_flight = b.connection(A).unwrap().in_flight();

    let mut region = Region {
        bytes: vec![0; 4096],
        writes: 0,
    };
    let mut sent = 0u64;
    let mut rng = Rng::new(7);
    let guesses = (0..200).map(|i| match i {
        0 => Key::ZERO,
        1 => key(0xB0), // a near miss of B's key
        2 => key(0xA1), // A's key: A's own secret is not B's
        _ => {
            let mut k = [0u8; Key::LEN];
            rng.fill(&mut k);
            Key::from_bytes(k)
        }
    });
    for guess in guesses {
        let mut o = outsider(guess);
        // (1) the next FRAG B expects from A, (2) a PUT into B's open region, (3) an
        // ACK for everything B sent, with credit: valid format, valid CRC, A's id.
        o.send(B, 1, 9, b"forged").unwrap();
        o.put(B, 2, REGION, &[0xEE; 600]).unwrap();
        let mut forged = transmits(&mut o, 0);
        let mut ack = wire::Packet::new(Kind::Ack, Channel::Priority, A);
        ack.ack = Some(wire::AckInfo {
            ack: 3,
            credits: 1000,
        });
        forged.push((Channel::Priority, ack.to_vec_keyed(&guess)));
        for (ch, d) in &forged {
            assert!(
                wire::decode_keyed(d, &guess).is_ok(),
                "valid format and CRC"
            );
            b.handle_datagram_into(Instant(5 * US), *ch, None, d, &mut region);
            sent += 1;
        }
    }
    let s = b.stats();
    assert_eq!(s.num_foreign_recvs, sent, "every forged datagram counted");
    assert_eq!(
        s.num_crc_errors + s.num_malformed_recvs + s.num_unk_recvs,
        0
    );
    assert_eq!(
        (s.num_frag_recvs, s.num_put_recvs, s.num_ack_recvs),
        (0, 0, 0),
        "nothing reached the window, the region or the ACK logic"
    );
    assert_eq!(region.writes, 0);
    assert!(region.bytes.iter().all(|&x| x == 0));
    assert!(events(&mut b).is_empty());
    assert_eq!(b.connection(A).unwrap().in_flight(), in_flight);
    assert!(
        transmits(&mut b, 6 * US).is_empty(),
        "no ACK answers a forgery"
    );

    // The window did not move: A's real first segment (the sequence number the
    // forgeries used) is still new and delivered.
    a.send(B, 1, 9, b"real").unwrap();
    for (ch, d) in transmits(&mut a, 10 * US) {
        b.handle_datagram_into(Instant(20 * US), ch, None, &d, &mut region);
    }
    assert_eq!(
        events(&mut b),
        vec![Event::Deliver {
            tag: 9,
            data: b"real".to_vec()
        }]
    );
}

#[test]
fn replayed_datagrams_are_ignored_by_the_window() {
    let (mut a, mut b) = members();
    let mut region = Region {
        bytes: vec![0; 4096],
        writes: 0,
    };
    for i in 0..3u8 {
        a.send(B, u64::from(i), 9, &[i; 50]).unwrap();
    }
    a.put(B, 9, REGION, &[0x55; 2500]).unwrap();
    let captured = transmits(&mut a, 0);
    assert!(captured.len() >= 6);
    for (ch, d) in &captured {
        b.handle_datagram_into(Instant(10 * US), *ch, None, d, &mut region);
    }
    let delivered = events(&mut b).len();
    assert_eq!(delivered, 3);
    let writes = region.writes;
    // B's application reuses the region; a replay must not write the old bytes again.
    region.bytes.fill(0);
    for round in 0..3 {
        for (ch, d) in &captured {
            b.handle_datagram_into(Instant((20 + round) * US), *ch, None, d, &mut region);
        }
    }
    let s = b.stats();
    assert_eq!(s.num_foreign_recvs, 0, "a replay carries a valid tag");
    assert_eq!(
        s.num_oow_low_recvs + s.num_dup_recvs,
        3 * captured.len() as u64,
        "every replay recognised as old"
    );
    assert!(events(&mut b).is_empty(), "nothing delivered twice");
    assert_eq!(region.writes, writes);
    assert!(
        region.bytes.iter().all(|&x| x == 0),
        "no PUT byte rewritten"
    );
}

#[test]
fn version_1_datagrams_are_refused() {
    let (mut a, mut b) = members();
    a.send(B, 1, 9, b"old").unwrap();
    let (ch, mut d) = transmits(&mut a, 0).remove(0);
    d[1] = 1;
    b.handle_datagram(Instant(1), ch, None, &d);
    assert_eq!(b.stats().num_bad_version_recvs, 1);
    assert!(events(&mut b).is_empty());
}
