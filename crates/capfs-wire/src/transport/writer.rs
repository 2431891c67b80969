//! The writer loop both ends of a connection run, and the arena their data frames are built in.

use bytes::BytesMut;
use futures_util::{Sink, SinkExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use super::shared::DirectSocket;
use crate::protocol::{DATA_CHUNK_BYTES, DATA_FRAME_HEADER_LEN};

/// Room a data-frame arena is given at a time: four frames, about what a queue of a few
/// messages holds, so that by the time it fills again the writer has usually sent them all.
const FRAME_ARENA_BYTES: usize = 4 * (DATA_FRAME_HEADER_LEN + DATA_CHUNK_BYTES);

/// Starts a data frame of `header` and up to `payload_len` bytes in `arena`, to be filled and
/// then taken with `arena.split().freeze()`. Once the writer has sent every frame of an arena,
/// its memory holds the next ones instead of a fresh allocation (whose pages the kernel would
/// zero and fault in, for every frame).
pub(crate) fn start_frame(arena: &mut BytesMut, header: &[u8], payload_len: usize) {
    if arena.capacity() < header.len() + payload_len {
        arena.reserve(FRAME_ARENA_BYTES);
    }
    arena.extend_from_slice(header);
}

/// What a connection's writer sends: a message, which the loop both ends share feeds to
/// tungstenite, or an item of the end's own kind, which the end's writer sends itself
/// ([`EndWriter`]: on the server a span of a file or a message under a reservation of the
/// outgoing budget, on the client a masked data frame).
pub(crate) enum Queued<T> {
    Message(Message),
    Own(T),
}

/// What one end adds to the writer loop both ends share: how it sends the items of its own kind.
pub(crate) trait EndWriter<S, T> {
    /// Sends `item` after everything `sink` (tungstenite's writing half) took: through it, or
    /// past it into `socket`, the connection's TCP socket when it has one; false when the
    /// connection broke, which ends the writer.
    fn send(
        &mut self,
        sink: &mut S,
        socket: Option<&DirectSocket>,
        item: T,
    ) -> impl Future<Output = bool> + Send;

    /// Everything sent so far has been flushed to the socket.
    fn flushed(&mut self) {}
}

/// Writes queued items to `sink` until the queue closes, then closes the socket. Messages queued
/// together go out in one flush, so many small responses under load cost one write instead of
/// one each; an item of the end's own kind goes out through `end` after everything queued
/// before it, with `socket` to write into past tungstenite.
pub(crate) async fn write_queued<S, T>(
    mut sink: S,
    socket: Option<DirectSocket>,
    mut queue: mpsc::Receiver<Queued<T>>,
    mut end: impl EndWriter<S, T>,
) where
    S: Sink<Message> + Unpin,
{
    while let Some(first) = queue.recv().await {
        let mut next = Some(first);
        while let Some(item) = next.take() {
            let sent = match item {
                Queued::Message(message) => sink.feed(message).await.is_ok(),
                Queued::Own(item) => end.send(&mut sink, socket.as_ref(), item).await,
            };
            if !sent {
                return;
            }
            next = queue.try_recv().ok();
        }
        if sink.flush().await.is_err() {
            return;
        }
        end.flushed();
    }
    let _ = sink.close().await;
}
