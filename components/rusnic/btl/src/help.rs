//! The component's diagnostics: its show_help topics
//! (configure-support/help/help-mpi-btl-rusnic.txt) and its verbose stream.

use mca::output::{ComponentStream, Stream};

use crate::params;

const FILE: &str = "help-mpi-btl-rusnic.txt";

/// Shows one of our topics with its `%s` arguments.
pub fn show(topic: &str, args: &[&str]) {
    mca::help::show_help(FILE, topic, true, args);
}

/// A parameter combination the protocol core rejects.
pub fn show_invalid(problem: &str) {
    mca::help::show_help(
        "help-rmca.txt",
        "invalid parameter",
        true,
        &["btl rusnic", problem],
    );
}

static STREAM: ComponentStream = ComponentStream::new();

/// The verbose stream, at `btl_rusnic_verbose`'s level.
pub fn stream() -> Stream {
    STREAM.get(|| params::get().verbose.get())
}

/// Closes the verbose stream (at component close).
pub fn close_stream() {
    STREAM.close();
}
