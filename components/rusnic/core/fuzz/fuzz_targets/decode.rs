//! Any byte string: decoding must not panic, accepted datagrams must re-encode
//! identically, and a connection must survive being fed it on either channel.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rusnic_core::wire;
use rusnic_core::{Channel, Config, Connection, ConnectionParams, Instant};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = wire::decode(data) {
        assert_eq!(p.to_vec(), data);
    }
    let cfg = Config { connectivity_check: true, ..Config::default() };
    let params = ConnectionParams { local_id: 0xB, peer_id: 0xA, local_isn: 0, peer_isn: 0, seed: 0 };
    let Ok(mut c) = Connection::new(cfg, params) else { return };
    for ch in Channel::ALL {
        c.handle_datagram(Instant(1), ch, data);
        while let Some(t) = c.poll_transmit(Instant(1)) {
            assert!(wire::decode(&t.to_vec()).is_ok());
        }
        while c.poll_event().is_some() {}
        c.handle_timeout(Instant(u64::MAX / 2));
    }
});
