//! One connection served over a byte stream such as stdin and stdout, without a listener.

use std::io;
use std::sync::Arc;

use tokio::io::AsyncReadExt;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_util::sync::CancellationToken;

use super::config::{ServerConfig, ws_config};
use super::connection::Connection;
use super::listener::shutdown_deadline_passed;
use super::shared::Shared;
use crate::transport::lines;
use crate::transport::stdio::EndAsStop;
use capfs::ExecutorFileSystem;

/// Serves exactly one connection over the process's stdin and stdout: WebSocket frames
/// (RFC 6455) directly on the byte stream, without the HTTP upgrade, so the JSON messages and
/// data frames are those of a TCP connection; or, when the first byte is `{` or white space,
/// one JSON message per line each way (codex's stdio executors), without data frames. Returns when stdin ends (after finishing the
/// requests in flight) or when `shutdown` completes. No token is checked: whoever can start the
/// process (over ssh, `kubectl exec`) is already trusted by that channel.
///
/// # Errors
///
/// As [`serve_byte_stream`].
pub async fn serve_stdio(
    fs: Arc<dyn ExecutorFileSystem>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    // Pipes (what ssh, `kubectl exec` and `RemoteFileSystem::connect_command` give) are read and
    // written without blocking, on the runtime itself; tokio's stdin and stdout, the fallback for
    // anything else, hand every read and write to the blocking pool and back.
    if let (Some(input), Some(output)) = (stdin_pipe(), stdout_pipe()) {
        let io = tokio::io::join(input, output);
        return serve_byte_stream(fs, config, io, "stdio", shutdown).await;
    }
    let io = tokio::io::join(tokio::io::stdin(), tokio::io::stdout());
    serve_byte_stream(fs, config, io, "stdio", shutdown).await
}

/// Standard input as a non-blocking pipe, when it is one.
fn stdin_pipe() -> Option<tokio::net::unix::pipe::Receiver> {
    use std::os::fd::AsFd;
    let fd = io::stdin().as_fd().try_clone_to_owned().ok()?;
    tokio::net::unix::pipe::Receiver::from_owned_fd(fd).ok()
}

/// Standard output as a non-blocking pipe, when it is one.
fn stdout_pipe() -> Option<tokio::net::unix::pipe::Sender> {
    use std::os::fd::AsFd;
    let fd = io::stdout().as_fd().try_clone_to_owned().ok()?;
    tokio::net::unix::pipe::Sender::from_owned_fd(fd).ok()
}

/// Serves exactly one connection over `io`, as [`serve_stdio`] does over stdin and stdout;
/// `peer` names the other end in logs. Once `shutdown` completes, the running requests get the
/// configured shutdown timeout to finish; then the connection is cut.
///
/// # Errors
///
/// `InvalidInput` for a limit out of range (see [`ServerConfig::validate`]); `TimedOut` when
/// the connection had to be cut at the shutdown deadline.
pub async fn serve_byte_stream<S>(
    fs: Arc<dyn ExecutorFileSystem>,
    config: ServerConfig,
    io: S,
    peer: &str,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    config.validate()?;
    let stop = CancellationToken::new();
    // The first byte decides the framing: a JSON line, or a WebSocket frame.
    let (mut input, output) = tokio::io::split(io);
    let mut first = [0u8; 1];
    if input.read(&mut first).await? == 0 {
        return Ok(());
    }
    let input = std::io::Cursor::new(first).chain(input);
    if lines::starts_a_line(first[0]) {
        let max_line = config.max_message_bytes;
        let (pipe, bridge) = lines::serve_lines(input, output, ws_config(&config), max_line).await;
        let served = serve_framed(fs, config, pipe, peer, true, stop, shutdown).await;
        // The bridge ends once the connection has closed its side of the pipe.
        let _ = bridge.await;
        return served;
    }
    let io = tokio::io::join(input, output);
    serve_framed(fs, config, io, peer, false, stop, shutdown).await
}

/// Runs one connection on the WebSocket frames of `io` until it ends, or until `shutdown` and
/// then the shutdown timeout; `over_lines` when the frames carry JSON lines.
async fn serve_framed<S>(
    fs: Arc<dyn ExecutorFileSystem>,
    config: ServerConfig,
    io: S,
    peer: &str,
    over_lines: bool,
    stop: CancellationToken,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let io = EndAsStop {
        io,
        stop: stop.clone(),
    };
    let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
        io,
        Role::Server,
        Some(ws_config(&config)),
    )
    .await;
    serve_one(fs, config, ws, peer, over_lines, stop, shutdown).await
}

/// Runs one connection on `ws` until it ends, or until `shutdown` and then the shutdown
/// timeout; `over_lines` when it carries JSON lines.
async fn serve_one<S>(
    fs: Arc<dyn ExecutorFileSystem>,
    config: ServerConfig,
    ws: tokio_tungstenite::WebSocketStream<S>,
    peer: &str,
    over_lines: bool,
    stop: CancellationToken,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let shutdown_timeout = config.shutdown_timeout;
    let grace = config.process_grace.min(shutdown_timeout);
    let shared = Arc::new(Shared::new(fs, config));
    // One connection, which no client can take back: its processes end with it.
    let processes = shared.processes.clone();
    let mut connection = Connection::new(shared, 1, peer.into());
    if over_lines {
        connection = connection.over_lines();
    }
    let run_stop = stop.clone();
    let run = async move {
        connection.run(ws, None, run_stop).await;
        if let Some(processes) = processes {
            processes.shutdown(grace).await;
        }
    };
    tokio::pin!(run);
    tokio::pin!(shutdown);
    tokio::select! {
        () = &mut run => return Ok(()),
        () = &mut shutdown => {}
    }
    tracing::info!("shutting down: finishing in-flight requests");
    stop.cancel();
    tokio::time::timeout(shutdown_timeout, run)
        .await
        .map_err(|_| shutdown_deadline_passed(shutdown_timeout, 1))
}
