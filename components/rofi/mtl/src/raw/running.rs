//! The engine of the running MTL, from init to finalize. A later MPI Session in the
//! same process inits rofi again (often without unloading it): it starts a new engine.

use mca::installed::Installed;

use crate::engine::Engine;

static ENGINE: Installed<Engine> = Installed::new();

/// The running engine, if any.
#[inline]
pub fn engine() -> Option<&'static Engine> {
    ENGINE.get()
}

/// Makes `engine` the running one; gives it back when one is running already.
pub fn start(engine: Box<Engine>) -> Result<&'static Engine, Box<Engine>> {
    ENGINE.install(engine)
}

/// Takes the running engine away and shuts it down (finalize, or a failed init).
pub fn stop() {
    // SAFETY: called only from the MTL's finalize, after rofi's progress callback is
    // unregistered, or from an init that failed before registering it: cm makes no
    // more calls into the module, and no engine reference is kept beyond the call that
    // got it.
    if let Some(stopped) = unsafe { ENGINE.remove() } {
        stopped.shut_down();
    }
}
