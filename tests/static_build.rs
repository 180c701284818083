//! Our components compiled into Open MPI itself: Debian's openmpi 4.1.4 source
//! package built with configure-support/static-ompi (`make static-ompi`), the
//! BTLs inside libopen-pal and the MTL inside libmpi. `ompi_info` lists them with
//! no component directory at all, no `.so` of them is installed, none of the Rust
//! code beyond the component structures is exported, and the conformance suite
//! passes on that installation for rusnic, rofi and rsmcuda (host path). The checks
//! shared with 5.0.7 (tests/ompi5_static.rs): `mca_harness::static_ompi::checks`.
//!
//! Every test prints `SKIPPED` and passes when build/ompi-static/prefix (or
//! `RMCA_STATIC_OMPI_PREFIX`) does not exist; `make check-static` builds it first
//! and makes a missing installation an error.

use mca_harness::static_ompi;
use mca_harness::static_ompi::checks::{MEMBERS, StaticBuild, listed};
use mca_harness::{McaConfig, conformance_suite, ompi_info_params};

fn build() -> StaticBuild {
    StaticBuild {
        prefix: static_ompi::prefix(),
        name_suffix: "-static",
        env: &[],
        ignored_parameter_endings: &[],
    }
}

fn rusnic() -> McaConfig {
    build().config(McaConfig::new(
        "rusnic",
        &[("pml", "ob1"), ("btl", "self,rusnic")],
    ))
}

fn rofi() -> McaConfig {
    build().config(McaConfig::new("rofi", &[("pml", "cm"), ("mtl", "rofi")]))
}

fn rsmcuda() -> McaConfig {
    build().config(McaConfig::new(
        "rsmcuda",
        &[("pml", "ob1"), ("btl", "self,rsmcuda")],
    ))
}

// The same skip lists as on the system Open MPI (tests/rusnic.rs, tests/rofi.rs,
// tests/rsmcuda.rs): trunc_large is ob1's defect for every BTL; rofi passes all.
conformance_suite!(rusnic_static, rusnic(), skip: ["trunc_large"]);
conformance_suite!(rofi_static, rofi(), skip: []);
conformance_suite!(rsmcuda_static, rsmcuda(), skip: ["trunc_large"]);

#[test]
fn ompi_info_lists_ours_as_static_members() {
    if !static_ompi::available() {
        return;
    }
    let (everything, static_only) = build().assert_ours_are_static_members();
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
    build().assert_no_shared_object_of_ours();
}

#[test]
fn libraries_export_the_component_structures_and_no_rust() {
    if !static_ompi::available() {
        return;
    }
    build().assert_libraries_export_the_structures_and_no_rust();
}

/// The parameters register and their help text is installed with the prefix.
#[test]
fn parameters_and_help_come_from_the_static_build() {
    if !static_ompi::available() {
        return;
    }
    build().assert_parameters_and_help();
}

/// The static members are the code of this checkout: the same parameters as the
/// plugins `make components` just built. A stale object left in Open MPI's build
/// tree (a component library not relinked after a Rust change) fails here.
#[test]
fn static_members_are_built_from_this_checkout() {
    if !static_ompi::available() {
        return;
    }
    let build = build();
    for member in MEMBERS {
        let (framework, component) = (member.framework, member.component);
        let plugin = ompi_info_params(framework, component);
        assert!(
            !build.parameter_names(&plugin).is_empty(),
            "ompi_info lists no parameters of the {framework} {component} plugin in build/mca"
        );
        build.assert_same_parameters(
            member,
            &build.parameters(member),
            &plugin,
            "make static-ompi",
        );
    }
}
