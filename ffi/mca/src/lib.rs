//! The one safe layer between our components and Open MPI.
//!
//! - [`component`]: the exported structure (every version field from the bindings),
//!   lifecycle trampolines, and refusal to run inside another Open MPI version.
//! - [`btl`]: the BTL module trait, its C trampolines and descriptors.
//! - [`guard`]: every entry point runs under a panic guard; a panic is logged with
//!   its location and the call fails with an OPAL/OMPI error code.
//! - [`error`], [`params`], [`pvars`], [`help`], [`output`], [`progress`], [`proc`]:
//!   error codes, MCA variables, MPI_T pvars, show_help, verbosity streams,
//!   progress registration, processes and the modex.
//! - [`selection`]: whether the user named a component in its framework's list.
//! - [`gpu`]: whether the running Open MPI lets a BTL use CUDA (4.1's build flavour,
//!   5.0's selected accelerator component).
//! - [`hwloc`]: the NUMA nodes of Open MPI's hwloc topology that this thread's binding
//!   touches.
//! - [`installed`]: a process-wide value put in place at init and taken away at
//!   finalize (a later MPI Session inits again without unloading us).
//! - [`threads`]: whether MPI may be entered by several threads at once (hot paths skip
//!   their locked read-modify-writes when not).

pub mod bsend;
pub mod btl;
pub mod component;
pub mod convertor;
pub mod error;
pub mod gpu;
pub mod guard;
pub mod help;
pub mod hwloc;
pub mod installed;
pub mod layout;
pub mod mtl;
pub mod object;
pub mod output;
pub mod params;
pub mod proc;
pub mod progress;
pub mod pvars;
pub mod selection;
pub mod strings;
pub mod threads;

pub use error::{Error, Result};
/// The raw bindings, for the few places the safe layer does not cover.
pub use ompi_sys as sys;
