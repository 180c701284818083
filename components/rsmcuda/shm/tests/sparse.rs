//! Memory that exists: an anonymous (memfd) segment is sparse — creating and attaching
//! it allocates only the header page, and using it allocates exactly the pages used —
//! while a named one is allocated in full at creation (`posix_fallocate`).
//!
//! What a segment holds is read as the benchmark reads it (`tests/bench/memprobe.c`):
//! the blocks its file has allocated (`st_blocks`), whoever allocated them — the
//! creator's fallocate or any process's first touch. (`mincore` would not do for the
//! named case: it does not count pages that fallocate allocated and nobody has touched
//! yet, which the kernel keeps as not up to date.)

mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;

use common::unique_name;
use rsmcuda_shm::{
    Backing, FRAG_HEADER_BYTES, LayoutParams, Locator, PoolKind, Segment, SegmentName,
};

const PAGE: u64 = 4096;

/// The BTL's layout at `n` ranks with its default parameters (`btl/src/setup.rs`: fifo
/// 4096, 128 eager fragments of 4 KiB, 32 max fragments of 32 KiB, fast boxes of 64 KiB
/// at 2 ranks halving as the rank count doubles).
fn btl_like(n: u32) -> LayoutParams {
    LayoutParams {
        fbox_bytes: match n {
            0..=2 => 64 << 10,
            3..=4 => 32 << 10,
            5..=8 => 16 << 10,
            _ => 8 << 10,
        },
        ..LayoutParams::new(n)
    }
}

/// Where shmem allocates transparent huge pages, a first touch allocates 2 MiB and the
/// page counts below do not hold.
fn shmem_thp() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled").is_ok_and(|s| {
        ["[always]", "[within_size]", "[force]"]
            .iter()
            .any(|m| s.contains(m))
    })
}

fn page_size() -> u64 {
    std::fs::read_to_string("/proc/self/smaps")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("KernelPageSize:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(PAGE, |k| k * 1024)
}

/// Bytes the segment's file has allocated: a named one through its name, an anonymous
/// one through this process's descriptor of it (the creator's, held until `settle`).
fn allocated(seg: &Segment) -> u64 {
    let path = match seg.backing() {
        Backing::Named => seg.name().dev_shm_path(),
        Backing::Anonymous => {
            let link = format!("/memfd:{} (deleted)", &seg.name().as_str()[1..]);
            std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .find(|p| std::fs::read_link(p).is_ok_and(|l| l.as_os_str() == link.as_str()))
                .expect("the creator holds the memfd")
        }
    };
    std::fs::metadata(path).unwrap().blocks() * 512
}

fn create(backing: Backing, name: &SegmentName, params: &LayoutParams) -> Segment {
    Segment::create_in(backing, name, params, 0, &[]).unwrap().0
}

#[test]
fn a_fresh_anonymous_segment_holds_its_header_page_only_and_a_named_one_everything() {
    if shmem_thp() || page_size() != PAGE {
        eprintln!("SKIP: shmem huge pages or a page size other than 4 KiB");
        return;
    }
    for n in [2, 4, 8, 16] {
        let params = btl_like(n);
        let name = unique_name("sparse");
        let seg = create(Backing::Anonymous, &name, &params);
        let total = seg.layout().total_size();
        // The header and the rank table, which end where rank 0's region starts.
        let header = seg.layout().region_off(0);
        assert_eq!(header, PAGE, "{n} ranks: one page of header and rank table");
        assert_eq!(allocated(&seg), header, "{n} ranks, created");
        // Every rank attaching (each writes its rank entry only) changes nothing.
        let me = std::process::id();
        let peers: Vec<Segment> = (1..n)
            .map(|r| {
                Segment::try_attach_from(Locator::Process(me), &name, r)
                    .unwrap()
                    .unwrap()
            })
            .collect();
        assert!(seg.all_attached());
        assert_eq!(allocated(&seg), header, "{n} ranks, attached");
        assert!(header * 100 < total, "{n} ranks: {header} of {total} bytes");
        drop(peers);

        let name = unique_name("full");
        let named = create(Backing::Named, &name, &params);
        let full = allocated(&named);
        // Unlinked before asserting, so that a failure leaves nothing in /dev/shm.
        named.unlink_if_leader_on_failure().unwrap();
        assert_eq!(
            full, total,
            "{n} ranks: a named segment is allocated in full"
        );
    }
}

/// The pages of `[off, off + len)`.
fn pages(off: u64, len: u64) -> impl Iterator<Item = u64> {
    off / PAGE..(off + len).div_ceil(PAGE)
}

#[test]
fn using_an_anonymous_segment_allocates_exactly_the_pages_it_uses() {
    if shmem_thp() || page_size() != PAGE {
        eprintln!("SKIP: shmem huge pages or a page size other than 4 KiB");
        return;
    }
    let name = unique_name("sparse-use");
    let s0 = create(Backing::Anonymous, &name, &btl_like(2));
    let s1 = Segment::try_attach_from(Locator::Process(std::process::id()), &name, 1)
        .unwrap()
        .unwrap();
    let l = *s0.layout();
    let mut expect: BTreeSet<u64> = pages(0, PAGE).collect();
    let check = |expect: &BTreeSet<u64>, what: &str| {
        assert_eq!(
            allocated(&s0),
            expect.len() as u64 * PAGE,
            "after {what}: expected pages {expect:?}"
        );
    };

    // Handles: pools and writers touch nothing; a FIFO reader claims its control line.
    let mut pool0 = s0.frag_pool().unwrap();
    let to1 = s0.fifo_writer(1).unwrap();
    let to0 = s1.fifo_writer(0).unwrap();
    check(&expect, "pool and writers");
    let mut r0 = s0.fifo_reader().unwrap();
    let mut r1 = s1.fifo_reader().unwrap();
    expect.extend(pages(l.fifo_ctrl_off(0), 128));
    expect.extend(pages(l.fifo_ctrl_off(1), 128));
    check(&expect, "FIFO readers");

    // One eager fragment from rank 0 to rank 1 and its ACK back.
    let mut f = pool0.alloc(5).unwrap();
    assert_eq!(f.kind(), PoolKind::Eager);
    pool0.payload_mut(&mut f)[..5].copy_from_slice(b"hello");
    let off = f.offset();
    to1.push(pool0.post(f, 5, 7).unwrap()).unwrap();
    let got = r1.pop().unwrap();
    let inc = r1.incoming(got).unwrap();
    assert_eq!(
        (inc.payload(), inc.tag(), inc.sender()),
        (&b"hello"[..], 7, 0)
    );
    let (owner, ack) = inc.into_ack(true);
    assert_eq!(owner, 0);
    to0.push(ack).unwrap();
    pool0.complete(r0.pop().unwrap().value()).unwrap();
    expect.extend(pages(off, FRAG_HEADER_BYTES + 5));
    expect.extend(pages(l.fifo_slots_off(1), 16));
    expect.extend(pages(l.fifo_slots_off(0), 16));
    check(&expect, "one fragment and its ACK");

    // One fast-box message from rank 1 to rank 0.
    let mut w = s1.fbox_writer(0).unwrap();
    let mut rd = s0.fbox_reader(1).unwrap();
    assert!(w.try_send(3, 8, |b| {
        b[..8].copy_from_slice(b"fastbox!");
        8
    }));
    let mut seen = Vec::new();
    rd.poll(8, |tag, p| seen.push((tag, p.to_vec()))).unwrap();
    assert_eq!(seen, vec![(3, b"fastbox!".to_vec())]);
    expect.extend(pages(l.fbox_off(1, 0), 64 + 64));
    check(&expect, "one fast-box message");
    assert!(
        expect.len() <= 8,
        "a few pages of {}: {expect:?}",
        l.total_size() / PAGE
    );
}
