//! Output streams: one verbosity stream per component, plus the always-on stream 0.

use std::ffi::c_int;

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
