//! Generates bindings over the Open MPI that `ompi-build` locates (OMPI_PREFIX or
//! the `mpicc` in PATH), compiles the macro shim and the wrappers of `static inline`
//! functions, and emits the framework version constants.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Names we bind. Everything else in the headers stays out of the bindings.
const ALLOW_PATTERNS: &[&str] = &[
    "opal_.*",
    "ompi_.*",
    "mca_.*",
    "rmca_.*",
    "OPAL_.*",
    "OMPI_.*",
    "MCA_.*",
    "MPI_.*",
    // The convertor's flags, renumbered in 6.0 (CONVERTOR_ACCELERATOR 0x00400000 on
    // 5.0 is CONVERTOR_RECV there).
    "CONVERTOR_.*",
];

/// The few hwloc items `mca::hwloc` uses to read the topology libopen-pal has already
/// loaded (`opal_hwloc_topology`). Named one by one: `hwloc_.*` would bind the whole API,
/// including hwloc's many `static inline` helpers, each needing a shim wrapper. All the
/// functions here are exported by libhwloc (hwloc 2.x), none is inline.
const HWLOC_FUNCTIONS: &[&str] = &[
    "hwloc_get_api_version",
    "hwloc_get_type_depth",
    "hwloc_get_nbobjs_by_depth",
    "hwloc_get_obj_by_depth",
    "hwloc_get_cpubind",
    "hwloc_bitmap_alloc",
    "hwloc_bitmap_free",
    "hwloc_bitmap_intersects",
];
const HWLOC_TYPES: &[&str] = &["hwloc_cpubind_flags_t", "hwloc_get_type_depth_e"];
const HWLOC_VARS: &[&str] = &["HWLOC_API_VERSION"];

/// Items the allowlist would drag in but that must not be bound, each with its reason.
const BLOCKLIST: &[(&str, &str)] = &[
    // 128-bit long double fields: no stable Rust equivalent; nothing we call uses them.
    ("max_align_t", "contains long double"),
    // The C++ and Fortran-facing handles are never touched by components.
    ("ompi_mpi_.*_f", "Fortran handles"),
];

/// cm's functions and class objects live in its own component, not in libmpi: only
/// its request types are bound (`ffi/ompi-sys` bindgen over its private headers).
const CM_NOT_BOUND: &[&str] = &["mca_pml_cm_.*_class", "mca_pml_cm_[a-z_]*"];

fn main() {
    let install = ompi_build::require();
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let umbrella_dir = manifest.join("../../ompi-headers");
    let shim_dir = manifest.join("shim");
    println!(
        "cargo:rerun-if-changed={}",
        umbrella_dir.join("ompi.h").display()
    );
    for file in ["shim.h", "shim.c", "versions.c", "bindings.h"] {
        println!("cargo:rerun-if-changed={}", shim_dir.join(file).display());
    }

    let mut include_dirs = vec![umbrella_dir.clone(), shim_dir.clone()];
    include_dirs.extend(install.include_dirs.iter().cloned());
    include_dirs.push(install.devel_include_dir.clone());

    // The Open MPI series, for the crates above (their build scripts read
    // DEP_OPEN_PAL_SERIES and set `cfg(ompi5)`): the one place a 4.1/5.0 difference
    // in a type's shape is decided.
    println!("cargo:series={}", install.version.0);
    println!("cargo::rustc-check-cfg=cfg(ompi5)");
    if install.version.0 >= 5 {
        println!("cargo:rustc-cfg=ompi5");
    }
    let config_h = install.devel_include_dir.join("opal_config.h");
    let config = std::fs::read_to_string(&config_h).unwrap_or_else(|e| {
        eprintln!("error: cannot read {}: {e}", config_h.display());
        std::process::exit(1);
    });
    if ompi_build::missing::uses_external_pmix(&config) {
        match ompi_build::missing::pmix_include_dirs() {
            Ok(dirs) => include_dirs.extend(dirs),
            Err(why) => {
                eprintln!("error: Open MPI {}: {why}", install.version_string());
                std::process::exit(1);
            }
        }
    }
    // Headers the installation lacks come last (taken from its release's source):
    // bindgen reads them, and static_fns.c includes the header bindgen read.
    let private_dir = private_headers(&install, &include_dirs, &config, &manifest);
    if !include_dirs.contains(&private_dir) {
        include_dirs.push(private_dir);
    }
    generate_bindings(&include_dirs, &shim_dir, &out);
    compile_shims(&include_dirs, &shim_dir, &out);
    generate_versions(&install, &include_dirs, &shim_dir, &out);

    // In an Open MPI build tree the component becomes part of libopen-pal/libmpi
    // (or a DSO their Makefile.am links against them): nothing to link here.
    if !install.build_tree {
        for dir in &install.lib_dirs {
            println!("cargo:rustc-link-search=native={}", dir.display());
        }
        // libmpi for the MTL side (requests, communicators), libopen-pal for everything,
        // and the external hwloc libopen-pal itself links (Debian: --with-hwloc=external),
        // whose functions `mca::hwloc` calls on libopen-pal's topology. In the process the
        // component is loaded into they are already there; naming the library lets the
        // test executables link.
        println!("cargo:rustc-link-lib=dylib=mpi");
        // 6.0 moved the internals (communicators, requests, datatypes) out of libmpi
        // into libopen_mpi, which its mpicc links beside it.
        if install.version.0 >= 6 {
            println!("cargo:rustc-link-lib=dylib=open_mpi");
        }
        println!("cargo:rustc-link-lib=dylib=open-pal");
        println!("cargo:rustc-link-lib=dylib=hwloc");
    }
    println!(
        "cargo:include={}",
        include_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(":")
    );
}

/// The headers the build needs that the installation lacks: the cm PML's private
/// headers, whose request layout rofi reads (persistent buffered sends,
/// `mca_pml_cm_hvy_send_request_t`), never installed by Open MPI, and whichever headers
/// `opal_config.h` names that the package left out. Taken from the source tree of a
/// build-tree build, or else from that release's source by
/// configure-support/ompi-private-headers (cached; downloads Debian's source package
/// once). Returns the directory that holds them.
fn private_headers(
    install: &ompi_build::OmpiInstall,
    include_dirs: &[PathBuf],
    config: &str,
    manifest: &Path,
) -> PathBuf {
    const CM_HEADER: &str = "ompi/mca/pml/cm/pml_cm_sendreq.h";
    let found = |header: &str| include_dirs.iter().find(|d| d.join(header).is_file());
    let mut lacking: Vec<String> = ompi_build::missing::headers_named_by_config(config)
        .into_iter()
        .filter(|h| found(h).is_none())
        .collect();
    if lacking.is_empty()
        && let Some(dir) = found(CM_HEADER)
    {
        return dir.clone();
    }
    let script = manifest.join("../../configure-support/ompi-private-headers");
    println!("cargo:rerun-if-changed={}", script.display());
    // The headers taken include others the installation may lack too: ask again for
    // those until nothing is missing (a few rounds at most).
    for _ in 0..8 {
        let dir = run_private_headers(&script, &install.version_string(), &lacking);
        let mut everywhere = include_dirs.to_vec();
        everywhere.push(dir.clone());
        let more: Vec<String> = lacking
            .iter()
            .map(String::as_str)
            .chain(std::iter::once(CM_HEADER))
            .flat_map(|h| ompi_build::missing::project_includes(&dir.join(h)))
            .filter(|h| !everywhere.iter().any(|d| d.join(h).is_file()))
            .filter(|h| !lacking.contains(h))
            .collect();
        if more.is_empty() {
            for header in std::iter::once(CM_HEADER).chain(lacking.iter().map(String::as_str)) {
                println!("cargo:rerun-if-changed={}", dir.join(header).display());
            }
            return dir;
        }
        lacking.extend(more);
        lacking.sort();
        lacking.dedup();
    }
    eprintln!("error: the headers Open MPI lacks keep naming more missing headers: {lacking:?}");
    std::process::exit(1);
}

/// configure-support/ompi-private-headers VERSION LACKING...: the directory it prints.
fn run_private_headers(script: &Path, version: &str, lacking: &[String]) -> PathBuf {
    let printed = Command::new(script).arg(version).args(lacking).output();
    match &printed {
        Ok(o) if o.status.success() => PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
        _ => {
            eprintln!(
                "error: {} {version} could not provide the headers Open MPI {version} does \
                 not install (cm's request layout{}{}): {}",
                script.display(),
                if lacking.is_empty() { "" } else { ", " },
                lacking.join(", "),
                printed.as_ref().map_or_else(
                    |e| e.to_string(),
                    |o| String::from_utf8_lossy(&o.stderr).into_owned()
                )
            );
            std::process::exit(1);
        }
    }
}

fn generate_bindings(include_dirs: &[PathBuf], shim_dir: &Path, out: &Path) {
    let mut builder = bindgen::Builder::default()
        .header(shim_dir.join("bindings.h").display().to_string())
        .clang_args(include_dirs.iter().map(|d| format!("-I{}", d.display())))
        // Open MPI 5 types opal_short_float_t as gcc's _Float16, which libclang before 15
        // rejects on x86-64; a 2-byte integer has its size and alignment.
        .clang_arg("-D_Float16=unsigned short")
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .wrap_static_fns(true)
        .wrap_static_fns_path(out.join("static_fns"))
        .layout_tests(true)
        .derive_default(true)
        .derive_debug(false)
        .generate_comments(false)
        .prepend_enum_name(false)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .size_t_is_usize(true)
        .clang_macro_fallback()
        // Its scratch files (a precompiled header, a probe source) go to OUT_DIR, not
        // into the source tree, which is where they land by default.
        .clang_macro_fallback_build_dir(out);
    for pattern in ALLOW_PATTERNS {
        builder = builder
            .allowlist_function(pattern)
            .allowlist_type(pattern)
            .allowlist_var(pattern);
    }
    for name in HWLOC_FUNCTIONS {
        builder = builder.allowlist_function(name);
    }
    for name in HWLOC_TYPES {
        builder = builder.allowlist_type(name);
    }
    for name in HWLOC_VARS {
        builder = builder.allowlist_var(name);
    }
    for (pattern, _reason) in BLOCKLIST {
        builder = builder.blocklist_item(pattern);
    }
    for pattern in CM_NOT_BOUND {
        builder = builder.blocklist_function(pattern).blocklist_var(pattern);
    }
    let bindings = builder.generate().unwrap_or_else(|e| {
        eprintln!("error: bindgen could not parse the Open MPI headers: {e}");
        std::process::exit(1);
    });
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");
}

fn compile_shims(include_dirs: &[PathBuf], shim_dir: &Path, out: &Path) {
    let mut build = cc::Build::new();
    build
        .file(shim_dir.join("shim.c"))
        .file(out.join("static_fns.c"))
        .warnings(false);
    // opal's atomics wrap 128-bit compare-and-swap; Open MPI itself is compiled with
    // cmpxchg16b on x86-64, and without it the compiler calls libatomic instead.
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64") {
        build.flag("-mcx16");
    }
    for dir in include_dirs {
        build.include(dir);
    }
    build.compile("rmca_ompi_shim");
}

fn generate_versions(
    install: &ompi_build::OmpiInstall,
    include_dirs: &[PathBuf],
    shim_dir: &Path,
    out: &Path,
) {
    let exe = out.join("rmca_versions");
    let mut cmd = Command::new("cc");
    cmd.arg(shim_dir.join("versions.c")).arg("-o").arg(&exe);
    for dir in include_dirs {
        cmd.arg(format!("-I{}", dir.display()));
    }
    let status = cmd.status().expect("run cc for versions.c");
    assert!(
        status.success(),
        "compiling versions.c against {} failed",
        install.mpicc.display()
    );
    let printed = Command::new(&exe).output().expect("run rmca_versions");
    assert!(printed.status.success(), "rmca_versions failed");
    std::fs::write(out.join("versions.rs"), printed.stdout).expect("write versions.rs");
}
