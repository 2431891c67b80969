//! Newline-delimited JSON on a byte stream, the framing codex's stdio executors speak: one
//! message per line each way. The lines are carried to a WebSocket connection through an
//! in-memory pipe, so the server runs the same connection (bounds, handshake, method table) on
//! both framings.

use std::io;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_util::sync::CancellationToken;

/// Bytes of the in-memory pipe between the lines and the WebSocket connection.
const PIPE_BYTES: usize = 256 * 1024;

/// Whether a byte stream that starts with `first` speaks lines: a JSON message starts with `{`
/// or white space, a WebSocket frame never does (its first byte carries the opcode).
pub(crate) fn starts_a_line(first: u8) -> bool {
    matches!(first, b'{' | b' ' | b'\t' | b'\r' | b'\n')
}

/// Carries the lines of `input` as text messages into the returned WebSocket stream and its
/// messages back to `output` as lines, until either end closes. The end of `input` cancels
/// `stop`, as the end of a WebSocket byte stream does (the running requests still answer). A
/// line longer than `max_line` bytes is passed on cut there, so the connection refuses it as
/// an oversized message.
pub(crate) async fn serve_lines<R, W>(
    input: R,
    mut output: W,
    config: WebSocketConfig,
    max_line: usize,
    stop: CancellationToken,
) -> (
    WebSocketStream<tokio::io::DuplexStream>,
    tokio::task::JoinHandle<io::Result<()>>,
)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (server_end, bridge_end) = tokio::io::duplex(PIPE_BYTES);
    let server = WebSocketStream::from_raw_socket(server_end, Role::Server, Some(config)).await;
    let bridge = WebSocketStream::from_raw_socket(bridge_end, Role::Client, Some(config)).await;
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
                    stop.cancel();
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
    (server, task)
}
