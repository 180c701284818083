//! Memory per peer, counted by the allocator: what a job of 1024 ranks holds for its
//! peers before they talk, and what a burst makes a connection take and give back.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use rusnic_core::{Config, Endpoint};

mod scenario;

use scenario::{MS, cfg, deliver, delivered, drain, pair_with_isns};

/// The system allocator, counting the bytes each thread holds (tests run on threads of
/// their own, so one test's count is its own).
struct Counting;

thread_local! {
    static HELD: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    // try_with: a thread being torn down may free after its counter is gone.
    let _ = HELD.try_with(|h| h.set(h.get() + delta));
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is a
// thread-local integer with a const initialiser, which neither allocates nor panics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        // SAFETY: as for `dealloc`; `new_size` is the caller's, checked by its contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn held() -> isize {
    HELD.with(Cell::get)
}

const KIB: isize = 1024;

/// The defaults a job runs with (window 4096, 256 receive buffers): 1024 peers added to
/// an endpoint hold at most 64 KiB each until they carry traffic (each held 4096-entry
/// send and receive rings before, about 620 KiB).
#[test]
fn a_peer_without_traffic_holds_at_most_64_kib_at_1024_peers() {
    let mut endpoint = Endpoint::new(Config::default(), 0).unwrap();
    let before = held();
    for peer in 1..=1024u64 {
        endpoint.add_peer(peer, peer as u16, 7);
    }
    let per_peer = (held() - before) / 1024;
    println!("per peer before traffic: {per_peer} bytes");
    assert!(
        per_peer <= 64 * KIB,
        "{per_peer} bytes per peer before any traffic"
    );
}

/// A burst grows A's send ring to what was in flight; the window empties; one idle
/// second later the ring is back at its start, and traffic after it is delivered whole.
#[test]
fn a_send_ring_grows_with_a_burst_and_shrinks_when_idle() {
    let config = Config {
        window: 128,
        rx_buffers: 128,
        ..cfg()
    };
    let (mut a, mut b) = pair_with_isns(config, 65500, 7);
    let start = a.ring_slots();
    assert_eq!(
        start,
        (16, 128),
        "send ring at its start, receive ring at the grant"
    );

    for id in 0..100u64 {
        a.send(id, 1, &[id as u8; 100]).unwrap();
    }
    let burst = drain(&mut a, 0);
    assert_eq!(a.in_flight(), 100);
    assert_eq!(a.ring_slots().0, 128, "doubled 16 -> 128 for 100 in flight");
    deliver(&mut b, &burst, MS);
    assert_eq!(delivered(&mut b), 100);
    let acks = drain(&mut b, 2 * MS);
    deliver(&mut a, &acks, 3 * MS);
    assert_eq!(a.in_flight(), 0);
    assert_eq!(
        a.ring_slots().0,
        128,
        "kept while the window may fill again soon"
    );

    let idle_until = a.next_timeout().expect("the idle timer runs");
    assert!(idle_until.0 >= 3 * MS + 1000 * MS, "{idle_until:?}");
    a.handle_timeout(idle_until);
    assert_eq!(
        a.ring_slots(),
        start,
        "an idle peer gives the burst's memory back"
    );
    assert_eq!(a.next_timeout(), None, "and no timer is left running");

    // Again across the shrink: the sequence numbers go on (past the 16-bit wrap).
    for id in 100..140u64 {
        a.send(id, 2, &[id as u8; 100]).unwrap();
    }
    let t = idle_until.0;
    let second = drain(&mut a, t);
    assert_eq!(a.ring_slots().0, 64);
    deliver(&mut b, &second, t + MS);
    assert_eq!(delivered(&mut b), 40);
    let acks = drain(&mut b, t + 2 * MS);
    deliver(&mut a, &acks, t + 3 * MS);
    assert_eq!(a.in_flight(), 0);
}
