//! Bulk transfer under random loss through the modelled loopback of `bulk/mod.rs`.

mod bulk;

use bulk::{Model, Outcome, US, run};

fn report(name: &str, o: &Outcome, lossless: f64) {
    let s = &o.sender;
    println!(
        "{name:>12}: {:8.1} MB/s ({:.2} of lossless), {:.2} ms; sends {} resends {} \
         (timeout {} fast {} rack {} probe {}), stalled {:.2} ms ({} over 500 us), \
         srtt {:.1} us rto {:.0} us; rx dup {} low {} acks sent {}",
        o.bandwidth(),
        o.bandwidth() / lossless,
        o.elapsed as f64 / 1e6,
        s.num_total_sends,
        s.num_resends,
        s.num_timeout_retrans,
        s.num_fast_retrans,
        s.num_rack_retrans,
        s.num_tail_probes,
        o.stalled as f64 / 1e6,
        o.long_stalls,
        o.srtt as f64 / US as f64,
        o.rto as f64 / US as f64,
        o.receiver.num_dup_recvs,
        o.receiver.num_oow_low_recvs,
        o.receiver.num_ack_sends,
    );
}

/// `cargo test --release -p rusnic-core --test bulk_loss -- --ignored --nocapture`
#[test]
#[ignore = "a measurement: prints simulated bandwidth under loss"]
fn measure_bulk_under_loss() {
    let base = run(&Model::new(1, 0.0));
    report("lossless", &base, base.bandwidth());
    for rack in [false, true] {
        println!("rack {rack}:");
        for loss in [0.01, 0.05] {
            let mut sum = 0.0;
            for seed in 1..=8 {
                let mut m = Model::new(seed, loss);
                m.cfg.rack = rack;
                let o = run(&m);
                sum += o.bandwidth() / 8.0;
                report(&format!("{}% s{seed}", loss * 100.0), &o, base.bandwidth());
            }
            println!(
                "  mean at {}%: {:.2} of lossless",
                loss * 100.0,
                sum / base.bandwidth()
            );
        }
    }
}

/// At 5 % loss, RACK keeps the modelled 4 MiB bandwidth within 80 % of lossless and
/// replaces most retransmission timeouts (lost retransmissions) with earlier resends.
#[test]
fn rack_keeps_bulk_bandwidth_under_five_percent_loss() {
    let model = |seed, loss, rack| {
        let mut m = Model::new(seed, loss);
        m.iterations = 4;
        m.cfg.rack = rack;
        m
    };
    let lossless = run(&model(1, 0.0, true)).bandwidth();
    let (mut with, mut without, mut rto_with, mut rto_without) = (0.0, 0.0, 0, 0);
    for seed in 1..=3 {
        let on = run(&model(seed, 0.05, true));
        let off = run(&model(seed, 0.05, false));
        with += on.bandwidth() / 3.0;
        without += off.bandwidth() / 3.0;
        rto_with += on.sender.num_timeout_retrans;
        rto_without += off.sender.num_timeout_retrans;
        assert!(on.sender.num_rack_retrans > 0);
        assert_eq!(off.sender.num_rack_retrans, 0);
    }
    assert!(with >= 0.8 * lossless, "{with:.0} of {lossless:.0} MB/s");
    assert!(
        with > without,
        "{with:.0} vs {without:.0} MB/s without RACK"
    );
    assert!(
        rto_with * 2 < rto_without,
        "timeouts {rto_with} with RACK, {rto_without} without"
    );
}
