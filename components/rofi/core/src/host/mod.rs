//! Host matching: MPI matching done by rofi instead of the provider's tagged queues.
//!
//! Used where a provider's tag matching cannot be trusted (libfabric < 1.19's `shm`, see
//! [`crate::provider::known_defect`]) or when `mtl_rofi_host_matching always` asks for
//! it. Only untagged messages (`fi_inject`) and RMA reads (`fi_read`) reach the provider,
//! and untagged messages are matched to posted receives by arrival order alone, which
//! every provider gets right.
//!
//! # The protocol
//! Every message starts with a [`wire`] header naming its kind.
//! - **Eager** (header + payload fit the provider's inject size): the envelope
//!   (communicator id, source rank, MPI tag), the length and the payload. With
//!   `MPI_Ssend` it also carries the sender's operation id, and the receiver sends
//!   **Ack**(id) when a receive consumes it (plain receive or Mrecv, truncated or not).
//! - **Rts** (larger messages): envelope, length, the sender's buffer address and the key
//!   it registered the buffer under. The receiver that consumes it reads
//!   `min(length, room)` bytes with `fi_read` straight into the receive buffer, then
//!   sends **Fin**(id); the sender keeps the buffer registered until then. Fin doubles as
//!   the synchronous-send acknowledgement: nothing is read before a receive matched.
//!
//! Every process keeps untagged receive buffers posted; each arrival goes through one
//! [`Matcher`]: to the oldest posted receive it fits, else to the unexpected queue, which
//! receives, probes and matched probes search in arrival order. That is MPI's
//! non-overtaking rule as long as the provider delivers one sender's messages in order
//! (FI_ORDER_SAS, asked for in the hints) and completes them in order, which holds for
//! messages within the inject size (copied in one step).

mod matcher;
pub mod wire;

#[cfg(test)]
mod tests;

pub use matcher::{ANY, Envelope, Matcher, Pattern};
