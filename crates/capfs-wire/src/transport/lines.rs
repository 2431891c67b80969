//! Newline-delimited JSON on a byte stream, the framing codex's stdio executors speak: one
//! message per line each way. The lines are carried to a WebSocket connection through an
//! in-memory pipe, so the server runs the same connection (bounds, handshake, method table) on
//! both framings.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

/// Bytes of the in-memory pipe between the lines and the WebSocket connection.
const PIPE_BYTES: usize = 256 * 1024;

/// Whether a byte stream that starts with `first` speaks lines: a JSON message starts with `{`
/// or white space, a WebSocket frame never does (its first byte carries the opcode).
pub(crate) fn starts_a_line(first: u8) -> bool {
    matches!(first, b'{' | b' ' | b'\t' | b'\r' | b'\n')
}

/// Carries the lines of `input` as text messages into the returned byte stream, which speaks
/// WebSocket frames for a server to read, and its messages back to `output` as lines, until
/// either end closes. The end of `input` becomes the end of the returned stream, after every
/// line before it: the server stops as it does at the end of a WebSocket byte stream. A line
/// longer than `max_line` bytes is passed on cut there, so the connection refuses it as an
/// oversized message.
pub(crate) async fn serve_lines<R, W>(
    input: R,
    mut output: W,
    config: WebSocketConfig,
    max_line: usize,
) -> (
    tokio::io::DuplexStream,
    tokio::task::JoinHandle<io::Result<()>>,
)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (server_end, bridge_end) = tokio::io::duplex(PIPE_BYTES);
    let (from_pipe, to_pipe) = tokio::io::split(bridge_end);
    let ended = Arc::new(AtomicBool::new(false));
    let to_pipe = EndOnFlush {
        inner: to_pipe,
        ended: Arc::clone(&ended),
    };
    let bridge = WebSocketStream::from_raw_socket(
        tokio::io::join(from_pipe, to_pipe),
        Role::Client,
        Some(config),
    )
    .await;
    let task = tokio::spawn(async move {
        let (mut to_server, mut from_server) = bridge.split();
        let reading = async {
            let mut lines = BufReader::new(input);
            let mut line = Vec::new();
            loop {
                line.clear();
                let read = (&mut lines)
                    .take(max_line as u64 + 1)
                    .read_until(b'\n', &mut line)
                    .await?;
                if read == 0 {
                    ended.store(true, Ordering::Release);
                    let _ = to_server.flush().await;
                    return Ok::<(), io::Error>(());
                }
                let text = line.strip_suffix(b"\n").unwrap_or(&line);
                let text = text.strip_suffix(b"\r").unwrap_or(text);
                if text.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                // Text frames must be UTF-8; anything else goes as binary, which the server
                // reads as JSON too and refuses as malformed if it is not.
                let message = match std::str::from_utf8(text) {
                    Ok(text) => Message::text(text),
                    Err(_) => Message::binary(text.to_vec()),
                };
                if to_server.send(message).await.is_err() {
                    return Ok(());
                }
            }
        };
        let writing = async {
            while let Some(message) = from_server.next().await {
                let text = match message {
                    Ok(Message::Text(text)) => text,
                    Ok(Message::Close(_)) | Err(_) => break,
                    Ok(_) => continue,
                };
                output.write_all(text.as_bytes()).await?;
                output.write_all(b"\n").await?;
                output.flush().await?;
            }
            Ok::<(), io::Error>(())
        };
        tokio::pin!(reading);
        tokio::pin!(writing);
        // Replies go on after the input ended, until the connection closes its side.
        tokio::select! {
            result = &mut writing => result,
            result = &mut reading => {
                result?;
                writing.await
            }
        }
    });
    (server_end, task)
}

/// The bridge's side of the pipe, whose flush after the input ended shuts the pipe down: the
/// server then reads to the end of what was sent, and then its end.
struct EndOnFlush<W> {
    inner: W,
    ended: Arc<AtomicBool>,
}

impl<W: AsyncWrite + Unpin> AsyncWrite for EndOnFlush<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(Pin::new(&mut self.inner).poll_flush(cx))?;
        if self.ended.load(Ordering::Acquire) {
            return Pin::new(&mut self.inner).poll_shutdown(cx);
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
