//! Output streams: one verbosity stream per component, plus the always-on stream 0.

use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::strings::lossy_cstring;
use ompi_sys as sys;

/// Writes to `opal_output` stream 0, which is always shown (errors, warnings).
pub fn emit_always(message: &str) {
    let text = lossy_cstring(message);
    // SAFETY: rmca_output formats with "%s" and a valid NUL-terminated string;
    // stream 0 exists from opal_init on, and before it opal_output writes to stderr.
    unsafe { sys::rmca_output(0, text.as_ptr()) };
}

/// A component's verbosity stream: messages at or below its level are printed.
#[derive(Debug, Clone, Copy)]
pub struct Stream {
    id: c_int,
    level: c_int,
}

impl Stream {
    /// Opens a stream prefixed with the component name, showing levels ≤ `level`.
    pub fn open(level: c_int) -> Stream {
        // SAFETY: opal_output_open(NULL) opens a default stream (stderr); it returns
        // a stream id or -1, never touching our memory.
        let id = unsafe { sys::opal_output_open(std::ptr::null_mut()) };
        if id >= 0 {
            // SAFETY: id was just returned by opal_output_open.
            unsafe { sys::opal_output_set_verbosity(id, level) };
        }
        Stream { id, level }
    }

    /// True when a message at `level` would be printed (skip formatting otherwise).
    /// The opal_output stream id (-1 when none could be opened).
    pub fn id(&self) -> c_int {
        self.id
    }

    pub fn enabled(&self, level: c_int) -> bool {
        self.id >= 0 && level <= self.level
    }

    /// Prints `message` if `level` is within the stream's verbosity.
    pub fn print(&self, level: c_int, message: &str) {
        if self.enabled(level) {
            let text = lossy_cstring(message);
            // SAFETY: valid stream id and NUL-terminated string formatted with "%s".
            unsafe { sys::rmca_output(self.id, text.as_ptr()) };
        }
    }

    /// Closes the stream (at component close).
    pub fn close(self) {
        if self.id > 0 {
            // SAFETY: id came from opal_output_open and is closed once.
            unsafe { sys::opal_output_close(self.id) };
        }
    }
}

/// A component's verbosity stream, opened at first use and closed when its framework
/// closes. opal_output's streams end with opal (after a process's last MPI Session),
/// which numbers them afresh when a later one starts it again: a stream id kept from
/// before would print nowhere, or into another's stream.
pub struct ComponentStream {
    /// The open stream's id and level (`pack`), or `CLOSED`.
    packed: AtomicU64,
}

const CLOSED: u64 = u64::MAX;

fn pack(stream: Stream) -> u64 {
    (u64::from(stream.id as u32) << 32) | u64::from(stream.level as u32)
}

fn unpack(packed: u64) -> Stream {
    Stream {
        id: (packed >> 32) as u32 as c_int,
        level: packed as u32 as c_int,
    }
}

impl ComponentStream {
    pub const fn new() -> ComponentStream {
        ComponentStream {
            packed: AtomicU64::new(CLOSED),
        }
    }

    /// The stream, opened at `level()` if it is not open.
    pub fn get(&self, level: impl FnOnce() -> c_int) -> Stream {
        let packed = self.packed.load(Ordering::Acquire);
        if packed != CLOSED {
            return unpack(packed);
        }
        let opened = Stream::open(level().max(0));
        match self.packed.compare_exchange(
            CLOSED,
            pack(opened),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => opened,
            Err(theirs) => {
                // Another thread opened it first.
                opened.close();
                unpack(theirs)
            }
        }
    }

    /// Closes the stream (at component close); the next `get` opens a new one.
    pub fn close(&self) {
        let packed = self.packed.swap(CLOSED, Ordering::AcqRel);
        if packed != CLOSED {
            unpack(packed).close();
        }
    }
}

impl Default for ComponentStream {
    fn default() -> ComponentStream {
        ComponentStream::new()
    }
}

/// `verbose!(stream, level, "format", args...)`: formats only when shown.
#[macro_export]
macro_rules! verbose {
    ($stream:expr, $level:expr, $($arg:tt)*) => {{
        let stream: &$crate::output::Stream = &$stream;
        if stream.enabled($level) {
            stream.print($level, &format!($($arg)*));
        }
    }};
}
