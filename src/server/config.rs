//! How a server is configured: limits, the listen address, the WebSocket settings they imply.

use std::io;
use std::net::SocketAddr;

use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::AuditLog;

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
