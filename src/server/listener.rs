//! Accepting connections: the TCP listener with its handshake checks (Origin, token, connection
//! limit) and `GET /readyz`, and the single connection served over a byte stream such as
//! stdin/stdout.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{StatusCode, header};
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::audit;
use super::config::{ServerConfig, ws_config};
use super::connection::{Connection, Shared};
use super::threads::ConnectionThreads;
use crate::ExecutorFileSystem;
use crate::transport::lines;
use crate::transport::shared::SharedSocket;
use crate::transport::stdio::EndAsStop;

/// The answer to `GET /readyz`.
const READYZ_RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\
    Content-Length: 6\r\nConnection: close\r\n\r\nready\n";
/// Accept failures are logged at most once per this interval, with a count of the others.
const ACCEPT_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// The first pause after accepting failed for want of descriptors or memory; it doubles with
/// every further failure up to [`MAX_ACCEPT_PAUSE`] and resets on the next success.
const MIN_ACCEPT_PAUSE: Duration = Duration::from_millis(10);
/// The longest pause between two accepts while descriptors or memory are exhausted.
const MAX_ACCEPT_PAUSE: Duration = Duration::from_millis(500);
/// Descriptors the server needs besides its connections: the runtime, the listener, the roots,
/// the audit log, and the files that requests have open.
const DESCRIPTOR_HEADROOM: u64 = 64;

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    fs: Arc<dyn ExecutorFileSystem>,
    config: ServerConfig,
    url: String,
}

impl Server {
    /// Checks the configuration and binds the listening socket; the server will serve `fs` (any
    /// [`ExecutorFileSystem`]: a local one, a remote one, a test double).
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a limit out of range (see [`ServerConfig::validate`]);
    /// `PermissionDenied` for a non-loopback address without a token; the bind error otherwise.
    pub async fn bind(fs: Arc<dyn ExecutorFileSystem>, config: ServerConfig) -> io::Result<Self> {
        config.validate()?;
        if !config.listen.ip().is_loopback() && config.token.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "refusing to listen on non-loopback address {} without a token \
                     (use --token-file or CAPFS_TOKEN)",
                    config.listen
                ),
            ));
        }
        warn_about_descriptor_limit(&config);
        let listener = TcpListener::bind(config.listen).await?;
        let url = format!("ws://{}", listener.local_addr()?);
        Ok(Self {
            listener,
            fs,
            config,
            url,
        })
    }

    /// Also serves the process methods (`process/start` and the rest) with `processes`;
    /// without them every process method is `-32601`. Processes belong to their session: they
    /// outlive a connection by the session TTL and end when the server stops.
    #[must_use]
    pub fn with_processes(mut self, processes: Arc<dyn crate::process::ExecutorProcesses>) -> Self {
        self.config.processes = Some(super::ServedProcesses(processes));
        self
    }

    /// The URL clients connect to, with the port actually bound.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Serves until `shutdown` completes, then stops accepting and lets every connection finish
    /// the requests it is running, for at most the configured shutdown timeout; connections
    /// still open then are cut (their tasks dropped, their sockets closed).
    ///
    /// # Errors
    ///
    /// `TimedOut` when connections had to be cut at the shutdown deadline, saying how many.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        let handshakes = Arc::new(Semaphore::new(self.config.max_handshakes));
        let shutdown_timeout = self.config.shutdown_timeout;
        let shared = Arc::new(Shared::new(self.fs, self.config));
        let processes = shared.processes.clone();
        // `stop` asks connections to stop reading and finish; `cut` drops them where they are.
        let stop = CancellationToken::new();
        let cut = CancellationToken::new();
        let connections = TaskTracker::new();
        let threads = match shared.config.connection_threads {
            0 => None,
            count => Some(ConnectionThreads::start(
                count,
                shared.config.max_blocking,
                &connections,
                &cut,
            )?),
        };
        let mut failures = AcceptFailures::default();
        let mut next_connection_id = 0u64;
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => break,
                accepted = self.listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    if let Some(pause) = failures.record(&e) {
                        tokio::select! {
                            () = &mut shutdown => break,
                            () = tokio::time::sleep(pause) => {}
                        }
                    }
                    continue;
                }
            };
            failures.reset_pause();
            next_connection_id += 1;
            let id = next_connection_id;
            // A connection that has not finished its handshake holds a handshake slot, never a
            // connection slot; when every handshake slot is taken, the newcomer is closed at
            // once so that silent peers cannot pile up descriptors.
            let Ok(handshake) = Arc::clone(&handshakes).try_acquire_owned() else {
                tracing::debug!(connection = id, %peer, "too many handshakes in progress: closed");
                drop(stream);
                continue;
            };
            let shared = Arc::clone(&shared);
            let stop = stop.clone();
            let cut = cut.clone();
            let Some(threads) = &threads else {
                connections.spawn(async move {
                    tokio::select! {
                        () = cut.cancelled() => {}
                        served = serve_connection(shared, stream, peer, id, handshake, stop) => {
                            log_end(id, peer, served);
                        }
                    }
                });
                continue;
            };
            // The socket leaves this runtime's reactor and joins that of the thread the
            // connection runs on, when it first polls there.
            let stream = match stream.into_std() {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::debug!(connection = id, %peer, "cannot hand off: {e}");
                    continue;
                }
            };
            threads.run(connections.track_future(async move {
                let stream = match TcpStream::from_std(stream) {
                    Ok(stream) => stream,
                    Err(e) => return log_end(id, peer, Err(WsError::Io(e))),
                };
                tokio::select! {
                    () = cut.cancelled() => {}
                    served = serve_connection(shared, stream, peer, id, handshake, stop) => {
                        log_end(id, peer, served);
                    }
                }
            }));
        }
        drop(self.listener);
        tracing::info!("shutting down: finishing in-flight requests");
        stop.cancel();
        connections.close();
        // Processes end with their server, whatever their sessions' TTL.
        if let Some(processes) = processes {
            processes.shutdown().await;
        }
        if tokio::time::timeout(shutdown_timeout, connections.wait())
            .await
            .is_ok()
        {
            if let Some(threads) = threads {
                threads.finish().await;
            }
            return Ok(());
        }
        let open = connections.len();
        cut.cancel();
        connections.wait().await;
        if let Some(threads) = threads {
            threads.finish().await;
        }
        Err(shutdown_deadline_passed(shutdown_timeout, open))
    }
}

fn log_end(id: u64, peer: SocketAddr, served: Result<(), WsError>) {
    if let Err(e) = served {
        tracing::debug!(connection = id, %peer, "connection ended: {e}");
    }
}

/// Warns when `RLIMIT_NOFILE` cannot hold every connection and handshake the bounds allow:
/// the server still works, but accepts pause whenever the descriptors run out.
fn warn_about_descriptor_limit(config: &ServerConfig) {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let Some(current) = limit.current else {
        return;
    };
    let wanted = (config.max_connections + config.max_handshakes) as u64 + DESCRIPTOR_HEADROOM;
    if current < wanted {
        tracing::warn!(
            "RLIMIT_NOFILE is {current}, below --max-connections + --max-handshakes + \
             {DESCRIPTOR_HEADROOM} ({wanted}): accepts will pause while descriptors run out"
        );
    }
}

fn shutdown_deadline_passed(timeout: Duration, open: usize) -> io::Error {
    let noun = if open == 1 {
        "connection"
    } else {
        "connections"
    };
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("shutdown timeout of {timeout:?} passed: cut {open} {noun} still open"),
    )
}

/// What the accept loop remembers of its failures: when it last logged one, how many it has
/// not logged since, and how long to pause after the next one.
struct AcceptFailures {
    logged_at: Option<Instant>,
    unlogged: u64,
    pause: Duration,
}

impl Default for AcceptFailures {
    fn default() -> Self {
        Self {
            logged_at: None,
            unlogged: 0,
            pause: MIN_ACCEPT_PAUSE,
        }
    }
}

impl AcceptFailures {
    /// Logs `error` unless one was logged less than [`ACCEPT_LOG_INTERVAL`] ago (then it is
    /// counted for the next line), and returns the pause to take before accepting again: one
    /// that grows for exhausted descriptors or memory, which no retry can fix at once, and none
    /// for a failure of one connection (a peer that reset before it was accepted).
    fn record(&mut self, error: &io::Error) -> Option<Duration> {
        let exhausted = is_resource_exhaustion(error);
        let now = Instant::now();
        if self
            .logged_at
            .is_some_and(|at| now.duration_since(at) < ACCEPT_LOG_INTERVAL)
        {
            self.unlogged += 1;
        } else {
            let unlogged = std::mem::take(&mut self.unlogged);
            let every = ACCEPT_LOG_INTERVAL;
            if exhausted {
                tracing::warn!(
                    unlogged,
                    "accept failed: {error}; pausing accepts (logged at most once every {every:?})"
                );
            } else {
                tracing::warn!(
                    unlogged,
                    "accept failed: {error} (logged at most once every {every:?})"
                );
            }
            self.logged_at = Some(now);
        }
        if !exhausted {
            return None;
        }
        let pause = self.pause;
        self.pause = (self.pause * 2).min(MAX_ACCEPT_PAUSE);
        Some(pause)
    }

    fn reset_pause(&mut self) {
        self.pause = MIN_ACCEPT_PAUSE;
    }
}

/// `EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`: the process or the system is out of descriptors or
/// memory, and accepting again at once would fail the same way.
fn is_resource_exhaustion(error: &io::Error) -> bool {
    use rustix::io::Errno;
    let Some(raw) = error.raw_os_error() else {
        return false;
    };
    [Errno::MFILE, Errno::NFILE, Errno::NOBUFS, Errno::NOMEM]
        .iter()
        .any(|errno| errno.raw_os_error() == raw)
}

/// Why a handshake is refused: the HTTP status and a one-line body.
type Refusal = (StatusCode, &'static str);

fn refusal((status, body): Refusal) -> ErrorResponse {
    let mut response = ErrorResponse::new(Some(body.to_string()));
    *response.status_mut() = status;
    response
}

/// The credentials of an `Authorization` value with the `Bearer` scheme, whose name is
/// case-insensitive (RFC 9110, section 11.1); `None` for any other scheme.
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, credentials) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| credentials.trim_start_matches(' '))
}

/// True when `presented` is `token`, compared in time that depends only on their lengths.
fn token_matches(presented: &str, token: &str) -> bool {
    presented.as_bytes().ct_eq(token.as_bytes()).into()
}

/// Decides whether a handshake may proceed: no `Origin` (no browser page may drive the
/// executor), the right bearer token when one is configured.
fn check_handshake(request: &Request, token: Option<&str>) -> Result<(), Refusal> {
    if request.headers().contains_key(header::ORIGIN) {
        return Err((
            StatusCode::FORBIDDEN,
            "capfs: requests with an Origin header are refused",
        ));
    }
    if let Some(token) = token {
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_credentials)
            .unwrap_or("");
        if !token_matches(presented, token) {
            return Err((
                StatusCode::UNAUTHORIZED,
                "capfs: missing or wrong bearer token",
            ));
        }
    }
    Ok(())
}

/// Runs one accepted connection: the handshake (holding `handshake`, a handshake slot, and
/// bounded by the handshake timeout), then, once it passed every check and took a connection
/// slot, the connection itself until it ends or `stop` asks it to finish.
async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    id: u64,
    handshake: OwnedSemaphorePermit,
    stop: CancellationToken,
) -> Result<(), WsError> {
    let _ = stream.set_nodelay(true);
    let handshake_shared = Arc::clone(&shared);
    let accept = async move {
        if is_readyz_request(&peek_head(&stream).await?) {
            answer_readyz(stream).await?;
            tracing::debug!(connection = id, %peer, "answered /readyz");
            return Ok(None);
        }
        let shared = handshake_shared;
        // Taken only once the request has passed the other checks: a peer that sends half a
        // request, or the wrong token, never holds a connection slot.
        let mut permit: Option<OwnedSemaphorePermit> = None;
        let slot = &mut permit;
        let connections = Arc::clone(&shared.connections);
        let token = shared.config.token.clone();
        let audit = shared.config.audit.clone();
        // The callback's error type is tungstenite's, large as it is.
        #[allow(clippy::result_large_err)]
        let callback = move |request: &Request, response: Response| {
            let mut verdict = check_handshake(request, token.as_deref());
            if verdict.is_ok() {
                match connections.try_acquire_owned() {
                    Ok(acquired) => *slot = Some(acquired),
                    Err(_) => {
                        verdict = Err((
                            StatusCode::SERVICE_UNAVAILABLE,
                            "capfs: too many connections; try again later",
                        ));
                    }
                }
            }
            if let (Err(refused), Some(audit)) = (verdict, &audit) {
                audit::record_refused_handshake(audit, id, &peer.to_string(), refused);
            }
            verdict.map_err(refusal)?;
            Ok(response)
        };
        let config = ws_config(&shared.config);
        // Shared with the connection's writer, which writes data frames into it.
        let shared_socket = SharedSocket::new(stream);
        let socket = shared_socket.direct();
        let ws =
            tokio_tungstenite::accept_hdr_async_with_config(shared_socket, callback, Some(config))
                .await?;
        let permit = permit.expect("an accepted handshake took a connection slot");
        Ok::<_, WsError>(Some((ws, socket, permit)))
    };
    let deadline = shared.config.handshake_timeout;
    // A handshake has no request to finish: at shutdown it is dropped at once.
    let accepted = tokio::select! {
        () = stop.cancelled() => return Ok(()),
        accepted = tokio::time::timeout(deadline, accept) => accepted.map_err(|_| {
            WsError::Io(io::Error::new(
                io::ErrorKind::TimedOut,
                "no complete handshake in time",
            ))
        }),
    };
    drop(handshake);
    let Some((ws, socket, permit)) = accepted?? else {
        return Ok(());
    };
    tracing::debug!(connection = id, %peer, "connected");
    Connection::new(shared, id, peer.to_string().into())
        .run(ws, Some(socket), stop)
        .await;
    drop(permit);
    tracing::debug!(connection = id, %peer, "disconnected");
    Ok(())
}

/// The first bytes the peer sent, without consuming them.
async fn peek_head(stream: &TcpStream) -> io::Result<Vec<u8>> {
    let mut head = vec![0u8; 2048];
    let n = stream.peek(&mut head).await?;
    head.truncate(n);
    Ok(head)
}

/// True for a plain `GET /readyz` (query allowed) without an `Upgrade` header. A WebSocket
/// handshake is never one, whatever its path.
fn is_readyz_request(head: &[u8]) -> bool {
    let Some(rest) = head.strip_prefix(b"GET /readyz") else {
        return false;
    };
    if !matches!(rest.first(), Some(b' ' | b'?')) {
        return false;
    }
    !String::from_utf8_lossy(head)
        .to_ascii_lowercase()
        .contains("\nupgrade:")
}

/// Answers `GET /readyz` with 200 and closes. The request is consumed first, so the close does
/// not reset the connection under the response.
async fn answer_readyz(mut stream: TcpStream) -> io::Result<()> {
    let mut request = [0u8; 2048];
    let _ = stream.read(&mut request).await?;
    stream.write_all(READYZ_RESPONSE).await?;
    stream.shutdown().await
}

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
            processes.shutdown().await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(token_matches("secret", "secret"));
        assert!(!token_matches("secret", "secreT"));
        assert!(!token_matches("secret", "secrets"));
        assert!(!token_matches("", "x"));
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for value in [
            "Bearer t0k",
            "bearer t0k",
            "BEARER t0k",
            "bEaReR   t0k",
            " Bearer t0k ",
        ] {
            assert_eq!(bearer_credentials(value), Some("t0k"), "{value:?}");
        }
        for value in ["Basic t0k", "Bearert0k", "t0k", "", "Bearer"] {
            assert_eq!(bearer_credentials(value), None, "{value:?}");
        }
    }

    #[test]
    fn only_exhausted_resources_pause_accepts() {
        use rustix::io::Errno;
        let os = |errno: Errno| io::Error::from_raw_os_error(errno.raw_os_error());
        let mut failures = AcceptFailures::default();
        assert_eq!(failures.record(&os(Errno::MFILE)), Some(MIN_ACCEPT_PAUSE));
        assert_eq!(
            failures.record(&os(Errno::NFILE)),
            Some(MIN_ACCEPT_PAUSE * 2)
        );
        for _ in 0..20 {
            failures.record(&os(Errno::MFILE));
        }
        assert_eq!(failures.record(&os(Errno::MFILE)), Some(MAX_ACCEPT_PAUSE));
        // All but the first were counted, not logged: the interval has not passed.
        assert_eq!(failures.unlogged, 22);
        assert_eq!(failures.record(&os(Errno::CONNABORTED)), None);
        failures.reset_pause();
        assert_eq!(failures.record(&os(Errno::MFILE)), Some(MIN_ACCEPT_PAUSE));
    }
}
