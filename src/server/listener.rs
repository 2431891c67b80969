//! Accepting connections: the TCP listener with its handshake checks (Origin, token, connection
//! limit) and `GET /readyz`, and the single connection served over a byte stream such as
//! stdin/stdout.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{StatusCode, header};
use tokio_tungstenite::tungstenite::protocol::Role;

use super::audit;
use super::config::{ServerConfig, ws_config};
use super::connection::{Connection, Shared};
use crate::LocalFileSystem;
use crate::transport::stdio::EndAsStop;

/// Bound on the time from accepting a TCP connection to a completed WebSocket handshake, so a
/// peer that connects and says nothing does not hold a connection slot.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The answer to `GET /readyz`.
const READYZ_RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\
    Content-Length: 6\r\nConnection: close\r\n\r\nready\n";

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secrets"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
