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

    /// Called whenever the queue is empty before a flush, with how many items the writer took
    /// since the last one: an end whose senders may be woken after its writer (see the
    /// client's `Writer`) lets them queue theirs first, and the writer takes those too before
    /// the flush. True when it did; the end must say false once a gathering brought nothing.
    fn gather(&mut self, taken: usize) -> impl Future<Output = bool> + Send {
        let _ = taken;
        std::future::ready(false)
    }
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
        let mut taken = 0;
        while let Some(item) = next.take() {
            let sent = match item {
                Queued::Message(message) => sink.feed(message).await.is_ok(),
                Queued::Own(item) => end.send(&mut sink, socket.as_ref(), item).await,
            };
            if !sent {
                return;
            }
            taken += 1;
            next = queue.try_recv().ok();
            if next.is_none() && end.gather(taken).await {
                next = queue.try_recv().ok();
            }
        }
        if sink.flush().await.is_err() {
            return;
        }
        end.flushed();
    }
    let _ = sink.close().await;
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::*;

    /// A sink that keeps each flush's messages as one batch.
    #[derive(Default)]
    struct Batches {
        done: Vec<Vec<String>>,
        open: Vec<String>,
    }

    impl Sink<Message> for Batches {
        type Error = std::convert::Infallible;

        fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn start_send(mut self: Pin<&mut Self>, item: Message) -> Result<(), Self::Error> {
            self.open.push(item.into_text().unwrap().to_string());
            Ok(())
        }

        fn poll_flush(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Result<(), Self::Error>> {
            let batch = std::mem::take(&mut self.open);
            self.done.push(batch);
            Poll::Ready(Ok(()))
        }

        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }
    }

    /// An end whose first gathering queues what other senders would have queued meanwhile,
    /// and which keeps what the writer tells it.
    #[derive(Default)]
    struct Gathering {
        senders: Option<mpsc::Sender<Queued<()>>>,
        /// `taken` at each gathering.
        asked: Vec<usize>,
        flushes: usize,
    }

    impl EndWriter<&mut Batches, ()> for &mut Gathering {
        async fn send(&mut self, _: &mut &mut Batches, _: Option<&DirectSocket>, (): ()) -> bool {
            true
        }

        fn flushed(&mut self) {
            self.flushes += 1;
            // Once a flush is done the queue closes, whether the end gathered or not.
            self.senders = None;
        }

        async fn gather(&mut self, taken: usize) -> bool {
            self.asked.push(taken);
            let Some(senders) = self.senders.take() else {
                return false;
            };
            for text in ["b", "c"] {
                senders
                    .send(Queued::Message(Message::text(text)))
                    .await
                    .unwrap();
            }
            true
        }
    }

    #[tokio::test]
    async fn what_an_end_gathers_goes_out_in_the_same_flush_and_it_is_asked_again_after() {
        let (tx, rx) = mpsc::channel(8);
        let mut end = Gathering {
            senders: Some(tx.clone()),
            ..Gathering::default()
        };
        tx.send(Queued::Message(Message::text("a"))).await.unwrap();
        drop(tx);
        let mut batches = Batches::default();
        write_queued(&mut batches, None, rx, &mut end).await;
        assert_eq!(batches.done, [vec!["a", "b", "c"]]);
        // Asked with one taken, then with the three, when it gathered nothing more.
        assert_eq!(end.asked, [1, 3]);
        assert_eq!(end.flushes, 1);
    }

    /// An end that never gathers: every message the queue held when the writer looked goes in
    /// one flush, and nothing waits for more.
    struct Plain;

    impl EndWriter<&mut Batches, ()> for Plain {
        async fn send(&mut self, _: &mut &mut Batches, _: Option<&DirectSocket>, (): ()) -> bool {
            true
        }
    }

    #[tokio::test]
    async fn without_gathering_the_queued_messages_go_in_one_flush() {
        let (tx, rx) = mpsc::channel(8);
        for text in ["a", "b"] {
            tx.send(Queued::Message(Message::text(text))).await.unwrap();
        }
        drop(tx);
        let mut batches = Batches::default();
        write_queued(&mut batches, None, rx, Plain).await;
        assert_eq!(batches.done, [vec!["a", "b"]]);
    }
}
