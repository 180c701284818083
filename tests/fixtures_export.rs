//! The test fixtures prove the export path of ffi/mca end to end: ompi_info lists
//! them and their parameters, mpirun loads them and moves verified data, and they
//! refuse, with a clear message and no crash, to run inside another Open MPI.

use std::process::Command;
use std::time::Duration;

use mca_harness::{Job, McaConfig, component_build_dir, component_path, exported_symbols, program};

fn ompi_info(args: &[&str]) -> String {
    let out = Command::new("ompi_info")
        .args(args)
        .env("OMPI_MCA_mca_base_component_path", component_path())
        .output()
        .expect("run ompi_info");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn fixture_built() {
    assert!(
        component_build_dir().join("mca_btl_rfixture.so").is_file(),
        "build/mca/mca_btl_rfixture.so is missing: run `make` (make check builds it)"
    );
}

#[test]
fn ompi_info_lists_the_btl_fixture_and_every_kind_of_parameter() {
    fixture_built();
    let text = ompi_info(&["--param", "btl", "rfixture", "--level", "9"]);
    for needle in [
        "MCA btl: rfixture (MCA v2.1.0, API v3.1.0, Component v4.1.4)",
        "\"btl_rfixture_verbose\" (current value: \"0\"",
        "\"btl_rfixture_frag_size\" (current value: \"65536\"",
        "\"btl_rfixture_delivery\" (current value: \"inline\"",
        "\"btl_rfixture_trace_payload\" (current value: \"false\"",
        "\"btl_rfixture_label\"",
        "\"btl_rfixture_eager_limit\"",
        "performance \"btl_rfixture_sends\"",
        "class: high watermark",
    ] {
        assert!(
            text.contains(needle),
            "ompi_info output lacks {needle:?}:\n{text}"
        );
    }
}

#[test]
fn btl_fixture_exported_symbol_is_the_only_one() {
    fixture_built();
    assert_eq!(
        exported_symbols("mca_btl_rfixture.so"),
        ["mca_btl_rfixture_component"]
    );
}

fn fixture_config(delivery: &str) -> McaConfig {
    McaConfig::new(
        &format!("rfixture-{delivery}"),
        &[("pml", "ob1"), ("btl", "rfixture")],
    )
    .with("btl_rfixture_delivery", delivery)
}

#[test]
fn ob1_moves_every_size_class_through_the_fixture_inline() {
    fixture_built();
    Job::new(&fixture_config("inline"), 1, program("self_exchange"))
        .timeout(Duration::from_secs(60))
        .run()
        .assert_passed();
}

#[test]
fn ob1_moves_every_size_class_through_the_fixture_from_progress() {
    fixture_built();
    Job::new(&fixture_config("progress"), 1, program("self_exchange"))
        .timeout(Duration::from_secs(60))
        .run()
        .assert_passed();
}

/// A panic in a hot entry point (btl_send goes through `guard_hot`, as sendi and
/// progress do) stops at the C boundary: reported with its message and location, the
/// call fails with an error code, and Open MPI ends the job through its own error path
/// instead of an unwind into C (which aborts the process with "panic in a function that
/// cannot unwind") or a crash.
#[test]
fn a_panic_in_a_hot_entry_point_stops_at_the_boundary() {
    fixture_built();
    let out = Job::new(
        &fixture_config("inline").with("btl_rfixture_panic_at_send", "3"),
        1,
        program("self_exchange"),
    )
    .timeout(Duration::from_secs(60))
    .run();
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(!out.succeeded() && !out.timed_out, "{}", out.report());
    assert!(
        all.contains("[rmca] internal error in btl_send: rfixture: the panic asked for at send 3 at components/fixtures/btl/src/lib.rs:"),
        "{}",
        out.report()
    );
    for crash in [
        "cannot unwind",
        "Segmentation fault",
        "signal 11",
        "SIGABRT",
        "signal 6",
    ] {
        assert!(!all.contains(crash), "{crash}: {}", out.report());
    }
}

#[test]
fn an_invalid_parameter_is_reported_and_the_component_stays_out() {
    fixture_built();
    let out = Job::new(
        // Not naming the component explicitly: the job must go on without it (naming
        // it makes MPI_Init abort, and ORTE may then lose the forwarded message).
        &McaConfig::new("bad", &[("pml", "ob1"), ("btl", "^openib,ofi")])
            .with("btl_rfixture_verbose", "500"),
        1,
        program("self_exchange"),
    )
    .timeout(Duration::from_secs(60))
    .run();
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        all.contains("btl_rfixture_verbose = 500 is out of range: it must be between 0 and 100"),
        "{}",
        out.report()
    );
    out.assert_passed();
}

#[test]
fn a_different_runtime_version_is_refused_with_a_clear_message() {
    fixture_built();
    // A library that makes libopen-pal's exported version string read 4.1.99: the
    // component must decline with an explanation instead of binding wrong layouts.
    let dir = std::env::temp_dir().join(format!("rmca-fakever-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("fakever.c");
    std::fs::write(&source, "const char opal_version_string[] = \"4.1.99\";\n").unwrap();
    let lib = dir.join("fakever.so");
    assert!(
        Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&lib)
            .arg(&source)
            .status()
            .unwrap()
            .success()
    );
    let out = Job::new(
        &McaConfig::new("mismatch", &[("pml", "ob1"), ("btl", "^openib,ofi")]),
        1,
        program("self_exchange"),
    )
    .env("LD_PRELOAD", lib.to_str().unwrap())
    .timeout(Duration::from_secs(60))
    .run();
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        all.contains("built against Open MPI 4.1.4 but this process runs Open MPI 4.1.99"),
        "{}",
        out.report()
    );
    assert!(
        !all.contains("Segmentation fault") && !all.contains("signal 11"),
        "{}",
        out.report()
    );
    out.assert_passed();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ompi_info_lists_the_mtl_fixture_and_its_parameters() {
    assert!(
        component_build_dir().join("mca_mtl_rfixture.so").is_file(),
        "run make: mca_mtl_rfixture.so missing"
    );
    let text = ompi_info(&["--param", "mtl", "rfixture", "--level", "9"]);
    for needle in [
        "MCA mtl: rfixture (MCA v2.1.0, API v2.0.0, Component v4.1.4)",
        "\"mtl_rfixture_priority\" (current value: \"0\"",
        "\"mtl_rfixture_verbose\"",
    ] {
        assert!(
            text.contains(needle),
            "ompi_info output lacks {needle:?}:\n{text}"
        );
    }
}

#[test]
fn cm_selects_the_mtl_fixture_and_matches_every_size_class() {
    assert!(
        component_build_dir().join("mca_mtl_rfixture.so").is_file(),
        "run make: mca_mtl_rfixture.so missing"
    );
    let config = McaConfig::new("rfixture-mtl", &[("pml", "cm"), ("mtl", "rfixture")])
        .with("mtl_rfixture_verbose", "1");
    let out = Job::new(&config, 1, program("self_exchange"))
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_passed();
    assert!(
        out.stderr.contains("mtl:rfixture: init") || out.stdout.contains("mtl:rfixture: init"),
        "{}",
        out.report()
    );
}

#[test]
fn the_mtl_fixture_declines_multi_process_jobs_and_cm_says_so() {
    let config = McaConfig::new("rfixture-mtl", &[("pml", "cm"), ("mtl", "rfixture")]);
    let out = Job::new(&config, 2, program("self_exchange"))
        .timeout(Duration::from_secs(60))
        .run();
    assert!(!out.succeeded(), "{}", out.report());
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        all.contains("PML cm cannot be selected")
            || all.contains("No components were able to be opened"),
        "{}",
        out.report()
    );
}

/// `make install` (configure-support/install-components) installs the three
/// components and their help files, never the fixtures: an installed rfixture BTL
/// would join every default ob1 job.
#[test]
fn install_leaves_the_fixtures_out() {
    fixture_built();
    let dir = std::env::temp_dir().join(format!("rmca-install-{}", std::process::id()));
    let out = Command::new(mca_harness::repo_root().join("configure-support/install-components"))
        .arg(component_build_dir())
        .arg(&dir)
        .output()
        .expect("run install-components");
    assert!(out.status.success(), "{out:?}");
    let mut installed: Vec<String> = std::fs::read_dir(&dir)
        .expect("the install directory")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    installed.sort();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        installed,
        [
            "help-mpi-btl-rsmcuda.txt",
            "help-mpi-btl-rusnic.txt",
            "help-mtl-rofi.txt",
            "help-rmca.txt",
            "mca_btl_rsmcuda.so",
            "mca_btl_rusnic.so",
            "mca_mtl_rofi.so",
        ]
    );
}
