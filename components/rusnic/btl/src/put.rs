//! Emulated PUT bookkeeping. ob1's put is cut into pieces the core accepts (at most a
//! fragment each); each piece lends the application's bytes to the core. The put
//! completes when every piece was acknowledged (or failed) and the core and the backend
//! have let go of every lent buffer: only then may ob1 reuse the memory.

use fast_hash::FastMap;
use std::sync::Arc;

use mca::btl::RdmaCompletion;
use mca::{Error, Result};
use rusnic_core::Shared;

/// `C`: what is owed to ob1 when a put ends (its `RdmaCompletion`; a plain value in tests).
struct PutOp<C> {
    peer: u64,
    pieces_left: usize,
    status: Result<()>,
    lent: Vec<Shared>,
    done: C,
}

impl<C> PutOp<C> {
    fn released(&self) -> bool {
        self.lent.iter().all(|s| Arc::strong_count(s) == 1)
    }
}

pub struct Puts<C = RdmaCompletion> {
    /// Engine send id of a piece → its put.
    piece_of: FastMap<u64, u64>,
    ops: FastMap<u64, PutOp<C>>,
    next_op: u64,
    /// Puts whose pieces all ended, waiting for their lent buffers to be released.
    finishing: Vec<PutOp<C>>,
}

impl<C> Default for Puts<C> {
    fn default() -> Self {
        Puts {
            piece_of: FastMap::default(),
            ops: FastMap::default(),
            next_op: 0,
            finishing: Vec::new(),
        }
    }
}

impl<C> Puts<C> {
    /// Starts a put to `peer`; pieces follow with [`Puts::add_piece`].
    pub fn begin(&mut self, peer: u64, done: C) -> u64 {
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
    pub fn fail_rest(&mut self, op: u64, err: Error) -> Option<C> {
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
    pub fn take_ready(&mut self) -> Vec<(C, Result<()>)> {
        if self.finishing.is_empty() {
            return Vec::new();
        }
        let (ready, waiting): (Vec<PutOp<C>>, Vec<PutOp<C>>) = std::mem::take(&mut self.finishing)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lent(n: usize) -> Shared {
        Arc::new(vec![0u8; n])
    }

    #[test]
    fn a_put_completes_once_every_piece_ended_and_every_clone_is_gone() {
        let mut puts: Puts<&str> = Puts::default();
        let op = puts.begin(7, "put A");
        let (a, b) = (lent(4), lent(4));
        puts.add_piece(op, 100, a.clone());
        puts.add_piece(op, 101, b.clone());
        assert!(puts.piece_ended(100, Ok(())));
        assert!(!puts.piece_ended(999, Ok(())), "not a piece of any put");
        assert!(puts.take_ready().is_empty(), "one piece still outstanding");
        assert!(puts.piece_ended(101, Ok(())));
        // The core or the backend still holds a datagram cut from `b`.
        let in_flight = b.clone();
        drop((a, b));
        assert!(
            puts.take_ready().is_empty(),
            "a lent buffer is still referenced"
        );
        drop(in_flight);
        let ready = puts.take_ready();
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].0, "put A");
        assert!(ready[0].1.is_ok());
        assert!(puts.is_empty());
    }

    #[test]
    fn failures_reach_the_completion() {
        let mut puts: Puts<&str> = Puts::default();
        // A failed piece fails the put, even when another one succeeds.
        let op = puts.begin(1, "A");
        puts.add_piece(op, 1, lent(1));
        puts.add_piece(op, 2, lent(1));
        puts.piece_ended(1, Err(Error::UNREACH));
        puts.piece_ended(2, Ok(()));
        let ready = puts.take_ready();
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].1, Err(Error::UNREACH));
        // Nothing queued: the completion comes back for the caller to drop.
        let op = puts.begin(1, "B");
        assert_eq!(puts.fail_rest(op, Error::OUT_OF_RESOURCE), Some("B"));
        assert!(puts.is_empty());
        // Some pieces queued: the put ends with the error once they ended.
        let op = puts.begin(1, "C");
        puts.add_piece(op, 3, lent(1));
        assert_eq!(puts.fail_rest(op, Error::UNREACH), None);
        puts.piece_ended(3, Ok(()));
        assert_eq!(puts.take_ready(), vec![("C", Err(Error::UNREACH))]);
    }

    #[test]
    fn puts_to_departed_peers_are_abandoned() {
        let mut puts: Puts<&str> = Puts::default();
        let gone = puts.begin(1, "to 1");
        let stays = puts.begin(2, "to 2");
        puts.add_piece(gone, 10, lent(1));
        puts.add_piece(stays, 20, lent(1));
        puts.abandon(Some(&[1]));
        assert_eq!(puts.take_ready(), vec![("to 1", Err(Error::UNREACH))]);
        assert!(!puts.piece_ended(10, Ok(())), "its pieces are forgotten");
        assert!(puts.piece_ended(20, Ok(())));
        assert_eq!(puts.take_ready(), vec![("to 2", Ok(()))]);
        assert!(puts.is_empty());
    }
}
