//! The layout check (`mca::layout`): a component built against another build of the
//! same Open MPI release, whose structures differ, refuses to run with one message
//! naming both layouts, and Open MPI carries on without it.
//!
//! The mismatched build is real: rusnic compiled (its own target directory) against a
//! copy of this Open MPI 4.1.4's headers whose `opal_config.h` says `OPAL_ENABLE_DEBUG
//! 1`, as a debug build of 4.1.4 installs them; the library that loads it is the
//! packaged, non-debug 4.1.4. The matching build (build/mca) runs in every other test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mca_harness::{Job, McaConfig, program, repo_root};

/// The include directories of the Open MPI in `PATH`, as its wrapper compiler says.
fn include_dirs() -> Vec<PathBuf> {
    let out = Command::new("mpicc")
        .arg("--showme:incdirs")
        .output()
        .expect("run mpicc --showme:incdirs");
    assert!(out.status.success(), "mpicc --showme:incdirs failed");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(PathBuf::from)
        .collect()
}

/// `dirs` copied under `into` (each by its own name), with `OPAL_ENABLE_DEBUG` turned on
/// in the copy's `opal_config.h`; returns the copies in the same order.
fn debug_headers(dirs: &[PathBuf], into: &Path) -> Vec<PathBuf> {
    let _ = std::fs::remove_dir_all(into);
    std::fs::create_dir_all(into).expect("create the header copy directory");
    // Copy the outermost directory once; the inner ones are found inside the copy.
    let outer = dirs
        .iter()
        .min_by_key(|d| d.components().count())
        .expect("mpicc names include directories");
    let status = Command::new("cp")
        .arg("-r")
        .arg(outer)
        .arg(into.join("include"))
        .status()
        .expect("run cp");
    assert!(status.success(), "copying {} failed", outer.display());
    let copies: Vec<PathBuf> = dirs
        .iter()
        .map(|d| {
            let inner = d.strip_prefix(outer).expect("nested include directories");
            into.join("include").join(inner)
        })
        .collect();
    let config = copies
        .iter()
        .map(|d| d.join("opal_config.h"))
        .find(|f| f.is_file())
        .expect("opal_config.h in an include directory");
    let text = std::fs::read_to_string(&config).expect("read opal_config.h");
    let release = "#define OPAL_ENABLE_DEBUG 0\n";
    assert!(
        text.contains(release),
        "{} is not a release build's",
        config.display()
    );
    std::fs::write(
        &config,
        text.replace(release, "#define OPAL_ENABLE_DEBUG 1\n"),
    )
    .expect("write opal_config.h");
    copies
}

#[test]
fn a_component_built_against_a_debug_build_refuses_to_run_in_a_release_build() {
    let work = repo_root().join("build/layout-check");
    let copies = debug_headers(&include_dirs(), &work.join("headers"));
    let includes = std::env::join_paths(&copies).expect("include path list");
    let target = repo_root().join("target/layout-check");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "--quiet", "-p", "btl-rusnic"])
        .env("OMPI_BUILD_TREE_INCLUDES", &includes)
        .env("CARGO_TARGET_DIR", &target)
        // Only its refusal is exercised: compile it quickly, not well.
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_LTO", "false")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
        .current_dir(repo_root())
        .status()
        .expect("run cargo build");
    assert!(
        status.success(),
        "building rusnic against the debug headers failed"
    );

    let components = work.join("mca");
    std::fs::create_dir_all(&components).expect("create the component directory");
    std::fs::copy(
        target.join("release/libmca_btl_rusnic.so"),
        components.join("mca_btl_rusnic.so"),
    )
    .expect("place mca_btl_rusnic.so");
    for help in std::fs::read_dir(repo_root().join("build/mca")).expect("build/mca") {
        let help = help.expect("build/mca entry").path();
        if help.extension().is_some_and(|e| e == "txt") {
            std::fs::copy(&help, components.join(help.file_name().expect("name")))
                .expect("place a help file");
        }
    }
    let path = format!(
        "{}:{}",
        components.display(),
        env!("RMCA_SYSTEM_COMPONENT_DIR")
    );

    // Asked for by name: the job fails, with the reason.
    let config = McaConfig::new(
        "rusnic-debug-headers",
        &[("pml", "ob1"), ("btl", "self,rusnic")],
    );
    let out = Job::new(&config, 2, program("checker_selftest"))
        .env("OMPI_MCA_mca_base_component_path", &path)
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_refused_with(&[
        "The rusnic component refuses to run in this process",
        "whose structures differ from this one's",
        "opal_object_t is 16 bytes there, 40 in ours",
        "Rebuild it against this installation",
    ]);

    // Among others (the default BTL list): Open MPI carries on without it.
    let others = McaConfig::new("default-btls", &[("pml", "ob1")]);
    let out = Job::new(&others, 2, program("checker_selftest"))
        .env("OMPI_MCA_mca_base_component_path", &path)
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_passed();
    let log = format!("{}{}", out.stdout, out.stderr);
    assert!(
        log.contains("whose structures differ from this one's"),
        "the refusal was not shown\n{}",
        out.report()
    );
}
