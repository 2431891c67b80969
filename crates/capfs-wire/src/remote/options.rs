//! How to reach a server: [`RemoteOptions`], taken by every remote constructor.

use std::time::Duration;

/// Default bound on one message from the server (and on one WebSocket frame): what a
/// `capfs serve` sends at most with its default `--max-message-bytes`.
const DEFAULT_CLIENT_MAX_MESSAGE_BYTES: usize = 64 << 20;

/// How to reach a server, and the bounds the client holds it to.
///
/// Build it with [`RemoteOptions::default`] and the `with_*` methods; fields may be added, so
/// it is `#[non_exhaustive]`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use capfs_wire::RemoteOptions;
///
/// let options = RemoteOptions::default()
///     .with_call_timeout(Duration::from_secs(30))
///     .with_stream_idle_timeout(Duration::from_secs(10))
///     .with_max_message_bytes(16 << 20);
/// assert_eq!(options.call_timeout, Duration::from_secs(30));
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RemoteOptions {
    /// Sent as `Authorization: Bearer <token>` when set.
    pub token: Option<String>,
    /// Bound on the TCP connect plus the WebSocket handshake, and separately on `initialize`.
    pub connect_timeout: Duration,
    /// Sent in `initialize`.
    pub client_name: String,
    /// A PEM file of certificate authorities `wss://` trusts besides the platform's.
    pub ca_file: Option<std::path::PathBuf>,
    /// Longest a call waits for its reply; then it fails with `TimedOut`. Streamed reads and
    /// writes are bounded by [`stream_idle_timeout`](Self::stream_idle_timeout) instead.
    pub call_timeout: Duration,
    /// Longest a streamed read or write goes without progress (no data frame from the server,
    /// no room for one towards it, no final reply); then it fails with `TimedOut`.
    pub stream_idle_timeout: Duration,
    /// Longest message, and longest WebSocket frame, accepted from the server. A larger one
    /// ends the connection before it is read, and the calls waiting on it fail with
    /// `InvalidData`.
    pub max_message_bytes: usize,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        Self {
            token: None,
            connect_timeout: Duration::from_secs(10),
            client_name: format!("capfs/{}", env!("CARGO_PKG_VERSION")),
            ca_file: None,
            call_timeout: Duration::from_secs(300),
            stream_idle_timeout: Duration::from_secs(60),
            max_message_bytes: DEFAULT_CLIENT_MAX_MESSAGE_BYTES,
        }
    }
}

with_setters!(RemoteOptions {
    with_token => token: Option<String>,
    with_connect_timeout => connect_timeout: Duration,
    with_client_name => client_name: String,
    with_ca_file => ca_file: Option<std::path::PathBuf>,
    with_call_timeout => call_timeout: Duration,
    with_stream_idle_timeout => stream_idle_timeout: Duration,
    with_max_message_bytes => max_message_bytes: usize,
});
