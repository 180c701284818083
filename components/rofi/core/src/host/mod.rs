//! Host matching: MPI matching done by rofi instead of the provider's tagged queues.
//!
//! Used where a provider's tag matching cannot be trusted (it fails rofi's matching
//! probe, [`crate::provider::probe`], as libfabric's `shm` does; or it has a
//! [`crate::provider::known_defect`]) or when `mtl_rofi_host_matching always` asks for
//! it. Only untagged messages (`fi_inject`) and RMA reads (`fi_read`) reach the provider,
//! and untagged messages are matched to posted receives by arrival order alone, which
//! every provider gets right.
//!
//! # The protocol
//! Every message starts with a [`wire`] header naming its kind.
//! - **Eager** (header + payload fit the receive buffers, 16 KiB by default): the envelope
//!   (communicator id, source rank, MPI tag), the length and the payload. With
//!   `MPI_Ssend` it also carries the sender's operation id, and the receiver sends
//!   **Ack**(id) when a receive consumes it (plain receive or Mrecv, truncated or not).
//! - **Rts** (larger messages): envelope, length, the sender's buffer offset and the key
//!   it registered the buffer under. The receiver that consumes it reads
//!   `min(length, room)` bytes with `fi_read` straight into the receive buffer, then
//!   sends **Fin**(id); the sender keeps the buffer registered until then. Fin doubles as
//!   the synchronous-send acknowledgement: nothing is read before a receive matched.
//!
//! Eager messages are injected when they fit the inject size and sent with a
//! completion up to the receive buffers' size otherwise; the sender's buffer is then
//! held until that completion ([`send`]: the path of a message and the events its
//! sender waits for). Eager and Rts messages carry a sequence number per
//! sender, communicator and receiver ([`Reorder`]), so a provider that completes a
//! large eager message after a later small one cannot reorder MPI matching.
//!
//! Every process keeps untagged receive buffers posted; each arrival goes through one
//! [`Matcher`]: to the oldest posted receive it fits, else to the unexpected queue, which
//! receives, probes and matched probes search in arrival order, arrival meaning send
//! order once [`Reorder`] has put each channel's messages back in sequence.

mod matcher;
mod reorder;
pub mod send;
pub mod wire;

#[cfg(test)]
mod tests;

pub use matcher::{ANY, Envelope, Matcher, Pattern};
pub use reorder::{Order, Reorder, Sequencer};
