//! Build-time discovery of the Open MPI installation our components are built against.
//!
//! Bindings must come from the `opal_config.h` of the Open MPI that will load us
//! (`OPAL_ENABLE_DEBUG` and `OPAL_CUDA_SUPPORT` change struct layouts), so every
//! build script asks this crate rather than guessing paths.
//!
//! Selection: `OMPI_PREFIX=<prefix>` uses `<prefix>/bin/mpicc`; otherwise the
//! `mpicc` found in `PATH`. Everything else is asked of that wrapper compiler
//! (`--showme:incdirs`, `--showme:libdirs`) and of the `ompi_info` beside it.
//!
//! Build-tree mode: `OMPI_BUILD_TREE_INCLUDES=<dir>:<dir>...` (set by
//! configure-support/ompi-tree/cargo-object while Open MPI's own `make` builds a
//! component) takes the headers straight from an Open MPI source and build tree
//! that is not installed yet: the listed directories are the `-I` flags Open MPI
//! compiles its components with, and one of them holds the generated
//! `opal_config.h`. Nothing is linked in that mode: the component becomes part of
//! the libraries being built, and their `Makefile.am` links it.

pub mod missing;

use std::path::{Path, PathBuf};
use std::process::Command;

/// One Open MPI installation, as its own wrapper compiler describes it.
#[derive(Debug, Clone)]
pub struct OmpiInstall {
    /// The wrapper compiler used to compile C test programs and shims.
    pub mpicc: PathBuf,
    /// `ompi_info` of the same installation.
    pub ompi_info: PathBuf,
    /// `mpirun` of the same installation.
    pub mpirun: PathBuf,
    /// Include directories, in the order `mpicc --showme:incdirs` gives them.
    pub include_dirs: Vec<PathBuf>,
    /// Library directories (`mpicc --showme:libdirs`).
    pub lib_dirs: Vec<PathBuf>,
    /// The directory holding `opal_config.h` and the internal `opal/`, `ompi/` trees.
    pub devel_include_dir: PathBuf,
    /// `(major, minor, release)` read from `opal/version.h`.
    pub version: (u32, u32, u32),
    /// `OPAL_GREEK_VERSION` of `opal/version.h`: "" for a release, "rc2" for a release
    /// candidate.
    pub greek: String,
    /// Headers from an Open MPI build tree (`OMPI_BUILD_TREE_INCLUDES`), not an
    /// installation: `mpicc`, `ompi_info` and `mpirun` do not exist yet and the
    /// libraries are not to be linked.
    pub build_tree: bool,
}

/// What went wrong while locating Open MPI, worded for the person running the build.
#[derive(Debug)]
pub struct LocateError(pub String);

impl std::fmt::Display for LocateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LocateError {}

const HEADER_HINT: &str = "The Open MPI internal (devel) headers are required. On Debian/Ubuntu \
     install `libopenmpi-dev` (run configure-support/setup); for an Open MPI built from source, \
     configure it with `--with-devel-headers` and point OMPI_PREFIX at its prefix.";

fn run(cmd: &Path, args: &[&str]) -> Result<String, LocateError> {
    let out = Command::new(cmd).args(args).output().map_err(|e| {
        LocateError(format!(
            "cannot run `{} {}`: {e}",
            cmd.display(),
            args.join(" ")
        ))
    })?;
    if !out.status.success() {
        return Err(LocateError(format!(
            "`{} {}` failed: {}",
            cmd.display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

fn tool_beside(mpicc: &Path, name: &str) -> PathBuf {
    let sibling = mpicc.with_file_name(name);
    if sibling.is_file() {
        sibling
    } else {
        find_in_path(name).unwrap_or(sibling)
    }
}

/// Parses `#define NAME <number>` out of a header's text.
pub fn define_value(header_text: &str, name: &str) -> Option<u32> {
    header_text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some("#define") && words.next() == Some(name))
            .then(|| words.next()?.parse().ok())
            .flatten()
    })
}

/// Reads `(major, minor, release)` out of `<devel_include_dir>/opal/version.h`.
fn read_version(version_h: &Path) -> Result<(u32, u32, u32), LocateError> {
    let text = std::fs::read_to_string(version_h).map_err(|e| {
        LocateError(format!(
            "cannot read {}: {e}. {HEADER_HINT}",
            version_h.display()
        ))
    })?;
    let part = |name| {
        define_value(&text, name)
            .ok_or_else(|| LocateError(format!("{} defines no {name}", version_h.display())))
    };
    Ok((
        part("OPAL_MAJOR_VERSION")?,
        part("OPAL_MINOR_VERSION")?,
        part("OPAL_RELEASE_VERSION")?,
    ))
}

/// Reads `OPAL_GREEK_VERSION` (a quoted string) out of `opal/version.h`.
fn read_greek(version_h: &Path) -> String {
    let text = std::fs::read_to_string(version_h).unwrap_or_default();
    text.lines()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("#define") && words.next() == Some("OPAL_GREEK_VERSION"))
                .then(|| words.next().map(|w| w.trim_matches('"').to_owned()))
                .flatten()
        })
        .unwrap_or_default()
}

/// The Open MPI series these components are written for: 4.1.x (BTL 3.1.0, MTL 2.0.0),
/// 5.0.x (BTL 3.3.0, MTL 2.0.0 with accelerator support, PMIx, the accelerator
/// framework) and 6.0.x (the interfaces of 5.0; the internals in `libopen_mpi`).
/// Anything else gets an error naming what was found.
pub const SUPPORTED_SERIES: &[(u32, u32)] = &[(4, 1), (5, 0), (6, 0)];

fn require_supported_version(version: (u32, u32, u32), origin: &Path) -> Result<(), LocateError> {
    if SUPPORTED_SERIES.contains(&(version.0, version.1)) {
        return Ok(());
    }
    let supported: Vec<String> = SUPPORTED_SERIES
        .iter()
        .map(|(major, minor)| format!("{major}.{minor}.x"))
        .collect();
    let (last, first) = supported.split_last().expect("a supported series");
    Err(LocateError(format!(
        "Open MPI {}.{}.{} at {} is not supported: these components are built for Open MPI {} and {last}",
        version.0,
        version.1,
        version.2,
        origin.display(),
        first.join(", ")
    )))
}

/// Build-tree mode: the headers of an Open MPI being built, from the `-I` list
/// its own Makefiles use (see the module documentation).
fn locate_build_tree(list: &std::ffi::OsStr) -> Result<OmpiInstall, LocateError> {
    let include_dirs: Vec<PathBuf> = std::env::split_paths(list)
        .filter(|dir| !dir.as_os_str().is_empty())
        .collect();
    let find = |file: &str| include_dirs.iter().find(|dir| dir.join(file).is_file());
    let devel_include_dir = find("opal_config.h").cloned().ok_or_else(|| {
        LocateError(format!(
            "OMPI_BUILD_TREE_INCLUDES={include_dirs:?}: no directory holds opal_config.h; \
             run Open MPI's configure first"
        ))
    })?;
    for header in ["opal/mca/btl/btl.h", "ompi/mca/mtl/mtl.h", "opal/version.h"] {
        if find(header).is_none() {
            return Err(LocateError(format!(
                "OMPI_BUILD_TREE_INCLUDES={include_dirs:?}: no directory holds {header}"
            )));
        }
    }
    let version_h = find("opal/version.h")
        .expect("checked above")
        .join("opal/version.h");
    let version = read_version(&version_h)?;
    require_supported_version(version, &version_h)?;
    Ok(OmpiInstall {
        greek: read_greek(&version_h),
        mpicc: PathBuf::from("mpicc"),
        ompi_info: PathBuf::from("ompi_info"),
        mpirun: PathBuf::from("mpirun"),
        include_dirs,
        lib_dirs: Vec::new(),
        devel_include_dir,
        version,
        build_tree: true,
    })
}

/// Finds the Open MPI installation selected by `OMPI_PREFIX` or `PATH`, or the
/// build tree named by `OMPI_BUILD_TREE_INCLUDES`.
pub fn locate() -> Result<OmpiInstall, LocateError> {
    if let Some(list) = std::env::var_os("OMPI_BUILD_TREE_INCLUDES").filter(|l| !l.is_empty()) {
        return locate_build_tree(&list);
    }
    let mpicc = match std::env::var_os("OMPI_PREFIX") {
        Some(prefix) if !prefix.is_empty() => {
            let candidate = Path::new(&prefix).join("bin").join("mpicc");
            if !candidate.is_file() {
                return Err(LocateError(format!(
                    "OMPI_PREFIX={} has no bin/mpicc; point it at an Open MPI installation prefix",
                    candidate
                        .parent()
                        .and_then(Path::parent)
                        .unwrap_or(Path::new("?"))
                        .display()
                )));
            }
            candidate
        }
        _ => find_in_path("mpicc").ok_or_else(|| {
            LocateError(format!(
                "no `mpicc` in PATH and OMPI_PREFIX is not set: cannot find Open MPI. {HEADER_HINT}"
            ))
        })?,
    };
    let split =
        |text: String| -> Vec<PathBuf> { text.split_whitespace().map(PathBuf::from).collect() };
    let include_dirs = split(run(&mpicc, &["--showme:incdirs"])?);
    let lib_dirs = split(run(&mpicc, &["--showme:libdirs"])?);

    let devel_include_dir = include_dirs
        .iter()
        .flat_map(|dir| [dir.clone(), dir.join("openmpi")])
        .find(|dir| dir.join("opal/mca/btl/btl.h").is_file() && dir.join("opal_config.h").is_file())
        .ok_or_else(|| {
            LocateError(format!(
                "Open MPI found through {} but its devel headers (opal_config.h, \
                 opal/mca/btl/btl.h) are not under {:?}. {HEADER_HINT}",
                mpicc.display(),
                include_dirs
            ))
        })?;

    let version = read_version(&devel_include_dir.join("opal/version.h"))?;
    require_supported_version(version, &mpicc)?;
    Ok(OmpiInstall {
        greek: read_greek(&devel_include_dir.join("opal/version.h")),
        ompi_info: tool_beside(&mpicc, "ompi_info"),
        mpirun: tool_beside(&mpicc, "mpirun"),
        mpicc,
        include_dirs,
        lib_dirs,
        devel_include_dir,
        version,
        build_tree: false,
    })
}

impl OmpiInstall {
    /// The version as the runtime's `opal_version_string` spells it ("4.1.4",
    /// "6.0.0rc2").
    pub fn version_string(&self) -> String {
        format!(
            "{}.{}.{}{}",
            self.version.0, self.version.1, self.version.2, self.greek
        )
    }

    /// The directory `ompi_info` loads components from (`ompi_info --path pkglibdir`).
    pub fn component_dir(&self) -> Result<PathBuf, LocateError> {
        let text = run(&self.ompi_info, &["--path", "pkglibdir", "--parsable"])?;
        text.lines()
            .find_map(|line| line.strip_prefix("path:pkglibdir:"))
            .map(|dir| PathBuf::from(dir.trim()))
            .ok_or_else(|| LocateError(format!("ompi_info printed no pkglibdir: {text}")))
    }

    /// Tells cargo when a build script that used this installation must run again.
    pub fn emit_rerun_hints(&self) {
        println!("cargo:rerun-if-env-changed=OMPI_PREFIX");
        println!("cargo:rerun-if-env-changed=OMPI_BUILD_TREE_INCLUDES");
        println!("cargo:rerun-if-env-changed=PATH");
        println!(
            "cargo:rerun-if-changed={}",
            self.devel_include_dir.join("opal_config.h").display()
        );
    }
}

/// For build scripts: locate Open MPI or stop the build with the reason.
pub fn require() -> OmpiInstall {
    match locate() {
        Ok(install) => {
            install.emit_rerun_hints();
            install
        }
        Err(e) => {
            // A build script communicates failure by exiting non-zero; cargo shows stderr.
            eprintln!("error: {e}");
            println!("cargo:warning={e}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{define_value, locate_build_tree};
    use std::path::{Path, PathBuf};

    /// A source/build tree pair with just the headers build-tree mode looks for.
    fn fake_tree(name: &str, (major, minor): (u32, u32), with_config: bool) -> (PathBuf, PathBuf) {
        let root = std::env::temp_dir().join(format!("ompi-build-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (src, obj) = (root.join("src"), root.join("obj/opal/include"));
        let write = |path: PathBuf, text: &str| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(src.join("opal/mca/btl/btl.h"), "");
        write(src.join("ompi/mca/mtl/mtl.h"), "");
        write(
            obj.join("opal/version.h"),
            &format!(
                "#define OPAL_MAJOR_VERSION {major}\n#define OPAL_MINOR_VERSION {minor}\n\
                 #define OPAL_RELEASE_VERSION 4\n"
            ),
        );
        if with_config {
            write(obj.join("opal_config.h"), "");
        }
        (src, obj)
    }

    fn list(dirs: &[&Path]) -> std::ffi::OsString {
        std::env::join_paths(dirs).unwrap()
    }

    #[test]
    fn build_tree_mode_takes_headers_from_the_listed_directories() {
        let (src, obj) = fake_tree("ok", (4, 1), true);
        let found = locate_build_tree(&list(&[&src, &obj])).unwrap();
        assert!(found.build_tree);
        assert_eq!(found.devel_include_dir, obj);
        assert_eq!(found.include_dirs, vec![src, obj]);
        assert_eq!(found.version, (4, 1, 4));
        assert!(found.lib_dirs.is_empty());
    }

    #[test]
    fn build_tree_mode_refuses_an_unconfigured_tree_and_other_series() {
        let (src, obj) = fake_tree("unconfigured", (4, 1), false);
        let err = locate_build_tree(&list(&[&src, &obj])).unwrap_err();
        assert!(err.0.contains("opal_config.h"), "{err}");
        let (src, obj) = fake_tree("v5", (5, 0), true);
        assert_eq!(
            locate_build_tree(&list(&[&src, &obj])).unwrap().version,
            (5, 0, 4)
        );
        let (src, obj) = fake_tree("v6", (6, 0), true);
        assert_eq!(
            locate_build_tree(&list(&[&src, &obj])).unwrap().version,
            (6, 0, 4)
        );
        // Past 6.0, and before 4.1: refused with the versions supported.
        for (name, series) in [
            ("v3", (3, 1)),
            ("v6-1", (6, 1)),
            ("v7", (7, 0)),
            ("v4-0", (4, 0)),
        ] {
            let (src, obj) = fake_tree(name, series, true);
            let err = locate_build_tree(&list(&[&src, &obj])).unwrap_err();
            let found = format!("Open MPI {}.{}.4", series.0, series.1);
            assert!(err.0.contains(&found), "{err}");
            assert!(err.0.contains("4.1.x, 5.0.x and 6.0.x"), "{err}");
        }
    }

    #[test]
    fn define_value_reads_numbers_and_ignores_lookalikes() {
        let text = "#define OPAL_MAJOR_VERSION_X 9\n#define OPAL_MAJOR_VERSION 4\n";
        assert_eq!(define_value(text, "OPAL_MAJOR_VERSION"), Some(4));
        assert_eq!(define_value(text, "OPAL_MINOR_VERSION"), None);
    }
}
