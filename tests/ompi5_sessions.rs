//! Communicators of MPI-4's sessions model on Open MPI 5.0.x: MPI_Comm_create_from_group
//! (which 4.1 does not have, hence a program of its own under tests/ompi5/ rather than in
//! tests/programs/, which also runs on 4.1). On such communicators 5.0's ob1 uses
//! extended CIDs: the first message to each peer carries an extra CID header, and a peer
//! that meets the new CID answers with a CID-only message. tests/ompi5/comm_from_group.c
//! sends first messages of several sizes that way between every pair of ranks and checks
//! every byte (tests/programs/check.h), then MPI_Comm_create_group.
//!
//! rsmcuda hung there (mpi4py's testCreateFromGroup, tests/ompi5_mpi4py.rs): ob1 stores a
//! match header's `hdr_ctx` just past a CID-only payload, which in a fast box was the next
//! record's header ("invalid header 0x14100030012"). Fast box records now keep
//! `FBOX_TAIL` bytes after each payload (components/rsmcuda/shm/src/fbox.rs).
//!
//! Under cm such a communicator has an index per process too; rofi's messages carry
//! their receiver's, which each process publishes through PMIx when the communicator is
//! made (ffi/mca `Comm::remote_context_id`); before, 5.0 refused these communicators
//! under cm + rofi.
//!
//! tests/ompi5/mpi_session_only.c is a program of the MPI Sessions model alone (no MPI_Init).
//!
//! Every test prints `SKIPPED` and passes when the installation or our 5.0 build is
//! missing; `RMCA_REQUIRE_OMPI5=1` makes a missing one an error.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mca_harness::ompi5::{self, on_ompi5};
use mca_harness::{Job, JobOutput, McaConfig};

/// comm_from_group at 2 and 4 ranks on `config` (5.0), every byte checked.
fn comm_from_group_passes(config: &McaConfig) {
    if !ompi5::available() {
        return;
    }
    // Compiled with 5.0's mpicc (static_ompi::program_for; check.h from tests/programs).
    let binary = config.program("comm_from_group");
    for ranks in [2, 4] {
        let out = Job::new(config, ranks, &binary)
            .timeout(Duration::from_secs(120))
            .run();
        out.assert_passed();
        let (passed, _) = out.counts().expect("counts");
        assert!(passed > 0, "{}", out.report());
        eprintln!("{} at {ranks} ranks: {passed} passed", config.name);
    }
}

#[test]
fn comm_from_group_stock_sm() {
    comm_from_group_passes(&ob1_config("stock-sm", "self,sm"));
}

#[test]
fn comm_from_group_rsmcuda() {
    comm_from_group_passes(&ob1_config("rsmcuda", "self,rsmcuda"));
}

#[test]
fn comm_from_group_rusnic() {
    comm_from_group_passes(&ob1_config("rusnic", "self,rusnic"));
}

/// cm with `mtl` on the libfabric provider `provider`, on 5.0.
fn cm_config(name: &str, mtl: &str, provider: &str) -> McaConfig {
    on_ompi5(McaConfig::new(
        name,
        &[
            ("pml", "cm"),
            ("mtl", mtl),
            (&format!("mtl_{mtl}_provider_include"), provider),
        ],
    ))
}

/// Under cm a communicator made from a group has an index per process: rofi's
/// messages carry the receiver's (`Comm::remote_context_id`), through the provider's
/// tag matching (tcp) and through rofi's own (shm, where rofi matches messages
/// itself). Before, cm refused such communicators ("does not support MPI sessions
/// related features"). The stock OFI MTL is the control.
#[test]
fn comm_from_group_rofi_tcp() {
    comm_from_group_passes(&cm_config("rofi-tcp", "rofi", "tcp;ofi_rxm"));
}

#[test]
fn comm_from_group_rofi_shm() {
    comm_from_group_passes(&cm_config("rofi-shm", "rofi", "shm"));
}

/// A scalable endpoint with communicators spread over 4 contexts: both ends choose a
/// communicator's context from the id they agree on (`Comm::agreed_id`), not from
/// their own indices.
#[test]
fn comm_from_group_rofi_sockets_sep4_grouping() {
    comm_from_group_passes(
        &cm_config("rofi-sockets-sep4-grouping", "rofi", "sockets")
            .with("mtl_rofi_enable_sep", "1")
            .with("mtl_rofi_num_ctxts", "4")
            .with("mtl_rofi_thread_grouping", "1"),
    );
}

#[test]
fn comm_from_group_stock_ofi() {
    comm_from_group_passes(&cm_config("stock-ofi-tcp", "ofi", "tcp;ofi_rxm"));
}

/// tests/ompi5/mpi_session_only.c (MPI Sessions without MPI_Init, two in a row, a rank
/// 0 that sends to ranks that only receive) at the given rank counts on `config`.
fn mpi_session_only_passes(config: &McaConfig, ranks: &[u32], args: &[&str]) {
    for &n in ranks {
        mpi_session_only(config, n, args, &[]);
    }
}

/// One job of mpi_session_only, checked to have passed (its output returned): alone
/// (no other job of this binary beside it), its ranks waiting for each other between
/// two MPI Sessions in a directory of their own (`--between`). 5.0.7's PMIx loses track
/// of its fences otherwise, stock sm as ours: the second MPI Session's MPI_Session_init
/// hangs in some ranks while the others wait in MPI_Comm_create_from_group, or reads the
/// first one's modex (rsmcuda then looks for a segment that is gone). 4 ranks, pairs of
/// jobs at once: 3 of 40 without the marks, 4 of 60 with them (2 of 60 on stock sm);
/// one job at a time beside 3 busy loops: 1 of 40 without the marks, 0 of 40 with them.
fn mpi_session_only(
    config: &McaConfig,
    ranks: u32,
    args: &[&str],
    mpirun_args: &[&str],
) -> JobOutput {
    static JOBS: AtomicUsize = AtomicUsize::new(0);
    let between = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "mpi_session_only-{}-{}",
        std::process::id(),
        JOBS.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&between).expect("a directory for the ranks' marks");
    let between_arg = format!("--between={}", between.display());
    let mut all_args = args.to_vec();
    all_args.push(&between_arg);
    let alone = config.clone().one_at_a_time();
    let out = Job::new(&alone, ranks, config.program("mpi_session_only"))
        .args(&all_args)
        .mpirun_args(mpirun_args)
        .timeout(Duration::from_secs(120))
        .run();
    let _ = std::fs::remove_dir_all(&between);
    out.assert_passed();
    let (passed, _) = out.counts().expect("counts");
    assert!(passed >= 4, "{}", out.report());
    out
}

/// pml ob1 with `btl`, on 5.0.
fn ob1_config(name: &str, btl: &str) -> McaConfig {
    on_ompi5(McaConfig::new(name, &[("pml", "ob1"), ("btl", btl)]))
}

#[test]
fn mpi_session_only_stock_sm() {
    if ompi5::available() {
        mpi_session_only_passes(&ob1_config("stock-sm", "self,sm"), &[1, 2, 4], &[]);
    }
}

#[test]
fn mpi_session_only_rsmcuda() {
    if ompi5::available() {
        mpi_session_only_passes(&ob1_config("rsmcuda", "self,rsmcuda"), &[1, 2, 4], &[]);
    }
}

/// rusnic crashed here (SIGSEGV in MPI_Session_finalize): it asked ob1 to add every
/// peer at once, which made 5.0.7 create and then destroy MPI_COMM_WORLD and
/// MPI_COMM_SELF after the PML was gone. Now it asks that under MPI_Init only.
#[test]
fn mpi_session_only_rusnic() {
    if ompi5::available() {
        mpi_session_only_passes(&ob1_config("rusnic", "self,rusnic"), &[1, 2, 4], &[]);
    }
}

#[test]
fn mpi_session_only_rofi() {
    if ompi5::available() {
        for (name, provider) in [("rofi-tcp", "tcp;ofi_rxm"), ("rofi-shm", "shm")] {
            mpi_session_only_passes(&cm_config(name, "rofi", provider), &[1, 2, 4], &[]);
        }
    }
}

/// Two MPI Sessions in a row with our component kept loaded between them, as where it
/// is linked into libmpi or anything pins its shared object (here: LD_PRELOAD in the
/// ranks): the second init finds what the first left in the component's statics. rofi
/// failed it ("No components were able to be opened in the pml framework": its engine
/// and cm's module cell were set-once) after a thread-local buffer of its own came to
/// pin the shared object; all three printed nothing verbose in the second (opal
/// numbers its output streams afresh). Each init's verbose line must appear once per
/// rank and MPI Session.
#[test]
fn mpi_session_only_with_ours_kept_loaded() {
    if !ompi5::available() {
        return;
    }
    let cases = [
        (
            ob1_config("rsmcuda-kept-loaded", "self,rsmcuda").with("btl_rsmcuda_verbose", "1"),
            "mca_btl_rsmcuda.so",
            "btl:rsmcuda: init, pid",
        ),
        (
            ob1_config("rusnic-kept-loaded", "self,rusnic").with("btl_rusnic_verbose", "1"),
            "mca_btl_rusnic.so",
            "btl:rusnic: not MPI_Init (MPI Sessions)",
        ),
        (
            cm_config("rofi-tcp-kept-loaded", "rofi", "tcp;ofi_rxm").with("mtl_rofi_verbose", "1"),
            "mca_mtl_rofi.so",
            "mtl:rofi: using tcp;ofi_rxm",
        ),
        (
            cm_config("rofi-shm-kept-loaded", "rofi", "shm").with("mtl_rofi_verbose", "1"),
            "mca_mtl_rofi.so",
            "mtl:rofi: using shm",
        ),
    ];
    let ranks = 2;
    let library_path = format!("LD_LIBRARY_PATH={}", ompi5::prefix().join("lib").display());
    for (config, object, init_line) in cases {
        let preload = format!(
            "LD_PRELOAD={}",
            ompi5::component_dir().join(object).display()
        );
        let out = mpi_session_only(&config, ranks, &[], &["-x", &preload, "-x", &library_path]);
        let said = out.stderr.matches(init_line).count();
        assert_eq!(
            said,
            2 * ranks as usize,
            "{init_line:?} once per rank and MPI Session\n{}",
            out.report()
        );
    }
}

/// The same across two namespace hosts (ranks 0 and 1 on one, 2 and 3 on the other):
/// ob1 adds no remote process before a communicator sends to it, so ranks 2 and 3 first
/// hear from rank 0 while it is unknown to them; rusnic adds such a sender of its own
/// job itself (without that, its datagrams would wait unacknowledged in a rank that
/// only receives). Stock tcp is the control. One MPI Session: across hosts a second
/// fails on stock tcp as on rusnic (tcp: connect() to the first MPI Session's port
/// refused; rusnic: the peer never answers), both reaching the addresses their peers
/// published in the first.
#[test]
fn mpi_session_only_across_two_hosts() {
    if !ompi5::available() {
        return;
    }
    for (name, btl) in [("stock-tcp", "self,tcp"), ("rusnic", "self,rusnic")] {
        mpi_session_only_passes(&ob1_config(name, btl).across_hosts(2), &[4], &["--count=1"]);
    }
}
