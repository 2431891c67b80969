//! A peer that stops reading: the connection's writer notes when it starts waiting on the
//! socket, each time the socket takes something, and when it has taken everything; the read
//! loop closes a connection whose writer has waited twice `--stream-idle-timeout` with nothing
//! taken (streams waiting on the peer fail first, with their own timeout). So replies and frames queued for a peer
//! that never reads give their share of the outgoing budget back, and the requests waiting
//! behind them end, instead of holding both for as long as the peer keeps the socket open.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// When the writer started waiting on the socket.
#[derive(Debug)]
pub(crate) struct WriterClock {
    base: Instant,
    /// Milliseconds since `base`, plus one, at which the writer last started waiting or saw
    /// the socket take something; 0 while everything has been flushed.
    waiting_since: AtomicU64,
}

impl WriterClock {
    pub(crate) fn new() -> Self {
        Self {
            base: Instant::now(),
            waiting_since: AtomicU64::new(0),
        }
    }

    fn now(&self) -> u64 {
        self.base.elapsed().as_millis() as u64 + 1
    }

    /// The writer is about to write something.
    pub(crate) fn writing(&self) {
        if self.waiting_since.load(Ordering::Relaxed) == 0 {
            self.waiting_since.store(self.now(), Ordering::Relaxed);
        }
    }

    /// The socket took what the writer was writing; it may have more to write.
    pub(crate) fn progressed(&self) {
        self.waiting_since.store(self.now(), Ordering::Relaxed);
    }

    /// The socket has taken everything written.
    pub(crate) fn flushed(&self) {
        self.waiting_since.store(0, Ordering::Relaxed);
    }

    /// Completes once the writer has been waiting on the socket for `idle` with nothing taken.
    pub(crate) async fn stalled(&self, idle: Duration) {
        let idle_ms = idle.as_millis() as u64;
        loop {
            let since = self.waiting_since.load(Ordering::Relaxed);
            let waited = if since == 0 { 0 } else { self.now() - since };
            if since != 0 && waited >= idle_ms {
                return;
            }
            tokio::time::sleep(Duration::from_millis(idle_ms - waited)).await;
        }
    }
}
