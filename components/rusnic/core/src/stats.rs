//! Counters, named after the reference's `opal_btl_usnic_module_stats_t` where one exists.

/// Per-connection (or, summed, per-endpoint) counters. All monotonic except the two
/// `max_*` high-water marks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Datagrams handed to the glue, of every type.
    pub num_total_sends: u64,
    /// Data segments sent again (timeout or fast retransmit).
    pub num_resends: u64,
    /// Segments queued for resend because their timer expired.
    pub num_timeout_retrans: u64,
    /// Segments queued for resend by duplicate ACKs or SACK evidence.
    pub num_fast_retrans: u64,
    /// Tail-loss probes: the newest unacknowledged segment sent again after a quiet
    /// probe timeout (`crate::tail_probe`).
    pub num_tail_probes: u64,
    /// Segments queued for resend by time-based (RACK) loss detection (`crate::rack`):
    /// a segment transmitted after them on their channel arrived. Lost retransmissions
    /// are among them.
    pub num_rack_retrans: u64,
    /// First transmissions of CHUNK segments.
    pub num_chunk_sends: u64,
    /// First transmissions of FRAG segments.
    pub num_frag_sends: u64,
    /// First transmissions of PUT segments (whole or chunk; also counted above).
    pub num_put_sends: u64,
    /// Standalone ACKs sent.
    pub num_ack_sends: u64,
    /// Datagrams passed to `handle_datagram`.
    pub num_total_recvs: u64,
    /// Well-formed datagrams from a sender we do not know.
    pub num_unk_recvs: u64,
    /// Of those, genuine ones kept until their sender became a peer (`crate::early`).
    pub num_early_kept: u64,
    /// Kept datagrams handed to their sender's connection once it was added.
    pub num_early_replayed: u64,
    /// Data segments already held in the receive window.
    pub num_dup_recvs: u64,
    /// Data segments below the window (already delivered; their ACK was lost).
    pub num_oow_low_recvs: u64,
    /// Data segments beyond the window.
    pub num_oow_high_recvs: u64,
    /// FRAG segments accepted.
    pub num_frag_recvs: u64,
    /// CHUNK segments accepted.
    pub num_chunk_recvs: u64,
    /// PUT segments accepted (also counted above).
    pub num_put_recvs: u64,
    /// Chunks dropped: mismatched fragment, or no reassembly slot free.
    pub num_badfrag_recvs: u64,
    /// Datagrams carrying an ACK (standalone or piggy-backed).
    pub num_ack_recvs: u64,
    /// ACKs older than what we already know.
    pub num_old_dup_acks: u64,
    /// Standalone ACKs that repeat the current cumulative ACK while data is outstanding.
    pub num_dup_acks: u64,
    /// Datagrams whose CRC-32C did not match.
    pub num_crc_errors: u64,
    /// Datagrams of valid format and CRC whose `auth` tag is not our key's: not made by a
    /// member of the job. Dropped before any field is trusted.
    pub num_foreign_recvs: u64,
    /// Datagrams shorter than their header says.
    pub num_truncated_recvs: u64,
    /// Datagrams that violate the wire format or the connection's limits.
    pub num_malformed_recvs: u64,
    /// Datagrams of another protocol version (or not ours at all).
    pub num_bad_version_recvs: u64,
    /// ACKs for sequence numbers never sent.
    pub num_bad_acks: u64,
    /// Data segments beyond the receive buffers we advertised: should stay zero.
    pub num_rx_overruns: u64,
    /// Times we entered receiver-not-ready backoff.
    pub num_backoffs: u64,
    /// Standalone ACKs sent with ACK_REQ to probe a closed credit window.
    pub num_window_probes: u64,
    /// Connectivity pings sent.
    pub num_pings: u64,
    /// High-water mark of unacknowledged segments.
    pub max_sent_window_size: u64,
    /// High-water mark of the receive window span in use (highest received − next expected + 1).
    pub max_rcvd_window_size: u64,
}

impl Stats {
    /// Adds `o` into `self` (high-water marks take the maximum).
    pub fn accumulate(&mut self, o: &Stats) {
        macro_rules! sum {
            ($($f:ident),*) => { $( self.$f += o.$f; )* };
        }
        sum!(
            num_total_sends,
            num_resends,
            num_timeout_retrans,
            num_fast_retrans,
            num_tail_probes,
            num_rack_retrans,
            num_chunk_sends,
            num_frag_sends,
            num_put_sends,
            num_ack_sends,
            num_total_recvs,
            num_unk_recvs,
            num_early_kept,
            num_early_replayed,
            num_dup_recvs,
            num_oow_low_recvs,
            num_oow_high_recvs,
            num_frag_recvs,
            num_chunk_recvs,
            num_put_recvs,
            num_badfrag_recvs,
            num_ack_recvs,
            num_old_dup_acks,
            num_dup_acks,
            num_crc_errors,
            num_foreign_recvs,
            num_truncated_recvs,
            num_malformed_recvs,
            num_bad_version_recvs,
            num_bad_acks,
            num_rx_overruns,
            num_backoffs,
            num_window_probes,
            num_pings
        );
        self.max_sent_window_size = self.max_sent_window_size.max(o.max_sent_window_size);
        self.max_rcvd_window_size = self.max_rcvd_window_size.max(o.max_rcvd_window_size);
    }

    pub(crate) fn count_decode_error(&mut self, e: crate::wire::DecodeError) {
        use crate::wire::DecodeError as E;
        match e {
            E::Truncated => self.num_truncated_recvs += 1,
            E::BadMagic(_) | E::BadVersion(_) => self.num_bad_version_recvs += 1,
            E::BadCrc => self.num_crc_errors += 1,
            E::Foreign => self.num_foreign_recvs += 1,
            E::Malformed(_) => self.num_malformed_recvs += 1,
        }
    }

    /// Total datagrams dropped at decode time.
    pub fn rejected(&self) -> u64 {
        self.num_truncated_recvs
            + self.num_bad_version_recvs
            + self.num_crc_errors
            + self.num_foreign_recvs
            + self.num_malformed_recvs
    }
}
