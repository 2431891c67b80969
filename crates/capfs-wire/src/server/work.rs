//! Bounds on file-system work: how many requests may be running a backend call (and so, for
//! the local backend, holding a thread of tokio's blocking pool) at once, per connection and
//! across the server. Streams hold a permit only while the backend works, never while they
//! wait for the peer (see `stream.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The two semaphores a request's file-system work takes, connection first, then server.
#[derive(Clone, Debug)]
pub(crate) struct Work {
    connection: Arc<Semaphore>,
    server: Arc<Semaphore>,
}

/// Permission to do file-system work; released on drop.
#[derive(Debug)]
pub(crate) struct WorkPermit {
    _server: OwnedSemaphorePermit,
    _connection: OwnedSemaphorePermit,
}

impl Work {
    pub(crate) fn new(connection: Arc<Semaphore>, server: Arc<Semaphore>) -> Self {
        Self { connection, server }
    }

    /// Waits for a permit. Always in the same order (connection, then server), so two
    /// requests never each hold what the other waits for.
    pub(crate) async fn acquire(self) -> WorkPermit {
        // The semaphores are never closed.
        let connection = self
            .connection
            .acquire_owned()
            .await
            .expect("open semaphore");
        let server = self.server.acquire_owned().await.expect("open semaphore");
        WorkPermit {
            _server: server,
            _connection: connection,
        }
    }
}

/// A work permit held only between the backend's calls on a stream: taken before data is
/// handed to the backend, given back when the backend turns to the network again.
pub(crate) struct StreamWork {
    work: Work,
    held: Option<WorkPermit>,
    acquiring: Option<Pin<Box<dyn Future<Output = WorkPermit> + Send>>>,
}

impl StreamWork {
    /// Starts with `held`, the permit under which the backend call began.
    pub(crate) fn new(work: Work, held: WorkPermit) -> Self {
        Self {
            work,
            held: Some(held),
            acquiring: None,
        }
    }

    /// Gives the permit back: the backend is about to wait on the network.
    pub(crate) fn release(&mut self) {
        self.held = None;
    }

    /// Ready once a permit is held.
    pub(crate) fn poll_hold(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.held.is_some() {
            return Poll::Ready(());
        }
        let work = &self.work;
        let acquiring = self
            .acquiring
            .get_or_insert_with(|| Box::pin(work.clone().acquire()));
        match acquiring.as_mut().poll(cx) {
            Poll::Ready(permit) => {
                self.acquiring = None;
                self.held = Some(permit);
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The slots a streamed transfer holds until its reply is queued.
pub(crate) struct RequestSlots {
    _in_flight: OwnedSemaphorePermit,
    _admitted: OwnedSemaphorePermit,
}

impl RequestSlots {
    pub(crate) fn new(in_flight: OwnedSemaphorePermit, admitted: OwnedSemaphorePermit) -> Self {
        Self {
            _in_flight: in_flight,
            _admitted: admitted,
        }
    }
}
