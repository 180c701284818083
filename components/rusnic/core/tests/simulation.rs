//! Deterministic simulation: many seeds, faults, stalls, wrap-around, and mutations that
//! prove the checker can fail.

mod sim;

use rusnic_core::fault::FaultConfig;
use sim::{MS, Sim, SimConfig, Stall, StallKind, US};

fn run(cfg: SimConfig, max_steps: u64) -> Sim {
    let mut s = Sim::new(cfg);
    if let Err(e) = s.drive_bounded(max_steps) {
        panic!("{e}");
    }
    s
}

#[test]
fn clean_network_two_nodes() {
    let s = run(SimConfig::new(1), 100_000);
    let st = s.endpoint(0).stats();
    assert_eq!(st.num_resends, 0, "{st:?}");
    assert_eq!(st.rejected(), 0);
    assert_eq!(s.verified, 2, "both connectivity checks pass");
}

#[test]
fn lossy_network_two_nodes() {
    let s = run(SimConfig::new(2).lossy(0.1), 400_000);
    let st = s.endpoint(0).stats();
    assert!(
        st.num_resends > 0 && st.rejected() > 0,
        "faults were exercised: {st:?}"
    );
}

/// The CI sweep: thousands of short scenarios with random loss, faults and shapes.
#[test]
fn many_seeds_short_scenarios() {
    let seeds: u64 = std::env::var("RUSNIC_SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 1000 } else { 5000 });
    let mut totals = (0u64, 0u64, 0u64, 0u64);
    for seed in 0..seeds {
        let mut cfg = SimConfig::new(0xC0FFEE ^ seed.wrapping_mul(0x9E37_79B9));
        let mut r = rusnic_core::fault::Rng::new(seed);
        cfg.nodes = if r.chance(0.25) { 3 } else { 2 };
        cfg.messages_per_pair = r.range(1, 12) as usize;
        cfg.max_msg = [100, 1000, 5000, 20_000][r.below(4) as usize];
        cfg = cfg.lossy([0.0, 0.02, 0.1, 0.2][r.below(4) as usize]);
        cfg.isn_near_wrap = r.chance(0.5);
        cfg.place_puts = r.chance(0.5);
        if cfg.faults.corrupt == 0.0 {
            cfg.payload_crc = r.chance(0.5);
        }
        cfg.delay_max = cfg.delay_min + r.below(200) * US;
        cfg.fifo = r.chance(0.8);
        cfg.proto.window = [8, 16, 64][r.below(3) as usize];
        cfg.proto.rx_buffers = (r.range(2, 32) as u16).min(cfg.proto.window);
        cfg.proto.max_reassemblies = r.range(1, 4) as u16;
        cfg.proto.ack_every = r.range(1, 8) as u16;
        if r.chance(0.2) {
            cfg.stalls.push(Stall {
                node: 1,
                kind: if r.chance(0.5) {
                    StallKind::NoRepost
                } else {
                    StallKind::NoProgress
                },
                start: r.below(500) * US,
                len: r.range(1, 5) * MS,
            });
        }
        let mut s = Sim::new(cfg);
        if let Err(e) = s.drive_bounded(200_000) {
            panic!("sweep seed {seed}: {e}");
        }
        totals.0 += s.delivered() as u64;
        totals.1 += s.steps;
        let st = s.endpoint(0).stats();
        totals.2 += st.num_resends;
        totals.3 += st.rejected();
    }
    eprintln!(
        "{seeds} seeds: {} messages delivered, {} steps, node-0 resends {}, rejected datagrams {}",
        totals.0, totals.1, totals.2, totals.3
    );
    assert!(totals.0 > seeds * 5, "the sweep moved real traffic");
}

/// Longer sweep: `RUSNIC_LONG_SWEEP=1 cargo test --release -- --ignored`.
#[test]
#[ignore]
fn long_sweep() {
    for seed in 0..20_000u64 {
        let mut cfg = SimConfig::new(seed).lossy(0.15);
        cfg.nodes = 2 + (seed % 3) as usize;
        cfg.messages_per_pair = 40;
        cfg.isn_near_wrap = seed % 2 == 0;
        cfg.place_puts = seed % 4 < 2;
        run(cfg, 2_000_000);
    }
}

#[test]
fn sequence_wrap_with_more_than_70k_segments() {
    let mut cfg = SimConfig::new(77).lossy(0.02);
    cfg.messages_per_pair = 71_000;
    cfg.max_msg = 150; // mostly single-segment fragments
    cfg.put_fraction = 0.05;
    cfg.isn_near_wrap = true;
    cfg.proto.window = 256;
    cfg.proto.rx_buffers = 128;
    cfg.proto.max_queued_fragments = 64;
    let s = run(cfg, 3_000_000);
    let st = s.endpoint(0).stats();
    assert!(
        st.num_frag_sends + st.num_chunk_sends > 70_000,
        "wrapped the 16-bit space in each direction: {st:?}"
    );
    assert_eq!(s.delivered(), 142_000);
}

#[test]
fn four_nodes_all_to_all_with_faults() {
    let mut cfg = SimConfig::new(4).lossy(0.08);
    cfg.nodes = 4;
    cfg.messages_per_pair = 30;
    run(cfg, 2_000_000);
}

/// LAM/MPI scenario: the receiver takes a few messages and then sleeps while the sender
/// streams non-blocking sends. Buffers in use must never exceed what was posted.
#[test]
fn stalled_receiver_is_never_overrun() {
    for kind in [StallKind::NoRepost, StallKind::NoProgress] {
        let mut cfg = SimConfig::new(9);
        cfg.messages_per_pair = 300;
        cfg.max_msg = 300;
        cfg.proto.rx_buffers = 4;
        cfg.proto.window = 64;
        cfg.stalls.push(Stall {
            node: 1,
            kind,
            start: 50 * US,
            len: 30 * MS,
        });
        let s = run(cfg, 1_000_000);
        let st = s.endpoint(1).stats();
        assert_eq!(st.num_rx_overruns, 0);
        let snd = s.endpoint(0).stats();
        if kind == StallKind::NoRepost {
            assert!(
                snd.num_window_probes > 0,
                "closed window was probed: {snd:?}"
            );
        }
    }
}

#[test]
fn window_updates_lost_while_stalled_are_recovered_by_probes() {
    let mut cfg = SimConfig::new(10).lossy(0.3);
    cfg.faults.corrupt = 0.0;
    cfg.messages_per_pair = 80;
    cfg.max_msg = 200;
    cfg.proto.rx_buffers = 2;
    cfg.stalls.push(Stall {
        node: 1,
        kind: StallKind::NoRepost,
        start: 0,
        len: 10 * MS,
    });
    run(cfg, 1_000_000);
}

#[test]
fn large_fragments_one_reassembly_slot_heavy_reorder() {
    let mut cfg = SimConfig::new(11).lossy(0.1);
    cfg.proto.max_reassemblies = 1;
    cfg.max_msg = 20_000;
    cfg.messages_per_pair = 30;
    cfg.delay_max = 400 * US;
    cfg.fifo = false;
    let s = run(cfg, 2_000_000);
    assert!(s.endpoint(0).stats().num_chunk_sends > 100);
}

#[test]
fn put_only_traffic() {
    let mut cfg = SimConfig::new(12).lossy(0.05);
    cfg.put_fraction = 1.0;
    cfg.max_msg = 20_000;
    run(cfg, 2_000_000);
}

/// The BTL's way: PUT bytes go to memory as they arrive, out of order, each exactly once,
/// inside their region, and all of them before any later delivery (ob1's FIN).
#[test]
fn put_traffic_placed_on_arrival() {
    for seed in 0..20 {
        let mut cfg = SimConfig::new(1200 + seed).lossy(0.05);
        cfg.place_puts = true;
        cfg.put_fraction = if seed % 2 == 0 { 1.0 } else { 0.5 };
        cfg.max_msg = 20_000;
        cfg.fifo = seed % 3 != 0;
        cfg.nodes = 2 + (seed % 2) as usize;
        run(cfg, 2_000_000);
    }
}

#[test]
fn heavy_corruption_and_truncation_never_corrupt_delivery() {
    let mut cfg = SimConfig::new(13);
    cfg.faults = FaultConfig {
        drop: 0.0,
        duplicate: 0.2,
        reorder: 0.2,
        corrupt: 0.3,
        truncate: 0.1,
    };
    let s = run(cfg, 2_000_000);
    let st = s.endpoint(1).stats();
    assert!(
        st.num_crc_errors > 0 && st.num_truncated_recvs > 0,
        "{st:?}"
    );
}

#[test]
fn one_loss_does_not_resend_the_window() {
    // A single early drop in a long burst is repaired by SACK-driven fast retransmit.
    let mut cfg = SimConfig::new(14);
    cfg.messages_per_pair = 200;
    cfg.max_msg = 100;
    cfg.nodes = 2;
    cfg.proto.window = 64;
    cfg.proto.rx_buffers = 64;
    cfg.faults.drop = 0.01;
    let s = run(cfg, 1_000_000);
    let st = s.endpoint(0).stats();
    assert!(st.num_fast_retrans > 0, "{st:?}");
    assert!(
        st.num_resends <= 3 * (st.num_fast_retrans + st.num_timeout_retrans),
        "resends stay proportional to losses: {st:?}"
    );
}

#[test]
fn unreachable_peer_is_reported_not_hung() {
    let mut cfg = SimConfig::new(15);
    cfg.black_hole = Some(1);
    cfg.allow_errors = true;
    cfg.proto.connectivity_retries = 5;
    let mut s = Sim::new(cfg);
    s.drive_until(200_000, |s| !s.errors.is_empty()).unwrap();
    assert!(
        s.errors
            .iter()
            .any(|(n, _, m)| *n == 0 && m.contains("unreachable")),
        "{:?}",
        s.errors
    );
}

#[test]
fn small_path_mtu_is_reported() {
    let mut cfg = SimConfig::new(16);
    cfg.path_mtu = Some(600);
    cfg.allow_errors = true;
    cfg.max_msg = 100;
    cfg.proto.connectivity_retries = 4;
    let mut s = Sim::new(cfg);
    s.drive_until(200_000, |s| !s.errors.is_empty()).unwrap();
    assert!(
        s.errors
            .iter()
            .any(|(_, _, m)| m.contains("path MTU") && m.contains("1000")),
        "{:?}",
        s.errors
    );
}

#[test]
fn sender_exceeding_its_grant_triggers_rnr_backoff() {
    // Node 0 believes node 1 has 32 buffers; node 1 has 2. Node 1 must drop the excess,
    // signal RNR, and node 0 must back off and still deliver everything.
    let mut cfg = SimConfig::new(17);
    cfg.allow_overruns = true;
    cfg.messages_per_pair = 60;
    cfg.max_msg = 200;
    let mut small = sim::sim_proto();
    small.rx_buffers = 2;
    cfg.node_proto.push((1, small));
    let s = run(cfg, 1_000_000);
    assert!(s.endpoint(1).stats().num_rx_overruns > 0);
    assert!(s.endpoint(0).stats().num_backoffs > 0);
}

// ---- the checker must be able to fail ----

#[test]
fn checker_detects_missing_delivery_without_retransmission() {
    let mut cfg = SimConfig::new(18).lossy(0.1);
    cfg.drop_retransmissions = true;
    let mut s = Sim::new(cfg);
    let e = s
        .drive_bounded(50_000)
        .expect_err("lossy run without retransmission cannot finish");
    assert!(e.contains("not done") || e.contains("deadlock"), "{e}");
}

#[test]
fn checker_detects_corrupted_content() {
    let mut cfg = SimConfig::new(19);
    cfg.evil_payload = 0.05;
    let mut s = Sim::new(cfg);
    let e = s
        .drive_bounded(200_000)
        .expect_err("payload corruption with a valid CRC must be caught");
    assert!(e.contains("wrong"), "{e}");
}

#[test]
fn checker_detects_overrun() {
    // Same misconfiguration as the RNR test, but with overruns forbidden.
    let mut cfg = SimConfig::new(20);
    cfg.messages_per_pair = 60;
    cfg.max_msg = 200;
    let mut small = sim::sim_proto();
    small.rx_buffers = 2;
    cfg.node_proto.push((1, small));
    let mut s = Sim::new(cfg);
    let e = s
        .drive_bounded(1_000_000)
        .expect_err("overrun must be flagged");
    assert!(e.contains("overrun"), "{e}");
}

#[test]
fn simulation_is_deterministic() {
    let a = run(SimConfig::new(21).lossy(0.1), 400_000);
    let b = run(SimConfig::new(21).lossy(0.1), 400_000);
    assert_eq!(a.steps, b.steps);
    assert_eq!(a.now, b.now);
    assert_eq!(a.endpoint(0).stats(), b.endpoint(0).stats());
}
