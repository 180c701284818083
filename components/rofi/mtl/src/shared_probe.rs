//! One matching probe per node ([`rofi_core::provider::shared`]): local rank 0 probes
//! and records its finding in the job's temporary directory on the node; the job's other processes on
//! the node take it from there, and probe themselves only when none comes in time.

use std::path::{Path, PathBuf};
use std::time::Instant;

use mca::verbose;
use rofi_core::provider::ProviderInfo;
use rofi_core::provider::probe::{Matching, ProbeConfig};
use rofi_core::provider::shared::{self, FindingKey, Role};

use crate::{env_number, stream};

/// What the probe finds on `info` probed with `config`: `probe` runs it here, unless
/// local rank 0 of this job on this node ran it and recorded its finding.
pub fn probe_once_per_node(
    info: &ProviderInfo,
    config: ProbeConfig,
    probe: impl FnOnce() -> Matching,
) -> Matching {
    let dir = mca::proc::job_directory();
    let local = |name| env_number(name).and_then(|n| u32::try_from(n).ok());
    let role = Role::of(
        local("OMPI_COMM_WORLD_LOCAL_RANK"),
        local("OMPI_COMM_WORLD_LOCAL_SIZE"),
        dir.is_some(),
    );
    let (Some(dir), Role::Records | Role::Takes) = (dir, role) else {
        return probe();
    };
    let key = FindingKey {
        provider: info.name.clone(),
        fabric: info.fabric.clone(),
        domain: info.domain.clone(),
        config,
    };
    let path = dir.join(key.file_name());
    if role == Role::Records {
        let matching = probe();
        if let Err(e) = record(&path, &shared::encode(&key, matching)) {
            verbose!(
                stream(),
                1,
                "mtl:rofi: could not record the matching probe's finding for the other \
                 local ranks in {} ({e}): each probes itself",
                path.display()
            );
        }
        return matching;
    }
    let started = Instant::now();
    loop {
        if let Some(matching) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|record| shared::decode(&record, &key))
        {
            verbose!(
                stream(),
                1,
                "mtl:rofi: {} [{}]: took local rank 0's matching probe finding ({}, after \
                 {:.1} ms)",
                info.name,
                info.fabric,
                summary(matching),
                started.elapsed().as_secs_f64() * 1e3
            );
            return matching;
        }
        if started.elapsed() >= shared::WAIT {
            verbose!(
                stream(),
                1,
                "mtl:rofi: {} [{}]: no matching probe finding from local rank 0 after {} s \
                 ({}): probing here",
                info.name,
                info.fabric,
                shared::WAIT.as_secs(),
                path.display()
            );
            return probe();
        }
        std::thread::sleep(shared::POLL);
    }
}

/// Writes `record` to `path` whole or not at all: a reader sees either no file or the
/// finished record (a temporary file of this process, renamed into place).
fn record(path: &Path, record: &str) -> std::io::Result<()> {
    let mut tmp = PathBuf::from(path).into_os_string();
    tmp.push(format!(".tmp.{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, record)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn summary(matching: Matching) -> String {
    match matching {
        Matching::Unprobed => "not probed".into(),
        Matching::Correct => "every check passed".into(),
        Matching::CorrectWithSink => {
            "matching right, truncation wrong but kept away by an overflow sink".into()
        }
        Matching::Failed(set) => format!("failed: {set}"),
        Matching::Unverified(why) => why.to_string(),
    }
}
