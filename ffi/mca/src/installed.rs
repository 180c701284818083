//! A process-wide value that a component puts in place at init and takes away at
//! finalize, for entry points that carry no context (opal_progress callbacks, the
//! MTL's functions). Open MPI may init the component again in the same process (a
//! second MPI Session) without unloading it: it stays loaded while anything pins its
//! shared object, and always where it is linked into libmpi. So the value is not a
//! `OnceLock`: a later init installs a new one.

use std::sync::atomic::{AtomicPtr, Ordering};

pub struct Installed<T> {
    value: AtomicPtr<T>,
}

impl<T> Installed<T> {
    pub const fn new() -> Installed<T> {
        Installed {
            value: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// Puts `value` in place; gives it back when one is in place already.
    pub fn install(&self, value: Box<T>) -> std::result::Result<&'static T, Box<T>> {
        let raw = Box::into_raw(value);
        match self.value.compare_exchange(
            std::ptr::null_mut(),
            raw,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: `raw` is the Box just placed; it lives until `remove`, whose
            // caller promises that no reference from here is used after it.
            Ok(_) => Ok(unsafe { &*raw }),
            // SAFETY: `raw` came from Box::into_raw above and was never shared.
            Err(_) => Err(unsafe { Box::from_raw(raw) }),
        }
    }

    /// The value in place, if any.
    #[inline]
    pub fn get(&self) -> Option<&'static T> {
        let raw = self.value.load(Ordering::Acquire);
        // SAFETY: a non-null pointer is a Box installed above and not yet removed;
        // `remove`'s contract keeps every reference from outliving it.
        unsafe { raw.as_ref() }
    }

    /// Takes the value away, to be dropped by the caller.
    ///
    /// # Safety
    /// No reference returned by `get` or `install` may be used after this call: the
    /// component calls it from finalize, once its progress callback is unregistered,
    /// when Open MPI makes no more calls into the module.
    pub unsafe fn remove(&self) -> Option<Box<T>> {
        let raw = self.value.swap(std::ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: a non-null pointer is a Box installed above, now owned by no one
        // else (the swap took it away from every later `get`).
        (!raw.is_null()).then(|| unsafe { Box::from_raw(raw) })
    }
}

impl<T> Default for Installed<T> {
    fn default() -> Installed<T> {
        Installed::new()
    }
}

// SAFETY: the value is shared by reference between the threads that enter the
// component, as a `static` of T would be; it is only moved (dropped) by `remove`.
unsafe impl<T: Sync + Send> Sync for Installed<T> {}

#[cfg(test)]
mod tests {
    use super::Installed;

    #[test]
    fn installs_once_until_removed_then_again() {
        let slot: Installed<String> = Installed::new();
        assert!(slot.get().is_none());
        assert_eq!(
            slot.install(Box::new("first".to_owned()))
                .map(String::as_str),
            Ok("first")
        );
        assert_eq!(
            slot.install(Box::new("second".to_owned())),
            Err(Box::new("second".to_owned()))
        );
        assert_eq!(slot.get().map(String::as_str), Some("first"));
        // SAFETY: no reference from get/install is used below.
        let removed = unsafe { slot.remove() };
        assert_eq!(removed.as_deref().map(String::as_str), Some("first"));
        assert!(slot.get().is_none());
        // SAFETY: as above.
        assert!(unsafe { slot.remove() }.is_none());
        assert_eq!(
            slot.install(Box::new("again".to_owned()))
                .map(String::as_str),
            Ok("again")
        );
        // SAFETY: as above.
        drop(unsafe { slot.remove() });
    }
}
