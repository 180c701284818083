//! Counters the glue bumps on the data path and exports as MPI_T performance variables.
//!
//! Plain `u64` fields: the glue keeps one `Stats` per endpoint context (already serialized
//! by that context's lock) and sums them with [`Stats::merge`] when a pvar is read, so no
//! atomics are needed on the data path.

/// One exported counter: MPI_T name, description, and how to read it.
#[derive(Clone, Copy, Debug)]
pub struct Pvar {
    /// Full MPI_T name, `mtl_rofi_<field>`.
    pub name: &'static str,
    pub description: &'static str,
    pub read: fn(&Stats) -> u64,
}

/// Per-context counters. Field names are the pvar names without the `mtl_rofi_` prefix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Sends posted with a completion (`fi_tsend[data]`).
    pub sends: u64,
    /// Sends posted with `fi_tinject[data]`.
    pub injects: u64,
    /// Receives posted (`fi_trecv`, including Mrecv claims).
    pub recvs: u64,
    /// Probes posted (`FI_PEEK`, with or without `FI_CLAIM`).
    pub probes: u64,
    /// Synchronous-send acknowledgements sent by this process as a receiver.
    pub ssend_acks_sent: u64,
    /// Synchronous-send acknowledgements received by this process as a sender.
    pub ssend_acks_received: u64,
    /// `fi_cq_read` calls that returned at least one entry.
    pub cq_reads: u64,
    /// Posts retried because the provider answered `-FI_EAGAIN`.
    pub eagain_retries: u64,
    /// Error completions and failed posts (truncations included).
    pub errors: u64,
}

macro_rules! pvars {
    ($($field:ident: $desc:literal),* $(,)?) => {
        /// Every counter, in a fixed order (the pvar index the glue registers).
        pub const PVARS: &[Pvar] = &[
            $(Pvar {
                name: concat!("mtl_rofi_", stringify!($field)),
                description: $desc,
                read: |s| s.$field,
            },)*
        ];

        impl Stats {
            /// Add another context's counters (saturating: a counter never wraps to small).
            pub fn merge(&mut self, other: &Stats) {
                $(self.$field = self.$field.saturating_add(other.$field);)*
            }
        }
    };
}

pvars! {
    sends: "Number of tagged sends posted with a completion",
    injects: "Number of tagged sends posted with fi_tinject (no completion)",
    recvs: "Number of tagged receives posted, including matched-probe receives",
    probes: "Number of probes posted (MPI_Iprobe and MPI_Improbe)",
    ssend_acks_sent: "Number of synchronous-send acknowledgements sent",
    ssend_acks_received: "Number of synchronous-send acknowledgements received",
    cq_reads: "Number of completion-queue reads that returned entries",
    eagain_retries: "Number of posts retried after FI_EAGAIN",
    errors: "Number of error completions and failed posts",
}

impl Stats {
    /// `(name, value)` of every counter, for verbose output at finalize.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        PVARS.iter().map(move |p| (p.name, (p.read)(self)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_exported_once_under_its_own_name() {
        assert_eq!(PVARS.len(), 9);
        let s = Stats {
            sends: 1,
            injects: 2,
            recvs: 3,
            probes: 4,
            ssend_acks_sent: 5,
            ssend_acks_received: 6,
            cq_reads: 7,
            eagain_retries: 8,
            errors: 9,
        };
        let v: Vec<u64> = s.iter().map(|(_, v)| v).collect();
        assert_eq!(v, (1..=9).collect::<Vec<u64>>());
        let mut names: Vec<&str> = PVARS.iter().map(|p| p.name).collect();
        assert!(names.iter().all(|n| n.starts_with("mtl_rofi_")));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PVARS.len());
        assert_eq!(PVARS[4].name, "mtl_rofi_ssend_acks_sent");
    }

    #[test]
    fn merge_adds_and_saturates() {
        let mut a = Stats {
            sends: u64::MAX - 1,
            errors: 2,
            ..Stats::default()
        };
        let b = Stats {
            sends: 5,
            errors: 3,
            ..Stats::default()
        };
        a.merge(&b);
        assert_eq!((a.sends, a.errors, a.recvs), (u64::MAX, 5, 0));
    }
}
