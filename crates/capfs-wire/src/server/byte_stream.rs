//! One connection served over a byte stream such as stdin and stdout, without a listener.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

use rustix::net::RecvFlags;
use tokio::io::{AsyncReadExt, Interest};
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_util::sync::CancellationToken;

use super::config::{ServerConfig, ws_config};
use super::connection::Connection;
use super::listener::shutdown_deadline_passed;
use super::shared::Shared;
use crate::transport::lines;
use crate::transport::shared::{DirectSocket, SharedSocket, StreamSocket};
use crate::transport::stdio::{EndAsStop, widen_pipe, widen_socket};
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
    // Unix stream sockets (what `RemoteFileSystem::connect_command` gives, and sshd) and pipes
    // (`kubectl exec`) are read and written without blocking, on the runtime itself; tokio's
    // stdin and stdout, the fallback for anything else, hand every read and write to the
    // blocking pool and back. Both are looked at before either is made non-blocking: a
    // non-blocking stdin (its open file, shared with the descriptor) would fail the blocking
    // reads of the fallback with `EAGAIN`.
    let (stdin, stdout) = (io::stdin(), io::stdout());
    match (kind_of(stdin.as_fd()), kind_of(stdout.as_fd())) {
        (Kind::UnixStream(input), Kind::UnixStream(output)) if input == output => {
            let socket = nonblocking_socket(stdin.as_fd())?;
            serve_socket(fs, config, socket, shutdown).await
        }
        (Kind::UnixStream(_), Kind::UnixStream(_)) => {
            let input = nonblocking_socket(stdin.as_fd())?;
            let io = tokio::io::join(input, nonblocking_socket(stdout.as_fd())?);
            serve_byte_stream(fs, config, io, "stdio", shutdown).await
        }
        (Kind::Pipe, Kind::Pipe) => {
            let io = tokio::io::join(stdin_pipe()?, stdout_pipe()?);
            serve_byte_stream(fs, config, io, "stdio", shutdown).await
        }
        _ => {
            let io = tokio::io::join(tokio::io::stdin(), tokio::io::stdout());
            serve_byte_stream(fs, config, io, "stdio", shutdown).await
        }
    }
}

/// Serves one connection on `socket`, both stdin and stdout: as [`serve_byte_stream`] does,
/// and with WebSocket frames, the data frames written past tungstenite as on TCP.
async fn serve_socket(
    fs: Arc<dyn ExecutorFileSystem>,
    config: ServerConfig,
    socket: tokio::net::UnixStream,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    config.validate()?;
    let mut first = [0u8; 1];
    let peek = socket.async_io(Interest::READABLE, || {
        rustix::net::recv(&socket, &mut first, RecvFlags::PEEK)
            .map(|(n, _)| n)
            .map_err(io::Error::from)
    });
    // A peer that has sent nothing yet is let go at shutdown.
    tokio::pin!(shutdown);
    let peeked = tokio::select! {
        () = &mut shutdown => return Ok(()),
        peeked = peek => peeked?,
    };
    if peeked == 0 {
        return Ok(());
    }
    if lines::starts_a_line(first[0]) {
        return serve_byte_stream(fs, config, socket, "stdio", shutdown).await;
    }
    let shared = SharedSocket::new(StreamSocket::Unix(socket));
    let direct = shared.direct();
    let stop = CancellationToken::new();
    serve_framed(
        fs,
        config,
        shared,
        Some(direct),
        "stdio",
        false,
        stop,
        shutdown,
    )
    .await
}

/// What a standard descriptor is, as far as serving on it goes.
enum Kind {
    /// A Unix stream socket, by its device and inode: two descriptors of one socket have the
    /// same.
    UnixStream((u64, u64)),
    Pipe,
    Other,
}

fn kind_of(fd: BorrowedFd<'_>) -> Kind {
    use rustix::fs::FileType;
    use rustix::net::{AddressFamily, SocketType, sockopt};
    let Ok(stat) = rustix::fs::fstat(fd) else {
        return Kind::Other;
    };
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Fifo => Kind::Pipe,
        FileType::Socket
            if sockopt::socket_domain(fd).is_ok_and(|d| d == AddressFamily::UNIX)
                && sockopt::socket_type(fd).is_ok_and(|t| t == SocketType::STREAM) =>
        {
            Kind::UnixStream((stat.st_dev, stat.st_ino))
        }
        _ => Kind::Other,
    }
}

/// A copy of the socket `fd`, non-blocking, widened.
fn nonblocking_socket(fd: BorrowedFd<'_>) -> io::Result<tokio::net::UnixStream> {
    let socket = std::os::unix::net::UnixStream::from(fd.try_clone_to_owned()?);
    socket.set_nonblocking(true)?;
    widen_socket(&socket);
    tokio::net::UnixStream::from_std(socket)
}

/// Standard input, a pipe, non-blocking and widened.
fn stdin_pipe() -> io::Result<tokio::net::unix::pipe::Receiver> {
    let fd = io::stdin().as_fd().try_clone_to_owned()?;
    let pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?;
    widen_pipe(&pipe);
    Ok(pipe)
}

/// Standard output, a pipe, non-blocking and widened.
fn stdout_pipe() -> io::Result<tokio::net::unix::pipe::Sender> {
    let fd = io::stdout().as_fd().try_clone_to_owned()?;
    let pipe = tokio::net::unix::pipe::Sender::from_owned_fd(fd)?;
    widen_pipe(&pipe);
    Ok(pipe)
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
    // The first byte decides the framing: a JSON line, or a WebSocket frame. A peer that has
    // sent nothing yet is let go at shutdown.
    let (mut input, output) = tokio::io::split(io);
    let mut first = [0u8; 1];
    tokio::pin!(shutdown);
    let read = tokio::select! {
        () = &mut shutdown => return Ok(()),
        read = input.read(&mut first) => read?,
    };
    if read == 0 {
        return Ok(());
    }
    let input = std::io::Cursor::new(first).chain(input);
    if lines::starts_a_line(first[0]) {
        let max_line = config.max_message_bytes;
        let (pipe, bridge) = lines::serve_lines(input, output, ws_config(&config), max_line).await;
        let served = serve_framed(fs, config, pipe, None, peer, true, stop, shutdown).await;
        // The bridge ends once the connection has closed its side of the pipe.
        let _ = bridge.await;
        return served;
    }
    let io = tokio::io::join(input, output);
    serve_framed(fs, config, io, None, peer, false, stop, shutdown).await
}

/// Runs one connection on the WebSocket frames of `io` until it ends, or until `shutdown` and
/// then the shutdown timeout; `socket` writes the data frames when `io` is a shared socket;
/// `over_lines` when the frames carry JSON lines.
#[allow(clippy::too_many_arguments)]
async fn serve_framed<S>(
    fs: Arc<dyn ExecutorFileSystem>,
    config: ServerConfig,
    io: S,
    socket: Option<DirectSocket>,
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
    serve_one(fs, config, ws, socket, peer, over_lines, stop, shutdown).await
}

/// Runs one connection on `ws` until it ends, or until `shutdown` and then the shutdown
/// timeout; `over_lines` when it carries JSON lines.
#[allow(clippy::too_many_arguments)]
async fn serve_one<S>(
    fs: Arc<dyn ExecutorFileSystem>,
    config: ServerConfig,
    ws: tokio_tungstenite::WebSocketStream<S>,
    socket: Option<DirectSocket>,
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
        connection.run(ws, socket, run_stop).await;
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
