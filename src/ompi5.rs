//! Open MPI 5.0.x (`make ompi5`, configure-support/ompi5) with our components built
//! against it (`make components-ompi5`: build/ompi5/mca).
//!
//! The tests on it (tests/ompi5.rs) print why they skip and pass when either is
//! missing, so that `make check` on 4.1 alone does not need the 5.0 build;
//! `make check-ompi5` builds both first and sets `RMCA_REQUIRE_OMPI5=1`, which turns
//! a missing one into a failure.

use std::path::{Path, PathBuf};

use crate::static_ompi::{is_installation, path_from_env, skip_unless_required};
use crate::{McaConfig, repo_root};

/// `RMCA_OMPI5_PREFIX` (set by `make check-ompi5` to `make -s ompi5-prefix`).
pub fn prefix() -> PathBuf {
    path_from_env("RMCA_OMPI5_PREFIX", || {
        repo_root().join("build/ompi5/no-prefix-given")
    })
}

/// Where `make components-ompi5` puts our components built against [`prefix`].
pub fn component_dir() -> PathBuf {
    repo_root().join("build/ompi5/mca")
}

/// `config` on Open MPI 5 with our 5.0 components, named `<name>-ompi5`.
pub fn on_ompi5(config: McaConfig) -> McaConfig {
    let name = format!("{}-ompi5", config.name);
    config
        .on_prefix_with(&prefix(), &component_dir())
        .named(&name)
}

/// The release of the installation at [`prefix`] as its `ompi_info` names it ("5.0.7",
/// "6.0.0rc2"; the 5.0 tests also run on 6.0, whose interfaces are 5.0's); empty if it
/// cannot say.
pub fn release() -> String {
    std::process::Command::new(prefix().join("bin/ompi_info"))
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("Open MPI v"))
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

/// Whether the installation and our components for it exist (see [`available_at`]).
pub fn available() -> bool {
    available_at(&prefix(), &component_dir())
}

/// True when `prefix` holds an Open MPI 5 installation and `components` our
/// components. Otherwise prints that the test is skipped and how to get them, and
/// returns false, unless `RMCA_REQUIRE_OMPI5` is set: then it panics.
pub fn available_at(prefix: &Path, components: &Path) -> bool {
    let installed = is_installation(prefix);
    // rofi and rusnic: the two that the libfabric 2 build (build/libfabric2-ompi5) has
    // too; a missing rsmcuda fails its own jobs by name.
    let built = ["mca_btl_rusnic.so", "mca_mtl_rofi.so"]
        .iter()
        .all(|so| components.join(so).is_file());
    if installed && built {
        return true;
    }
    let why = if installed {
        format!(
            "no components built for Open MPI 5 in {} (`make components-ompi5`)",
            components.display()
        )
    } else {
        format!(
            "no Open MPI 5 at {} (RMCA_OMPI5_PREFIX; `make check-ompi5` builds it and \
             runs these tests)",
            prefix.display()
        )
    };
    skip_unless_required("RMCA_REQUIRE_OMPI5", &why)
}
