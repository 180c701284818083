//! Compiles the MPI C test programs (tests/programs/*.c, tests/fixtures/*.c) and the
//! benchmark programs (tests/bench/*.c, used by tools/bench) with the
//! `mpicc` of the Open MPI we build against, and tells the harness where things are.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let install = ompi_build::require();
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("programs");
    std::fs::create_dir_all(&out).unwrap();
    for dir in ["tests/programs", "tests/fixtures", "tests/bench"] {
        println!("cargo:rerun-if-changed={dir}");
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut sources: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "c"))
            .collect();
        sources.sort();
        for source in sources {
            compile(&install.mpicc, &source, &out);
        }
    }
    let component_dir = install.component_dir().unwrap_or_else(|e| panic!("{e}"));
    println!("cargo:rustc-env=RMCA_PROGRAMS_DIR={}", out.display());
    println!("cargo:rustc-env=RMCA_MPIRUN={}", install.mpirun.display());
    println!(
        "cargo:rustc-env=RMCA_SYSTEM_COMPONENT_DIR={}",
        component_dir.display()
    );
}

fn compile(mpicc: &Path, source: &Path, out: &Path) {
    let name = source.file_stem().unwrap().to_string_lossy().into_owned();
    let status = Command::new(mpicc)
        .args(["-O2", "-g", "-Wall", "-Wextra", "-Werror", "-pthread", "-I"])
        .arg(source.parent().unwrap())
        .arg("-o")
        .arg(out.join(&name))
        .arg(source)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", mpicc.display()));
    assert!(status.success(), "mpicc failed on {}", source.display());
    println!("cargo:rerun-if-changed={}", source.display());
}
