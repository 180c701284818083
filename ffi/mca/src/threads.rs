//! Whether this process's MPI may be entered by several threads at once.
//!
//! Open MPI sets `opal_uses_threads` when `MPI_THREAD_MULTIPLE` is asked for, in
//! `MPI_Init` before any BTL or MTL is initialised, and (5.0) again when a later
//! `MPI_Session_init` asks for it; it never clears it. So callers read it per call, as Open MPI's own
//! `opal_using_threads()` does, rather than once. Below that level, MPI calls never
//! overlap: a thread's calls are ordered after another's by the application's own
//! synchronisation (`MPI_THREAD_SERIALIZED`) or come from one thread.
//! Open MPI's C components skip their locks then (`OPAL_THREAD_LOCK` is a no-op unless
//! `opal_using_threads()`); hot paths of ours do the same through this flag: a locked
//! read-modify-write per message waits for the stores before it (ring lines the peer
//! owns) and costs about a cross-core round trip.

/// True when MPI may be entered by several threads at once (`MPI_THREAD_MULTIPLE`), or
/// when Open MPI says so for its own reasons (a progress thread).
pub fn concurrent() -> bool {
    // SAFETY: a plain `bool` that Open MPI sets (never clears) while initialising an
    // MPI instance; a one-byte volatile load cannot tear, and a caller that read false
    // is inside an MPI call of a process that was not multi-threaded at that time.
    unsafe { std::ptr::addr_of!(ompi_sys::opal_uses_threads).read_volatile() }
}
