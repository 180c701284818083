//! Our components compiled into Open MPI itself: Debian's openmpi 4.1.4 source
//! package built with configure-support/static-ompi (`make static-ompi`), the
//! BTLs inside libopen-pal and the MTL inside libmpi. `ompi_info` lists them with
//! no component directory at all, no `.so` of them is installed, none of the Rust
//! code beyond the component structures is exported, and the conformance suite
//! passes on that installation for rusnic, rofi and rsmcuda (host path).
//!
//! Every test prints `SKIPPED` and passes when build/ompi-static/prefix (or
//! `RMCA_STATIC_OMPI_PREFIX`) does not exist; `make check-static` builds it first
//! and makes a missing installation an error.

use std::path::Path;

use mca_harness::static_ompi::{self, ompi_info};
use mca_harness::{
    McaConfig, assert_every_parameter_has_help, conformance_suite, ompi_info_params,
};

fn on_static(config: McaConfig) -> McaConfig {
    let name = format!("{}-static", config.name);
    config.on_prefix(&static_ompi::prefix()).named(&name)
}

fn rusnic() -> McaConfig {
    on_static(McaConfig::new(
        "rusnic",
        &[("pml", "ob1"), ("btl", "self,rusnic")],
    ))
}

fn rofi() -> McaConfig {
    on_static(McaConfig::new("rofi", &[("pml", "cm"), ("mtl", "rofi")]))
}

fn rsmcuda() -> McaConfig {
    on_static(McaConfig::new(
        "rsmcuda",
        &[("pml", "ob1"), ("btl", "self,rsmcuda")],
    ))
}

// The same skip lists as on the system Open MPI (tests/rusnic.rs, tests/rofi.rs,
// tests/rsmcuda.rs): trunc_large is ob1's defect for every BTL; rofi passes all.
conformance_suite!(rusnic_static, rusnic(), skip: ["trunc_large"]);
conformance_suite!(rofi_static, rofi(), skip: []);
conformance_suite!(rsmcuda_static, rsmcuda(), skip: ["trunc_large"]);

/// Ours, as `framework:component`, with the library that must contain each.
const OURS: &[(&str, &str, &str)] = &[
    ("btl", "rusnic", "libopen-pal.so"),
    ("btl", "rsmcuda", "libopen-pal.so"),
    ("mtl", "rofi", "libmpi.so"),
];

/// The components `ompi_info` sees when its component path is an empty directory:
/// exactly those compiled into the libraries.
fn components_without_dsos(prefix: &Path) -> String {
    let empty = prefix.with_file_name("empty-component-dir");
    std::fs::create_dir_all(&empty).expect("create an empty component directory");
    ompi_info(
        prefix,
        &["--parsable"],
        &[(
            "OMPI_MCA_mca_base_component_path",
            empty.to_str().expect("utf-8 path"),
        )],
    )
}

fn listed(ompi_info: &str, framework: &str, component: &str) -> bool {
    let prefix = format!("mca:{framework}:{component}:version:");
    ompi_info.lines().any(|l| l.starts_with(&prefix))
}

#[test]
fn ompi_info_lists_ours_as_static_members() {
    if !static_ompi::available() {
        return;
    }
    let prefix = static_ompi::prefix();
    let everything = ompi_info(&prefix, &["--parsable"], &[]);
    let static_only = components_without_dsos(&prefix);
    for (framework, component, _) in OURS {
        assert!(
            listed(&everything, framework, component),
            "ompi_info does not list {framework} {component}:\n{everything}"
        );
        assert!(
            listed(&static_only, framework, component),
            "{framework} {component} disappears without the component directory: \
             it is not compiled in:\n{static_only}"
        );
    }
    // The check tells the two apart: stock components stay DSOs in this build.
    assert!(
        listed(&everything, "btl", "tcp") && !listed(&static_only, "btl", "tcp"),
        "btl tcp should be listed as a DSO only:\n{static_only}"
    );
}

#[test]
fn no_shared_object_of_ours_is_installed() {
    if !static_ompi::available() {
        return;
    }
    let mut stack = vec![static_ompi::prefix()];
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
                .any(|(fw, c, _)| name.starts_with(&format!("mca_{fw}_{c}.")))
            {
                found.push(path);
            }
        }
    }
    assert!(found.is_empty(), "DSOs of static components: {found:?}");
}

/// `readelf --dyn-syms --defined-only`-style list of what a library exports.
fn exported(library: &Path) -> Vec<String> {
    let out = std::process::Command::new("readelf")
        .args(["--dyn-syms", "-W"])
        .arg(library)
        .output()
        .expect("run readelf");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains(" UND "))
        .filter_map(|l| l.split_whitespace().nth(7).map(str::to_owned))
        .collect()
}

/// Each component structure lives in the library it belongs to, and none of the
/// Rust code around it (the standard library in particular, one private copy per
/// component) is exported from Open MPI's libraries.
#[test]
fn libraries_export_the_component_structures_and_no_rust() {
    if !static_ompi::available() {
        return;
    }
    let lib = static_ompi::prefix().join("lib");
    for (framework, component, library) in OURS {
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

/// The parameters register and their help text is installed with the prefix.
#[test]
fn parameters_and_help_come_from_the_static_build() {
    if !static_ompi::available() {
        return;
    }
    let prefix = static_ompi::prefix();
    for (framework, component, _) in OURS {
        let params = ompi_info(
            &prefix,
            &["--param", framework, component, "--level", "9"],
            &[],
        );
        let count = assert_every_parameter_has_help(&params, &format!("{framework}_{component}_"));
        assert!(
            count > 0,
            "no {framework}_{component}_* parameters:\n{params}"
        );
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

fn parameter_names(ompi_info: &str) -> std::collections::BTreeSet<String> {
    ompi_info
        .split("parameter \"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_owned)
        .collect()
}

/// The static members are the code of this checkout: the same parameters as the
/// plugins `make components` just built. A stale object left in Open MPI's build
/// tree (a component library not relinked after a Rust change) fails here.
#[test]
fn static_members_are_built_from_this_checkout() {
    if !static_ompi::available() {
        return;
    }
    let prefix = static_ompi::prefix();
    for (framework, component, _) in OURS {
        let static_params = parameter_names(&ompi_info(
            &prefix,
            &["--param", framework, component, "--level", "9"],
            &[],
        ));
        let plugin_params = parameter_names(&ompi_info_params(framework, component));
        assert!(
            !plugin_params.is_empty(),
            "ompi_info lists no parameters of the {framework} {component} plugin in build/mca"
        );
        assert_eq!(
            static_params, plugin_params,
            "{framework} {component}: the static member's parameters differ from the plugin's \
             (rebuild with make static-ompi)"
        );
    }
}
