//! `capfs serve`: the local backend behind a WebSocket endpoint.
//!
//! Transport (this file): accept, answer `GET /readyz`, check the handshake (Origin, token,
//! connection limit), then run each connection: the handshake state machine inline, fs requests
//! concurrently (bounded per connection), responses written by one writer task as they
//! complete. The handler (`handler.rs`) maps requests to trait calls; `audit.rs` writes one line
//! per request.
//!
//! Two transports carry the same WebSocket connection: TCP with the HTTP upgrade
//! ([`Server`]), and a byte stream such as stdin/stdout with RFC 6455 frames and no HTTP at all
//! ([`serve_stdio`]).

mod audit;
mod handler;
mod session;
mod stream;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{StatusCode, header};
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};

use crate::protocol::{
    CAPFS_READ_FILE_STREAM_METHOD, CAPFS_WRITE_FILE_STREAM_METHOD, DATA_FRAME_HEADER_LEN,
    ErrorObject, FS_GET_METADATA_METHOD, RequestId, SERVER_BUSY, data_frame_stream,
};
use crate::{ExecutorFileSystem, LocalFileSystem};
use audit::RequestLog;
pub use audit::{AuditLog, AuditRecord, HANDSHAKE_METHOD, OUTCOME_OK};
pub use handler::FS_METHODS;
pub use session::Session;
use session::{FsCall, Step, is_stream_method};

/// Default bound on one incoming message: 64 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// Default bound on simultaneous connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Default bound on requests running at once on one connection; further requests wait unread.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;

/// Messages queued for one connection's writer. With data frames of 256 KiB this bounds what a
/// streamed read can have in memory at 8 MiB per connection.
const OUT_QUEUE_MESSAGES: usize = 32;
/// Bound on the time from accepting a TCP connection to a completed WebSocket handshake, so a
/// peer that connects and says nothing does not hold a connection slot.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The answer to `GET /readyz`.
const READYZ_RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\
    Content-Length: 6\r\nConnection: close\r\n\r\nready\n";

/// How `capfs serve` listens and what it allows.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The address to bind (port 0 picks a free port).
    pub listen: SocketAddr,
    /// When set, every handshake must carry `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Largest incoming message in bytes.
    pub max_message_bytes: usize,
    /// Most simultaneous connections; beyond it a handshake gets HTTP 503.
    pub max_connections: usize,
    /// Most requests running at once per connection.
    pub max_in_flight: usize,
    /// Where one JSON line per request goes, when set.
    pub audit: Option<AuditLog>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            audit: None,
        }
    }
}

/// Parses a listen URL of the form `ws://HOST:PORT` (HOST an IP address or `localhost`).
///
/// # Errors
///
/// `InvalidInput` for any other form.
pub fn parse_listen_url(url: &str) -> io::Result<SocketAddr> {
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{url}: expected a listen URL like ws://127.0.0.1:0"),
        )
    };
    let rest = url.strip_prefix("ws://").ok_or_else(bad)?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let rest = rest.replacen("localhost:", "127.0.0.1:", 1);
    rest.parse().map_err(|_| bad())
}

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    fs: LocalFileSystem,
    config: ServerConfig,
    url: String,
}

impl Server {
    /// Binds the listening socket.
    ///
    /// # Errors
    ///
    /// `PermissionDenied` for a non-loopback address without a token; the bind error otherwise.
    pub async fn bind(fs: LocalFileSystem, config: ServerConfig) -> io::Result<Self> {
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
        let listener = TcpListener::bind(config.listen).await?;
        let url = format!("ws://{}", listener.local_addr()?);
        Ok(Self {
            listener,
            fs,
            config,
            url,
        })
    }

    /// The URL clients connect to, with the port actually bound.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Serves until `shutdown` completes, then stops accepting, lets every connection finish
    /// the requests it is running, and returns.
    ///
    /// # Errors
    ///
    /// Only when accepting fails in a way that is not about one connection.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        let shared = Arc::new(Shared {
            fs: self.fs,
            connections: Arc::new(Semaphore::new(self.config.max_connections)),
            config: self.config,
        });
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut connections = JoinSet::new();
        let mut next_connection_id = 0u64;
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = self.listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(accepted) => accepted,
                        Err(e) => {
                            tracing::warn!("accept failed: {e}");
                            continue;
                        }
                    };
                    next_connection_id += 1;
                    let id = next_connection_id;
                    let shared = Arc::clone(&shared);
                    let stop = stop_rx.clone();
                    connections.spawn(async move {
                        if let Err(e) = serve_connection(shared, stream, peer, id, stop).await {
                            tracing::debug!(connection = id, %peer, "connection ended: {e}");
                        }
                    });
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        drop(self.listener);
        tracing::info!("shutting down: finishing in-flight requests");
        let _ = stop_tx.send(true);
        while connections.join_next().await.is_some() {}
        Ok(())
    }
}

struct Shared {
    fs: LocalFileSystem,
    config: ServerConfig,
    connections: Arc<Semaphore>,
}

/// Compares two secrets in time that depends only on their lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Why a handshake is refused: the HTTP status and a one-line body.
type Refusal = (StatusCode, &'static str);

fn refusal((status, body): Refusal) -> ErrorResponse {
    let mut response = ErrorResponse::new(Some(body.to_string()));
    *response.status_mut() = status;
    response
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
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !constant_time_eq(presented.as_bytes(), token.as_bytes()) {
            return Err((
                StatusCode::UNAUTHORIZED,
                "capfs: missing or wrong bearer token",
            ));
        }
    }
    Ok(())
}

async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    id: u64,
    stop: watch::Receiver<bool>,
) -> Result<(), WsError> {
    let _ = stream.set_nodelay(true);
    let handshake_shared = Arc::clone(&shared);
    let handshake = async move {
        if is_readyz_request(&peek_head(&stream).await?) {
            answer_readyz(stream).await?;
            tracing::debug!(connection = id, %peer, "answered /readyz");
            return Ok(None);
        }
        let shared = handshake_shared;
        let permit = Arc::clone(&shared.connections).try_acquire_owned().ok();
        let full = permit.is_none();
        let token = shared.config.token.clone();
        let audit = shared.config.audit.clone();
        // The callback's error type is tungstenite's, large as it is.
        #[allow(clippy::result_large_err)]
        let callback = move |request: &Request, response: Response| {
            let mut verdict = check_handshake(request, token.as_deref());
            if verdict.is_ok() && full {
                verdict = Err((
                    StatusCode::SERVICE_UNAVAILABLE,
                    "capfs: too many connections; try again later",
                ));
            }
            if let (Err(refused), Some(audit)) = (verdict, &audit) {
                audit::record_refused_handshake(audit, id, &peer.to_string(), refused);
            }
            verdict.map_err(refusal)?;
            Ok(response)
        };
        let config = ws_config(&shared.config);
        let ws =
            tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(config)).await?;
        Ok::<_, WsError>(Some((ws, permit)))
    };
    let accepted = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
        .await
        .map_err(|_| {
            WsError::Io(io::Error::new(
                io::ErrorKind::TimedOut,
                "no complete handshake in time",
            ))
        })??;
    let Some((ws, permit)) = accepted else {
        return Ok(());
    };
    tracing::debug!(connection = id, %peer, "connected");
    Connection::new(shared, id, peer.to_string().into())
        .run(ws, stop)
        .await;
    drop(permit);
    tracing::debug!(connection = id, %peer, "disconnected");
    Ok(())
}

fn ws_config(config: &ServerConfig) -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(config.max_message_bytes))
        .max_frame_size(Some(config.max_message_bytes))
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
/// data frames are those of a TCP connection. Returns when stdin ends (after finishing the
/// requests in flight) or when `shutdown` completes. No token is checked: whoever can start the
/// process (over ssh, `kubectl exec`) is already trusted by that channel.
///
/// # Errors
///
/// None today; the result leaves room for transport set-up failures.
pub async fn serve_stdio(
    fs: LocalFileSystem,
    config: ServerConfig,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let io = tokio::io::join(tokio::io::stdin(), tokio::io::stdout());
    serve_byte_stream(fs, config, io, "stdio", shutdown).await
}

/// Serves exactly one connection over `io`, as [`serve_stdio`] does over stdin and stdout;
/// `peer` names the other end in logs.
///
/// # Errors
///
/// None today; the result leaves room for transport set-up failures.
pub async fn serve_byte_stream<S>(
    fs: LocalFileSystem,
    config: ServerConfig,
    io: S,
    peer: &str,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (stop_tx, stop_rx) = watch::channel(false);
    let stop_tx = Arc::new(stop_tx);
    let io = EndAsStop {
        io,
        stop: Some(Arc::clone(&stop_tx)),
    };
    let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
        io,
        Role::Server,
        Some(ws_config(&config)),
    )
    .await;
    let shared = Arc::new(Shared {
        fs,
        connections: Arc::new(Semaphore::new(1)),
        config,
    });
    let run = Connection::new(shared, 1, peer.into()).run(ws, stop_rx);
    tokio::pin!(run);
    tokio::pin!(shutdown);
    tokio::select! {
        () = &mut run => {}
        () = &mut shutdown => {
            tracing::info!("shutting down: finishing in-flight requests");
            let _ = stop_tx.send(true);
            run.await;
        }
    }
    Ok(())
}

/// A byte stream whose end of input stops the connection like a shutdown does, instead of
/// reaching tungstenite: tungstenite takes an end without a close frame for a dead connection
/// and refuses to write after it, which would lose the replies of the requests still running.
/// A client that closes its side (stdin) after its last request still gets every reply.
struct EndAsStop<S> {
    io: S,
    stop: Option<Arc<watch::Sender<bool>>>,
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for EndAsStop<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match std::pin::Pin::new(&mut this.io).poll_read(cx, buf) {
            std::task::Poll::Ready(Ok(()))
                if buf.filled().len() == before && buf.remaining() > 0 =>
            {
                if let Some(stop) = this.stop.take() {
                    let _ = stop.send(true);
                }
                // Never ready again: the connection stops reading on the signal above.
                std::task::Poll::Pending
            }
            other => other,
        }
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for EndAsStop<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

struct Connection {
    shared: Arc<Shared>,
    id: u64,
    peer: Arc<str>,
    session: Session,
    in_flight: Arc<Semaphore>,
    /// Streamed writes still expecting data frames, by stream id.
    uploads: HashMap<u64, stream::Upload>,
}

impl Connection {
    fn new(shared: Arc<Shared>, id: u64, peer: Arc<str>) -> Self {
        let in_flight = Arc::new(Semaphore::new(shared.config.max_in_flight));
        let session = Session::new(shared.config.max_message_bytes).with_roots(
            shared
                .fs
                .sandbox()
                .roots()
                .iter()
                .map(|root| crate::protocol::RootDescription {
                    path: root.path().clone(),
                    access: root.access().into(),
                })
                .collect(),
        );
        Self {
            shared,
            id,
            peer,
            session,
            in_flight,
            uploads: HashMap::new(),
        }
    }

    async fn run<S>(
        mut self,
        ws: tokio_tungstenite::WebSocketStream<S>,
        mut stop: watch::Receiver<bool>,
    ) where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (sink, mut stream) = ws.split();
        let (out_tx, out_rx) = mpsc::channel::<WsMessage>(OUT_QUEUE_MESSAGES);
        let writer = tokio::spawn(crate::ws::write_queued(sink, out_rx));
        loop {
            let incoming = tokio::select! {
                _ = stop.wait_for(|stopping| *stopping) => break,
                incoming = stream.next() => incoming,
            };
            match incoming {
                Some(Ok(WsMessage::Text(text))) => self.on_message(text.as_bytes(), &out_tx).await,
                Some(Ok(WsMessage::Binary(bytes))) => match data_frame_stream(&bytes) {
                    Some(stream_id) => {
                        let payload = bytes.slice(DATA_FRAME_HEADER_LEN..);
                        stream::route_data(&mut self.uploads, stream_id, payload).await;
                    }
                    None => self.on_message(&bytes, &out_tx).await,
                },
                Some(Ok(WsMessage::Close(_))) | None => break,
                Some(Ok(_)) => continue,
                Some(Err(WsError::Capacity(e))) => {
                    tracing::warn!(connection = self.id, "message refused: {e}");
                    let close = CloseFrame {
                        code: CloseCode::Size,
                        reason: format!(
                            "message too big: limit is {} bytes",
                            self.shared.config.max_message_bytes
                        )
                        .into(),
                    };
                    let _ = out_tx.send(WsMessage::Close(Some(close))).await;
                    break;
                }
                Some(Err(e)) => {
                    tracing::debug!(connection = self.id, "read failed: {e}");
                    break;
                }
            }
        }
        // Streamed writes still waiting for data will never get it: they fail and leave their
        // files as they were.
        self.uploads.clear();
        // Let every running request finish and queue its response before the writer closes.
        let _ = self
            .in_flight
            .acquire_many(self.shared.config.max_in_flight as u32)
            .await;
        drop(out_tx);
        let _ = writer.await;
    }

    async fn on_message(&mut self, bytes: &[u8], out: &mpsc::Sender<WsMessage>) {
        match self.session.receive(bytes) {
            Step::Reply(message) => send(out, WsMessage::text(message.to_text())).await,
            Step::Answer { request, reply } => {
                let log =
                    self.request_log(&request.method, audit::raw_paths(request.params.as_ref()));
                self.answer(out, log, request.id, reply).await;
            }
            Step::Run(call) => self.on_request(call, out).await,
            Step::Ignore => {}
        }
    }

    /// The log of a request that starts now.
    fn request_log(&self, method: &str, paths: Vec<String>) -> RequestLog {
        RequestLog {
            audit: self.shared.config.audit.clone(),
            connection: self.id,
            peer: Arc::clone(&self.peer),
            method: method.to_string(),
            paths,
            started: Instant::now(),
        }
    }

    /// Sends a reply decided here, without running the request, and logs it.
    async fn answer(
        &self,
        out: &mpsc::Sender<WsMessage>,
        log: RequestLog,
        id: RequestId,
        reply: Result<Value, ErrorObject>,
    ) {
        log.finish(&reply, 0);
        send(out, reply_message(id, reply)).await;
    }

    /// Runs a request that passed the handshake rules.
    async fn on_request(&mut self, call: FsCall, out: &mpsc::Sender<WsMessage>) {
        let FsCall { id, method, params } = call;
        let log = self.request_log(&method, audit::raw_paths(params.as_ref()));
        let is_stream = is_stream_method(&method);
        // A streamed write must not wait for a permit here: the data frames that would let the
        // running writes finish arrive behind it on this same socket. It is refused instead.
        let permit = if method == CAPFS_WRITE_FILE_STREAM_METHOD {
            match Arc::clone(&self.in_flight).try_acquire_owned() {
                Ok(permit) => permit,
                Err(_) => {
                    let message = format!(
                        "server busy: {} requests already in flight on this connection",
                        self.shared.config.max_in_flight
                    );
                    let error = ErrorObject::new(SERVER_BUSY, message);
                    self.answer(out, log, id, Err(error)).await;
                    return;
                }
            }
        } else {
            match Arc::clone(&self.in_flight).acquire_owned().await {
                Ok(permit) => permit,
                Err(_) => return,
            }
        };
        if is_stream {
            let fs = self.shared.fs.clone();
            let out = out.clone();
            if method == CAPFS_READ_FILE_STREAM_METHOD {
                stream::start_read(fs, id, params, out, permit, log);
            } else if let Err(error) = stream::start_write(
                fs,
                &mut self.uploads,
                id.clone(),
                params,
                out.clone(),
                permit,
                log.clone(),
            ) {
                self.answer(&out, log, id, Err(error)).await;
            }
            return;
        }
        let inline = method == FS_GET_METADATA_METHOD;
        let shared = Arc::clone(&self.shared);
        let out = out.clone();
        let run = async move {
            let mut outcome = handler::Outcome::default();
            let fs: &dyn ExecutorFileSystem = &shared.fs;
            let reply = handler::dispatch(fs, &method, params, &mut outcome).await;
            let log = RequestLog {
                paths: outcome.paths,
                ..log
            };
            log.finish(&reply, outcome.bytes);
            send(&out, reply_message(id, reply)).await;
            drop(permit);
        };
        // The local backend answers `getMetadata` with a few `stat` calls and no hand-off to the
        // blocking pool: cheaper to run here than to spawn. Everything else runs beside this loop.
        if inline {
            run.await;
        } else {
            tokio::spawn(run);
        }
    }
}

/// The text frame answering request `id` with `reply`.
pub(crate) fn reply_message(id: RequestId, reply: Result<Value, ErrorObject>) -> WsMessage {
    WsMessage::text(session::reply_message(id, reply).to_text())
}

pub(crate) async fn send(out: &mpsc::Sender<WsMessage>, message: WsMessage) {
    // A closed writer means the peer is gone; there is no one left to tell.
    let _ = out.send(message).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_urls() {
        assert_eq!(
            parse_listen_url("ws://127.0.0.1:0").unwrap(),
            SocketAddr::from(([127, 0, 0, 1], 0))
        );
        assert_eq!(
            parse_listen_url("ws://localhost:8080/").unwrap(),
            SocketAddr::from(([127, 0, 0, 1], 8080))
        );
        assert!(parse_listen_url("http://127.0.0.1:0").is_err());
        assert!(parse_listen_url("ws://127.0.0.1").is_err());
    }

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secrets"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
