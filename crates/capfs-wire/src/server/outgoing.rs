//! What a connection's writer sends: messages, and on a TCP connection the data frames of
//! streamed reads from local disks, which it reads and writes itself.
//!
//! Such a read's task reads a file smaller than a frame itself, into one frame, as an inline read
//! would. Beyond that, it does not read the file: it queues spans ("up to N bytes of this file,
//! from where it stands") among the connection's other messages, at most [`SPANS_AHEAD`] at a
//! time, and learns from each how many bytes went out; a span that comes back short has met the
//! end of the file. The writer reads each frame's payload into one buffer it keeps, behind room
//! for the frame's headers (from the page cache on its own thread, from the disk on the blocking
//! pool), and writes the frame with one `send`, past tungstenite. A data frame
//! thus costs one copy out of the page cache and one into the socket; through `read_file_to`
//! and tungstenite it cost two more (the backend's batch into a frame, the frame into
//! tungstenite's buffer). The writer sizes each frame by what the read returned, so a file that
//! shrinks or grows meanwhile still gives well-formed frames, and the stream reports exactly
//! what it sent. tungstenite writes too, from both halves (the read loop's half answers pings),
//! so the writer takes the socket for each frame once nothing of tungstenite's is half-written
//! on it, and tungstenite's writes wait until the frame is out (`transport/shared.rs`).
//!
//! A connection without a TCP socket (stdio) and a backend without descriptors to hand over
//! send their frames through `read_file_to` and tungstenite instead (`stream.rs`).

use std::collections::VecDeque;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::{Sink, SinkExt};
use rustix::io::{Errno, IoSliceMut, ReadWriteFlags};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::budget::{ConnectionBudget, Reservation};
use super::encoded::{self, EncodedReply, Helper};
use super::stall::WriterClock;
use super::work::Work;
use crate::error::stream_idle;
use crate::protocol::{DATA_CHUNK_BYTES, DATA_FRAME_HEADER_LEN, data_frame_header};
use crate::transport::shared::{DirectSocket, FRAME_HEAD_ROOM, frame_in_place};
use crate::transport::writer::{EndWriter, Queued};
use capfs::AbsolutePathBuf;
use capfs::error::{too_large, with_path};

/// Spans one streamed read may have queued or in the writer at once: enough that the writer
/// always has the next one when it finishes a frame.
pub(crate) const SPANS_AHEAD: usize = 4;

/// What a connection's writer sends: messages, and spans of files it sends as data frames.
pub(crate) type Outgoing = Queued<Tracked>;

/// What the server's writer sends itself and reports back on: a span of a file (how much of it
/// went out), or a message under a reservation of the outgoing budget (given back once the
/// message has been flushed to the socket).
pub(crate) enum Tracked {
    Span(FileSpan),
    Reserved(WsMessage, Reservation),
    Encoded(EncodedReply),
}

impl Outgoing {
    /// `message`, holding `reservation` until it is written.
    pub(crate) fn reserved(message: WsMessage, reservation: Reservation) -> Self {
        Queued::Own(Tracked::Reserved(message, reservation))
    }
}

/// The next at most `max` bytes of a streamed read's file, to go out as data frames.
pub(crate) struct FileSpan {
    source: Arc<SpanSource>,
    max: usize,
    /// How many bytes went out (fewer than `max` only at the end of the file), or the file's
    /// error; nothing is sent for a span whose stream stopped listening.
    done: oneshot::Sender<io::Result<usize>>,
}

/// A file being streamed: the descriptor, the stream's frame header and how far it has gone.
struct SpanSource {
    file: std::fs::File,
    header: [u8; DATA_FRAME_HEADER_LEN],
    /// Advanced only by the writer, one span at a time.
    offset: AtomicU64,
}

/// What a streamed read's task needs to queue spans.
pub(crate) struct SpanQueue<'a> {
    pub(crate) out: &'a mpsc::Sender<Outgoing>,
    pub(crate) idle: Duration,
    pub(crate) budget: &'a ConnectionBudget,
}

impl SpanQueue<'_> {
    /// Sends `file` as data frames of stream `stream_id`, at most `max_bytes` of it (more is
    /// the read limit's error), and returns the number of bytes sent. Waits for the peer at
    /// most the idle timeout at a time.
    pub(crate) async fn send_file(
        &self,
        path: &AbsolutePathBuf,
        file: std::fs::File,
        stream_id: u64,
        max_bytes: Option<u64>,
    ) -> io::Result<u64> {
        let file_error = |e| with_path(path, e);
        let size = file.metadata().map_err(file_error)?.len();
        let limit = max_bytes.unwrap_or(u64::MAX);
        let source = Arc::new(SpanSource {
            file,
            header: data_frame_header(stream_id),
            offset: AtomicU64::new(0),
        });
        let (mut asked, mut sent, mut ended) = (0u64, 0u64, false);
        if size < DATA_CHUNK_BYTES as u64 {
            // A small file is read here into one frame, as an inline read would be: no span
            // goes to the writer and back. Only a file that grew to a frame's size meanwhile
            // goes on in spans.
            let want = limit.min(DATA_CHUNK_BYTES as u64);
            // The frame's memory is reserved before it is read.
            let reserved = self.reserve(DATA_FRAME_HEADER_LEN as u64 + want).await?;
            let mut frame = Vec::with_capacity(DATA_FRAME_HEADER_LEN + want as usize);
            frame.extend_from_slice(&source.header);
            (&source.file)
                .take(want)
                .read_to_end(&mut frame)
                .map_err(file_error)?;
            let n = (frame.len() - DATA_FRAME_HEADER_LEN) as u64;
            if n > 0 {
                let message = Outgoing::reserved(WsMessage::Binary(frame.into()), reserved);
                self.queue(message).await?;
            }
            source.offset.store(n, Ordering::Relaxed);
            (asked, sent, ended) = (n, n, n < want);
        }
        // Receivers of the spans queued, in order, with the size each asked for. Dropping one
        // tells the writer to skip its span.
        let mut pending: VecDeque<(oneshot::Receiver<io::Result<usize>>, usize)> = VecDeque::new();
        loop {
            // Ask for what the size promises, then one span more to find the end (the file may
            // have grown), never past the limit.
            while !ended
                && asked < limit
                && pending.len() < SPANS_AHEAD
                && (asked < size || pending.is_empty())
            {
                let max = (limit - asked).min(DATA_CHUNK_BYTES as u64) as usize;
                let (done, receiver) = oneshot::channel();
                let span = FileSpan {
                    source: Arc::clone(&source),
                    max,
                    done,
                };
                self.queue(Outgoing::Own(Tracked::Span(span))).await?;
                pending.push_back((receiver, max));
                asked += max as u64;
            }
            let Some((receiver, max)) = pending.pop_front() else {
                break;
            };
            let n = match tokio::time::timeout(self.idle, receiver).await {
                Ok(Ok(result)) => result.map_err(file_error)?,
                Ok(Err(_)) => return Err(crate::error::client_gone()),
                Err(_) => return Err(stream_idle(self.idle)),
            };
            sent += n as u64;
            ended |= n < max;
        }
        // Everything up to the limit went: one byte more means the file is over it.
        if sent == limit && max_bytes.is_some() {
            let more = read_at(&source.file, &mut [0u8], sent).map_err(file_error)?;
            if more > 0 {
                return Err(too_large(limit));
            }
        }
        Ok(sent)
    }

    /// Reserves `bytes` of the outgoing budget, waiting at most the idle timeout.
    async fn reserve(&self, bytes: u64) -> io::Result<Reservation> {
        match tokio::time::timeout(self.idle, self.budget.reserve(bytes)).await {
            Ok(reserved) => reserved,
            Err(_) => Err(stream_idle(self.idle)),
        }
    }

    /// Queues `item` for the writer, waiting for room at most the idle timeout.
    async fn queue(&self, item: Outgoing) -> io::Result<()> {
        match tokio::time::timeout(self.idle, self.out.send(item)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(crate::error::client_gone()),
            Err(_) => Err(stream_idle(self.idle)),
        }
    }
}

/// The server's end of a connection's writer (`transport::link`): spans, read into frames and
/// written into the connection's TCP socket (spans are queued only when it has one), and
/// reserved messages, whose reservations are held until they are flushed. It tells `clock` how
/// the socket takes what it writes.
pub(crate) struct Writer {
    frames: FileFrames,
    /// The reservation of the last message fed to tungstenite, until it is flushed.
    unflushed: Option<Reservation>,
    clock: Arc<WriterClock>,
    /// The thread that encodes large replies ahead of this writer.
    helper: Helper,
}

impl Writer {
    /// A writer whose frames that wait on the disk are read under `work`'s permits.
    pub(crate) fn new(work: Work, clock: Arc<WriterClock>) -> Self {
        Self {
            frames: FileFrames::new(work),
            unflushed: None,
            clock,
            helper: Helper::default(),
        }
    }
}

impl<S: Sink<WsMessage> + Unpin + Send> EndWriter<S, Tracked> for Writer {
    async fn send(&mut self, sink: &mut S, socket: Option<&DirectSocket>, item: Tracked) -> bool {
        self.clock.writing();
        // Once an item has gone into the socket, or into tungstenite's buffer, everything
        // before it is out (tungstenite flushes its buffer before it takes another message,
        // and a span waits for it), so only the last message's bytes are still held.
        let sent = match item {
            Tracked::Span(span) => {
                let sent = send_span(sink, socket, &mut self.frames, span).await;
                self.unflushed = None;
                sent
            }
            Tracked::Reserved(message, reservation) => {
                let sent = sink.feed(message).await.is_ok();
                self.unflushed = Some(reservation);
                sent
            }
            Tracked::Encoded(reply) => {
                let sent = encoded::send(sink, socket, reply, &self.helper).await;
                self.unflushed = None;
                sent
            }
        };
        self.clock.progressed();
        sent
    }

    fn flushed(&mut self) {
        self.unflushed = None;
        self.clock.flushed();
    }
}

/// Sends one span into `socket`; false when the connection broke.
async fn send_span<S>(
    sink: &mut S,
    socket: Option<&DirectSocket>,
    frames: &mut FileFrames,
    span: FileSpan,
) -> bool
where
    S: Sink<WsMessage> + Unpin,
{
    if span.done.is_closed() {
        return true;
    }
    let Some(socket) = socket else {
        let _ = span.done.send(Err(crate::error::no_socket_for_frames()));
        return true;
    };
    let mut sent = 0;
    let result = loop {
        if sent == span.max {
            break Ok(sent);
        }
        match frames
            .send_frame(sink, socket, &span.source, span.max - sent)
            .await
        {
            Ok(0) => break Ok(sent),
            Ok(n) => sent += n,
            Err(Failed::File(e)) => break Err(e),
            Err(Failed::Socket) => return false,
        }
    };
    let _ = span.done.send(result);
    // A frame's read is a file read on the connection's thread, like an inline read: the
    // tasks of its other connections get their turn before the next one.
    tokio::task::yield_now().await;
    true
}

/// Why a frame did not go out.
enum Failed {
    /// Reading the file failed; nothing was sent.
    File(io::Error),
    /// The socket failed, possibly in the middle of a frame: the connection is over.
    Socket,
}

/// What the writer reads the data frames of files with: the one buffer every frame is read
/// into, and the connection's bounds on file work.
struct FileFrames {
    /// Made (and zeroed) on first use, reused for every frame after.
    buffer: Vec<u8>,
    /// The connection's bounds on file work, for the reads that go to the blocking pool.
    work: Work,
}

impl FileFrames {
    fn new(work: Work) -> Self {
        Self {
            buffer: Vec::new(),
            work,
        }
    }

    /// Reads the next at most `want` bytes of the file and writes them as one data frame into
    /// `socket`; `Ok(0)` at the end of the file.
    async fn send_frame<S>(
        &mut self,
        sink: &mut S,
        socket: &DirectSocket,
        source: &Arc<SpanSource>,
        want: usize,
    ) -> Result<usize, Failed>
    where
        S: Sink<WsMessage> + Unpin,
    {
        let want = want.min(DATA_CHUNK_BYTES);
        if self.buffer.is_empty() {
            self.buffer = vec![0u8; FRAME_HEAD_ROOM + DATA_CHUNK_BYTES];
        }
        let offset = source.offset.load(Ordering::Relaxed);
        let payload = &mut self.buffer[FRAME_HEAD_ROOM..FRAME_HEAD_ROOM + want];
        let n = match read_cached(&source.file, payload, offset).map_err(Failed::File)? {
            Some(n) => n,
            None => self.read_in_pool(source, want, offset).await?,
        };
        if n == 0 {
            return Ok(0);
        }
        source.offset.store(offset + n as u64, Ordering::Relaxed);
        // The headers go right before the payload, so the frame is one slice.
        let start = frame_in_place(&mut self.buffer, &source.header, n, None);
        let frame = &self.buffer[start..FRAME_HEAD_ROOM + n];
        match socket.send_frame(sink, frame).await {
            Ok(()) => Ok(n),
            Err(e) => {
                tracing::debug!("writing a data frame failed: {e}");
                Err(Failed::Socket)
            }
        }
    }

    /// Reads the frame's payload on the blocking pool, under a work permit, for pages the
    /// page cache does not hold: the connection's thread never waits on the disk.
    async fn read_in_pool(
        &mut self,
        source: &Arc<SpanSource>,
        want: usize,
        offset: u64,
    ) -> Result<usize, Failed> {
        let permit = self.work.clone().acquire().await;
        let (source, mut buffer) = (Arc::clone(source), std::mem::take(&mut self.buffer));
        let read = tokio::task::spawn_blocking(move || {
            let n = read_at(&source.file, &mut buffer[FRAME_HEAD_ROOM..][..want], offset);
            (buffer, n)
        })
        .await;
        drop(permit);
        let (buffer, n) = read.map_err(|e| Failed::File(crate::error::read_task_failed(e)))?;
        self.buffer = buffer;
        n.map_err(Failed::File)
    }
}

/// Reads from `file` at `offset` what the page cache holds of the next `buf.len()` bytes
/// (`preadv2` with `RWF_NOWAIT`); `None` when the first of them would have to come from the
/// disk. Where the flag is not known, reads as usual.
pub(crate) fn read_cached(
    file: &std::fs::File,
    buf: &mut [u8],
    offset: u64,
) -> io::Result<Option<usize>> {
    loop {
        let read = rustix::io::preadv2(
            file,
            &mut [IoSliceMut::new(buf)],
            offset,
            ReadWriteFlags::NOWAIT,
        );
        match read {
            Ok(n) => return Ok(Some(n)),
            Err(Errno::AGAIN) => return Ok(None),
            Err(Errno::INTR) => {}
            Err(Errno::OPNOTSUPP | Errno::NOSYS | Errno::INVAL) => {
                return read_at(file, buf, offset).map(Some);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// `pread`, again when a signal interrupted it.
fn read_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    loop {
        match file.read_at(buf, offset) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            read => return read,
        }
    }
}

/// Queues `message` for the writer. A closed writer means the peer is gone; there is no one
/// left to tell.
pub(crate) async fn send(out: &mpsc::Sender<Outgoing>, message: WsMessage) {
    let _ = out.send(Outgoing::Message(message)).await;
}
