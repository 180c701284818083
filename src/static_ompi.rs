//! The Open MPI built from Debian's source package with our components compiled in
//! statically (`make static-ompi`, configure-support/static-ompi), and running test
//! programs on any such separate installation.
//!
//! Its tests (tests/static_build.rs) print why they skip and pass when the
//! installation is missing, so that `make check` does not need the long build;
//! `make check-static` builds it first and sets `RMCA_REQUIRE_STATIC_OMPI=1`, which
//! turns a missing installation into a failure.

pub mod checks;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::repo_root;

/// `RMCA_STATIC_OMPI_PREFIX`, or build/ompi-static/prefix where `make static-ompi`
/// installs.
pub fn prefix() -> PathBuf {
    path_from_env("RMCA_STATIC_OMPI_PREFIX", || {
        repo_root().join("build/ompi-static/prefix")
    })
}

/// The path in environment variable `var` when set and not empty, else `default()`.
pub fn path_from_env(var: &str, default: impl FnOnce() -> PathBuf) -> PathBuf {
    std::env::var_os(var)
        .filter(|p| !p.is_empty())
        .map_or_else(default, PathBuf::from)
}

/// Whether the static build exists (see [`prefix_available`]).
pub fn available() -> bool {
    prefix_available(&prefix())
}

/// Whether `prefix` holds an Open MPI installation (`bin/mpirun`, `bin/mpicc`,
/// `bin/ompi_info`).
pub fn is_installation(prefix: &Path) -> bool {
    ["bin/mpirun", "bin/mpicc", "bin/ompi_info"]
        .iter()
        .all(|tool| prefix.join(tool).is_file())
}

/// For a test that needs something that is missing (`why`): prints that it is skipped
/// and returns false, unless the environment variable `require` is set (a make target
/// that built it first): then it panics.
pub fn skip_unless_required(require: &str, why: &str) -> bool {
    if std::env::var_os(require).is_some_and(|v| !v.is_empty()) {
        panic!("{require} is set but there is {why}");
    }
    println!("SKIPPED: {why}");
    eprintln!("SKIPPED: {why}");
    false
}

/// True when `prefix` holds an Open MPI installation. Otherwise prints that the test
/// is skipped and how to build it, and returns false, unless `RMCA_REQUIRE_STATIC_OMPI`
/// is set: then it panics.
pub fn prefix_available(prefix: &Path) -> bool {
    if is_installation(prefix) {
        return true;
    }
    let why = format!(
        "no Open MPI installation at {} (`make static-ompi` builds it; \
         `make check-static` builds it and runs these tests)",
        prefix.display()
    );
    skip_unless_required("RMCA_REQUIRE_STATIC_OMPI", &why)
}

/// `name` (tests/{programs,fixtures,bench,ompi5}/NAME.c) compiled with
/// `<prefix>/bin/mpicc` into build/prefix-programs/<prefix path>/, once per test
/// binary and again whenever the source or the installation's `mpicc` is newer.
/// The wrapper's runpath makes the program load that installation's libmpi even
/// though the system has another one.
pub fn program_for(prefix: &Path, name: &str) -> PathBuf {
    // Tests of one binary run in parallel and may want the same program.
    static COMPILING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = COMPILING.lock().unwrap_or_else(|e| e.into_inner());

    let source = [
        "tests/programs",
        "tests/fixtures",
        "tests/bench",
        "tests/ompi5",
    ]
    .iter()
    .map(|dir| repo_root().join(dir).join(format!("{name}.c")))
    .find(|p| p.is_file())
    .unwrap_or_else(|| panic!("no tests/{{programs,fixtures,bench,ompi5}}/{name}.c"));
    let mpicc = prefix.join("bin/mpicc");
    let out_dir = repo_root().join("build/prefix-programs").join(
        prefix
            .display()
            .to_string()
            .trim_matches('/')
            .replace('/', "_"),
    );
    std::fs::create_dir_all(&out_dir).expect("create build/prefix-programs");
    let binary = out_dir.join(name);
    // check.h, for programs kept outside tests/programs (tests/ompi5).
    let includes = [
        source.parent().expect("source has a directory").to_owned(),
        repo_root().join("tests/programs"),
    ];
    compile_once(&mpicc, &source, &includes, &["-pthread"], &[], &binary);
    binary
}

/// Compiles `source` into `binary` with `mpicc` (warnings are errors), unless `binary`
/// is newer than the source, check.h and `mpicc`: `-I` for every directory of
/// `includes`, `flags` before and `libs` after the source.
pub(crate) fn compile_once(
    mpicc: &Path,
    source: &Path,
    includes: &[PathBuf],
    flags: &[&str],
    libs: &[&OsStr],
    binary: &Path,
) {
    let check_h = repo_root().join("tests/programs/check.h");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let fresh = modified(binary).is_some_and(|built| {
        [source, &check_h, mpicc]
            .iter()
            .all(|input| modified(input).is_some_and(|m| m <= built))
    });
    if fresh {
        return;
    }
    let mut command = Command::new(mpicc);
    command
        .args(["-O2", "-g", "-Wall", "-Wextra", "-Werror"])
        .args(flags);
    for dir in includes {
        command.arg("-I").arg(dir);
    }
    let out = command
        .arg("-o")
        .arg(binary)
        .arg(source)
        .args(libs)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", mpicc.display()));
    assert!(
        out.status.success(),
        "{} failed on {}:\n{}",
        mpicc.display(),
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `<prefix>/bin/ompi_info` with `args`, its own component directory only; stdout.
pub fn ompi_info(prefix: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let tool = prefix.join("bin/ompi_info");
    let out = Command::new(&tool)
        .args(args)
        .env_remove("OMPI_MCA_mca_base_component_path")
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", tool.display()));
    assert!(
        out.status.success(),
        "{} {} failed:\n{}",
        tool.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `RMCA_OMPI5_STATIC_PREFIX` (set by `make check-ompi5` to
/// `configure-support/static-ompi5 --print-prefix`): Open MPI 5.0.x built with our
/// components compiled in, cached outside the checkout.
pub fn ompi5_prefix() -> PathBuf {
    path_from_env("RMCA_OMPI5_STATIC_PREFIX", || {
        repo_root().join("build/ompi5-static/no-prefix-given")
    })
}

/// True when [`ompi5_prefix`] holds an Open MPI installation. Otherwise prints that
/// the test is skipped and how to build it, and returns false, unless
/// `RMCA_REQUIRE_OMPI5` is set (`make check-ompi5`): then it panics.
pub fn ompi5_available() -> bool {
    let prefix = ompi5_prefix();
    if is_installation(&prefix) {
        return true;
    }
    let why = format!(
        "no Open MPI 5 static build at {} (RMCA_OMPI5_STATIC_PREFIX; `make static-ompi5` \
         builds it, `make check-ompi5` builds it and runs these tests)",
        prefix.display()
    );
    skip_unless_required("RMCA_REQUIRE_OMPI5", &why)
}
