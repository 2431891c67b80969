//! What the client and the server share about driving a WebSocket.

use futures_util::{Sink, SinkExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

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
