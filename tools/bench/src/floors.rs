//! Small-message latency over the socket round trips measured in the same rounds: the
//! UDP BTL against half the raw UDP loopback round trip (issue #35's target) and against
//! half `udp_mmsg_rtt`, the same round trip made with its own system calls (two sockets
//! polled in turn with `recvmmsg`, `sendmmsg` of a header and the payload) and no protocol
//! work at all; stock tcp against half the raw TCP round trip, for scale.

use std::fmt::Write as _;

use crate::fi_pingpong::ratio;
use crate::results::Sample;

/// Issue #35: rusnic's 8-byte latency at most this times half the raw UDP round trip.
pub const TARGET: f64 = 1.15;
const SIZE: u64 = 8;

/// The round trips (whole ones, as `limits` measures them) a configuration is set against.
fn floors_of(config: &str) -> &'static [&'static str] {
    if config.starts_with("rusnic") && !config.contains('@') {
        &["udp_rtt", "udp_mmsg_rtt"]
    } else if config == "stock-tcp" {
        &["tcp_rtt"]
    } else {
        &[]
    }
}

/// One row per configuration and floor measured in the same rounds; empty when none.
pub fn table(samples: &[Sample], configs: &[String]) -> String {
    let mut rows = String::new();
    for config in configs {
        for &floor in floors_of(config) {
            // The limit is a whole round trip, latency half of one.
            let Some((ours, whole, r)) = ratio(samples, config, floor, SIZE) else {
                continue;
            };
            let r = 2.0 * r;
            let verdict = match (floor, r <= TARGET) {
                ("udp_rtt", true) => format!("met (<= {TARGET:.2})"),
                ("udp_rtt", false) => {
                    format!("MISSED: +{:.0} % (<= {TARGET:.2})", (r - 1.0) * 100.0)
                }
                _ => "-".to_owned(),
            };
            let half = format!("{floor}/2");
            let _ = writeln!(
                rows,
                "{config:<19} {half:<16} {ours:>10.3} {:>10.3} {r:>7.2}  {verdict}",
                whole / 2.0
            );
        }
    }
    if rows.is_empty() {
        return rows;
    }
    format!(
        "# socket floors: {SIZE}-byte latency (us) over half a loopback round trip of the same \
         rounds (udp_mmsg_rtt: two sockets polled with recvmmsg, sendmmsg of header and \
         payload, no protocol); ratio: the median of the per-round ratios\n\
         # target (issue #35): rusnic <= {TARGET:.2} x udp_rtt/2\n\
         {:<19} {:<16} {:>10} {:>10} {:>7}  target\n{rows}",
        "configuration", "floor", "config", "floor", "ratio"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::LIMITS;
    use crate::results::tests::{row, sample};

    fn round(config: &str, test: &str, round: u32, value: f64) -> Sample {
        let mut s = sample(config, test, SIZE, "us", value);
        s.round = round;
        s
    }

    #[test]
    fn ratios_are_over_half_the_round_trip_of_the_same_round() {
        let samples = vec![
            round("rusnic", "latency", 1, 2.6),
            round(LIMITS, "udp_rtt", 1, 3.4),
            round(LIMITS, "udp_mmsg_rtt", 1, 4.0),
            round("rusnic", "latency", 2, 2.0),
            round(LIMITS, "udp_rtt", 2, 3.6),
            round(LIMITS, "udp_mmsg_rtt", 2, 4.2),
            round("stock-tcp", "latency", 1, 3.5),
            round(LIMITS, "tcp_rtt", 1, 5.0),
            round("rusnic@loss1", "latency", 1, 9.0),
        ];
        let names: Vec<String> = ["stock-tcp", "rusnic", "rusnic@loss1"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let t = table(&samples, &names);
        let line = |prefix: &str| row(&t, prefix);
        // Round 1: 2.6 / 1.7 = 1.53; round 2: 2.0 / 1.8 = 1.11; median 1.32.
        assert!(
            line("rusnic              udp_rtt/2").contains(" 1.32  MISSED: +32 %"),
            "{t}"
        );
        assert!(
            line("rusnic              udp_mmsg_rtt/2").contains(" 1.13  -"),
            "{t}"
        );
        assert!(
            line("stock-tcp           tcp_rtt/2").contains(" 1.40  -"),
            "{t}"
        );
        assert!(!t.contains("rusnic@loss1"), "{t}");
        assert!(table(&samples[..1], &names).is_empty());
    }
}
