//! tools/residue/no-residue, which `make test` runs under: it must catch a /dev/shm
//! entry or an nftables table that a command leaves behind, spare entries a running
//! process still holds, and pass a command's own failure through.

use std::process::{Command, Output};

use mca_harness::repo_root;

/// One run at a time: a run sees every new /dev/shm entry, a sibling test's too.
static ONE_RUN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn no_residue(script: &str) -> Output {
    let _one = ONE_RUN.lock().unwrap_or_else(|e| e.into_inner());
    Command::new(repo_root().join("tools/residue/no-residue"))
        .args(["bash", "-c", script])
        .output()
        .expect("run no-residue")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn unique(what: &str) -> String {
    format!("rmca-residue-{what}-{}", std::process::id())
}

#[test]
fn a_clean_command_passes() {
    let out = no_residue("true");
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn a_file_left_in_dev_shm_fails_the_run() {
    let name = unique("leak");
    let out = no_residue(&format!("touch /dev/shm/{name}"));
    let _ = std::fs::remove_file(format!("/dev/shm/{name}"));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("LEFT BEHIND: /dev/shm/{name}")),
        "{}",
        text(&out)
    );
}

#[test]
fn an_entry_still_in_use_is_not_residue() {
    let path = format!("/dev/shm/{}", unique("held"));
    // A job still running at the end (here a background holder) owns what it has open.
    let out = no_residue(&format!(
        "touch {path}; (exec 3<{path}; sleep 3) & sleep 0.2"
    ));
    let _ = std::fs::remove_file(&path);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("still in use"), "{}", text(&out));
}

#[test]
fn a_failing_command_keeps_its_status() {
    let out = no_residue("exit 3");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
}

#[test]
fn an_nftables_table_left_behind_fails_the_run() {
    let have_nft = Command::new("nft")
        .args(["list", "tables"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_nft {
        eprintln!("skipped: nft cannot list tables here");
        return;
    }
    let table = unique("table").replace('-', "_");
    let out = no_residue(&format!("nft add table inet {table}"));
    let _ = Command::new("nft")
        .args(["delete", "table", "inet", &table])
        .status();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains(&table), "{}", text(&out));
}
