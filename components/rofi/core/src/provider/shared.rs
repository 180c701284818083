//! One matching probe per node: the processes of a job on one node share what the probe
//! found, instead of each running it.
//!
//! The probe opens two endpoints of the provider and drives them through its checks; on
//! `tcp;ofi_rxm` that is most of a process's start-up (two more rxm endpoints, each
//! zeroing its buffer pools: about 0.4 s of CPU per process on the project's build
//! machine, more than the rest of `MPI_Init`). Every process of a job on a node has the
//! same libfabric and the same parameters, so it would find the same, and a finding
//! that differs between them (a probe starved of CPU) would make them choose apart.
//! So local rank 0 probes and records its finding in the job's temporary directory, and
//! the other local ranks wait for the record and take it ([`Role`]). A process that
//! finds no record in time probes itself, as every process did before.
//!
//! The record names what was probed ([`FindingKey`]: provider, fabric, domain and the
//! probe's configuration), so a record of another provider, or of another host's
//! domain in a shared temporary directory, is never taken for this one.
//!
//! Sans-IO: the glue reads the environment, the directory and the clock.

use std::fmt::Write as _;
use std::time::Duration;

use super::probe::{Check, CheckSet, Matching, ProbeConfig, Unverified};

/// How long a process waits for local rank 0's finding before probing itself. Local
/// rank 0 probes in well under a second (milliseconds on shm); this bound only matters
/// when it never writes one (it chose differently, failed or died), and the waiting
/// process then does what it did before this sharing existed.
pub const WAIT: Duration = Duration::from_secs(10);

/// How often a waiting process looks for the finding.
pub const POLL: Duration = Duration::from_millis(2);

/// The first line of a record: the format and its version.
const MAGIC: &str = "mtl_rofi matching probe 1";

/// What a probe ran on: a finding applies only to the same provider entry probed the
/// same way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FindingKey {
    pub provider: String,
    pub fabric: String,
    pub domain: String,
    pub config: ProbeConfig,
}

impl FindingKey {
    /// The key as the record's second line: tab-separated, so that no field can pass for
    /// another (names hold no tabs or newlines; anything else is escaped away).
    fn line(&self) -> String {
        let clean = |s: &str| s.replace(['\t', '\n'], " ");
        format!(
            "key\t{}\t{}\t{}\tcq_data={}\ttrunc_room={}",
            clean(&self.provider),
            clean(&self.fabric),
            clean(&self.domain),
            u8::from(self.config.cq_data),
            self.config.trunc_room
        )
    }

    /// The record's file name in the job's directory: a stable hash of the key
    /// (FNV-1a, the same in every process and build), so that each provider entry has
    /// its own record.
    #[must_use]
    pub fn file_name(&self) -> String {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in self.line().bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        format!("mtl_rofi_probe.{hash:016x}")
    }
}

/// What this process does about the probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// No other process of the job on this node, or nowhere to share: probe, keep it.
    Alone,
    /// Local rank 0 of several: probe and record the finding.
    Records,
    /// Another local rank: wait for local rank 0's record, probe only without one.
    Takes,
}

impl Role {
    /// From the job's local rank and size (`OMPI_COMM_WORLD_LOCAL_RANK` / `_SIZE`) and
    /// whether the job has a temporary directory on the node to share in.
    #[must_use]
    pub fn of(local_rank: Option<u32>, local_size: Option<u32>, directory: bool) -> Role {
        match (local_rank, local_size) {
            (Some(rank), Some(size)) if directory && size > 1 && rank < size => {
                if rank == 0 {
                    Role::Records
                } else {
                    Role::Takes
                }
            }
            _ => Role::Alone,
        }
    }
}

/// The record of `matching` found on `key`.
#[must_use]
pub fn encode(key: &FindingKey, matching: Matching) -> String {
    let mut out = format!("{MAGIC}\n{}\n", key.line());
    let finding = match matching {
        Matching::Unprobed => "unprobed".to_owned(),
        Matching::Correct => "correct".to_owned(),
        Matching::CorrectWithSink => "correct_with_sink".to_owned(),
        Matching::Failed(set) => {
            let mut s = String::from("failed");
            for check in set.iter() {
                let _ = write!(s, " {}", check.name());
            }
            s
        }
        Matching::Unverified(Unverified::NoLoopback) => "unverified no_loopback".to_owned(),
    };
    out.push_str(&finding);
    out.push('\n');
    out
}

/// The finding in `record` if it is a whole record of `key` (a partial, foreign or
/// unreadable one is `None`: the caller keeps waiting, then probes itself).
#[must_use]
pub fn decode(record: &str, key: &FindingKey) -> Option<Matching> {
    let mut lines = record.split('\n');
    if lines.next()? != MAGIC || lines.next()? != key.line() {
        return None;
    }
    let finding = lines.next()?;
    // The record ends with a newline: a file cut short is not a record.
    if !lines.next()?.is_empty() || lines.next().is_some() {
        return None;
    }
    let mut words = finding.split(' ');
    let matching = match words.next()? {
        "unprobed" => Matching::Unprobed,
        "correct" => Matching::Correct,
        "correct_with_sink" => Matching::CorrectWithSink,
        "unverified" => match words.next()? {
            "no_loopback" => Matching::Unverified(Unverified::NoLoopback),
            _ => return None,
        },
        "failed" => {
            let mut failed = Vec::new();
            for name in words.by_ref() {
                failed.push(Check::ALL.into_iter().find(|c| c.name() == name)?);
            }
            if failed.is_empty() {
                return None;
            }
            return Some(Matching::Failed(CheckSet::of(&failed)));
        }
        _ => return None,
    };
    words.next().is_none().then_some(matching)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(provider: &str, domain: &str) -> FindingKey {
        FindingKey {
            provider: provider.into(),
            fabric: "127.0.0.0/8".into(),
            domain: domain.into(),
            config: ProbeConfig {
                cq_data: true,
                trunc_room: 4,
            },
        }
    }

    #[test]
    fn every_finding_comes_back_as_recorded() {
        let k = key("tcp;ofi_rxm", "lo");
        let findings = [
            Matching::Unprobed,
            Matching::Correct,
            Matching::CorrectWithSink,
            Matching::Unverified(Unverified::NoLoopback),
            Matching::Failed(CheckSet::of(&[Check::Peek])),
            Matching::Failed(CheckSet::of(&[
                Check::TruncationPosted,
                Check::TruncationUnexpected,
            ])),
            Matching::Failed(CheckSet::of(&Check::ALL)),
        ];
        for m in findings {
            assert_eq!(decode(&encode(&k, m), &k), Some(m), "{m:?}");
        }
    }

    #[test]
    fn a_record_of_another_entry_or_probe_is_not_taken() {
        let record = encode(&key("shm", "shm"), Matching::Correct);
        assert_eq!(decode(&record, &key("shm", "other")), None);
        assert_eq!(decode(&record, &key("sm2", "shm")), None);
        let mut other_room = key("shm", "shm");
        other_room.config.trunc_room = 64;
        assert_eq!(decode(&record, &other_room), None);
        assert_ne!(key("shm", "shm").file_name(), other_room.file_name());
        assert_ne!(key("shm", "a").file_name(), key("shm", "b").file_name());
    }

    #[test]
    fn a_partial_or_damaged_record_is_not_taken() {
        let k = key("shm", "shm");
        let whole = encode(&k, Matching::Failed(CheckSet::of(&[Check::Peek])));
        for cut in 0..whole.len() {
            assert_eq!(decode(&whole[..cut], &k), None, "cut at {cut}");
        }
        for bad in [
            "failed\n",
            "failed nonsense\n",
            "correct extra\n",
            "unverified\n",
            "unverified other\n",
            "maybe\n",
        ] {
            let record = format!("{MAGIC}\n{}\n{bad}", k.line());
            assert_eq!(decode(&record, &k), None, "{bad:?}");
        }
        assert_eq!(decode(&format!("{whole}more\n"), &k), None);
        let other_version = whole.replacen(" 1\n", " 2\n", 1);
        assert_eq!(decode(&other_version, &k), None);
    }

    #[test]
    fn a_tab_in_a_name_cannot_shift_the_fields() {
        let a = FindingKey {
            provider: "a\tb".into(),
            ..key("x", "d")
        };
        let b = FindingKey {
            provider: "a".into(),
            fabric: "b\t127.0.0.0/8".into(),
            ..key("x", "d")
        };
        assert_ne!(a.line(), b.line());
    }

    #[test]
    fn local_rank_0_of_several_records_and_the_others_take() {
        assert_eq!(Role::of(Some(0), Some(4), true), Role::Records);
        assert_eq!(Role::of(Some(3), Some(4), true), Role::Takes);
        assert_eq!(Role::of(Some(0), Some(1), true), Role::Alone);
        assert_eq!(Role::of(Some(1), Some(2), false), Role::Alone);
        assert_eq!(Role::of(None, Some(2), true), Role::Alone);
        assert_eq!(Role::of(Some(0), None, true), Role::Alone);
        assert_eq!(Role::of(Some(5), Some(2), true), Role::Alone);
    }
}
