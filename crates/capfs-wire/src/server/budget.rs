//! The server's budget for outgoing bytes: what replies and data frames may hold between being
//! built and being written to the socket, across the server and per connection.
//!
//! Every reply and every data frame that goes through the connection's queue is covered by a
//! [`Reservation`], taken before its contents are read or built and given back once the
//! connection's writer has flushed it to the socket (or the connection has died and its queue
//! has been dropped). A connection draws first from a small floor of its own, which no other
//! connection can take, so that its small replies never wait on others; beyond the floor it
//! draws from the server's pool, at most its share (`--max-outgoing-bytes-per-connection`). So
//! a peer that never reads stalls its own requests once its share is held, and other
//! connections keep their floors and what is left of the pool. A reply larger than a share can
//! never be sent: it fails at once, naming the limit.
//!
//! Waiting for the budget never holds a work permit (see [`ReplyBudget`]).

use std::io;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::work::{Work, WorkPermit};

/// Bytes are counted in units of this many (a permit each), so that a share of up to 4 TiB is
/// one `acquire_many`.
const UNIT: u64 = 1024;

/// What each connection may hold outside the server's pool: room for its small replies (a
/// stat, a listing of a few thousand names, a small file) whatever other connections hold.
pub(crate) const CONNECTION_FLOOR_BYTES: u64 = 1 << 20;

fn units(bytes: u64) -> u64 {
    bytes.div_ceil(UNIT)
}

/// The server-wide pool.
#[derive(Clone, Debug)]
pub(crate) struct Budget {
    pool: Arc<Semaphore>,
    pool_units: u64,
    share_units: u64,
}

impl Budget {
    /// A pool of `total` bytes, of which one connection may hold at most `share` (besides its
    /// floor).
    pub(crate) fn new(total: u64, share: u64) -> Self {
        Self {
            pool: Arc::new(Semaphore::new(units(total) as usize)),
            pool_units: units(total),
            share_units: units(share),
        }
    }

    /// Bytes of the pool held now (connections' floors apart), for `/metrics`.
    pub(crate) fn pool_bytes_in_use(&self) -> u64 {
        let free = self.pool.available_permits() as u64;
        self.pool_units.saturating_sub(free) * UNIT
    }

    /// The budget of a new connection.
    pub(crate) fn connection(&self) -> ConnectionBudget {
        ConnectionBudget {
            pool: Arc::clone(&self.pool),
            share: Arc::new(Semaphore::new(self.share_units as usize)),
            floor: Arc::new(Semaphore::new(units(CONNECTION_FLOOR_BYTES) as usize)),
            share_units: self.share_units,
            unsized_turn: Arc::new(Semaphore::new(1)),
        }
    }
}

/// One connection's part of the budget.
#[derive(Clone, Debug)]
pub(crate) struct ConnectionBudget {
    pool: Arc<Semaphore>,
    /// What this connection holds at most, floor and pool together.
    share: Arc<Semaphore>,
    floor: Arc<Semaphore>,
    share_units: u64,
    /// One listing or walk at a time may be built before its size is known (and so before it
    /// is reserved); see [`ReplyBudget::unsized_work`].
    unsized_turn: Arc<Semaphore>,
}

/// Bytes held for a reply or a frame until it is written; given back on drop.
#[derive(Debug, Default)]
pub(crate) struct Reservation {
    share: Option<OwnedSemaphorePermit>,
    floor: Option<OwnedSemaphorePermit>,
    pool: Option<OwnedSemaphorePermit>,
}

use crate::error::never_fits;

impl ConnectionBudget {
    /// The most bytes one reservation can hold.
    pub(crate) fn share_bytes(&self) -> u64 {
        self.share_units * UNIT
    }

    /// Waits until `bytes` are reserved: this connection's share first (so that a connection
    /// waits behind its own replies), then its floor as far as it goes, then the pool.
    ///
    /// # Errors
    ///
    /// `InvalidInput` ([`never_fits`]) when `bytes` exceed the share.
    pub(crate) async fn reserve(&self, bytes: u64) -> io::Result<Reservation> {
        let n = self.check(bytes)?;
        if n == 0 {
            return Ok(Reservation::default());
        }
        let share = acquire(&self.share, n).await;
        let floor = self.take_floor(n);
        let from_pool = n - floor.as_ref().map_or(0, |p| p.num_permits() as u64);
        let pool = match from_pool {
            0 => None,
            n => Some(acquire(&self.pool, n).await),
        };
        Ok(Reservation {
            share: Some(share),
            floor,
            pool,
        })
    }

    /// Reserves `bytes` if that needs no wait; `None` otherwise.
    ///
    /// # Errors
    ///
    /// As [`reserve`](Self::reserve).
    pub(crate) fn try_reserve(&self, bytes: u64) -> io::Result<Option<Reservation>> {
        let n = self.check(bytes)?;
        if n == 0 {
            return Ok(Some(Reservation::default()));
        }
        let Ok(share) = Arc::clone(&self.share).try_acquire_many_owned(n as u32) else {
            return Ok(None);
        };
        let floor = self.take_floor(n);
        let from_pool = n - floor.as_ref().map_or(0, |p| p.num_permits() as u64);
        let pool = match from_pool {
            0 => None,
            n => match Arc::clone(&self.pool).try_acquire_many_owned(n as u32) {
                Ok(pool) => Some(pool),
                Err(_) => return Ok(None),
            },
        };
        Ok(Some(Reservation {
            share: Some(share),
            floor,
            pool,
        }))
    }

    fn check(&self, bytes: u64) -> io::Result<u64> {
        let n = units(bytes);
        if n > self.share_units {
            return Err(never_fits(bytes, self.share_bytes()));
        }
        Ok(n)
    }

    /// As much of `n` units as the floor has free, without waiting.
    fn take_floor(&self, n: u64) -> Option<OwnedSemaphorePermit> {
        let free = (self.floor.available_permits() as u64).min(n);
        if free == 0 {
            return None;
        }
        Arc::clone(&self.floor)
            .try_acquire_many_owned(free as u32)
            .ok()
    }
}

async fn acquire(semaphore: &Arc<Semaphore>, n: u64) -> OwnedSemaphorePermit {
    // The budget's semaphores are never closed.
    Arc::clone(semaphore)
        .acquire_many_owned(n as u32)
        .await
        .expect("open semaphore")
}

impl Reservation {
    /// Bytes held.
    pub(crate) fn bytes(&self) -> u64 {
        self.share.as_ref().map_or(0, |p| p.num_permits() as u64) * UNIT
    }

    /// Gives back what is held beyond `bytes`: the pool's part first, then the floor's.
    pub(crate) fn shrink_to(&mut self, bytes: u64) {
        let held = self.share.as_ref().map_or(0, |p| p.num_permits() as u64);
        let mut extra = held.saturating_sub(units(bytes));
        if extra == 0 {
            return;
        }
        if let Some(share) = self.share.as_mut() {
            drop(share.split(extra as usize));
        }
        for part in [&mut self.pool, &mut self.floor] {
            if let Some(permit) = part.as_mut() {
                let from_here = extra.min(permit.num_permits() as u64);
                if from_here == permit.num_permits() as u64 {
                    *part = None;
                } else {
                    drop(permit.split(from_here as usize));
                }
                extra -= from_here;
            }
        }
    }

    /// Adds `other` to what this reservation holds.
    pub(crate) fn merge(&mut self, other: Reservation) {
        for (mine, theirs) in [
            (&mut self.share, other.share),
            (&mut self.floor, other.floor),
            (&mut self.pool, other.pool),
        ] {
            match (mine.as_mut(), theirs) {
                (Some(mine), Some(theirs)) => mine.merge(theirs),
                (None, theirs) => *mine = theirs,
                (Some(_), None) => {}
            }
        }
    }
}

/// A request's budget while it runs: its reservation, and the work permit it holds while it
/// does file work, given back whenever it waits for the budget, so that requests waiting on a
/// peer that does not read hold no permit another connection could use.
#[derive(Debug)]
pub(crate) struct ReplyBudget {
    budget: ConnectionBudget,
    work: Work,
    permit: Option<WorkPermit>,
    held: Reservation,
}

impl ReplyBudget {
    pub(crate) fn new(budget: ConnectionBudget, work: Work) -> Self {
        Self {
            budget,
            work,
            permit: None,
            held: Reservation::default(),
        }
    }

    /// Takes a work permit, waiting for one.
    pub(crate) async fn start_work(&mut self) {
        if self.permit.is_none() {
            self.permit = Some(self.work.clone().acquire().await);
        }
    }

    /// Gives the work permit back.
    pub(crate) fn end_work(&mut self) {
        self.permit = None;
    }

    /// Makes sure at least `bytes` are held, waiting if need be; while it waits, the work
    /// permit (if held) is given back, and taken again after.
    ///
    /// # Errors
    ///
    /// As [`ConnectionBudget::reserve`].
    pub(crate) async fn cover(&mut self, bytes: u64) -> io::Result<()> {
        let more = bytes.saturating_sub(self.held.bytes());
        if more == 0 {
            return Ok(());
        }
        if bytes > self.budget.share_bytes() {
            return Err(never_fits(bytes, self.budget.share_bytes()));
        }
        if let Some(reserved) = self.budget.try_reserve(more)? {
            self.held.merge(reserved);
            return Ok(());
        }
        let working = self.permit.take().is_some();
        let reserved = self.budget.reserve(more).await;
        if working {
            self.start_work().await;
        }
        self.held.merge(reserved?);
        Ok(())
    }

    /// True when `bytes` are held, reserving what is missing only if that needs no wait.
    ///
    /// # Errors
    ///
    /// As [`ConnectionBudget::reserve`].
    pub(crate) fn try_cover(&mut self, bytes: u64) -> io::Result<bool> {
        let more = bytes.saturating_sub(self.held.bytes());
        if more == 0 {
            return Ok(true);
        }
        if bytes > self.budget.share_bytes() {
            return Err(never_fits(bytes, self.budget.share_bytes()));
        }
        match self.budget.try_reserve(more)? {
            Some(reserved) => {
                self.held.merge(reserved);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Waits for this connection's turn to build a reply whose size is known only once it is
    /// built (a listing, a walk): one at a time per connection, so that what a connection holds
    /// outside its reservations is one such reply. The work permit is given back meanwhile.
    pub(crate) async fn unsized_work(&mut self) -> OwnedSemaphorePermit {
        if let Ok(turn) = Arc::clone(&self.budget.unsized_turn).try_acquire_owned() {
            return turn;
        }
        let working = self.permit.take().is_some();
        let turn = acquire(&self.budget.unsized_turn, 1).await;
        if working {
            self.start_work().await;
        }
        turn
    }

    /// The reservation, to go with the reply into the queue.
    pub(crate) fn take(&mut self) -> Reservation {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_connection_holds_its_share_at_most_and_others_keep_their_floor() {
        let budget = Budget::new(6 << 20, 4 << 20);
        let greedy = budget.connection();
        let mut held = Vec::new();
        // Its floor and its share of the pool: then it waits.
        while let Some(r) = greedy.try_reserve(512 << 10).unwrap() {
            held.push(r);
        }
        assert_eq!(held.iter().map(Reservation::bytes).sum::<u64>(), 4 << 20);
        let other = budget.connection();
        let others: Vec<_> = (0..5)
            .map_while(|_| other.try_reserve(1 << 20).unwrap())
            .collect();
        // One MiB of floor, then 3 MiB of the 3 MiB left of the pool: its share.
        assert_eq!(others.len(), 4);
        let third = budget.connection();
        let floor = third.try_reserve(1 << 20).unwrap();
        assert!(floor.is_some(), "its floor");
        assert!(third.try_reserve(1).unwrap().is_none(), "the pool is taken");
        drop(others);
        assert!(third.try_reserve(1 << 20).unwrap().is_some());
        drop((floor, held));
        let err = third.try_reserve((4 << 20) + 1).unwrap_err();
        assert!(err.to_string().contains("capfs/readFileStream"), "{err}");
    }

    #[tokio::test]
    async fn a_reservation_shrinks_and_grows() {
        let budget = Budget::new(4 << 20, 4 << 20);
        let conn = budget.connection();
        let mut r = conn.reserve(3 << 20).await.unwrap();
        assert_eq!(r.bytes(), 3 << 20);
        r.shrink_to(100);
        assert_eq!(r.bytes(), UNIT);
        assert!(conn.try_reserve((4 << 20) - UNIT).unwrap().is_some());
        r.merge(conn.reserve(UNIT).await.unwrap());
        assert_eq!(r.bytes(), 2 * UNIT);
        drop(r);
        assert!(conn.try_reserve(4 << 20).unwrap().is_some());
    }
}
