//! One WebSocket connection as either end drives it: a writer task fed by a bounded queue, and a
//! read half that says what each message it reads is.
//!
//! The server's connections (`server/connection.rs`) and the client (`remote/client.rs`) open
//! the same link over whatever carries their frames (TCP with its [`DirectSocket`], TLS, a
//! command's stdio, codex's JSON lines through `lines.rs`, an in-memory pipe), so both ends tell
//! data frames from JSON messages, and a peer's close from a broken connection, the same way.
//! What differs is the end's own writer ([`EndWriter`]) and what it does with what it reads.

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::{SplitSink, SplitStream};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::CapacityError;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::shared::DirectSocket;
use super::writer::{EndWriter, Queued, write_queued};
use crate::protocol::{DATA_FRAME_HEADER_LEN, data_frame_kind};

/// tungstenite's writing half of a link, which the writer and an end's [`EndWriter`] send
/// through.
pub(crate) type WsSink<S> = SplitSink<WebSocketStream<S>, Message>;

/// An open WebSocket connection, split into its read half and its writer task.
pub(crate) struct Link<S, T> {
    /// What the peer sends, one message at a time.
    pub(crate) incoming: Incoming<S>,
    /// The writer's queue. The writer closes the connection once every sender is gone and
    /// everything queued has been sent.
    pub(crate) out: mpsc::Sender<Queued<T>>,
    /// The writer task. Aborting it drops what is queued: nothing more is written.
    pub(crate) writer: JoinHandle<()>,
    /// The link has a TCP socket: the end's writer may send data frames into it itself, past
    /// tungstenite.
    pub(crate) writes_frames_itself: bool,
}

impl<S, T> Link<S, T>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    T: Send + 'static,
{
    /// Splits `ws` and spawns its writer, which sends what is queued, at most `queue_bound`
    /// items ahead, with `end` sending the items of the end's own kind; `socket` is the TCP
    /// socket under `ws`, when there is one to write data frames into past tungstenite.
    pub(crate) fn open<W>(
        ws: WebSocketStream<S>,
        socket: Option<DirectSocket>,
        queue_bound: usize,
        end: W,
    ) -> Self
    where
        W: EndWriter<WsSink<S>, T> + Send + 'static,
    {
        let (sink, stream) = ws.split();
        let (out, queue) = mpsc::channel(queue_bound);
        let writes_frames_itself = socket.is_some();
        let writer = tokio::spawn(write_queued(sink, socket, queue, end));
        Self {
            incoming: Incoming { stream },
            out,
            writer,
            writes_frames_itself,
        }
    }
}

/// The read half of a [`Link`]. tungstenite answers the peer's pings and closes from it, as it
/// reads.
pub(crate) struct Incoming<S> {
    stream: SplitStream<WebSocketStream<S>>,
}

/// One message read from a link.
#[derive(Debug)]
pub(crate) enum Received {
    /// A JSON message: a text message (its UTF-8 bytes, not copied), or a binary one that is not
    /// a data frame.
    Message(Bytes),
    /// A data frame (`protocol/frames.rs`): its stream, whether it is tagged as the last of an
    /// unsized write, and what follows its header.
    Data {
        stream_id: u64,
        last: bool,
        payload: Bytes,
    },
    /// A message over the link's size limit, of which nothing was kept: the peer is owed a
    /// close, and nothing more can be read.
    TooBig(CapacityError),
    /// The peer closed the connection, or what carried it ended where a message could start.
    Closed,
    /// Reading failed: the peer broke the protocol, or went away without closing.
    Broken(WsError),
}

impl<S: AsyncRead + AsyncWrite + Unpin> Incoming<S> {
    /// The next message. Dropping the future before it completes loses nothing: a message is
    /// taken from tungstenite only when it is returned. After `TooBig`, `Closed` or `Broken`,
    /// there is nothing more to read.
    pub(crate) async fn next(&mut self) -> Received {
        loop {
            let message = match self.stream.next().await {
                Some(Ok(message)) => message,
                Some(Err(WsError::Capacity(e))) => return Received::TooBig(e),
                Some(Err(e)) => return Received::Broken(e),
                None => return Received::Closed,
            };
            match message {
                Message::Text(text) => return Received::Message(text.into()),
                Message::Binary(bytes) => return Received::binary(bytes),
                Message::Close(_) => return Received::Closed,
                // Pings are answered by tungstenite; pongs carry nothing, and a raw frame is
                // never read.
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
            }
        }
    }
}

impl Received {
    /// A binary message: a data frame when it starts with a data-frame header, a JSON message
    /// otherwise. The payload is a view of the message, not a copy.
    fn binary(bytes: Bytes) -> Self {
        match data_frame_kind(&bytes) {
            Some((stream_id, last)) => Self::Data {
                stream_id,
                last,
                payload: bytes.slice(DATA_FRAME_HEADER_LEN..),
            },
            None => Self::Message(bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tokio::io::{AsyncWriteExt, DuplexStream};
    use tokio_tungstenite::tungstenite::error::ProtocolError;
    use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
    use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

    use super::*;
    use crate::protocol::{data_frame_header, data_frame_last_header};

    /// An end whose writer sends nothing of its own.
    struct MessagesOnly;

    impl<S: Send> EndWriter<S, Infallible> for MessagesOnly {
        async fn send(&mut self, _: &mut S, _: Option<&DirectSocket>, item: Infallible) -> bool {
            match item {}
        }
    }

    type End = Link<DuplexStream, Infallible>;

    /// A client-role and a server-role link over one in-memory pipe; the server reads messages
    /// of at most `server_limit` bytes.
    async fn pair(server_limit: Option<usize>) -> (End, End) {
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let config = WebSocketConfig::default().max_message_size(server_limit);
        let client = WebSocketStream::from_raw_socket(client_io, Role::Client, None).await;
        let server = WebSocketStream::from_raw_socket(server_io, Role::Server, Some(config)).await;
        (
            Link::open(client, None, 4, MessagesOnly),
            Link::open(server, None, 4, MessagesOnly),
        )
    }

    async fn queue(out: &mpsc::Sender<Queued<Infallible>>, message: Message) {
        out.send(Queued::Message(message))
            .await
            .expect("the writer runs");
    }

    fn binary(parts: &[&[u8]]) -> Message {
        Message::binary(parts.concat())
    }

    /// What was read, in a form a test can compare.
    fn shape(received: Received) -> String {
        match received {
            Received::Message(bytes) => format!("message {bytes:?}"),
            Received::Data {
                stream_id,
                last,
                payload,
            } => format!("data {stream_id} last={last} {payload:?}"),
            Received::TooBig(e) => format!("too big: {e}"),
            Received::Closed => "closed".to_string(),
            Received::Broken(e) => format!("broken: {e}"),
        }
    }

    /// Each end reads what the other sent, in order, data frames told from JSON messages by
    /// their header alone: text and binary JSON are messages, a frame of either tag is data
    /// with its stream and payload, a binary message shorter than a header is a message, and
    /// pings are answered without being read.
    #[tokio::test]
    async fn each_end_tells_data_frames_from_messages() {
        let (mut client, mut server) = pair(None).await;
        let ends = [
            (&client.out, &mut server.incoming),
            (&server.out, &mut client.incoming),
        ];
        for (sender, reader) in ends {
            let sent = [
                Message::text(r#"{"id":1,"method":"fs/readFile"}"#),
                binary(&[&data_frame_header(7), b"abc"]),
                Message::Ping(Bytes::from_static(b"are you there")),
                binary(&[&data_frame_last_header(u64::MAX), b""]),
                Message::binary(&br#"{"method":"initialized"}"#[..]),
                binary(&[&data_frame_header(0)]),
                Message::binary(&[0u8, 1, 2][..]),
                binary(&[&[2], &data_frame_header(9)[1..]]),
            ];
            for message in sent {
                queue(sender, message).await;
            }
            let mut got = Vec::new();
            for _ in 0..7 {
                got.push(shape(reader.next().await));
            }
            assert_eq!(
                got,
                [
                    r#"message b"{\"id\":1,\"method\":\"fs/readFile\"}""#.to_string(),
                    r#"data 7 last=false b"abc""#.to_string(),
                    format!(r#"data {} last=true b"""#, u64::MAX),
                    r#"message b"{\"method\":\"initialized\"}""#.to_string(),
                    r#"data 0 last=false b"""#.to_string(),
                    r#"message b"\0\x01\x02""#.to_string(),
                    r#"message b"\x02\0\0\0\0\0\0\0\t""#.to_string(),
                ]
            );
        }
    }

    /// A message over the reader's limit is `TooBig`, and the close the end then queues reaches
    /// the peer as `Closed`.
    #[tokio::test]
    async fn an_oversize_message_is_too_big() {
        let (mut client, mut server) = pair(Some(1024)).await;
        queue(&client.out, Message::text("x".repeat(1025))).await;
        assert_eq!(
            shape(server.incoming.next().await),
            "too big: Message too long: 1025 > 1024"
        );
        let close = CloseFrame {
            code: CloseCode::Size,
            reason: "message too big".into(),
        };
        queue(&server.out, Message::Close(Some(close))).await;
        assert_eq!(shape(client.incoming.next().await), "closed");
    }

    /// A peer whose queue closes has its writer close the connection: the other end reads
    /// `Closed`, and the writer's task ends.
    #[tokio::test]
    async fn a_peer_that_closes_is_closed() {
        let (client, mut server) = pair(None).await;
        queue(&client.out, Message::text("{}")).await;
        drop(client.out);
        client.writer.await.expect("the writer ends");
        assert_eq!(shape(server.incoming.next().await), r#"message b"{}""#);
        assert_eq!(shape(server.incoming.next().await), "closed");
    }

    /// A peer that goes without a close, its writer cut (as the server's watchdog cuts one), is
    /// `Broken` with the reset, which the client tells from a broken protocol.
    #[tokio::test]
    async fn a_peer_that_vanishes_is_broken() {
        let (mut client, server) = pair(None).await;
        server.writer.abort();
        let _ = server.writer.await;
        drop(server.incoming);
        match client.incoming.next().await {
            Received::Broken(WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake)) => {}
            other => panic!("{}", shape(other)),
        }
    }

    /// Bytes that are no WebSocket frame are `Broken`.
    #[tokio::test]
    async fn a_peer_that_breaks_the_protocol_is_broken() {
        let (mut raw, server_io) = tokio::io::duplex(1024);
        let server = WebSocketStream::from_raw_socket(server_io, Role::Server, None).await;
        let mut server: End = Link::open(server, None, 4, MessagesOnly);
        assert!(!server.writes_frames_itself);
        // A final frame of opcode 3, which RFC 6455 reserves.
        raw.write_all(&[0x83, 0x80, 0, 0, 0, 0])
            .await
            .expect("the pipe is open");
        match server.incoming.next().await {
            Received::Broken(WsError::Protocol(ProtocolError::InvalidOpcode(3))) => {}
            other => panic!("{}", shape(other)),
        }
    }

    /// The writer sends the end's own items through its `EndWriter`, in their turn among the
    /// messages.
    #[tokio::test]
    async fn own_items_go_out_in_their_turn() {
        use futures_util::{Sink, SinkExt};

        /// Sends each of its items as a text message, upper-cased.
        struct Shouts;

        impl<S: Sink<Message> + Unpin + Send> EndWriter<S, &'static str> for Shouts {
            async fn send(&mut self, sink: &mut S, _: Option<&DirectSocket>, item: &str) -> bool {
                sink.feed(Message::text(item.to_uppercase())).await.is_ok()
            }
        }

        let (client_io, server_io) = tokio::io::duplex(1024);
        let client = WebSocketStream::from_raw_socket(client_io, Role::Client, None).await;
        let server = WebSocketStream::from_raw_socket(server_io, Role::Server, None).await;
        let client = Link::open(client, None, 4, Shouts);
        let mut server: End = Link::open(server, None, 4, MessagesOnly);
        for item in [
            Queued::Message(Message::text("a")),
            Queued::Own("b"),
            Queued::Message(Message::text("c")),
        ] {
            assert!(client.out.send(item).await.is_ok());
        }
        for expected in ["a", "B", "c"] {
            assert_eq!(
                shape(server.incoming.next().await),
                format!("message b{expected:?}")
            );
        }
    }
}
