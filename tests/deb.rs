//! `make deb`: the Debian package of ours for the Debian-packaged Open MPI they were
//! built against (configure-support/make-deb over build/mca). Its control fields, its
//! files, lintian, and a `dpkg -i` → ompi_info → jobs → `dpkg --purge` round in a
//! scratch overlay of this machine (tests/deb/install-remove).
//!
//! Build first: `make components` (build/mca).

use std::path::{Path, PathBuf};
use std::process::Command;

use mca_harness::{component_build_dir, repo_root, system_component_dir};

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Builds the package once per test binary into its own directory.
fn package() -> PathBuf {
    static DEB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DEB.get_or_init(|| {
        let out_dir = repo_root().join("target/deb-test");
        let _ = std::fs::remove_dir_all(&out_dir);
        let out = Command::new(repo_root().join("configure-support/make-deb"))
            .arg(component_build_dir())
            .arg(&out_dir)
            .env("DEBFULLNAME", "rmca tests")
            .env("DEBEMAIL", "rmca-tests@example.org")
            .output()
            .expect("run configure-support/make-deb");
        assert!(
            out.status.success(),
            "make-deb failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
    .clone()
}

fn field(deb: &Path, name: &str) -> String {
    run("dpkg-deb", &["-f", &deb.display().to_string(), name])
        .trim()
        .to_owned()
}

/// The package of the libopen-pal that this Open MPI's ompi_info reports, and its
/// installed version.
fn open_pal_package() -> (String, String) {
    let libdir = run("ompi_info", &["--path", "libdir", "--parsable"]);
    let libdir = libdir.trim().trim_start_matches("path:libdir:");
    let pal = std::fs::canonicalize(Path::new(libdir).join("libopen-pal.so"))
        .expect("libopen-pal.so in Open MPI's libdir");
    let owner = run("dpkg", &["-S", &pal.display().to_string()]);
    let owner = owner.split(':').next().unwrap().trim().to_owned();
    let version = run("dpkg-query", &["-W", "-f", "${Version}", &owner]);
    (owner, version)
}

#[test]
fn depends_on_exactly_the_open_mpi_it_was_built_against() {
    let deb = package();
    let (owner, version) = open_pal_package();
    let depends = field(&deb, "Depends");
    assert!(
        depends.starts_with(&format!("{owner} (= {version})")),
        "Depends: {depends}"
    );
    assert!(
        depends.contains("libfabric1") && depends.contains("libc6"),
        "Depends: {depends}"
    );
    assert_eq!(field(&deb, "Package"), "rmca-components");
    let release = run("ompi_info", &["--version"]);
    let release = release
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("Open MPI v");
    assert!(
        field(&deb, "Version").ends_with(&format!("+ompi{release}")),
        "{}",
        field(&deb, "Version")
    );
}

#[test]
fn holds_the_three_components_and_their_help_files_and_no_fixture() {
    let deb = package();
    let listing = run("dpkg-deb", &["-c", &deb.display().to_string()]);
    let pkglibdir = system_component_dir();
    let pkgdatadir = run("ompi_info", &["--path", "pkgdatadir", "--parsable"]);
    let pkgdatadir = pkgdatadir.trim().trim_start_matches("path:pkgdatadir:");
    let files: Vec<&str> = listing
        .lines()
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| l.split_whitespace().last())
        .map(|p| p.trim_start_matches('.'))
        .collect();
    for so in ["mca_btl_rusnic.so", "mca_mtl_rofi.so", "mca_btl_rsmcuda.so"] {
        assert!(
            files.contains(&format!("{pkglibdir}/{so}").as_str()),
            "{so} not in {pkglibdir}:\n{listing}"
        );
    }
    for help in [
        "help-rmca.txt",
        "help-mpi-btl-rusnic.txt",
        "help-mtl-rofi.txt",
        "help-mpi-btl-rsmcuda.txt",
    ] {
        for dir in [pkglibdir, pkgdatadir] {
            assert!(
                files.contains(&format!("{dir}/{help}").as_str()),
                "{help} not in {dir}:\n{listing}"
            );
        }
    }
    assert!(!listing.contains("rfixture"), "a test fixture:\n{listing}");
    assert!(
        files.contains(&"/usr/share/doc/rmca-components/copyright"),
        "{listing}"
    );
}

/// lintian, pedantic and with informational tags, finds nothing the package's override
/// file does not explain.
#[test]
fn lintian_finds_nothing_unexplained() {
    let deb = package();
    let out = Command::new("lintian")
        .args(["-I", "--pedantic", &deb.display().to_string()])
        .output()
        .expect("run lintian (configure-support/setup installs it)");
    let tags: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(": "))
        .map(str::to_owned)
        .collect();
    assert!(
        out.status.success() && tags.is_empty(),
        "lintian: {}\n{}",
        tags.join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// dpkg -i, ompi_info, a job through each of ours with Open MPI's own component path,
/// dpkg --purge: in a scratch overlay of this machine, which stays as it was.
#[test]
fn installs_runs_and_purges_without_a_trace() {
    let deb = package();
    let p2p_sizes = mca_harness::program("p2p_sizes");
    let programs = p2p_sizes.parent().expect("the programs' directory");
    let out = Command::new(repo_root().join("tests/deb/install-remove"))
        .arg(&deb)
        .arg(programs)
        .output()
        .expect("run tests/deb/install-remove");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("PASS: installed, listed, ran"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
