//! How a server is configured: limits, the listen address, the WebSocket settings they imply.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::AuditLog;

/// Default bound on one incoming message: 64 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// Default bound on simultaneous connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Default bound on requests running at once on one connection; further requests wait unread.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;
/// Default bound on requests doing file-system work at once across the server (each holds at
/// most one thread of tokio's blocking pool, whose own bound is 512).
pub const DEFAULT_MAX_BLOCKING: usize = 128;
/// Default bound on requests doing file-system work at once on one connection.
pub const DEFAULT_MAX_BLOCKING_PER_CONNECTION: usize = 16;
/// Default time a streamed transfer may go without progress before it fails.
pub const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

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
    /// Most requests doing file-system work at once across the server. A request waiting for
    /// the network (a streamed write waiting for data, a streamed read waiting for the peer to
    /// read) does not count; so no thread of the blocking pool ever waits on a peer.
    pub max_blocking: usize,
    /// Most requests doing file-system work at once on one connection.
    pub max_blocking_per_connection: usize,
    /// Longest time a streamed read or write may make no progress (no data frame arriving, or
    /// the peer not reading) before it fails; a failed write leaves the file as it was.
    pub stream_idle_timeout: Duration,
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
            max_blocking: DEFAULT_MAX_BLOCKING,
            max_blocking_per_connection: DEFAULT_MAX_BLOCKING_PER_CONNECTION,
            stream_idle_timeout: DEFAULT_STREAM_IDLE_TIMEOUT,
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

pub(crate) fn ws_config(config: &ServerConfig) -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(config.max_message_bytes))
        .max_frame_size(Some(config.max_message_bytes))
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
}
