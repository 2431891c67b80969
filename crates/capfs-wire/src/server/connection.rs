//! One connection: the read loop over a `transport::link`, requests run concurrently up to the
//! in-flight bound, replies queued for the link's writer, and the drain at shutdown.
//!
//! The read loop never waits for a slot, a permit or the file system: it polls each request once
//! and, when the request must wait, leaves it to a task of its own ([`run_or_spawn`]), so data
//! frames and ordinary requests never wait on each other. A small call on a local disk ends in
//! that first poll, its work done on the connection's thread as its task would have done it.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use serde_json::Value;
use tokio::sync::{Semaphore, mpsc};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::audit::{self, RequestLog};
use super::budget::{ConnectionBudget, ReplyBudget};
use super::frames::StreamContext;
use super::methods::{self, Runs};
use super::outgoing::{self, Outgoing};
use super::payload::{Outcome, Payload};
use super::process::table::{self as process_table, Attached, Sink};
use super::reply;
use super::session::{FsCall, Session, Step};
use super::shared::Shared;
use super::stall::WriterClock;
use super::stream;
use super::work::{RequestSlots, Work};
use crate::protocol::{ErrorObject, RequestId, SERVER_BUSY};
use crate::transport::link::{Link, Received};
use crate::transport::shared::DirectSocket;
use capfs::ExecutorFileSystem;

/// Messages queued for one connection's writer. Where a streamed read's data frames go through
/// the queue (not read by the writer itself, see `outgoing.rs`), this bounds them at 8 MiB per
/// connection.
const OUT_QUEUE_MESSAGES: usize = 32;

pub(crate) struct Connection {
    shared: Arc<Shared>,
    id: u64,
    peer: Arc<str>,
    session: Session,
    /// Requests running (or, for a streamed transfer, open) at once.
    in_flight: Arc<Semaphore>,
    /// Requests read and not yet answered: running, or waiting for an in-flight slot. The read
    /// loop never waits for a slot, so data frames always get read; beyond this bound a request
    /// is refused with `server busy`.
    admitted: Arc<Semaphore>,
    work: Work,
    /// This connection's part of the outgoing budget.
    budget: ConnectionBudget,
    /// Streamed writes still expecting data frames, by stream id.
    uploads: HashMap<u64, stream::Upload>,
    /// The writer writes data frames of local files into the socket itself (see `outgoing.rs`).
    writes_frames_itself: bool,
}

impl Connection {
    pub(crate) fn new(shared: Arc<Shared>, id: u64, peer: Arc<str>) -> Self {
        let in_flight = Arc::new(Semaphore::new(shared.config.max_in_flight));
        let admitted = Arc::new(Semaphore::new(
            shared.config.max_in_flight.saturating_mul(2),
        ));
        let work = Work::new(
            Arc::new(Semaphore::new(shared.config.max_blocking_per_connection)),
            Arc::clone(&shared.work),
        );
        let session = Session::new(shared.config.max_message_bytes)
            .with_roots(shared.fs.served_roots())
            .announcing(shared.fs.read_file_limit())
            .serving(
                Arc::clone(&shared.fs),
                Arc::clone(&shared.sessions),
                Arc::clone(&shared.handles),
                Arc::clone(&shared.watches),
            );
        let session = match &shared.processes {
            Some(processes) => session.serving_processes(process_table::info(&*processes.imp)),
            None => session,
        };
        let budget = shared.budget.connection();
        Self {
            shared,
            id,
            peer,
            session,
            in_flight,
            admitted,
            work,
            budget,
            uploads: HashMap::new(),
            writes_frames_itself: false,
        }
    }

    /// The connection carries JSON lines: no data frames.
    pub(crate) fn over_lines(mut self) -> Self {
        self.session = self.session.without_data_frames();
        self
    }

    pub(crate) async fn run<S>(
        mut self,
        ws: tokio_tungstenite::WebSocketStream<S>,
        socket: Option<DirectSocket>,
        stop: CancellationToken,
    ) where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let clock = Arc::new(WriterClock::new());
        let end = outgoing::Writer::new(self.work.clone(), Arc::clone(&clock));
        let link = Link::open(ws, socket, OUT_QUEUE_MESSAGES, end);
        let (mut incoming, out_tx) = (link.incoming, link.out);
        self.writes_frames_itself = link.writes_frames_itself;
        let watches = Arc::clone(&self.session.connection().watches);
        watches.send_to(out_tx.clone());
        // Dropping the connection (cut at the shutdown deadline) ends its writer too.
        let writer = AbortOnDropHandle::new(link.writer);
        let idle = self.shared.config.stream_idle_timeout;
        // A peer that reads nothing: once the writer has waited twice the idle timeout (a stream
        // waiting on the peer fails with its own timeout first), the watchdog drops the writer
        // with what is queued, so that its reservations go back and every request waiting on
        // the budget or the queue ends, the read loop's own answers included.
        let stalled = CancellationToken::new();
        let watchdog = {
            let (clock, writer, stalled) = (clock, writer.abort_handle(), stalled.clone());
            AbortOnDropHandle::new(tokio::spawn(async move {
                clock.stalled(idle * 2).await;
                writer.abort();
                stalled.cancel();
            }))
        };
        // Once the server drains, the loop reads on only for the streamed writes still
        // receiving their data frames, and tells the peer why it closes.
        let mut draining = false;
        loop {
            if draining && self.uploads.is_empty() {
                break;
            }
            let received = tokio::select! {
                () = stop.cancelled(), if !draining => {
                    draining = true;
                    continue;
                }
                () = stalled.cancelled() => {
                    tracing::warn!(
                        connection = self.id,
                        "the peer took nothing queued for it in {:?}: connection closed",
                        idle * 2
                    );
                    break;
                }
                received = incoming.next() => received,
            };
            match received {
                Received::Message(bytes) => self.on_message(&bytes, &out_tx).await,
                Received::Data {
                    stream_id,
                    last,
                    payload,
                } => stream::route_data(&mut self.uploads, stream_id, last, payload, idle).await,
                Received::TooBig(e) => {
                    tracing::warn!(connection = self.id, "message refused: {e}");
                    let close = CloseFrame {
                        code: CloseCode::Size,
                        reason: format!(
                            "message too big: limit is {} bytes",
                            self.shared.config.max_message_bytes
                        )
                        .into(),
                    };
                    outgoing::send(&out_tx, WsMessage::Close(Some(close))).await;
                    break;
                }
                Received::Closed => break,
                Received::Broken(e) => {
                    tracing::debug!(connection = self.id, "read failed: {e}");
                    break;
                }
            }
        }
        // Streamed writes still waiting for data will never get it: they fail and leave their
        // files as they were.
        self.uploads.clear();
        // Let every admitted request finish and queue its response before the writer closes.
        let _ = self
            .admitted
            .acquire_many(self.shared.config.max_in_flight.saturating_mul(2) as u32)
            .await;
        if draining {
            let close = CloseFrame {
                code: CloseCode::Away,
                reason: "server shutting down".into(),
            };
            outgoing::send(&out_tx, WsMessage::Close(Some(close))).await;
        }
        // Watches hold the queue too: they end with their connection. Processes let go of it
        // and wait for the session to be resumed.
        watches.stop();
        let attached = self.session.connection().processes();
        if let (Some(attached), Some(id)) = (attached, self.session.id()) {
            attached.server.leave(id, &attached.session);
        }
        drop(out_tx);
        let _ = writer.await;
        drop(watchdog);
        if let Some(id) = self.session.id() {
            self.shared.sessions.leave(id);
        }
    }

    async fn on_message(&mut self, bytes: &[u8], out: &mpsc::Sender<Outgoing>) {
        let step = self.session.receive(bytes);
        self.attach_processes(out);
        match step {
            Step::Unreadable(message) => {
                let mut budget = self.reply_budget();
                reply::send_message(out, &mut budget, &message).await;
            }
            Step::Answer { request, reply } => {
                let mut log = self.request_log(request.row, request.method);
                log.note_sent(&request.params);
                self.answer(out, log, request.id, reply).await;
            }
            Step::Run(call) => self.on_request(call, out).await,
            Step::Ignore => {}
        }
    }

    /// Once the handshake named the session, its processes send their notifications here.
    fn attach_processes(&mut self, out: &mpsc::Sender<Outgoing>) {
        let connection = self.session.connection();
        let (Some(processes), Some(id)) = (&self.shared.processes, self.session.id()) else {
            return;
        };
        if connection.processes().is_some() {
            return;
        }
        let sink = Sink {
            out: out.clone(),
            budget: self.budget.clone(),
        };
        connection.set_processes(Attached {
            server: Arc::clone(processes),
            session: processes.attach(id, sink),
            connection: self.id,
            peer: Arc::clone(&self.peer),
        });
    }

    /// The log of a request that starts now; it keeps the request's paths when they are
    /// written somewhere, once its params are read.
    /// It takes the request's method (`row`, and its name as sent): the log holds the one copy.
    fn request_log(&self, row: Option<&'static methods::Method>, method: String) -> RequestLog {
        RequestLog {
            audit: self.shared.config.audit.clone(),
            metrics: Arc::clone(&self.shared.metrics),
            label: row.map_or(super::metrics::UNKNOWN_METHOD, |m| m.name),
            writes: row.is_some_and(methods::Method::writes_contents),
            connection: self.id,
            peer: Arc::clone(&self.peer),
            method,
            paths: audit::keeps_paths(self.shared.config.audit.as_ref()).then(Vec::new),
            streamed: row
                .is_some_and(|m| matches!(m.runs, Runs::StreamRead(_) | Runs::StreamWrite(_))),
            started: Instant::now(),
        }
    }

    /// Sends a reply decided here, without running the request, and logs it.
    async fn answer(
        &self,
        out: &mpsc::Sender<Outgoing>,
        log: RequestLog,
        id: RequestId,
        reply: Result<Value, ErrorObject>,
    ) {
        log.finish(&reply, 0);
        let mut budget = self.reply_budget();
        reply::send(out, &mut budget, id, reply.map(Payload::Json)).await;
    }

    fn reply_budget(&self) -> ReplyBudget {
        ReplyBudget::new(self.budget.clone(), self.work.clone())
    }

    fn busy(&self) -> ErrorObject {
        let message = format!(
            "server busy: {} requests already in flight on this connection",
            self.shared.config.max_in_flight
        );
        ErrorObject::new(SERVER_BUSY, message)
    }

    /// The file system this connection serves: the server's, or a narrowing of it
    /// (`capfs/narrowRoots`, `narrow.rs`), kept where the connection's handles and watches find
    /// it too.
    fn fs(&self) -> Arc<dyn ExecutorFileSystem> {
        self.session
            .connection()
            .fs()
            .unwrap_or_else(|| Arc::clone(&self.shared.fs))
    }

    fn stream_context(&self, out: &mpsc::Sender<Outgoing>) -> StreamContext {
        StreamContext {
            fs: self.fs(),
            work: self.work.clone(),
            idle: self.shared.config.stream_idle_timeout,
            out: out.clone(),
            writes_frames_itself: self.writes_frames_itself,
            budget: self.budget.clone(),
        }
    }

    /// Runs a request that passed the handshake rules. Never waits for a slot: a request is
    /// admitted (it then waits for an in-flight slot on a task of its own) or refused.
    async fn on_request(&mut self, call: FsCall, out: &mpsc::Sender<Outgoing>) {
        let FsCall {
            id,
            method,
            params,
            row,
        } = call;
        let mut log = self.request_log(row, method);
        let Ok(admitted) = Arc::clone(&self.admitted).try_acquire_owned() else {
            let error = self.busy();
            log.note_sent(&params);
            self.answer(out, log, id, Err(error)).await;
            return;
        };
        let runs = row.map(|m| m.runs);
        if matches!(runs, Some(Runs::StreamWrite(_))) {
            // A streamed write must start at once: its data frames arrive behind it on this
            // same socket, and the read loop cannot hold them for a write that waits.
            let Ok(in_flight) = Arc::clone(&self.in_flight).try_acquire_owned() else {
                let error = self.busy();
                log.note_sent(&params);
                self.answer(out, log, id, Err(error)).await;
                return;
            };
            let ctx = self.stream_context(out);
            let slots = RequestSlots::new(in_flight, admitted);
            if let Err(error) =
                stream::start_write(ctx, &mut self.uploads, id.clone(), params, slots, &mut log)
            {
                self.answer(out, log, id, Err(error)).await;
            }
            return;
        }
        if matches!(runs, Some(Runs::ReadLoop(_))) {
            // In the read loop: every request read after this one sees the narrowed roots,
            // and so does the work that outlives a request (replace handles, watches).
            let mut fs = self.fs();
            log.note_sent(&params);
            let reply = super::narrow::narrow_connection(&mut fs, params).await;
            self.session.connection().set_fs(fs);
            self.answer(out, log, id, reply).await;
            return;
        }
        let in_flight = Arc::clone(&self.in_flight);
        if matches!(runs, Some(Runs::StreamRead(_))) {
            let ctx = self.stream_context(out);
            // One task, its future boxed (as below).
            tokio::spawn(Box::pin(async move {
                let Ok(in_flight) = in_flight.acquire_owned().await else {
                    return;
                };
                let slots = RequestSlots::new(in_flight, admitted);
                stream::stream_read(ctx, id, params, slots, log).await;
            }));
            return;
        }
        let shared = Arc::clone(&self.shared);
        let connection_fs = self.fs();
        let budget = self.reply_budget();
        let out = out.clone();
        let connection = self.session.connection();
        // The request's future is boxed: moved unboxed into a task, its few kilobytes of state
        // were copied four times over on the way and again as it ended, more than a small
        // call's own work (callgrind, 64 getMetadata in flight).
        run_or_spawn(Box::pin(async move {
            let mut log = log;
            let Ok(in_flight) = in_flight.acquire_owned().await else {
                return;
            };
            let mut outcome = Outcome {
                paths: log.paths.take(),
                ..Outcome::default()
            };
            let max_message_bytes = shared.config.max_message_bytes;
            let mut budget = budget;
            // The work permit goes with the budget, which gives it back while it waits.
            budget.start_work().await;
            outcome.budget = Some(budget);
            let fs: &dyn ExecutorFileSystem = &*connection_fs;
            let reply = methods::dispatch(
                fs,
                &connection,
                row,
                &log.method,
                params,
                max_message_bytes,
                &mut outcome,
            )
            .await;
            let mut budget = outcome.budget.take().expect("the budget given above");
            budget.end_work();
            log.paths = outcome.paths.take();
            log.finish(&Payload::for_log(&reply), outcome.bytes);
            reply::send(&out, &mut budget, id, reply).await;
            drop((in_flight, admitted));
        }));
    }
}

/// Polls a request's future once here and, when it must wait (for a slot, the blocking pool, the
/// budget, the queue), spawns it to go on beside the read loop, so a file system that hangs
/// never stalls the loop. Most small calls on a local disk end in that first poll: they then
/// cost no task, and the reply is queued before the loop reads on. The first poll has no one
/// to wake: the spawned task polls the future again at once, and whatever became ready in
/// between is seen then. A panic in it ends the request, as it would end the request's task.
fn run_or_spawn(mut request: Pin<Box<dyn Future<Output = ()> + Send>>) {
    let mut context = Context::from_waker(Waker::noop());
    let polled = std::panic::catch_unwind(AssertUnwindSafe(|| request.as_mut().poll(&mut context)));
    if matches!(polled, Ok(Poll::Pending)) {
        tokio::spawn(request);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn a_request_that_need_not_wait_ends_in_its_first_poll() {
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        run_or_spawn(Box::pin(async move { flag.store(true, Ordering::SeqCst) }));
        assert!(
            done.load(Ordering::SeqCst),
            "it did not run before the loop went on"
        );
    }

    #[tokio::test]
    async fn a_request_that_waits_goes_on_as_a_task_woken_before_or_after_its_next_poll() {
        for yield_first in [false, true] {
            let slots = Arc::new(Semaphore::new(0));
            let (done_tx, done_rx) = tokio::sync::oneshot::channel();
            let waiting = Arc::clone(&slots);
            run_or_spawn(Box::pin(async move {
                let _slot = waiting.acquire().await.unwrap();
                done_tx.send(()).unwrap();
            }));
            if yield_first {
                // The task polls again (and waits again) before the slot comes.
                tokio::task::yield_now().await;
            }
            slots.add_permits(1);
            tokio::time::timeout(Duration::from_secs(10), done_rx)
                .await
                .expect("the waiting request was never woken")
                .unwrap();
        }
    }

    #[tokio::test]
    async fn a_request_that_panics_in_its_first_poll_ends_alone_and_gives_back_what_it_held() {
        let slots = Arc::new(Semaphore::new(1));
        let slot = Arc::clone(&slots).try_acquire_owned().unwrap();
        run_or_spawn(Box::pin(async move {
            let _slot = slot;
            panic!("a handler's bug");
        }));
        assert_eq!(slots.available_permits(), 1);
    }
}
