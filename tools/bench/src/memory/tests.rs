//! Unit tests of `rmca-bench --memory`: parsing memprobe, aggregation, tables.

use super::*;

const OUTPUT: &str = "\
MEM rank=0 ranks=2 phase=init rss=100 pss=50 private_dirty=40 anonymous=30
MEM rank=1 ranks=2 phase=init rss=100 pss=50 private_dirty=40 anonymous=30
MEM rank=1 ranks=2 phase=contact rss=300 pss=150 private_dirty=140 anonymous=130
MEM rank=0 ranks=2 phase=contact rss=100 pss=50 private_dirty=40 anonymous=70
SEG rank=0 dev=00:01 inode=7 size=4096 rss=4096 pss=2048 alloc=4096 path=/memfd:rsmcuda-1 (deleted)
SEG rank=1 dev=00:01 inode=7 size=4096 rss=0 pss=0 alloc=8192 path=/memfd:rsmcuda-1 (deleted)
SEG rank=0 dev=00:1b inode=9 size=65536 rss=0 pss=0 alloc=-1 path=/dev/shm/vader_segment.vm.0.1.0
SEG rank=0 dev=fe:00 inode=3 size=4194304 rss=0 pss=0 alloc=4096 path=/tmp/ompi.vm.0/pid.1/pmix_dstor_ds21_1/smseg-1-0
mpibench noise: RESULT test=latency
";

#[test]
fn probe_lines_parse_with_spaces_in_paths() {
    let p = parse(OUTPUT);
    assert_eq!(p.ranks.len(), 4);
    assert_eq!(p.ranks[3].anonymous, 70);
    assert_eq!(p.segments.len(), 4);
    assert_eq!(p.segments[0].path, "/memfd:rsmcuda-1 (deleted)");
    assert_eq!(p.segments[2].alloc, -1);
    assert!(is_runtime(&p.segments[3].path));
    assert_eq!(fields("MEM rank=x", "SEG "), None);
    assert!(parse("MEM rank=0 phase=init rss=1").ranks.is_empty());
}

#[test]
fn points_count_each_file_once_without_the_runtimes() {
    let p = point("rsmcuda", 2, &parse(OUTPUT)).unwrap();
    assert_eq!(p.segments, 2);
    assert_eq!(p.shared_mapped, 4096 + 65536);
    // The largest allocation seen; unknown (-1) counts as the mapped size.
    assert_eq!(p.shared_alloc, 8192 + 65536);
    // The contact phase, averaged over ranks.
    assert_eq!(p.anonymous, 100.0);
    assert_eq!(p.rss, 200.0);
    let e = point("rsmcuda", 4, &parse(OUTPUT)).unwrap_err();
    assert!(
        e.contains("2 memory lines at phase contact, expected 4"),
        "{e}"
    );
    // Only an init phase (the baseline's --no-contact): that one.
    let init: String = OUTPUT.lines().take(2).map(|l| format!("{l}\n")).collect();
    assert_eq!(point("b", 2, &parse(&init)).unwrap().anonymous, 30.0);
}

fn at(config: &str, ranks: u32, mapped: u64, alloc: u64, anonymous: f64) -> Point {
    Point {
        config: config.to_owned(),
        ranks,
        segments: usize::from(mapped > 0),
        shared_mapped: mapped,
        shared_alloc: alloc,
        anonymous,
        private_dirty: anonymous,
        pss: anonymous,
        rss: anonymous,
    }
}

#[test]
fn growth_per_peer_and_slope() {
    assert_eq!(per_peer(1300.0, 100.0, 4), Some(400.0));
    assert_eq!(per_peer(1300.0, 100.0, 1), None);
    let pts = [
        at("a", 2, 0, 0, 1000.0),
        at("a", 4, 0, 0, 1600.0),
        at("a", 8, 0, 0, 2800.0),
    ];
    let refs: Vec<&Point> = pts.iter().collect();
    assert!((slope(&refs, |p| p.anonymous).unwrap() - 300.0).abs() < 1e-9);
    assert_eq!(slope(&refs[..1], |p| p.anonymous), None);
}

#[test]
fn tables_say_where_ours_maps_more_than_stock() {
    let mib = 1 << 20;
    let points = [
        at("stock-vader", 2, 8 * mib, mib, 3.0 * 1024.0 * 1024.0),
        at("rsmcuda", 2, 3 * mib, 3 * mib, 3.0 * 1024.0 * 1024.0),
        at("stock-vader", 16, 64 * mib, 4 * mib, 3.5 * 1024.0 * 1024.0),
        at("rsmcuda", 16, 28 * mib, 28 * mib, 3.0 * 1024.0 * 1024.0),
        at("stock-tcp", 2, 0, 0, 4.0 * 1024.0 * 1024.0),
    ];
    let names: Vec<String> = ["stock-vader", "rsmcuda", "stock-tcp"]
        .map(str::to_owned)
        .into();
    let base = at(BASELINE, 1, 0, 0, 2.0 * 1024.0 * 1024.0);
    let shm: Vec<String> = names[..2].to_vec();
    let t = table(&points, &names, &shm, &[2, 16], Some(&base));
    assert!(t.contains("rsmcuda vs stock-vader, mapped: at most the stock one's at every count; growth 2->16 ranks: rsmcuda x9.3 (+25.00 MiB, +1829 KiB a rank), stock-vader x8.0 (+56.00 MiB, +4096 KiB a rank)"), "{t}");
    assert!(
        t.contains("allocated: MORE than the stock one's at 2 ranks x3.00, 16 ranks x7.00"),
        "{t}"
    );
    // stock-tcp has no segment: no shared column, a private one with its growth.
    assert!(!t.contains("stock-tcp mapped"), "{t}");
    let row = t.lines().rfind(|l| l.starts_with("2 ")).unwrap();
    assert!(row.ends_with("4.00 MiB (+2048 KiB)"), "{t}");
    assert!(t.contains("+0 KiB/peer"), "{t}");
    let csv = csv(&points, Some(&base));
    assert!(
        csv.lines()
            .nth(1)
            .unwrap()
            .starts_with("btl-self-1rank,1,0,0,0,"),
        "{csv}"
    );
    assert!(
        csv.contains("\nstock-tcp,2,0,0,0,4194304,4194304,4194304,4194304,2097152,2097152\n"),
        "{csv}"
    );
    let (samples, shared, private) = samples(&points, &shm);
    assert_eq!(
        shared,
        [
            "stock-vader mapped",
            "stock-vader allocated",
            "rsmcuda mapped",
            "rsmcuda allocated"
        ]
    );
    assert_eq!(private, ["stock-vader", "rsmcuda", "stock-tcp"]);
    assert_eq!(samples.len(), 4 * 2 + 5);
}

#[test]
fn options_default_to_the_pairs_and_check_counts() {
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let o = parse_options(&args(&[
        "--ranks",
        "8,2,2",
        "--configs",
        "stock-tcp,stock-vader",
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(o.counts, [2, 8]);
    assert_eq!(o.configs.len(), 2);
    assert!(!on_shared_memory(&o.configs[0].config));
    assert!(on_shared_memory(&o.configs[1].config));
    assert!(
        parse_options(&args(&["--ranks", "1"]))
            .unwrap_err()
            .contains("2..=64")
    );
    assert!(
        parse_options(&args(&["--configs", "rsmcuda-ompi5"]))
            .unwrap_err()
            .contains("5.0")
    );
    let o = parse_options(&args(&["--", "--small", "20"]))
        .unwrap()
        .unwrap();
    assert_eq!(o.probe_args, ["--small", "20"]);
    let o = parse_options(&args(&[
        "--config",
        "w=--mca pml ob1 --mca btl self,rusnic",
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(o.configs.len(), 1);
    assert_eq!(o.configs[0].config.name, "w");
}
