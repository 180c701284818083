//! What the configurations need before they run: the scratch install of
//! `default+ours`, and the Open MPI 5 installation the 5.0 ones run on.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use mca_harness::{component_build_dir, repo_root};

use super::registry::{BenchConfig, installed_dir};
use super::series::Series;

/// Makes what the configurations need before they run: the scratch install of
/// `default+ours`.
pub fn prepare(configs: &[BenchConfig]) -> Result<(), String> {
    if !configs.iter().any(|c| c.config.name == "default+ours") {
        return Ok(());
    }
    let dir = installed_dir();
    let _ = std::fs::remove_dir_all(&dir);
    let out = std::process::Command::new(
        mca_harness::repo_root().join("configure-support/install-components"),
    )
    .arg(component_build_dir())
    .arg(&dir)
    .output()
    .map_err(|e| format!("install-components: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "install-components into {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// The Open MPI 5 installation: `RMCA_OMPI5_PREFIX`, else what
/// `configure-support/ompi5 --print-prefix` (`make -s ompi5-prefix`) prints. The
/// script answers at once when `make ompi5` has built it (and builds it otherwise: its
/// progress goes to stderr).
pub fn ompi5_prefix() -> Result<PathBuf, String> {
    if let Some(prefix) = std::env::var_os("RMCA_OMPI5_PREFIX").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(prefix));
    }
    let script = repo_root().join("configure-support/ompi5");
    let out = Command::new(&script)
        .arg("--print-prefix")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout.lines().map(str::trim).rfind(|l| !l.is_empty()) {
        Some(prefix) if out.status.success() => Ok(PathBuf::from(prefix)),
        _ => Err(format!(
            "{} --print-prefix failed ({}): no Open MPI 5 prefix; `make ompi5` builds it, \
             or set RMCA_OMPI5_PREFIX",
            script.display(),
            out.status
        )),
    }
}

/// Checks that every configuration can run here, and points the 5.0 ones at the
/// installation `prefix5()` names (asked only if there is one) with ours from
/// `components5`. Returns that prefix, if asked. Ours must have been built for their
/// series (`make`, `make components-ompi5`), which is checked before the prefix is
/// asked for.
pub fn locate(
    configs: &mut [BenchConfig],
    components5: &Path,
    prefix5: impl FnOnce() -> Result<PathBuf, String>,
) -> Result<Option<PathBuf>, String> {
    for c in configs.iter() {
        let Some(file) = c.needs else { continue };
        match c.series {
            Series::Ompi41 if !component_build_dir().join(file).is_file() => {
                return Err(format!(
                    "{} needs build/mca/{file} (run make first)",
                    c.config.name
                ));
            }
            Series::Ompi50 if !components5.join(file).is_file() => {
                return Err(format!(
                    "{} needs {file} built against Open MPI 5 in {}: run `make components-ompi5` \
                     (it builds Open MPI 5.0.7 first, as `make ompi5` does, if needed)",
                    c.config.name,
                    components5.display()
                ));
            }
            _ => {}
        }
    }
    if !configs.iter().any(|c| c.series == Series::Ompi50) {
        return Ok(None);
    }
    let prefix = prefix5()?;
    if !mca_harness::static_ompi::is_installation(&prefix) {
        return Err(format!(
            "no Open MPI 5 installation at {} (bin/mpirun, bin/mpicc, bin/ompi_info): \
             `make ompi5` builds one and `make -s ompi5-prefix` prints its prefix; \
             RMCA_OMPI5_PREFIX names another",
            prefix.display()
        ));
    }
    // The stock 5.0 configurations see the same component path as ours, as the 4.1
    // ones do (build/mca first): it must exist for mpirun to parse it.
    std::fs::create_dir_all(components5).map_err(|e| format!("{}: {e}", components5.display()))?;
    for c in configs.iter_mut().filter(|c| c.series == Series::Ompi50) {
        c.config = c.config.clone().on_prefix_with(&prefix, components5);
    }
    Ok(Some(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configs::spec::resolve;

    /// A scratch directory with an installation-shaped prefix and a component
    /// directory holding `so` (empty files: locate only looks).
    fn scratch(test: &str, so: &[&str]) -> (PathBuf, PathBuf, PathBuf) {
        let root = std::env::temp_dir().join(format!("rmca-bench-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let prefix = root.join("prefix");
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        for tool in ["mpirun", "mpicc", "ompi_info"] {
            std::fs::write(prefix.join("bin").join(tool), "").unwrap();
        }
        let components = root.join("mca");
        std::fs::create_dir_all(&components).unwrap();
        for file in so {
            std::fs::write(components.join(file), "").unwrap();
        }
        (root, prefix, components)
    }

    #[test]
    fn locate_points_the_ompi5_configurations_at_the_installation() {
        let (root, prefix, components) = scratch("locate", &["mca_btl_rusnic.so"]);
        let mut configs = vec![
            resolve("stock-tcp").unwrap(),
            resolve("stock-tcp-ompi5").unwrap(),
            resolve("rusnic-ompi5").unwrap(),
        ];
        let found = locate(&mut configs, &components, || Ok(prefix.clone())).unwrap();
        assert_eq!(found.as_deref(), Some(prefix.as_path()));
        assert!(configs[0].config.prefix.is_none());
        for c in &configs[1..] {
            assert_eq!(c.config.prefix.as_deref(), Some(prefix.as_path()));
            assert_eq!(c.config.components.as_deref(), Some(components.as_path()));
            assert_eq!(c.config.mpirun(), prefix.join("bin/mpirun"));
        }
        // Without a 5.0 configuration the prefix is not asked for.
        let mut only41 = vec![resolve("stock-vader").unwrap()];
        let asked = locate(&mut only41, &components, || panic!("asked")).unwrap();
        assert!(asked.is_none());
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn locate_names_the_make_target_of_what_is_missing() {
        let (root, prefix, components) = scratch("missing", &[]);
        // Ours not built for 5.0: refused before the prefix is asked for.
        let mut configs = vec![resolve("rsmcuda-ompi5").unwrap()];
        let e = locate(&mut configs, &components, || panic!("asked")).unwrap_err();
        assert!(
            e.contains("make components-ompi5") && e.contains("mca_btl_rsmcuda.so"),
            "{e}"
        );
        // No installation at the prefix.
        let mut configs = vec![resolve("stock-sm-ompi5").unwrap()];
        let e = locate(&mut configs, &components, || Ok(root.join("nowhere"))).unwrap_err();
        assert!(
            e.contains("make ompi5") && e.contains("RMCA_OMPI5_PREFIX"),
            "{e}"
        );
        // The finder's own error passes through.
        let e = locate(&mut configs, &components, || Err("no prefix".to_owned())).unwrap_err();
        assert_eq!(e, "no prefix");
        assert!(locate(&mut configs, &components, || Ok(prefix.clone())).is_ok());
        let _ = std::fs::remove_dir_all(root);
    }
}
