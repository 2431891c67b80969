//! What the client's writer sends: messages through tungstenite, and on a TCP connection the
//! data frames of streamed writes, which it writes past tungstenite.
//!
//! A streamed write reads each frame's contents straight into a buffer of its own, behind room
//! for the frame's headers, masks the frame there (a client's frames must be masked, RFC 6455
//! §5.3) and queues the whole buffer; the writer sends it with one `send` and hands the buffer
//! back for the frame after next ([`Frames`]). A data frame thus costs the source's read and one
//! copy into the socket. Through tungstenite it also cost zeroing the frame's room before the
//! read and the masked copy into tungstenite's buffer. tungstenite writes too (the reader task's
//! half answers pings), so the writer takes the socket for each frame only once nothing of
//! tungstenite's is half-written (`transport/shared.rs`).
//!
//! Over a command's stdin and stdout, or TLS, frames go through tungstenite as messages.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::BytesMut;
use futures_util::Sink;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::common::connection_lost;
use crate::protocol::{DATA_CHUNK_BYTES, DATA_FRAME_HEADER_LEN};
use crate::transport::shared::{DirectSocket, FRAME_HEAD_ROOM, frame_in_place};
use crate::transport::writer::{EndWriter, Queued, start_frame};

/// Data frames of one streamed write in the writer's queue at once; each holds a buffer of a
/// frame's size. Two let the next frame be read while the writer sends the last.
const FRAMES_AHEAD: usize = 2;

/// What the client's writer sends: messages, and whole data frames it writes past tungstenite.
pub(super) type Outgoing = Queued<MaskedFrame>;

/// A whole, masked data frame: `buffer[start..end]`. The buffer goes back through `done` once
/// sent.
pub(super) struct MaskedFrame {
    buffer: Vec<u8>,
    start: usize,
    end: usize,
    done: oneshot::Sender<Vec<u8>>,
}

/// The client's end of a connection's writer (`transport::link`): masked frames, written into
/// the connection's TCP socket (they are queued only when it has one).
pub(super) struct Writer {
    /// The writer runs on a multi-thread runtime. There a task woken by another task of the
    /// same worker runs next, before the tasks queued earlier: the writer, woken by the first
    /// of many callers the reader has just handed their replies, would send that caller's next
    /// request alone, and each of the others' with a write of its own.
    gathers: bool,
    /// Replies the reader has handed to their callers since the writer last looked.
    pub(super) answered: Arc<AtomicUsize>,
    /// Callers answered since the last flush: each may be about to queue its next request.
    owed: usize,
    /// What the writer had taken when it last gathered since the last flush.
    last: Option<usize>,
}

impl Writer {
    /// The writer of a connection whose tasks run on the current runtime.
    pub(super) fn new() -> Self {
        let flavor = tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor());
        Self {
            gathers: matches!(flavor, Ok(tokio::runtime::RuntimeFlavor::MultiThread)),
            answered: Arc::default(),
            owed: 0,
            last: None,
        }
    }
}

impl<S: Sink<WsMessage> + Unpin + Send> EndWriter<S, MaskedFrame> for Writer {
    async fn send(
        &mut self,
        sink: &mut S,
        socket: Option<&DirectSocket>,
        frame: MaskedFrame,
    ) -> bool {
        // Without a socket the frame cannot go: ending here fails every call.
        let Some(socket) = socket else { return false };
        let bytes = &frame.buffer[frame.start..frame.end];
        if let Err(e) = socket.send_frame(sink, bytes).await {
            tracing::debug!("writing a data frame failed: {e}");
            return false;
        }
        let _ = frame.done.send(frame.buffer);
        true
    }

    /// On a multi-thread runtime, while fewer requests were taken since the last flush than
    /// callers were answered, yields, so that the callers already woken queue their next
    /// requests and the writer sends them with one write; it stops once a yield brought
    /// nothing (a caller that was done). On a current-thread runtime a woken task runs after
    /// those queued before it, and that order comes by itself. A caller alone costs no yield.
    async fn gather(&mut self, taken: usize) -> bool {
        self.owed += self.answered.swap(0, Ordering::Relaxed);
        let progressed = self.last.is_none_or(|last| taken > last);
        let gather = self.gathers && taken < self.owed && progressed;
        if gather {
            self.last = Some(taken);
            tokio::task::yield_now().await;
        }
        gather
    }

    fn flushed(&mut self) {
        self.owed = 0;
        self.last = None;
    }
}

/// How one streamed write builds its data frames and queues them.
pub(super) enum Frames {
    /// As messages for tungstenite, built in an arena (see `start_frame`).
    Messages(BytesMut),
    /// Whole and masked, for the writer to send itself past tungstenite: the buffers in its
    /// queue, oldest first, and the one being filled.
    Masked {
        queued: VecDeque<oneshot::Receiver<Vec<u8>>>,
        filling: Vec<u8>,
    },
}

impl Frames {
    /// Frames for a writer that sends them itself when `writes_frames_itself`, else messages.
    pub(super) fn new(writes_frames_itself: bool) -> Self {
        if writes_frames_itself {
            Self::Masked {
                queued: VecDeque::new(),
                filling: Vec::new(),
            }
        } else {
            Self::Messages(BytesMut::new())
        }
    }

    /// Reads the next frame's contents from `reader`: `want` bytes, fewer only at its end;
    /// returns how many.
    pub(super) async fn fill(
        &mut self,
        reader: &mut (dyn AsyncRead + Unpin + Send),
        header: &[u8; DATA_FRAME_HEADER_LEN],
        want: usize,
    ) -> io::Result<usize> {
        match self {
            Self::Messages(arena) => {
                start_frame(arena, header, want);
                let mut limited = reader.take(want as u64);
                let mut filled = 0;
                loop {
                    match limited.read_buf(arena).await? {
                        0 => return Ok(filled),
                        n => filled += n,
                    }
                }
            }
            Self::Masked { queued, filling } => {
                if filling.is_empty() {
                    *filling = if queued.len() < FRAMES_AHEAD {
                        // Zeroed once; reads into it initialise nothing after.
                        vec![0u8; FRAME_HEAD_ROOM + DATA_CHUNK_BYTES]
                    } else {
                        let oldest = queued.pop_front().expect("frames are queued");
                        oldest.await.map_err(|_| connection_lost())?
                    };
                }
                let room = &mut filling[FRAME_HEAD_ROOM..FRAME_HEAD_ROOM + want];
                let mut filled = 0;
                while filled < want {
                    match reader.read(&mut room[filled..]).await? {
                        0 => break,
                        n => filled += n,
                    }
                }
                Ok(filled)
            }
        }
    }

    /// The frame `fill` read, of `len` bytes of contents, as the writer's next item.
    pub(super) fn take(&mut self, header: &[u8; DATA_FRAME_HEADER_LEN], len: usize) -> Outgoing {
        match self {
            Self::Messages(arena) => Outgoing::Message(WsMessage::Binary(arena.split().freeze())),
            Self::Masked { queued, filling } => {
                let mut buffer = std::mem::take(filling);
                let mask = rand::random::<[u8; 4]>();
                let start = frame_in_place(&mut buffer, header, len, Some(mask));
                let (done, back) = oneshot::channel();
                queued.push_back(back);
                Outgoing::Own(MaskedFrame {
                    buffer,
                    start,
                    end: FRAME_HEAD_ROOM + len,
                    done,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Sink = futures_util::sink::Drain<WsMessage>;

    /// Whether `writer` gathers (run on `runtime`) after `answered` more replies, having taken
    /// `taken` requests since the last flush.
    fn gathers(
        runtime: &tokio::runtime::Runtime,
        writer: &mut Writer,
        answered: usize,
        taken: usize,
    ) -> bool {
        writer.answered.fetch_add(answered, Ordering::Relaxed);
        let gathered = runtime.block_on(<Writer as EndWriter<Sink, MaskedFrame>>::gather(
            writer, taken,
        ));
        assert_eq!(writer.answered.load(Ordering::Relaxed), 0, "counted once");
        gathered
    }

    fn flushed(writer: &mut Writer) {
        <Writer as EndWriter<Sink, MaskedFrame>>::flushed(writer);
    }

    #[test]
    fn the_writer_gathers_on_a_multi_thread_runtime_while_answered_callers_keep_sending() {
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let mut writer = multi.block_on(async { Writer::new() });
        assert!(!gathers(&multi, &mut writer, 0, 1));
        flushed(&mut writer);
        assert!(
            !gathers(&multi, &mut writer, 1, 1),
            "a caller alone costs no yield"
        );
        flushed(&mut writer);
        // Four callers answered: the writer yields while they send, however the replies were
        // counted, and stops once they all did or a yield brought nothing.
        assert!(gathers(&multi, &mut writer, 3, 1));
        assert!(gathers(&multi, &mut writer, 1, 2));
        assert!(!gathers(&multi, &mut writer, 0, 2), "no progress");
        flushed(&mut writer);
        assert!(gathers(&multi, &mut writer, 4, 1));
        assert!(gathers(&multi, &mut writer, 0, 3));
        assert!(!gathers(&multi, &mut writer, 0, 4), "all four sent");
        flushed(&mut writer);
        assert!(
            !gathers(&multi, &mut writer, 0, 1),
            "a flush forgets the callers it served"
        );
        let current = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut writer = current.block_on(async { Writer::new() });
        assert!(
            !gathers(&current, &mut writer, 64, 1),
            "a current-thread runtime orders it itself"
        );
    }
}
