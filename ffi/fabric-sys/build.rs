//! Bindings over the installed libfabric (found with pkg-config's `libfabric.pc`
//! when present, else the default include path), with the `static inline` API
//! wrapped as real functions.

use std::path::PathBuf;
use std::process::Command;

fn pkg_config(args: &[&str]) -> Option<String> {
    let out = Command::new("pkg-config")
        .args(args)
        .arg("libfabric")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let umbrella = manifest.join("../../ompi-headers/fabric.h");
    println!("cargo:rerun-if-changed={}", umbrella.display());
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let cflags = pkg_config(&["--cflags"]).unwrap_or_default();
    let include_dirs: Vec<String> = cflags
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("-I").map(str::to_owned))
        .collect();
    let has_header = include_dirs
        .iter()
        .map(PathBuf::from)
        .chain([
            PathBuf::from("/usr/include"),
            PathBuf::from("/usr/local/include"),
        ])
        .any(|dir| dir.join("rdma/fabric.h").is_file());
    if !has_header {
        eprintln!(
            "error: libfabric headers (rdma/fabric.h) not found. Install `libfabric-dev` \
             (configure-support/setup does) or set PKG_CONFIG_PATH to a libfabric install."
        );
        std::process::exit(1);
    }

    let mut builder = bindgen::Builder::default()
        .header(umbrella.display().to_string())
        .clang_args(include_dirs.iter().map(|d| format!("-I{d}")))
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .allowlist_function("fi_.*")
        .allowlist_type("fi_.*|fid_.*|fid")
        .allowlist_var("FI_.*|fi_.*")
        .wrap_static_fns(true)
        .wrap_static_fns_path(out.join("fabric_static_fns"))
        .layout_tests(true)
        .derive_default(true)
        .generate_comments(false)
        .prepend_enum_name(false)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .size_t_is_usize(true)
        .clang_macro_fallback();
    // Bit flags are 64-bit in the API (uint64_t flags/caps) but bindgen guesses u32
    // for small literals: make every FI_ macro constant u64 unless it is negative.
    builder = builder.parse_callbacks(Box::new(FlagsAreU64));
    let bindings = builder.generate().unwrap_or_else(|e| {
        eprintln!("error: bindgen could not parse the libfabric headers: {e}");
        std::process::exit(1);
    });
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");

    let mut build = cc::Build::new();
    build
        .file(out.join("fabric_static_fns.c"))
        .include(manifest.join("../../ompi-headers"))
        .warnings(false);
    for dir in &include_dirs {
        build.include(dir);
    }
    build.compile("rmca_fabric_static_fns");
    if let Some(libs) = pkg_config(&["--libs-only-L"]) {
        for dir in libs.split_whitespace().filter_map(|f| f.strip_prefix("-L")) {
            println!("cargo:rustc-link-search=native={dir}");
        }
    }
    println!("cargo:rustc-link-lib=dylib=fabric");
}

#[derive(Debug)]
struct FlagsAreU64;

impl bindgen::callbacks::ParseCallbacks for FlagsAreU64 {
    fn int_macro(&self, name: &str, value: i64) -> Option<bindgen::callbacks::IntKind> {
        (name.starts_with("FI_") && value >= 0).then_some(bindgen::callbacks::IntKind::U64)
    }
}
