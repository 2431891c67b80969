//! Connection threads: each runs a `current_thread` runtime of its own, and every connection
//! lives on one of them for its whole life, with all the tasks it spawns and the readiness
//! events of its socket. A call then never crosses threads between the socket and its answer:
//! on a work-stealing runtime every readiness event can be polled on one worker and its task
//! woken on the other, a futex wake-up and often a sleeping CPU's wake-up on every message (see
//! docs/DESIGN.md §7). Each new connection goes to the thread with the fewest.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Threads the blocking pools may hold beyond the server's file-work bound: under churn a
/// finished task's thread is not idle yet when the next task is spawned, so a pool capped at
/// exactly the permit count would still start new threads, and one with no cap would run past
/// the bound.
const POOL_MARGIN: usize = 16;

struct Worker {
    jobs: mpsc::UnboundedSender<Job>,
    /// Connections handed to this thread and not yet ended.
    load: Arc<AtomicUsize>,
}

/// The running threads. Dropping this (the server's future dropped) cuts their connections.
pub(crate) struct ConnectionThreads {
    workers: Vec<Worker>,
    handles: Vec<std::thread::JoinHandle<()>>,
    cut: CancellationToken,
}

/// Ends the connection's count on its thread when the connection ends, however it ends.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ConnectionThreads {
    /// Starts `count` threads. Their blocking pools share `max_blocking` plus
    /// [`POOL_MARGIN`] threads, split evenly, so the process's thread count has the same bound
    /// as with one pool: work beyond a pool's share waits in that pool's queue (holding its
    /// work permit, so the server-wide bound still counts it). A thread stops once
    /// `connections` is closed and empty, or at once when `cut` is cancelled. Each polls for
    /// work for at most `poll_before_sleep` before it sleeps (`spin.rs`).
    pub(crate) fn start(
        count: usize,
        max_blocking: usize,
        poll_before_sleep: std::time::Duration,
        connections: &TaskTracker,
        cut: &CancellationToken,
    ) -> io::Result<Self> {
        let pool = max_blocking
            .saturating_add(POOL_MARGIN)
            .div_ceil(count)
            .max(1);
        // Built before the first thread starts: if a later one cannot start, dropping this cuts
        // (and so stops) those already running.
        let mut threads = Self {
            workers: Vec::with_capacity(count),
            handles: Vec::with_capacity(count),
            cut: cut.clone(),
        };
        for index in 0..count {
            let polling = super::spin::build(
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .max_blocking_threads(pool),
                poll_before_sleep,
            )?;
            if !polling.polls && !poll_before_sleep.is_zero() {
                tracing::warn!(
                    thread = index,
                    "connection thread cannot poll before it sleeps: its epoll descriptor was not found"
                );
            }
            let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
            let (connections, cut) = (connections.clone(), cut.clone());
            let handle = std::thread::Builder::new()
                .name(format!("capfs-connections-{index}"))
                .spawn(move || {
                    polling.enter();
                    let runtime = polling.runtime;
                    runtime.block_on(async move {
                        while let Some(job) = queue.recv().await {
                            tokio::spawn(job);
                        }
                        tokio::select! {
                            () = connections.wait() => {}
                            () = cut.cancelled() => {}
                        }
                    });
                    // Whatever is still running was cut: drop it without waiting for the
                    // blocking calls under way, which finish on their own.
                    runtime.shutdown_background();
                })?;
            threads.handles.push(handle);
            threads.workers.push(Worker {
                jobs,
                load: Arc::new(AtomicUsize::new(0)),
            });
        }
        Ok(threads)
    }

    /// Runs `connection` on the thread with the fewest connections. The future is polled
    /// only there, so whatever it registers with a runtime (its socket, its timers) is that
    /// thread's.
    pub(crate) fn run(&self, connection: impl Future<Output = ()> + Send + 'static) {
        let Some(worker) = self
            .workers
            .iter()
            .min_by_key(|w| w.load.load(Ordering::Relaxed))
        else {
            return;
        };
        worker.load.fetch_add(1, Ordering::Relaxed);
        let counted = Counted(Arc::clone(&worker.load));
        let job: Job = Box::pin(async move {
            let _counted = counted;
            connection.await;
        });
        if worker.jobs.send(job).is_err() {
            tracing::error!("a connection thread has stopped: connection dropped");
        }
    }

    /// Waits until every thread has ended: call it once the connections' tracker is closed
    /// (and, if they were cut, after cancelling the cut token).
    pub(crate) async fn finish(mut self) {
        // Their queues end, and each thread returns once the connections have.
        self.workers.clear();
        let handles = std::mem::take(&mut self.handles);
        let _ = tokio::task::spawn_blocking(move || {
            for handle in handles {
                let _ = handle.join();
            }
        })
        .await;
    }
}

impl Drop for ConnectionThreads {
    fn drop(&mut self) {
        // After `finish` every connection has already ended; otherwise the server's future was
        // dropped, and its connections go with it.
        self.cut.cancel();
    }
}
