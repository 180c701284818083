//! Emulated PUT bookkeeping. ob1's put is cut into pieces the core accepts (at most a
//! fragment each); each piece lends the application's bytes to the core. The put
//! completes when every piece was acknowledged (or failed) and the core and the backend
//! have let go of every lent buffer: only then may ob1 reuse the memory.

use std::collections::HashMap;
use std::sync::Arc;

use mca::btl::RdmaCompletion;
use mca::{Error, Result};
use rusnic_core::Shared;

struct PutOp {
    peer: u64,
    pieces_left: usize,
    status: Result<()>,
    lent: Vec<Shared>,
    done: RdmaCompletion,
}

impl PutOp {
    fn released(&self) -> bool {
        self.lent.iter().all(|s| Arc::strong_count(s) == 1)
    }
}

#[derive(Default)]
pub struct Puts {
    /// Engine send id of a piece → its put.
    piece_of: HashMap<u64, u64>,
    ops: HashMap<u64, PutOp>,
    next_op: u64,
    /// Puts whose pieces all ended, waiting for their lent buffers to be released.
    finishing: Vec<PutOp>,
}

impl Puts {
    /// Starts a put to `peer`; pieces follow with [`Puts::add_piece`].
    pub fn begin(&mut self, peer: u64, done: RdmaCompletion) -> u64 {
        self.next_op += 1;
        self.ops.insert(
            self.next_op,
            PutOp {
                peer,
                pieces_left: 0,
                status: Ok(()),
                lent: Vec::new(),
                done,
            },
        );
        self.next_op
    }

    /// The engine accepted a piece of `op` under send id `id`, reading from `lent`.
    pub fn add_piece(&mut self, op: u64, id: u64, lent: Shared) {
        if let Some(o) = self.ops.get_mut(&op) {
            o.pieces_left += 1;
            o.lent.push(lent);
            self.piece_of.insert(id, op);
        }
    }

    /// A piece could not be queued: the put fails once the queued ones ended. When none
    /// was queued, the completion comes back (the caller reports the error instead).
    pub fn fail_rest(&mut self, op: u64, err: Error) -> Option<RdmaCompletion> {
        let o = self.ops.get_mut(&op)?;
        o.status = Err(err);
        if o.pieces_left > 0 {
            return None;
        }
        self.ops.remove(&op).map(|o| o.done)
    }

    /// The engine reported send `id` acknowledged (`Ok`) or failed; false when `id` is
    /// not a piece of a put.
    pub fn piece_ended(&mut self, id: u64, status: Result<()>) -> bool {
        let Some(op) = self.piece_of.remove(&id) else {
            return false;
        };
        if let Some(o) = self.ops.get_mut(&op) {
            if o.status.is_ok() {
                o.status = status;
            }
            o.pieces_left -= 1;
            if o.pieces_left == 0
                && let Some(o) = self.ops.remove(&op)
            {
                self.finishing.push(o);
            }
        }
        true
    }

    /// Fails every put to a peer in `peers` (all when None): their connections are gone,
    /// so their pieces will report nothing more.
    pub fn abandon(&mut self, peers: Option<&[u64]>) {
        let gone: Vec<u64> = self
            .ops
            .iter()
            .filter(|(_, o)| peers.is_none_or(|ps| ps.contains(&o.peer)))
            .map(|(k, _)| *k)
            .collect();
        self.piece_of.retain(|_, op| !gone.contains(op));
        for k in gone {
            if let Some(mut o) = self.ops.remove(&k) {
                o.status = Err(Error::UNREACH);
                self.finishing.push(o);
            }
        }
    }

    /// Puts that may complete now, with their status; run them outside every lock
    /// (ob1 sends its FIN from the callback).
    pub fn take_ready(&mut self) -> Vec<(RdmaCompletion, Result<()>)> {
        if self.finishing.is_empty() {
            return Vec::new();
        }
        let (ready, waiting): (Vec<PutOp>, Vec<PutOp>) = std::mem::take(&mut self.finishing)
            .into_iter()
            .partition(PutOp::released);
        self.finishing = waiting;
        ready.into_iter().map(|o| (o.done, o.status)).collect()
    }

    /// No put in progress.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.finishing.is_empty()
    }
}
