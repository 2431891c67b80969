//! What the client and the server share about driving a WebSocket.

use bytes::BytesMut;
use futures_util::{Sink, SinkExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

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

/// Writes queued messages to `sink` until the queue closes, then closes the socket. Whatever is
/// already queued when a message is taken goes out with it in one flush, so many small responses
/// under load cost one write instead of one each.
pub(crate) async fn write_queued<S>(mut sink: S, mut queue: mpsc::Receiver<Message>)
where
    S: Sink<Message> + Unpin,
{
    while let Some(first) = queue.recv().await {
        if sink.feed(first).await.is_err() {
            return;
        }
        while let Ok(next) = queue.try_recv() {
            if sink.feed(next).await.is_err() {
                return;
            }
        }
        if sink.flush().await.is_err() {
            return;
        }
    }
    let _ = sink.close().await;
}
