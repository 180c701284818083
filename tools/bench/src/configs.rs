//! The named configurations a benchmark can compare.
//!
//! Every configuration runs two ranks bound to cores with the runtime's own traffic
//! (OOB) on the loopback, so the only difference between two columns of a table is
//! the transport. Ours are listed only when their component was built.
//!
//! Two Open MPI series: the system's 4.1 (names as they are) and 5.0 (`NAME-ompi5`, as
//! in tests/ompi5.rs:
//! the installation of configure-support/ompi5 with ours from build/ompi5/mca), so that
//! one invocation can measure both in the same interleaved rounds.
//!
//! Layered one way: `series` (the two series and the 5.0 names), `registry` (the
//! configurations), then `spec` (resolving a command-line name) and `setup` (what
//! they need before they run); this module only gathers them.

mod registry;
mod series;
mod setup;
mod spec;

pub use registry::{BenchConfig, registry};
pub use series::Series;
pub use setup::{locate, ompi5_prefix, prepare};
pub use spec::resolve;
