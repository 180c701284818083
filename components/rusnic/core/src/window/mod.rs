//! Per-peer sliding windows: the sender's record of unacknowledged segments and the
//! receiver's record of what arrived out of order.

pub(crate) mod recv;
pub(crate) mod send;
