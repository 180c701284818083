//! The panic guard every C entry point goes through.
//!
//! A panic must never unwind into Open MPI. `guard` runs the body under
//! `catch_unwind`; a panic is logged through `opal_output` (stream 0, always shown)
//! with its message and source location, and the entry point returns the
//! caller-chosen failure value (an OPAL/OMPI error code, a NULL pointer, ...).
//!
//! The guard keeps no state of its own on the way in: the hot entry points (a BTL's
//! sendi, every progress pass) pay only `catch_unwind`, which costs nothing until a
//! panic, and one check that the hook is installed. The hook therefore cannot know
//! whether a panic will be caught: it records the message for the guard that may catch
//! it and hands the panic on to the hook before it (Rust's own prints it on stderr),
//! so an uncaught one is reported as ever and a caught one twice (stderr and
//! `opal_output`). A thread-local depth counter told the hook before; reading it
//! twice per call cost two `__tls_get_addr` calls in a shared object.

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// Message and location of the last panic on this thread, for the guard that
    /// catches it (touched only when a panic happens).
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

static INSTALL_HOOK: Once = Once::new();

fn install_hook() {
    INSTALL_HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "<non-string panic payload>".to_owned());
            let location = info
                .location()
                .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
                .unwrap_or_else(|| "<unknown location>".to_owned());
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{message} at {location}")));
            previous(info);
        }));
    });
}

/// Runs `body`; if it panics, logs the panic against `entry` and returns `on_panic`.
#[inline]
pub fn guard<R>(entry: &str, on_panic: R, body: impl FnOnce() -> R) -> R {
    install_hook();
    guard_hot(entry, on_panic, body)
}

/// [`guard`] for the entry points every message passes (a BTL's sendi and send, a
/// progress pass): without the check that the hook is installed, which the component's
/// registration (the first call Open MPI makes into it, through [`guard`]) did. A panic
/// before that would still be stopped here, reported with its message but without
/// its location.
#[inline]
pub fn guard_hot<R>(entry: &str, on_panic: R, body: impl FnOnce() -> R) -> R {
    match panic::catch_unwind(AssertUnwindSafe(body)) {
        Ok(value) => value,
        Err(payload) => report(entry, &*payload, on_panic),
    }
}

#[cold]
#[inline(never)]
fn report<R>(entry: &str, payload: &(dyn std::any::Any + Send), on_panic: R) -> R {
    let what = LAST_PANIC
        .with(|p| p.borrow_mut().take())
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic without details".to_owned());
    crate::output::emit_always(&format!(
        "[rmca] internal error in {entry}: {what}; the call fails with an error code"
    ));
    on_panic
}

/// A guarded entry point returning an OPAL/OMPI code: panics become `OPAL_ERROR`.
pub fn guard_code(entry: &str, body: impl FnOnce() -> crate::Result<()>) -> std::ffi::c_int {
    guard(
        entry,
        ompi_sys::OPAL_ERROR,
        || crate::error::to_code(body()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_failure_value_and_is_recorded() {
        let value = guard("test_entry", -1, || -> i32 { panic!("boom {}", 7) });
        assert_eq!(value, -1);
        assert_eq!(guard("test_entry", -1, || 5), 5);
    }

    #[test]
    fn the_hot_guard_stops_a_panic_too() {
        assert_eq!(
            guard_hot("hot_entry", -1, || -> i32 { panic!("hot {}", 1) }),
            -1
        );
        assert_eq!(guard_hot("hot_entry", -1, || 3), 3);
    }

    #[test]
    fn guard_code_maps_errors_and_panics() {
        assert_eq!(guard_code("e", || Ok(())), 0);
        assert_eq!(
            guard_code("e", || Err(crate::Error::UNREACH)),
            ompi_sys::OPAL_ERR_UNREACH
        );
        assert_eq!(guard_code("e", || panic!("x")), ompi_sys::OPAL_ERROR);
    }
}
