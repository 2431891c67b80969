//! The data-frame extension: `capfs/readFileStream` and `capfs/writeFileStream`, served over
//! the trait's [`read_file_to`](ExecutorFileSystem::read_file_to) and
//! [`write_file_from_chunks`](ExecutorFileSystem::write_file_from_chunks).
//!
//! A streamed read sends the file as data frames (binary WebSocket frames: a zero tag byte, the
//! stream id, then up to [`DATA_CHUNK_BYTES`] of contents) and then the JSON response with the
//! byte count. A streamed write receives the data frames after its request and replaces the file
//! once all `size` bytes (or, without `size`, everything up to the frame tagged
//! [`DATA_FRAME_LAST_TAG`](crate::protocol::DATA_FRAME_LAST_TAG)) have arrived; an empty
//! zero-tagged frame aborts it.
//!
//! The backend sees an `AsyncWrite` (the frames it writes are queued for the connection's
//! writer) or [`WriteChunks`] (the chunks the read loop routes here, each handed over in the
//! buffer it was read into, which the local backend writes from). Both hold a work permit
//! only while the backend works, and give it back whenever they wait for the peer; both fail
//! with `TimedOut` when the peer makes no progress for the idle timeout. Memory stays bounded:
//! a read's frames (the `AsyncWrite` of `frames.rs`) and its backend's batch are reserved in
//! the outgoing budget (`budget.rs`) before they are read, a write holds at most
//! [`UPLOAD_QUEUE_CHUNKS`] chunks queued, and its backend the batch it writes (the local
//! backend's: 1 MiB and one chunk at most, in at most 16 chunks). On a TCP connection, a read
//! of a file the backend hands over as a descriptor (`open_for_transfer`: a local disk) is
//! sent by the connection's writer itself instead, with no frame queued (`outgoing.rs`).

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::{Instant, Sleep};

use super::audit::RequestLog;
use super::budget::Reservation;
use super::frames::{FrameWriter, StreamContext};
use super::outgoing::SpanQueue;
use super::params::{CallParams, check_policy, take};
use super::payload::{Payload, invalid_input};
use super::reply;
use super::spin::Receiving;
use super::work::{RequestSlots, StreamWork, WorkPermit};
use crate::error::{stream_aborted, stream_cut, stream_idle};
use crate::protocol::{
    ErrorObject, INVALID_PARAMS, ReadStreamParams, RequestId, StreamResponse, WriteStreamParams,
};
use capfs::error::too_large;
use capfs::{ExecutorFileSystem, WriteChunks, WriteOptions};

/// Chunks a streamed write may have queued between the socket and the backend.
pub(crate) const UPLOAD_QUEUE_CHUNKS: usize = 8;

/// What a backend holds of a streamed read at a time, at most: the local backend's batch.
const STREAM_BATCH_BYTES: u64 = 1 << 20;

/// What the read loop hands a streamed write.
#[derive(Debug)]
enum Chunk {
    Data(Bytes),
    /// The contents are complete.
    End,
}

/// A streamed write still expecting data.
pub(crate) struct Upload {
    chunks: mpsc::Sender<Chunk>,
    /// Bytes still to come, for a write that announced its size.
    remaining: Option<u64>,
    aborted: Arc<AtomicBool>,
}

fn stream_reply(result: io::Result<u64>) -> Result<Payload, ErrorObject> {
    result
        .map(|size| {
            Payload::Json(serde_json::to_value(StreamResponse { size }).expect("serializable"))
        })
        .map_err(|e| ErrorObject::from_io(&e))
}

/// Runs a streamed read: the backend writes the file into data frames, then the reply goes.
pub(crate) async fn stream_read(
    ctx: StreamContext,
    id: RequestId,
    params: CallParams,
    in_flight: RequestSlots,
    mut log: RequestLog,
) {
    let params = take::<ReadStreamParams>(params, log.paths.as_mut());
    let reply = match params {
        Err(error) => Err(error),
        Ok(p) => {
            // The policy looks at the file system too: under a work permit, as the read.
            let held = ctx.work.clone().acquire().await;
            match check_policy(&*ctx.fs, &p).await {
                Err(error) => Err(error),
                Ok(()) => stream_reply(read(&ctx, &p, held).await),
            }
        }
    };
    log.finish(&Payload::for_log(&reply), 0);
    reply::send(&ctx.out, &mut ctx.reply_budget(), id, reply).await;
    drop(in_flight);
}

/// Sends `p`'s file as data frames: through the connection's writer when the backend hands it
/// over as a descriptor, through the backend's `read_file_to` otherwise. `held` is the work
/// permit it opens the file under.
async fn read(ctx: &StreamContext, p: &ReadStreamParams, held: WorkPermit) -> io::Result<u64> {
    let opened = match ctx.writes_frames_itself {
        true => ctx.fs.open_for_transfer(&p.path).await?,
        false => None,
    };
    // A file whose size already says it holds more than the bound is refused before any
    // frame: an opened one by its own size, any other by the backend's metadata.
    match (&opened, p.max_bytes) {
        (Some(file), Some(max)) if file.metadata()?.len() > max => return Err(too_large(max)),
        (None, Some(max)) => too_large_before(&*ctx.fs, &p.path, max).await?,
        _ => {}
    }
    drop(held);
    match opened {
        Some(file) => {
            let spans = SpanQueue {
                out: &ctx.out,
                idle: ctx.idle,
                budget: &ctx.budget,
            };
            spans
                .send_file(&p.path, file, p.stream_id, p.max_bytes)
                .await
        }
        None => read_through_backend(ctx, p).await,
    }
}

/// Streams `p`'s file through the backend's `read_file_to`, each frame queued for the writer.
/// The batch the backend reads before it writes frames is reserved first, without a work
/// permit while it waits.
async fn read_through_backend(ctx: &StreamContext, p: &ReadStreamParams) -> io::Result<u64> {
    let batch = reserve_batch(ctx).await?;
    let held = ctx.work.clone().acquire().await;
    let work = StreamWork::new(ctx.work.clone(), held);
    let mut writer = FrameWriter::new(ctx, p.stream_id, work, p.max_bytes);
    let sent = ctx.fs.read_file_to(&p.path, &mut writer, &mut |_| {}).await;
    drop(batch);
    // A file that held more than the bound: the bound's error, whatever the backend made of
    // the writer's refusal.
    match (writer.over_limit(), p.max_bytes) {
        (true, Some(max)) => Err(too_large(max)),
        _ => sent,
    }
}

/// Reserves what a backend's read batch holds (at most [`STREAM_BATCH_BYTES`]) while a
/// streamed read runs through `read_file_to`.
async fn reserve_batch(ctx: &StreamContext) -> io::Result<Reservation> {
    match tokio::time::timeout(ctx.idle, ctx.budget.reserve(STREAM_BATCH_BYTES)).await {
        Ok(reserved) => reserved,
        Err(_) => Err(stream_idle(ctx.idle)),
    }
}

/// Refuses a file whose size already says it holds more than `max` bytes, before any frame.
async fn too_large_before(
    fs: &dyn ExecutorFileSystem,
    path: &capfs::AbsolutePathBuf,
    max: u64,
) -> io::Result<()> {
    match fs.get_metadata(path).await {
        Ok(metadata) if metadata.is_file && metadata.size > max => Err(too_large(max)),
        // Any other failure is left to the read itself, which reports it the usual way.
        _ => Ok(()),
    }
}

/// Starts a streamed write: registers the stream so data frames reach it, then runs the
/// backend's write on a task of its own.
pub(crate) fn start_write(
    ctx: StreamContext,
    uploads: &mut HashMap<u64, Upload>,
    id: RequestId,
    params: CallParams,
    in_flight: RequestSlots,
    log: &mut RequestLog,
) -> Result<(), ErrorObject> {
    let p: WriteStreamParams = take(params, log.paths.as_mut())?;
    // Forget writes that ended without taking all their frames (refused, failed, timed out):
    // what stays is at most one entry per write still running, each holding an in-flight slot.
    uploads.retain(|_, upload| !upload.chunks.is_closed());
    if uploads.contains_key(&p.stream_id) {
        return Err(invalid_input(
            INVALID_PARAMS,
            format!("stream id {} is already in use", p.stream_id),
        ));
    }
    let (tx, rx) = mpsc::channel(UPLOAD_QUEUE_CHUNKS);
    let aborted = Arc::new(AtomicBool::new(false));
    if p.size == Some(0) {
        // Nothing follows: the contents are complete already.
        let _ = tx.try_send(Chunk::End);
    } else {
        let upload = Upload {
            chunks: tx,
            remaining: p.size,
            aborted: Arc::clone(&aborted),
        };
        uploads.insert(p.stream_id, upload);
    }
    let options = WriteOptions::default()
        .with_mode(p.mode)
        .with_modified_at_ms(p.modified_at_ms);
    let log = log.clone();
    // Made here, on the connection's thread: that thread does not poll before it sleeps
    // while the write runs (its task ends with it, or at the idle timeout).
    let receiving = Receiving::start();
    tokio::spawn(async move {
        let _receiving = receiving;
        let held = ctx.work.clone().acquire().await;
        // A write the request's policy refuses takes none of its frames: they are dropped as
        // they arrive, as those of a write that failed.
        if let Err(error) = check_policy(&*ctx.fs, &p).await {
            drop((rx, held));
            log.finish(&Err(error.clone()), 0);
            reply::send(&ctx.out, &mut ctx.reply_budget(), id, Err(error)).await;
            drop(in_flight);
            return;
        }
        let mut chunks = Chunks {
            chunks: rx,
            current: Bytes::new(),
            ended: false,
            aborted,
            idle: ctx.idle,
            deadline: Box::pin(tokio::time::sleep(ctx.idle)),
            waiting: false,
            work: StreamWork::new(ctx.work.clone(), held),
        };
        let written = ctx
            .fs
            .write_file_from_chunks(&p.path, &mut chunks, p.size, options, &mut |_| {})
            .await;
        drop(chunks);
        let reply = stream_reply(written);
        log.finish(&Payload::for_log(&reply), 0);
        reply::send(&ctx.out, &mut ctx.reply_budget(), id, reply).await;
        drop(in_flight);
    });
    Ok(())
}

/// Hands a data frame's payload to its streamed write; `last` marks the frame that ends an
/// unsized write. An empty frame that is not `last` aborts the write at once. Frames of
/// unknown streams (finished, or refused before their data arrived) are dropped.
///
/// Waits while the write's queue is full (the backend is slower than the peer), at most the
/// idle timeout: a write whose backend takes no chunk for that long is cut off.
pub(crate) async fn route_data(
    uploads: &mut HashMap<u64, Upload>,
    stream_id: u64,
    last: bool,
    payload: Bytes,
    idle: Duration,
) {
    let Some(upload) = uploads.get_mut(&stream_id) else {
        return;
    };
    if payload.is_empty() && !last {
        upload.aborted.store(true, Ordering::Release);
        // Dropping the sender wakes the write, which then sees the flag.
        uploads.remove(&stream_id);
        return;
    }
    let len = payload.len() as u64;
    let mut done = last;
    if let Some(remaining) = upload.remaining.as_mut() {
        done |= len >= *remaining;
        *remaining = remaining.saturating_sub(len);
    }
    let mut delivered = true;
    if !payload.is_empty() {
        delivered = deliver(&upload.chunks, Chunk::Data(payload), idle).await;
    }
    if done && delivered {
        delivered = deliver(&upload.chunks, Chunk::End, idle).await;
    }
    if done || !delivered {
        uploads.remove(&stream_id);
    }
}

async fn deliver(chunks: &mpsc::Sender<Chunk>, chunk: Chunk, idle: Duration) -> bool {
    matches!(
        tokio::time::timeout(idle, chunks.send(chunk)).await,
        Ok(Ok(()))
    )
}

/// What a streamed write's backend takes its contents from: the chunks routed by the read loop,
/// each handed over as it came off the socket.
struct Chunks {
    chunks: mpsc::Receiver<Chunk>,
    current: Bytes,
    ended: bool,
    aborted: Arc<AtomicBool>,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    /// Waiting for the peer since the deadline was last set.
    waiting: bool,
    work: StreamWork,
}

impl WriteChunks for Chunks {
    fn poll_next_chunk(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Bytes>>> {
        loop {
            if self.aborted.load(Ordering::Acquire) {
                return Poll::Ready(Err(stream_aborted()));
            }
            if !self.current.is_empty() || self.ended {
                // The backend gets data only while it may work on it.
                ready!(self.work.poll_hold(cx));
                if self.current.is_empty() {
                    return Poll::Ready(Ok(None));
                }
                return Poll::Ready(Ok(Some(std::mem::take(&mut self.current))));
            }
            self.work.release();
            if !self.waiting {
                self.waiting = true;
                self.deadline.as_mut().reset(Instant::now() + self.idle);
            }
            match self.chunks.poll_recv(cx) {
                Poll::Ready(Some(Chunk::Data(bytes))) => {
                    self.current = bytes;
                    self.waiting = false;
                }
                Poll::Ready(Some(Chunk::End)) => self.ended = true,
                Poll::Ready(None) if self.aborted.load(Ordering::Acquire) => {
                    return Poll::Ready(Err(stream_aborted()));
                }
                Poll::Ready(None) => return Poll::Ready(Err(stream_cut())),
                Poll::Pending => {
                    ready!(self.deadline.as_mut().poll(cx));
                    return Poll::Ready(Err(stream_idle(self.idle)));
                }
            }
        }
    }
}
