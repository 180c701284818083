//! Our components compiled into Open MPI 5.0.7 itself: configure-support/static-ompi5
//! (`make static-ompi5`) drops them into 5.0.7's source with
//! configure-support/ompi-tree/into-tree and builds it with
//! `--enable-mca-static=btl-rusnic,btl-rsmcuda,mtl-rofi`, the BTLs inside libopen-pal
//! and the MTL inside libmpi. `ompi_info` reports 5.0.7 and lists ours with the 5.0
//! interfaces and no component directory at all, no `.so` of them is installed, none
//! of the Rust code beyond the component structures is exported, and the conformance
//! suite passes on that installation for rusnic, rofi (tcp;ofi_rxm) and rsmcuda. The
//! checks shared with 4.1.4 (tests/static_build.rs): `mca_harness::static_ompi::checks`.
//!
//! Every test prints `SKIPPED` and passes when `RMCA_OMPI5_STATIC_PREFIX` names no
//! installation; `make check-ompi5` builds it first, sets the variable and
//! `RMCA_REQUIRE_OMPI5=1`, which makes a missing installation an error.

use mca_harness::static_ompi;
use mca_harness::static_ompi::checks::{MEMBERS, StaticBuild, listed};
use mca_harness::{McaConfig, conformance_suite, ompi5};

fn build() -> StaticBuild {
    StaticBuild {
        prefix: static_ompi::ompi5_prefix(),
        name_suffix: "-ompi5-static",
        // Open MPI 5's PMIx lists the files it cannot load from the component path.
        env: &[("PMIX_MCA_mca_base_component_show_load_errors", "0")],
        // Open MPI's BTL base registers these two for every BTL only in a build with
        // CUDA GDR support (btl_base_mca.c, `#if OPAL_CUDA_GDR_SUPPORT`): the stock 5.0
        // prefix is configured with CUDA (for tests/cuda.rs), this static build is
        // not, and the code of ours is the same.
        ignored_parameter_endings: &["_accelerator_eager_limit", "_accelerator_rdma_limit"],
    }
}

fn rusnic() -> McaConfig {
    build().config(McaConfig::new(
        "rusnic",
        &[("pml", "ob1"), ("btl", "self,rusnic")],
    ))
}

fn rofi_tcp() -> McaConfig {
    build().config(McaConfig::new(
        "rofi-tcp",
        &[
            ("pml", "cm"),
            ("mtl", "rofi"),
            ("mtl_rofi_provider_include", "tcp;ofi_rxm"),
        ],
    ))
}

fn rsmcuda() -> McaConfig {
    build().config(McaConfig::new(
        "rsmcuda",
        &[("pml", "ob1"), ("btl", "self,rsmcuda")],
    ))
}

// The skip lists of the same components built as plugins for 5.0 (tests/ompi5.rs):
// trunc_large is ob1's defect for every BTL; rofi passes all.
conformance_suite!(rusnic_ompi5_static, rusnic(), skip: ["trunc_large"]);
conformance_suite!(rofi_tcp_ompi5_static, rofi_tcp(), skip: []);
conformance_suite!(rsmcuda_ompi5_static, rsmcuda(), skip: ["trunc_large"]);

/// The 5.0 interface version each framework of ours implements.
fn api(framework: &str) -> &'static str {
    match framework {
        "btl" => "3.3.0",
        "mtl" => "2.0.0",
        other => panic!("no 5.0 interface version known for {other}"),
    }
}

#[test]
fn ompi_info_reports_5_0_7_and_lists_ours_as_static_members() {
    if !static_ompi::ompi5_available() {
        return;
    }
    let build = build();
    let (everything, _) = build.assert_ours_are_static_members();
    assert!(
        everything.lines().any(|l| l == "ompi:version:full:5.0.7"),
        "ompi_info does not report Open MPI 5.0.7:\n{everything}"
    );
    for member in MEMBERS {
        let (framework, component) = (member.framework, member.component);
        let line = format!(
            "mca:{framework}:{component}:version:\"api:{}\"",
            api(framework)
        );
        assert!(
            everything.lines().any(|l| l == line),
            "no '{line}' in:\n{everything}"
        );
    }
    // The check tells the two apart. 5.0 compiles its own components into the
    // libraries by default, so the contrast is ours as plugins on the stock 5.0
    // (`make components-ompi5`): listed with their directory in the path, gone
    // without it.
    if let Some((stock, path)) = plugins_for_5_0() {
        let with_plugins = build.ompi_info_with_path(&stock, &["--parsable"], &path);
        let stock_static_only = build.components_without_dsos(&stock);
        for member in MEMBERS {
            let (framework, component) = (member.framework, member.component);
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
    build().assert_no_shared_object_of_ours();
}

#[test]
fn libraries_export_the_component_structures_and_no_rust() {
    if !static_ompi::ompi5_available() {
        return;
    }
    build().assert_libraries_export_the_structures_and_no_rust();
}

/// The stock 5.0 installation (`RMCA_OMPI5_PREFIX`) and a component path with our
/// plugins built against it (`make components-ompi5`), when both exist (`make
/// check-ompi5` builds them before these tests); otherwise says why not.
fn plugins_for_5_0() -> Option<(std::path::PathBuf, String)> {
    let stock = ompi5::prefix();
    let dir = ompi5::component_dir();
    let built = MEMBERS.iter().all(|m| {
        dir.join(format!("mca_{}_{}.so", m.framework, m.component))
            .is_file()
    });
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
    let build = build();
    let listings = build.assert_parameters_and_help();
    if let Some((stock, path)) = plugins_for_5_0() {
        for (member, text) in MEMBERS.iter().zip(&listings) {
            let args = [
                "--param",
                member.framework,
                member.component,
                "--level",
                "9",
            ];
            let plugin = build.ompi_info_with_path(&stock, &args, &path);
            build.assert_same_parameters(member, text, &plugin, "make static-ompi5");
        }
    }
}
