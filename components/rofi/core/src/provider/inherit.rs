//! The choice a process made (provider, fabric, matching), handed on to the jobs it
//! spawns so that they choose exactly the same.
//!
//! Processes that talk to each other must use the same provider and match messages the
//! same way (the provider's tagged matching, or rofi's own host matching); add_procs
//! refuses a peer that does not. The processes of one job choose alike: the same
//! parameters, the same libfabric, and a matching probe whose verdict does not depend on
//! how much CPU the process got (its waits are bounded in polls as well as in time, so
//! a starved process waits longer, it does not conclude differently). A spawned job,
//! though, does not always get its parent's settings: Open MPI 5.0's mpirun passes the
//! variables of `-x` (`-x FI_PROVIDER=shm`) to the first job only (open-mpi/ompi#13399),
//! and the children of a parent on shm with host matching listed every provider and
//! chose tcp;ofi_rxm with tagged matching. `MPI_Comm_spawn` and
//! `MPI_Comm_spawn_multiple` do copy the spawning process's own `OMPI_MCA_*` environment
//! into the new job (ompi/dpm/dpm.c, 4.1 and 5.0 alike), so a process records its
//! choice there ([`ENV`]) and a process started with one chooses by it
//! ([`select_inherited`]): the same provider (on the same fabric where it has it), the
//! same matching, and no probe of its own. Grandchildren inherit from their parents in
//! turn.
//!
//! Sans-IO: the glue reads and sets the variable.

use std::fmt;

use super::select::{
    Chosen, HostMatching, Outcome, Rejection, Requirements, Selection, Verdict, select,
};
use super::{NameFilter, ProviderInfo};

/// The MCA parameter (`mtl_rofi_` + this) that carries an inherited choice.
pub const PARAM: &str = "inherited_choice";

/// The environment variable a process sets to hand its choice on: the parameter, as
/// `MPI_Comm_spawn` copies every `OMPI_MCA_*` variable of the spawning process.
pub const ENV: &str = "OMPI_MCA_mtl_rofi_inherited_choice";

/// What a process chose, as its spawned jobs must choose it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Inherited {
    /// The provider's name, e.g. `shm`, `tcp;ofi_rxm`.
    pub provider: String,
    /// Its fabric, e.g. `192.0.2.0/24` (a node without it uses another fabric of the
    /// same provider).
    pub fabric: String,
    /// rofi matches messages itself (else: the provider's tagged matching).
    pub host_matching: bool,
}

/// Separates the fields: provider names hold `;`, fabric names `/`, `.` and `:`.
const SEP: char = '|';

/// An inherited choice that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "mtl_rofi_{PARAM} {:?} is not `host|<provider>|<fabric>` or \
             `tagged|<provider>|<fabric>` (rofi sets it for the jobs a process spawns)",
            self.0
        )
    }
}

impl std::error::Error for ParseError {}

impl Inherited {
    /// The choice `chosen` of entry `info`.
    #[must_use]
    pub fn of(info: &ProviderInfo, chosen: &Chosen) -> Inherited {
        Inherited {
            provider: info.name.clone(),
            fabric: info.fabric.clone(),
            host_matching: chosen.host_matching,
        }
    }

    /// The parameter's value: `host|shm|shm`, `tagged|tcp;ofi_rxm|192.0.2.0/24`.
    #[must_use]
    pub fn encode(&self) -> String {
        let matching = if self.host_matching { "host" } else { "tagged" };
        format!("{matching}{SEP}{}{SEP}{}", self.provider, self.fabric)
    }

    /// Reads the parameter: `None` when it is unset or blank.
    pub fn parse(value: Option<&str>) -> Result<Option<Inherited>, ParseError> {
        let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        let bad = || ParseError(v.to_owned());
        let mut fields = v.splitn(3, SEP);
        let host_matching = match fields.next() {
            Some("host") => true,
            Some("tagged") => false,
            _ => return Err(bad()),
        };
        let provider = fields.next().filter(|p| !p.is_empty()).ok_or_else(bad)?;
        let fabric = fields.next().ok_or_else(bad)?;
        if fabric.contains(SEP) {
            return Err(bad());
        }
        Ok(Some(Inherited {
            provider: provider.to_owned(),
            fabric: fabric.to_owned(),
            host_matching,
        }))
    }

    /// How the glue discovers candidates and how selection treats matching: host
    /// matching always, or the provider's tagged matching without a probe (the parent
    /// probed it; `never` keeps a provider with a known defect out).
    #[must_use]
    pub fn requirements(&self, req: &Requirements) -> Requirements {
        Requirements {
            host_matching: if self.host_matching {
                HostMatching::Always
            } else {
                HostMatching::Never
            },
            ..*req
        }
    }
}

impl fmt::Display for Inherited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} [{}] with {}",
            self.provider,
            self.fabric,
            if self.host_matching {
                "host matching"
            } else {
                "tagged matching"
            }
        )
    }
}

/// Selects as the spawning process chose: among the entries of its provider on its
/// fabric (or, where this node has no such fabric, of its provider on any), with its
/// matching ([`Inherited::requirements`]). Every other entry is rejected with
/// [`Rejection::NotInherited`]. The caller runs no matching probe.
#[must_use]
pub fn select_inherited(
    candidates: &[ProviderInfo],
    inherited: &Inherited,
    req: &Requirements,
) -> Selection {
    let same = |i: &usize, fabric: bool| {
        let c = &candidates[*i];
        c.name == inherited.provider && (!fabric || c.fabric == inherited.fabric)
    };
    let all: Vec<usize> = (0..candidates.len()).collect();
    let on_fabric: Vec<usize> = all.iter().copied().filter(|i| same(i, true)).collect();
    let keep = if on_fabric.is_empty() {
        all.iter().copied().filter(|i| same(i, false)).collect()
    } else {
        on_fabric
    };
    let subset: Vec<ProviderInfo> = keep.iter().map(|&i| candidates[i].clone()).collect();
    let inner = select(&subset, &NameFilter::Default, &inherited.requirements(req));
    let mut verdicts: Vec<Verdict> = inner
        .verdicts
        .into_iter()
        .map(|v| Verdict {
            index: keep[v.index],
            ..v
        })
        .collect();
    verdicts.extend(all.iter().filter(|i| !keep.contains(i)).map(|&i| Verdict {
        index: i,
        name: candidates[i].name.clone(),
        fabric: candidates[i].fabric.clone(),
        outcome: Outcome::Rejected(Rejection::NotInherited(inherited.clone())),
    }));
    Selection {
        chosen: inner.chosen.map(|c| Chosen {
            index: keep[c.index],
            ..c
        }),
        verdicts,
    }
}

/// Why this process (`mine`) cannot talk to a peer that chose `theirs` (each publishes
/// its choice in the modex), or `None` when they chose alike: the same provider and the
/// same matching. Fabrics may differ (tcp between nodes on different subnets).
#[must_use]
pub fn disagreement(mine: &Inherited, theirs: &Inherited) -> Option<String> {
    if mine.provider == theirs.provider && mine.host_matching == theirs.host_matching {
        return None;
    }
    let cause = if mine.provider == theirs.provider {
        "their matching probes or settings (mtl_rofi_host_matching, \
         mtl_rofi_matching_probe) disagreed"
    } else {
        "they were given different providers (mtl_rofi_provider_include, FI_PROVIDER; \
         Open MPI 5.0's mpirun does not pass -x variables on to spawned jobs)"
    };
    Some(format!(
        "this process uses {mine} and a peer {theirs}: {cause}. A job spawned by \
         rofi processes chooses as they did (mtl_rofi_{PARAM}); processes started apart \
         need the same mtl_rofi_provider_include and mtl_rofi_host_matching \
         (see mtl_rofi_verbose 1)"
    ))
}

#[cfg(test)]
#[path = "inherit_tests.rs"]
mod tests;
