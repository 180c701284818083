//! A lock that is only ever tried: the caller that finds it taken does something else
//! (another path, or nothing). Raw module: the exclusive access is `unsafe` here.
//!
//! Two ways to take it, chosen per call:
//! - [`TryLock::try_lock`]: a compare-exchange, as a mutex would do;
//! - [`TryLock::try_lock_serialized`]: the caller promises that no other thread tries
//!   the lock at an overlapping time (MPI below `MPI_THREAD_MULTIPLE`: calls never
//!   overlap and one thread's are ordered after another's by the application). It is a
//!   plain load and store, which still refuses a re-entrant attempt from the holder's own
//!   thread (a receive callback that calls progress);
//! - [`TryLock::get_serialized`]: the same promise, from a caller that cannot re-enter
//!   itself either (a fast box's writer, used by `sendi` alone, which calls nothing of
//!   the BTL while it writes): no load, no store, the value itself.
//!
//! Why not a `Mutex`: releasing one, and taking this in concurrent mode, is a locked
//! read-modify-write, which waits until the stores before it are visible. On a send
//! path those stores went to cache lines the peer's core holds (the ring it reads), so
//! every message paid about one cross-core round trip just to release a lock. Releasing
//! this is a plain Release store either way; the serialized way takes it without any
//! locked instruction at all. The choice is per call because Open MPI may switch to
//! `MPI_THREAD_MULTIPLE` after a lock was made (a later `MPI_Session_init` asking for it).

use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

pub struct TryLock<T> {
    busy: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is reached only through a guard, and a guard exists only for the
// caller that switched `busy` from false to true (compare-exchange with Acquire; or, for
// `try_lock_serialized`, a load and store whose callers promise not to overlap, ordered
// by the application's synchronisation) until it stores false (Release). `T: Send`
// because the value is used from several threads.
unsafe impl<T: Send> Sync for TryLock<T> {}

impl<T> TryLock<T> {
    pub fn new(value: T) -> Self {
        Self {
            busy: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// The value, if nobody holds the lock (this thread included).
    pub fn try_lock(&self) -> Option<TryLockGuard<'_, T>> {
        self.busy
            .compare_exchange(false, true, Acquire, Relaxed)
            .is_ok()
            // Built only on success: dropping a guard releases the lock.
            .then(|| TryLockGuard { lock: self })
    }

    /// The value, without taking the lock at all: for a caller that no other thread
    /// can overlap and that cannot re-enter itself while it holds the reference.
    ///
    /// # Safety
    /// No other thread may take or hold this lock, or use this method, at an
    /// overlapping time; this call must happen after (in the happens-before sense)
    /// every earlier guard on another thread was dropped; and nothing else reaches the
    /// value (through this method or a guard) while the reference lives.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get_serialized(&self) -> &mut T {
        // SAFETY: exclusive access is the caller's promise.
        unsafe { &mut *self.value.get() }
    }

    /// [`Self::try_lock`] without a locked instruction.
    ///
    /// # Safety
    /// No other thread may try this lock (either way) at an overlapping time, and this
    /// call must happen after (in the happens-before sense) every earlier guard on
    /// another thread was dropped.
    pub unsafe fn try_lock_serialized(&self) -> Option<TryLockGuard<'_, T>> {
        if self.busy.load(Relaxed) {
            return None;
        }
        self.busy.store(true, Relaxed);
        Some(TryLockGuard { lock: self })
    }

    /// The value, through exclusive access to the lock.
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

impl<T> fmt::Debug for TryLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TryLock")
            .field("busy", &self.busy.load(Relaxed))
            .finish()
    }
}

/// Exclusive access to a [`TryLock`]'s value until dropped. A panic while holding it
/// releases it (the values kept under it stay consistent between statements).
pub struct TryLockGuard<'a, T> {
    lock: &'a TryLock<T>,
}

impl<T> Deref for TryLockGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only access to the value (see the `Sync` impl).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for TryLockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this borrow unique.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for TryLockGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.busy.store(false, Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_held_lock_refuses_in_both_modes_and_frees_on_drop() {
        let lock = TryLock::new(1);
        let mut g = lock.try_lock().expect("free");
        *g += 1;
        assert!(lock.try_lock().is_none(), "re-entrant attempt refused");
        // SAFETY: one thread only.
        assert!(unsafe { lock.try_lock_serialized() }.is_none());
        drop(g);
        // SAFETY: one thread only.
        let mut g = unsafe { lock.try_lock_serialized() }.expect("free again");
        *g += 1;
        assert!(lock.try_lock().is_none(), "held either way");
        drop(g);
        assert_eq!(*lock.try_lock().expect("free again"), 3);
    }

    #[test]
    fn a_panic_while_holding_releases() {
        let lock = TryLock::new(0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _g = lock.try_lock().unwrap();
            panic!("boom");
        }));
        assert!(r.is_err());
        assert!(lock.try_lock().is_some());
    }

    #[test]
    fn concurrent_mode_gives_exclusive_access() {
        let lock = Arc::new(TryLock::new(0u64));
        let inside = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (lock, inside) = (Arc::clone(&lock), Arc::clone(&inside));
                std::thread::spawn(move || {
                    let mut done = 0;
                    while done < 10_000 {
                        if let Some(mut g) = lock.try_lock() {
                            assert!(!inside.swap(true, Relaxed), "two holders at once");
                            // A non-atomic read-modify-write with room for others to
                            // fail their attempts meanwhile: lost updates show a race.
                            let v = *g;
                            for _ in 0..20 {
                                std::hint::spin_loop();
                            }
                            *g = v + 1;
                            inside.store(false, Relaxed);
                            done += 1;
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*lock.try_lock().unwrap(), 40_000);
    }
}
