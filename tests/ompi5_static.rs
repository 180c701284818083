//! Our components compiled into Open MPI 5.0.7 itself: configure-support/static-ompi5
//! (`make static-ompi5`) drops them into 5.0.7's source with
//! configure-support/ompi-tree/into-tree and builds it with
//! `--enable-mca-static=btl-rusnic,btl-rsmcuda,mtl-rofi`, the BTLs inside libopen-pal
//! and the MTL inside libmpi. `ompi_info` reports 5.0.7 and lists ours with the 5.0
//! interfaces and no component directory at all, no `.so` of them is installed, none
//! of the Rust code beyond the component structures is exported, and the conformance
//! suite passes on that installation for rusnic, rofi (tcp;ofi_rxm) and rsmcuda.
//!
//! Every test prints `SKIPPED` and passes when `RMCA_OMPI5_STATIC_PREFIX` names no
//! installation; `make check-ompi5` builds it first, sets the variable and
//! `RMCA_REQUIRE_OMPI5=1`, which makes a missing installation an error.

use std::path::Path;

use mca_harness::static_ompi::{self, ompi_info};
use mca_harness::{McaConfig, assert_every_parameter_has_help, conformance_suite, ompi5};

fn on_static5(config: McaConfig) -> McaConfig {
    let name = format!("{}-ompi5-static", config.name);
    config
        .on_prefix(&static_ompi::ompi5_prefix())
        // Open MPI 5's PMIx lists the files it cannot load from the component path.
        .with_env("PMIX_MCA_mca_base_component_show_load_errors", "0")
        .named(&name)
}

fn rusnic() -> McaConfig {
    on_static5(McaConfig::new(
        "rusnic",
        &[("pml", "ob1"), ("btl", "self,rusnic")],
    ))
}

fn rofi_tcp() -> McaConfig {
    on_static5(McaConfig::new(
        "rofi-tcp",
        &[
            ("pml", "cm"),
            ("mtl", "rofi"),
            ("mtl_rofi_provider_include", "tcp;ofi_rxm"),
        ],
    ))
}

fn rsmcuda() -> McaConfig {
    on_static5(McaConfig::new(
        "rsmcuda",
        &[("pml", "ob1"), ("btl", "self,rsmcuda")],
    ))
}

// The skip lists of the same components built as plugins for 5.0 (tests/ompi5.rs):
// trunc_large is ob1's defect for every BTL; rofi passes all.
conformance_suite!(rusnic_ompi5_static, rusnic(), skip: ["trunc_large"]);
conformance_suite!(rofi_tcp_ompi5_static, rofi_tcp(), skip: []);
conformance_suite!(rsmcuda_ompi5_static, rsmcuda(), skip: ["trunc_large"]);

/// Ours, as `framework:component`, with the 5.0 interface version each implements and
/// the library that must contain it.
const OURS: &[(&str, &str, &str, &str)] = &[
    ("btl", "rusnic", "3.3.0", "libopen-pal.so"),
    ("btl", "rsmcuda", "3.3.0", "libopen-pal.so"),
    ("mtl", "rofi", "2.0.0", "libmpi.so"),
];

/// The components the `ompi_info` of `prefix` sees when its component path is an
/// empty directory (beside the static build's prefix): exactly those compiled into
/// the libraries.
fn components_without_dsos(prefix: &Path) -> String {
    let empty = static_ompi::ompi5_prefix().with_file_name("empty-component-dir");
    std::fs::create_dir_all(&empty).expect("create an empty component directory");
    ompi_info(
        prefix,
        &["--parsable"],
        &[
            (
                "OMPI_MCA_mca_base_component_path",
                empty.to_str().expect("utf-8 path"),
            ),
            ("PMIX_MCA_mca_base_component_show_load_errors", "0"),
        ],
    )
}

fn listed(ompi_info: &str, framework: &str, component: &str) -> bool {
    let prefix = format!("mca:{framework}:{component}:version:");
    ompi_info.lines().any(|l| l.starts_with(&prefix))
}

#[test]
fn ompi_info_reports_5_0_7_and_lists_ours_as_static_members() {
    if !static_ompi::ompi5_available() {
        return;
    }
    let prefix = static_ompi::ompi5_prefix();
    let everything = ompi_info(&prefix, &["--parsable"], &[]);
    assert!(
        everything.lines().any(|l| l == "ompi:version:full:5.0.7"),
        "ompi_info does not report Open MPI 5.0.7:\n{everything}"
    );
    let static_only = components_without_dsos(&prefix);
    for (framework, component, api, _) in OURS {
        let line = format!("mca:{framework}:{component}:version:\"api:{api}\"");
        assert!(
            everything.lines().any(|l| l == line),
            "no '{line}' in:\n{everything}"
        );
        assert!(
            listed(&static_only, framework, component),
            "{framework} {component} disappears without the component directory: \
             it is not compiled in:\n{static_only}"
        );
    }
    // The check tells the two apart. 5.0 compiles its own components into the
    // libraries by default, so the contrast is ours as plugins on the stock 5.0
    // (`make components-ompi5`): listed with their directory in the path, gone
    // without it.
    if let Some((stock, path)) = plugins_for_5_0() {
        let with_plugins = ompi_info(
            &stock,
            &["--parsable"],
            &[
                ("OMPI_MCA_mca_base_component_path", path.as_str()),
                ("PMIX_MCA_mca_base_component_show_load_errors", "0"),
            ],
        );
        let stock_static_only = components_without_dsos(&stock);
        for (framework, component, _, _) in OURS {
            assert!(
                listed(&with_plugins, framework, component)
                    && !listed(&stock_static_only, framework, component),
                "{framework} {component} as a plugin of the stock 5.0 should be listed only \
                 with its directory in the component path:\n{stock_static_only}"
            );
        }
    }
}

#[test]
fn no_shared_object_of_ours_is_installed() {
    if !static_ompi::ompi5_available() {
        return;
    }
    let mut stack = vec![static_ompi::ompi5_prefix()];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read the prefix") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if OURS
                .iter()
                .any(|(fw, c, _, _)| name.starts_with(&format!("mca_{fw}_{c}.")))
            {
                found.push(path);
            }
        }
    }
    assert!(found.is_empty(), "DSOs of static components: {found:?}");
}

/// What a library's dynamic symbol table defines (`readelf --dyn-syms`).
fn exported(library: &Path) -> Vec<String> {
    let out = std::process::Command::new("readelf")
        .args(["--dyn-syms", "-W"])
        .arg(library)
        .output()
        .expect("run readelf");
    assert!(
        out.status.success(),
        "readelf {}: {}",
        library.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains(" UND "))
        .filter_map(|l| l.split_whitespace().nth(7).map(str::to_owned))
        .collect()
}

/// Each component structure lives in the library it belongs to, and none of the
/// Rust code around it (one private copy of the standard library per component) is
/// exported from Open MPI's libraries.
#[test]
fn libraries_export_the_component_structures_and_no_rust() {
    if !static_ompi::ompi5_available() {
        return;
    }
    let lib = static_ompi::ompi5_prefix().join("lib");
    for (framework, component, _, library) in OURS {
        let symbols = exported(&lib.join(library));
        let structure = format!("mca_{framework}_{component}_component");
        assert!(
            symbols.contains(&structure),
            "{library} does not export {structure}"
        );
    }
    for library in ["libopen-pal.so", "libmpi.so"] {
        let rust: Vec<String> = exported(&lib.join(library))
            .into_iter()
            .filter(|s| s.starts_with("_ZN") || s.starts_with("_R") || s.contains("rust_"))
            .collect();
        assert!(rust.is_empty(), "{library} exports Rust symbols: {rust:?}");
    }
}

/// The names of the parameters `ompi_info` lists, less the two that Open MPI's BTL base
/// registers for every BTL only in a build with CUDA GDR support (btl_base_mca.c, `#if
/// OPAL_CUDA_GDR_SUPPORT`): the stock 5.0 prefix is configured with CUDA (for
/// tests/cuda.rs), this static build is not, and the code of ours is the same.
fn parameter_names(ompi_info: &str) -> std::collections::BTreeSet<String> {
    ompi_info
        .split("parameter \"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter(|name| {
            !name.ends_with("_accelerator_eager_limit")
                && !name.ends_with("_accelerator_rdma_limit")
        })
        .map(str::to_owned)
        .collect()
}

/// The stock 5.0 installation (`RMCA_OMPI5_PREFIX`) and a component path with our
/// plugins built against it (`make components-ompi5`), when both exist (`make
/// check-ompi5` builds them before these tests); otherwise says why not.
fn plugins_for_5_0() -> Option<(std::path::PathBuf, String)> {
    let stock = ompi5::prefix();
    let dir = ompi5::component_dir();
    let built = OURS
        .iter()
        .all(|(fw, c, _, _)| dir.join(format!("mca_{fw}_{c}.so")).is_file());
    if !static_ompi::is_installation(&stock) || !built {
        println!(
            "not compared with the plugins: no Open MPI 5 at {} (RMCA_OMPI5_PREFIX) or no \
             plugins in {} (make components-ompi5)",
            stock.display(),
            dir.display()
        );
        return None;
    }
    let path = format!("{}:{}", dir.display(), stock.join("lib/openmpi").display());
    Some((stock, path))
}

/// The parameters register with help text, the help files are installed with the
/// prefix, and the static members are the code of this checkout: the same
/// parameters as the plugins `make components-ompi5` built from it (a stale object
/// left in the cached build tree fails here).
#[test]
fn parameters_and_help_match_the_plugins_of_this_checkout() {
    if !static_ompi::ompi5_available() {
        return;
    }
    let prefix = static_ompi::ompi5_prefix();
    let plugins = plugins_for_5_0();
    for (framework, component, _, _) in OURS {
        let args = ["--param", framework, component, "--level", "9"];
        let text = ompi_info(&prefix, &args, &[]);
        let count = assert_every_parameter_has_help(&text, &format!("{framework}_{component}_"));
        assert!(
            count > 0,
            "no {framework}_{component}_* parameters:\n{text}"
        );
        if let Some((stock, path)) = &plugins {
            let plugin = ompi_info(
                stock,
                &args,
                &[
                    ("OMPI_MCA_mca_base_component_path", path.as_str()),
                    ("PMIX_MCA_mca_base_component_show_load_errors", "0"),
                ],
            );
            assert_eq!(
                parameter_names(&text),
                parameter_names(&plugin),
                "{framework} {component}: the static member's parameters differ from the \
                 plugin's (rebuild with make static-ompi5)"
            );
        }
    }
    let share = prefix.join("share/openmpi");
    for help in [
        "help-mpi-btl-rusnic.txt",
        "help-mpi-btl-rsmcuda.txt",
        "help-mtl-rofi.txt",
        "help-rmca.txt",
    ] {
        assert!(
            share.join(help).is_file(),
            "{help} not installed in {}",
            share.display()
        );
    }
}
