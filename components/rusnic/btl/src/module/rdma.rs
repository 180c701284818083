//! ob1's RDMA protocol on top of the engine: emulated PUT from the application's buffer,
//! and registrations that open receive buffers for arriving PUT data.

use mca::btl::{Btl, RdmaCompletion, RdmaOp, Registration};
use mca::{Error, Result};

use super::{PeerEndpoint, Rusnic, btl_error, max_fragment};
use crate::help;
use crate::raw_ob1::Upcalls;
use crate::raw_put;

impl Rusnic {
    /// Emulated PUT: the bytes travel as data segments carrying their destination and
    /// land in the peer's registered buffer as they arrive; `done` runs once the peer
    /// acknowledged them all. The source is read in place, never copied.
    pub(super) fn start_put(
        btl: &Btl<Rusnic>,
        ep: &PeerEndpoint,
        op: RdmaOp,
        done: RdmaCompletion,
    ) -> Result<()> {
        if let Some(h) = op.remote_handle {
            let (base, len) = raw_put::peer_region(h);
            let inside = op.remote >= base
                && (op.remote - base)
                    .checked_add(op.size as u64)
                    .is_some_and(|end| end <= len);
            if !inside {
                help::show(
                    "internal error",
                    &[&format!(
                        "put of {} bytes to {:#x} lies outside the peer's registered region \
                         {base:#x}+{len}",
                        op.size, op.remote
                    )],
                );
                return Err(Error::BAD_PARAM);
            }
        }
        if op.size == 0 {
            done.complete(btl, Ok(()));
            return Ok(());
        }
        let piece = max_fragment(btl);
        let mut eng = btl.engine();
        let mut puts = btl.puts();
        let put = puts.begin(ep.id, done);
        for off in (0..op.size).step_by(piece) {
            let len = piece.min(op.size - off);
            let lent = raw_put::lend(&op, off, len);
            match eng.put(ep.id, op.remote + off as u64, lent.clone(), len) {
                Ok(id) => puts.add_piece(put, id, lent),
                Err(e) => {
                    let err = btl_error(&e);
                    if puts.fail_rest(put, err).is_some() {
                        // Nothing was queued: ob1 gets the error instead of a callback.
                        return Err(err);
                    }
                    break;
                }
            }
        }
        drop(puts);
        eng.pump_tx(btl.now());
        Ok(())
    }

    /// Registration is bookkeeping only (nothing to pin): it opens the buffer for PUT
    /// data from peers until ob1 deregisters it.
    pub(super) fn open_region(&self, base: *mut u8, size: usize) -> Option<Registration> {
        let key = self.regions().open(base as u64, size as u64)?;
        Some(raw_put::new_handle(base as u64, size as u64, key))
    }

    pub(super) fn close_region(&self, handle: Registration) -> Result<()> {
        let key = raw_put::take_handle(handle);
        if self.regions().close(key) {
            Ok(())
        } else {
            Err(Error::BAD_PARAM)
        }
    }

    /// Runs the callbacks of puts that are over and whose buffers are released.
    pub(super) fn finish_puts(&self, btl: &Btl<Rusnic>) -> usize {
        let ready = self.puts().take_ready();
        let n = ready.len();
        for (done, status) in ready {
            if self.upcalls() {
                done.complete(btl, status);
            }
        }
        n
    }
}
