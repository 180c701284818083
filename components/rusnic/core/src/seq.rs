//! Sequence numbers.
//!
//! The wire carries 16-bit sequence numbers, as the reference does. Inside the core every
//! sequence number is a `u64` that never wraps (2^64 segments is centuries at line rate),
//! so window logic is plain integer comparison and there is no `SEQ_LT` to get wrong in
//! a hundred places. The one place where wrap matters is [`expand`], which recovers the
//! full number from its low 16 bits relative to a nearby reference; that works as long
//! as the true value is within ±32767 of the reference, which the window bound
//! (≤ 32768 segments) guarantees for every legitimate datagram.
//!
//! As with every 16-bit scheme (the reference's included) this assumes a bounded datagram
//! lifetime: a stray duplicate that surfaces after 65536 − window newer segments were
//! delivered would look new. The CRC does not help there; the frag-id/size checks of
//! reassembly catch most such chunks, and the window bound keeps the exposure small.
//!
//! Internal counters start at `2^16 + isn` so that expansion below the initial sequence
//! number (an old ACK right after start) cannot underflow.

/// Signed distance `a - b` in the 16-bit sequence space (the reference's `SEQ_DIFF`).
#[must_use]
pub fn seq_diff(a: u16, b: u16) -> i16 {
    // Two's-complement reinterpretation is exactly the wrap-aware difference.
    a.wrapping_sub(b) as i16
}

/// `a` precedes `b` (wrap-aware; the reference's `SEQ_LT`).
#[must_use]
pub fn seq_lt(a: u16, b: u16) -> bool {
    seq_diff(a, b) < 0
}

/// `a` precedes or equals `b`.
#[must_use]
pub fn seq_le(a: u16, b: u16) -> bool {
    seq_diff(a, b) <= 0
}

/// `a` follows `b`.
#[must_use]
pub fn seq_gt(a: u16, b: u16) -> bool {
    seq_diff(a, b) > 0
}

/// `a` follows or equals `b`.
#[must_use]
pub fn seq_ge(a: u16, b: u16) -> bool {
    seq_diff(a, b) >= 0
}

/// Low 16 bits of an internal sequence number, as sent on the wire.
#[must_use]
pub fn wire(seq: u64) -> u16 {
    seq as u16
}

/// The internal sequence number nearest to `reference` whose low 16 bits are `wire`.
#[must_use]
pub fn expand(wire: u16, reference: u64) -> u64 {
    let diff = seq_diff(wire, reference as u16);
    reference.wrapping_add_signed(i64::from(diff))
}

/// Internal starting point for a connection whose initial sequence number is `isn`.
#[must_use]
pub fn initial(isn: u16) -> u64 {
    (1u64 << 16) + u64::from(isn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_across_wrap() {
        assert_eq!(seq_diff(0, 65535), 1);
        assert_eq!(seq_diff(65535, 0), -1);
        assert_eq!(seq_diff(5, 65530), 11);
        assert_eq!(seq_diff(32767, 0), 32767);
        assert_eq!(seq_diff(32768, 0), -32768);
        assert!(seq_lt(65535, 0));
        assert!(seq_lt(65000, 100));
        assert!(!seq_lt(100, 65000));
        assert!(seq_le(7, 7) && seq_ge(7, 7) && !seq_gt(7, 7) && !seq_lt(7, 7));
        assert!(seq_gt(2, 65534));
        assert!(seq_ge(0, 65535));
    }

    #[test]
    fn lt_is_antisymmetric_except_at_half() {
        for a in (0..=u16::MAX).step_by(97) {
            for d in [1u16, 2, 100, 4096, 32767] {
                let b = a.wrapping_add(d);
                assert!(seq_lt(a, b), "{a} < {b}");
                assert!(!seq_lt(b, a), "!({b} < {a})");
            }
        }
    }

    #[test]
    fn expand_recovers_nearby_values() {
        let bases = [
            initial(0),
            initial(65535),
            initial(65530) + 10,
            1 << 40,
            initial(1) + 70_000,
        ];
        for &base in &bases {
            for off in [-32768i64, -32767, -4096, -1, 0, 1, 4095, 32767] {
                let truth = base.wrapping_add_signed(off);
                if off == -32768 {
                    // Exactly half the space away is ambiguous and resolves backwards.
                    assert_eq!(expand(wire(truth), base), truth);
                    continue;
                }
                assert_eq!(expand(wire(truth), base), truth, "base {base} off {off}");
            }
        }
    }

    #[test]
    fn initial_keeps_isn_in_low_bits() {
        for isn in [0u16, 1, 65535, 40000] {
            assert_eq!(wire(initial(isn)), isn);
            assert!(initial(isn) >= 1 << 16);
            // An ACK one below the start still expands without underflow.
            assert_eq!(expand(isn.wrapping_sub(1), initial(isn)), initial(isn) - 1);
        }
    }
}
