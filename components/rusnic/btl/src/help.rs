//! The component's show_help topics (configure-support/help/help-mpi-btl-rusnic.txt).

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
