//! `capfs serve`: the local backend behind a WebSocket endpoint.
//!
//! Transport (this file): accept, check the handshake (Origin, token, connection limit), then
//! run each connection: the handshake state machine ([`Session`], `session.rs`) inline, fs
//! requests concurrently (bounded per connection), responses written by one writer task as they
//! complete. The handler (`handler.rs`) maps requests to trait calls.

mod handler;
mod session;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{StatusCode, header};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};

use crate::protocol::Message;
use crate::{ExecutorFileSystem, LocalFileSystem};
pub use handler::FS_METHODS;
pub use session::Session;
use session::Step;

/// Default bound on one incoming message: 64 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// Default bound on simultaneous connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Default bound on requests running at once on one connection; further requests wait unread.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;

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
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
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
    let permit = Arc::clone(&shared.connections).try_acquire_owned().ok();
    let full = permit.is_none();
    let token = shared.config.token.clone();
    // The callback's error type is tungstenite's, large as it is.
    #[allow(clippy::result_large_err)]
    let callback = move |request: &Request, response: Response| {
        check_handshake(request, token.as_deref()).map_err(refusal)?;
        if full {
            return Err(refusal((
                StatusCode::SERVICE_UNAVAILABLE,
                "capfs: too many connections; try again later",
            )));
        }
        Ok(response)
    };
    let ws_config = WebSocketConfig::default()
        .max_message_size(Some(shared.config.max_message_bytes))
        .max_frame_size(Some(shared.config.max_message_bytes));
    let ws =
        tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(ws_config)).await?;
    tracing::debug!(connection = id, %peer, "connected");
    Connection::new(shared, id).run(ws, stop).await;
    drop(permit);
    tracing::debug!(connection = id, %peer, "disconnected");
    Ok(())
}

struct Connection {
    shared: Arc<Shared>,
    id: u64,
    session: Session,
    in_flight: Arc<Semaphore>,
}

impl Connection {
    fn new(shared: Arc<Shared>, id: u64) -> Self {
        let in_flight = Arc::new(Semaphore::new(shared.config.max_in_flight));
        let session = Session::new(shared.config.max_message_bytes);
        Self {
            shared,
            id,
            session,
            in_flight,
        }
    }

    async fn run<S>(
        mut self,
        ws: tokio_tungstenite::WebSocketStream<S>,
        mut stop: watch::Receiver<bool>,
    ) where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (mut sink, mut stream) = ws.split();
        let (out_tx, mut out_rx) = mpsc::channel::<WsMessage>(256);
        let writer = tokio::spawn(async move {
            while let Some(message) = out_rx.recv().await {
                if sink.send(message).await.is_err() {
                    return;
                }
            }
            let _ = sink.close().await;
        });
        loop {
            let incoming = tokio::select! {
                _ = stop.wait_for(|stopping| *stopping) => break,
                incoming = stream.next() => incoming,
            };
            let bytes = match incoming {
                Some(Ok(WsMessage::Text(text))) => text.as_bytes().to_vec(),
                Some(Ok(WsMessage::Binary(bytes))) => bytes.to_vec(),
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
            };
            self.on_message(&bytes, &out_tx).await;
        }
        // Let every running request finish and queue its response before the writer closes.
        let _ = self
            .in_flight
            .acquire_many(self.shared.config.max_in_flight as u32)
            .await;
        drop(out_tx);
        let _ = writer.await;
    }

    /// Answers one incoming message: handshake and protocol errors at once, fs calls on their
    /// own task (at most `max_in_flight` at a time), each reply queued for the writer.
    async fn on_message(&mut self, bytes: &[u8], out: &mpsc::Sender<WsMessage>) {
        let call = match self.session.receive(bytes) {
            Step::Reply(message) => return send(out, message).await,
            Step::Ignore => return,
            Step::Run(call) => call,
        };
        let Ok(permit) = Arc::clone(&self.in_flight).acquire_owned().await else {
            return;
        };
        let shared = Arc::clone(&self.shared);
        let out = out.clone();
        let connection = self.id;
        tokio::spawn(async move {
            let started = Instant::now();
            let method = call.method.clone();
            let mut outcome = handler::Outcome::default();
            let fs: &dyn ExecutorFileSystem = &shared.fs;
            let reply = call.run(fs, &mut outcome).await;
            tracing::debug!(
                connection,
                method,
                paths = ?outcome.paths,
                ok = matches!(reply, Message::Response(_)),
                bytes = outcome.bytes,
                micros = started.elapsed().as_micros() as u64,
                "request"
            );
            send(&out, reply).await;
            drop(permit);
        });
    }
}

async fn send(out: &mpsc::Sender<WsMessage>, message: Message) {
    // A closed writer means the peer is gone; there is no one left to tell.
    let _ = out.send(WsMessage::text(message.to_text())).await;
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
