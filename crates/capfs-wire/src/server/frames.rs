//! The `AsyncWrite` a streamed read's backend writes when the connection's writer does not
//! read the file itself (`outgoing.rs`): every write becomes a data frame queued for the
//! writer, its bytes reserved in the outgoing budget before they are copied, and the work
//! permit given back while it waits for the budget or the queue.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::AsyncWrite;
use tokio::sync::mpsc::error::SendError;
use tokio::sync::mpsc::{self, OwnedPermit};
use tokio::time::{Instant, Sleep};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::budget::ReplyBudget;
use super::budget::{ConnectionBudget, Reservation};
use super::outgoing::Outgoing;
use super::work::{StreamWork, Work};
use crate::error::{client_gone, stream_idle};
use crate::protocol::{DATA_CHUNK_BYTES, DATA_FRAME_HEADER_LEN, data_frame_header};
use crate::transport::writer::start_frame;
use capfs::ExecutorFileSystem;
use capfs::error::too_large;
use std::sync::Arc;

/// What a streamed transfer needs from its connection.
#[derive(Clone)]
pub(crate) struct StreamContext {
    pub(crate) fs: Arc<dyn ExecutorFileSystem>,
    pub(crate) work: Work,
    pub(crate) idle: Duration,
    pub(crate) out: mpsc::Sender<Outgoing>,
    /// The connection's writer reads and writes data frames itself (see `outgoing.rs`).
    pub(crate) writes_frames_itself: bool,
    /// The connection's part of the outgoing budget.
    pub(crate) budget: ConnectionBudget,
}

impl StreamContext {
    pub(crate) fn reply_budget(&self) -> ReplyBudget {
        ReplyBudget::new(self.budget.clone(), self.work.clone())
    }
}

type Reserving =
    Pin<Box<dyn Future<Output = Result<OwnedPermit<Outgoing>, SendError<()>>> + Send + 'static>>;
type Budgeting = Pin<Box<dyn Future<Output = io::Result<Reservation>> + Send + 'static>>;

/// The bytes a data frame's reservation covers, before its payload is known.
const FRAME_BYTES: u64 = (DATA_FRAME_HEADER_LEN + DATA_CHUNK_BYTES) as u64;

/// The `AsyncWrite` a streamed read's backend writes: every write becomes a data frame queued
/// for the connection's writer, its bytes reserved in the outgoing budget before it is copied.
pub(crate) struct FrameWriter {
    out: mpsc::Sender<Outgoing>,
    header: [u8; DATA_FRAME_HEADER_LEN],
    budget: ConnectionBudget,
    reserving_bytes: Option<Budgeting>,
    reserved: Option<Reservation>,
    reserving: Option<Reserving>,
    /// Bytes of the caller's buffer already queued, awaiting a work permit to report them.
    queued: Option<usize>,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    waiting: bool,
    work: StreamWork,
    /// Bytes this stream may carry at most; more fails the write and sets `over_limit`.
    max_bytes: Option<u64>,
    sent: u64,
    over_limit: bool,
    /// Where frames are built, each split off as it is queued (see
    /// `transport::writer::start_frame`).
    frames: BytesMut,
}

impl FrameWriter {
    /// A writer of stream `stream_id`'s frames, carrying at most `max_bytes`.
    pub(crate) fn new(
        ctx: &StreamContext,
        stream_id: u64,
        work: StreamWork,
        max_bytes: Option<u64>,
    ) -> Self {
        Self {
            out: ctx.out.clone(),
            header: data_frame_header(stream_id),
            budget: ctx.budget.clone(),
            reserving_bytes: None,
            reserved: None,
            reserving: None,
            queued: None,
            idle: ctx.idle,
            deadline: Box::pin(tokio::time::sleep(ctx.idle)),
            waiting: false,
            work,
            max_bytes,
            sent: 0,
            over_limit: false,
            frames: BytesMut::new(),
        }
    }

    /// True when the backend wrote more than `max_bytes` (and was refused).
    pub(crate) fn over_limit(&self) -> bool {
        self.over_limit
    }

    /// Ready once a frame's bytes are reserved and there is room in the queue for it.
    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<OwnedPermit<Outgoing>>> {
        if self.reserved.is_none() {
            let budget = &self.budget;
            let reserving = self.reserving_bytes.get_or_insert_with(|| {
                let budget = budget.clone();
                Box::pin(async move { budget.reserve(FRAME_BYTES).await })
            });
            let reserved = ready!(reserving.as_mut().poll(cx));
            self.reserving_bytes = None;
            self.reserved = Some(reserved?);
        }
        let out = &self.out;
        let reserving = self
            .reserving
            .get_or_insert_with(|| Box::pin(out.clone().reserve_owned()));
        let slot = ready!(reserving.as_mut().poll(cx));
        self.reserving = None;
        Poll::Ready(slot.map_err(|_| client_gone()))
    }
}

impl AsyncWrite for FrameWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(n) = this.queued {
            ready!(this.work.poll_hold(cx));
            this.queued = None;
            return Poll::Ready(Ok(n));
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if let Some(max) = this.max_bytes
            && this.sent >= max
        {
            this.over_limit = true;
            return Poll::Ready(Err(too_large(max)));
        }
        this.work.release();
        if !this.waiting {
            this.waiting = true;
            this.deadline.as_mut().reset(Instant::now() + this.idle);
        }
        let slot = match this.poll_room(cx) {
            Poll::Ready(Ok(slot)) => slot,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {
                ready!(this.deadline.as_mut().poll(cx));
                return Poll::Ready(Err(stream_idle(this.idle)));
            }
        };
        this.waiting = false;
        let mut n = buf.len().min(DATA_CHUNK_BYTES);
        if let Some(max) = this.max_bytes {
            n = (n as u64).min(max - this.sent) as usize;
        }
        this.sent += n as u64;
        start_frame(&mut this.frames, &this.header, n);
        this.frames.extend_from_slice(&buf[..n]);
        let mut reserved = this.reserved.take().expect("reserved by poll_room");
        reserved.shrink_to((DATA_FRAME_HEADER_LEN + n) as u64);
        let frame = WsMessage::Binary(this.frames.split().freeze());
        slot.send(Outgoing::reserved(frame, reserved));
        this.queued = Some(n);
        ready!(this.work.poll_hold(cx));
        this.queued = None;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Frames are queued for the connection's writer, which flushes them.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
