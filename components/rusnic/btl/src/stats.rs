//! MPI_T performance variables mirroring the core's counters (the reference's names),
//! refreshed from progress, and the optional periodic statistics line.

use std::sync::atomic::{AtomicU64, Ordering};

use mca::Result;
use mca::pvars::{self, PvarClass};
use mca::sys;
use rusnic_core::Stats;

macro_rules! counters {
    ($( $field:ident : $class:ident, $desc:literal; )*) => {
        /// One atomic per pvar, in declaration order.
        static VALUES: [AtomicU64; [$(stringify!($field)),*].len()] =
            [const { AtomicU64::new(0) }; [$(stringify!($field)),*].len()];

        const NAMES: &[(&str, PvarClass, &str)] = &[$((stringify!($field), PvarClass::$class, $desc)),*];

        fn values_of(s: &Stats) -> Vec<u64> {
            vec![$(s.$field),*]
        }
    };
}

counters! {
    num_total_sends: Counter, "Datagrams sent (every type, retransmissions included)";
    num_resends: Counter, "Data segments sent again";
    num_timeout_retrans: Counter, "Segments queued for resend by a retransmission timeout";
    num_fast_retrans: Counter, "Segments queued for resend by duplicate ACKs or SACK evidence";
    num_tail_probes: Counter, "Tail-loss probes: the newest unacknowledged segment sent again after two round trips of silence";
    num_rack_retrans: Counter, "Segments queued for resend by time-based (RACK) loss detection: a segment sent after them on their channel was acknowledged (lost retransmissions included)";
    num_chunk_sends: Counter, "First transmissions of chunks of large fragments";
    num_frag_sends: Counter, "First transmissions of whole fragments";
    num_put_sends: Counter, "First transmissions of emulated PUT segments";
    num_ack_sends: Counter, "Standalone ACKs sent";
    num_total_recvs: Counter, "Datagrams received";
    num_unk_recvs: Counter, "Datagrams from senders that are not peers (yet)";
    num_early_kept: Counter, "Datagrams from senders not yet added as peers, kept until they are";
    num_early_replayed: Counter, "Kept datagrams handed to their sender's connection once it was added";
    num_dup_recvs: Counter, "Duplicate data segments, dropped";
    num_oow_low_recvs: Counter, "Data segments below the receive window, dropped";
    num_oow_high_recvs: Counter, "Data segments beyond the receive window, dropped";
    num_frag_recvs: Counter, "Whole fragments accepted";
    num_chunk_recvs: Counter, "Chunks accepted";
    num_put_recvs: Counter, "Emulated PUT segments placed in registered memory";
    num_badfrag_recvs: Counter, "Chunks dropped for a mismatched or unavailable reassembly, PUT segments outside a registered region";
    num_ack_recvs: Counter, "Datagrams carrying an ACK";
    num_old_dup_acks: Counter, "ACKs older than the cumulative ACK";
    num_dup_acks: Counter, "Duplicate ACKs while data was outstanding";
    num_crc_errors: Counter, "Datagrams with a bad CRC-32C, dropped";
    num_foreign_recvs: Counter, "Datagrams of valid format and CRC without this process's job key (not from a job member), dropped before anything else is looked at";
    num_truncated_recvs: Counter, "Truncated datagrams, dropped";
    num_malformed_recvs: Counter, "Malformed datagrams, dropped";
    num_rx_overruns: Counter, "Segments beyond the advertised receive buffers (should stay 0)";
    num_backoffs: Counter, "Receiver-not-ready backoffs";
    num_window_probes: Counter, "Window probes sent to a peer that granted no credit";
    num_pings: Counter, "Connectivity probes sent";
    max_sent_window_size: HighWatermark, "Most unacknowledged segments to one peer";
    max_rcvd_window_size: HighWatermark, "Widest receive window span in use";
}

/// Registers every pvar for the component.
pub fn register(component: *const sys::mca_base_component_t) -> Result<()> {
    for (i, (name, class, desc)) in NAMES.iter().enumerate() {
        // SAFETY: the component's exported structure; VALUES is 'static.
        unsafe { pvars::register(component, name, desc, *class, &VALUES[i])? };
    }
    Ok(())
}

/// Publishes the current counters.
pub fn publish(s: &Stats) {
    for (slot, v) in VALUES.iter().zip(values_of(s)) {
        slot.store(v, Ordering::Relaxed);
    }
}

/// One line in the spirit of the reference's periodic printout.
pub fn line(rank: u32, s: &Stats) -> String {
    format!(
        "btl:rusnic rank {rank}: sends {} (frag {} chunk {} put {} ack {}) resends {} (timeout {} fast {} rack {} tail {}) \
         recvs {} (frag {} chunk {} put {} ack {}) dup {} oow {}/{} badfrag {} crc {} foreign {} malformed {} \
         unknown {} (kept {} replayed {}) backoffs {} window-hwm {}/{}",
        s.num_total_sends,
        s.num_frag_sends,
        s.num_chunk_sends,
        s.num_put_sends,
        s.num_ack_sends,
        s.num_resends,
        s.num_timeout_retrans,
        s.num_fast_retrans,
        s.num_rack_retrans,
        s.num_tail_probes,
        s.num_total_recvs,
        s.num_frag_recvs,
        s.num_chunk_recvs,
        s.num_put_recvs,
        s.num_ack_recvs,
        s.num_dup_recvs,
        s.num_oow_low_recvs,
        s.num_oow_high_recvs,
        s.num_badfrag_recvs,
        s.num_crc_errors,
        s.num_foreign_recvs,
        s.num_malformed_recvs,
        s.num_unk_recvs,
        s.num_early_kept,
        s.num_early_replayed,
        s.num_backoffs,
        s.max_sent_window_size,
        s.max_rcvd_window_size,
    )
}
