//! How to reach a server: [`RemoteOptions`], taken by every remote constructor.

use std::time::Duration;

/// How to reach a server.
#[derive(Clone, Debug)]
pub struct RemoteOptions {
    /// Sent as `Authorization: Bearer <token>` when set.
    pub token: Option<String>,
    /// Bound on the TCP connect plus the WebSocket handshake, and separately on `initialize`.
    pub connect_timeout: Duration,
    /// Sent in `initialize`.
    pub client_name: String,
    /// A PEM file of certificate authorities `wss://` trusts besides the platform's.
    pub ca_file: Option<std::path::PathBuf>,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        Self {
            token: None,
            connect_timeout: Duration::from_secs(10),
            client_name: format!("capfs/{}", env!("CARGO_PKG_VERSION")),
            ca_file: None,
        }
    }
}
