//! Bindings over the installed libfabric (found with pkg-config's `libfabric.pc`
//! when present, else the default include path), with the `static inline` API
//! wrapped as real functions.
//!
//! Another libfabric (configure-support/libfabric2's 2.1) is picked with nothing but
//! PKG_CONFIG_PATH=<prefix>/lib/pkgconfig: its headers for the bindings, its
//! library directory for the link. No runpath is embedded: the process must load
//! one libfabric.so.1 for every component (Open MPI's ofi MTL links it too), so
//! which one is the loader's choice (LD_LIBRARY_PATH). A library older than the
//! headers is refused: by `shim/load.c` when it lacks a symbol version the build
//! binds (1.17 has no FABRIC_1.8, 2.x's fi_getinfo), else by the components at
//! open (`check_runtime_version`).
//!
//! The library is not linked: the six functions the components call directly are
//! renamed in the headers (`fi_getinfo` → `rmca_fi_getinfo`, [`LOADED_FUNCTIONS`]) and
//! defined by `shim/load.c`, which loads libfabric.so.1 on first use and binds each at
//! the version this build's library gives it (read here with `readelf`).

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

/// The functions of libfabric the components call directly (everything else is
/// dispatch through the objects these return): renamed `rmca_<name>` in the headers and
/// defined by shim/load.c.
const LOADED_FUNCTIONS: [&str; 6] = [
    "fi_getinfo",
    "fi_freeinfo",
    "fi_dupinfo",
    "fi_fabric",
    "fi_strerror",
    "fi_version",
];

/// The library the build's headers belong to: pkg-config's libdir, else where the C
/// compiler would find it.
fn library_path() -> Option<PathBuf> {
    let from_pkg_config = pkg_config(&["--variable=libdir"])
        .map(|dir| PathBuf::from(dir).join("libfabric.so.1"))
        .filter(|p| p.is_file());
    from_pkg_config.or_else(|| {
        let out = Command::new("cc")
            .arg("-print-file-name=libfabric.so.1")
            .output()
            .ok()?;
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        path.is_absolute().then_some(path).filter(|p| p.is_file())
    })
}

/// Each of [`LOADED_FUNCTIONS`] with the version the linker would bind it to in
/// `library` (its default, `name@@VERSION`); "" where the library has no version for it.
fn default_versions(library: &std::path::Path) -> Vec<(&'static str, String)> {
    let symbols = Command::new("readelf")
        .args(["--dyn-syms", "--wide"])
        .arg(library)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_else(|e| {
            eprintln!(
                "error: readelf {}: {e} (install binutils)",
                library.display()
            );
            std::process::exit(1);
        });
    LOADED_FUNCTIONS
        .iter()
        .map(|&name| {
            let prefix = format!("{name}@@");
            let version = symbols
                .split_whitespace()
                .find_map(|word| word.strip_prefix(&prefix))
                .unwrap_or("")
                .to_owned();
            (name, version)
        })
        .collect()
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
    let header_dir = include_dirs
        .iter()
        .map(PathBuf::from)
        .chain([
            PathBuf::from("/usr/include"),
            PathBuf::from("/usr/local/include"),
        ])
        .find(|dir| dir.join("rdma/fabric.h").is_file());
    let Some(header_dir) = header_dir else {
        eprintln!(
            "error: libfabric headers (rdma/fabric.h) not found. Install `libfabric-dev` \
             (configure-support/setup does) or set PKG_CONFIG_PATH to a libfabric install."
        );
        std::process::exit(1);
    };
    // A rebuilt libfabric at the same prefix regenerates the bindings.
    println!(
        "cargo:rerun-if-changed={}",
        header_dir.join("rdma/fabric.h").display()
    );

    // 2.x put `data_progress` in a union with its successor `progress`: the
    // accessors in lib.rs follow the layout (cfg fabric_v2).
    println!("cargo::rustc-check-cfg=cfg(fabric_v2)");
    let header = std::fs::read_to_string(header_dir.join("rdma/fabric.h")).unwrap_or_default();
    let major = header
        .lines()
        .find_map(|l| l.trim().strip_prefix("#define FI_MAJOR_VERSION"))
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or_else(|| {
            eprintln!("error: no FI_MAJOR_VERSION in {}", header_dir.display());
            std::process::exit(1);
        });
    if major >= 2 {
        println!("cargo:rustc-cfg=fabric_v2");
    }

    let renames: Vec<String> = LOADED_FUNCTIONS
        .iter()
        .map(|name| format!("-D{name}=rmca_{name}"))
        .collect();
    let mut builder = bindgen::Builder::default()
        .header(umbrella.display().to_string())
        .clang_args(include_dirs.iter().map(|d| format!("-I{d}")))
        .clang_args(renames.iter().cloned())
        .allowlist_function("rmca_fi_.*")
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
        .clang_macro_fallback()
        // Its scratch files (a precompiled header, a probe source) go to OUT_DIR, not
        // into the source tree, which is where they land by default.
        .clang_macro_fallback_build_dir(out.as_path());
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

    let Some(library) = library_path() else {
        eprintln!(
            "error: libfabric.so.1 not found beside the headers in {} (pkg-config's libdir) \
             or where the C compiler looks. Install `libfabric1` / `libfabric-dev`.",
            header_dir.display()
        );
        std::process::exit(1);
    };
    println!("cargo:rerun-if-changed={}", library.display());
    let load_shim = manifest.join("shim/load.c");
    println!("cargo:rerun-if-changed={}", load_shim.display());
    let mut build = cc::Build::new();
    build
        .file(out.join("fabric_static_fns.c"))
        .file(load_shim)
        .include(manifest.join("../../ompi-headers"))
        .warnings(false);
    for name in LOADED_FUNCTIONS {
        build.define(name, format!("rmca_{name}").as_str());
    }
    for (name, version) in default_versions(&library) {
        build.define(
            &format!("RMCA_{}_VERSION", name.to_ascii_uppercase()),
            format!("\"{version}\"").as_str(),
        );
    }
    for dir in &include_dirs {
        build.include(dir);
    }
    build.compile("rmca_fabric_static_fns");
}

#[derive(Debug)]
struct FlagsAreU64;

impl bindgen::callbacks::ParseCallbacks for FlagsAreU64 {
    fn int_macro(&self, name: &str, value: i64) -> Option<bindgen::callbacks::IntKind> {
        (name.starts_with("FI_") && value >= 0).then_some(bindgen::callbacks::IntKind::U64)
    }
}
