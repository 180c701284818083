//! Everything in rofi that dereferences a raw pointer lives below this module: the
//! libfabric objects, operation contexts handed to the provider, the PML's request
//! memory, process endpoints and matched-message handles. The rest of the glue is safe.

pub mod bounce;
pub mod bsend;
pub mod buffer;
pub mod context;
pub mod env;
pub mod fabric;
pub mod message;
pub mod modex;
pub mod post;
pub mod probe;
pub mod procs;
pub mod pvar;
pub mod running;
pub mod sink;
pub mod slot;

/// A value moved between threads exactly as the C pointer it wraps would be.
#[derive(Debug)]
pub struct Owned<T>(pub T);

// SAFETY: `Owned` wraps request state that holds raw pointers into PML-owned objects
// (convertors, communicators, buffers). cm hands a request to one thread at a time,
// and rofi touches the state only under its progress lock or before posting.
unsafe impl<T> Send for Owned<T> {}
