//! The flags of `capfs mcp --listen`: MCP over Streamable HTTP instead of stdio, who may call
//! it and how much one client may hold.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::parse::duration;

/// Serving `capfs mcp` over HTTP.
#[derive(Args)]
pub struct Listen {
    /// Serve MCP over Streamable HTTP at URL (http://HOST:PORT/PATH, or https:// with
    /// --tls-cert and --tls-key) instead of stdio; port 0 picks a free one and the URL is the
    /// first line of stdout. Clients send a bearer token of --token-file (one a line), else
    /// CAPFS_TOKEN.
    #[arg(long, value_name = "URL")]
    pub listen: Option<String>,
    /// The certificate chain (PEM) of an https:// listener.
    #[arg(long, value_name = "FILE", requires = "listen")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of an https:// listener.
    #[arg(long, value_name = "FILE", requires = "listen")]
    pub tls_key: Option<PathBuf>,
    /// An Origin allowed to call (repeatable), as a browser sends it: scheme://host[:port].
    /// A request with any other Origin is refused (default: every request with one).
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "listen")]
    pub allow_origin: Vec<String>,
    /// A Host (host:port) clients may name besides the listener's own (repeatable): the name
    /// a non-loopback listener is reached by.
    #[arg(long = "allow-host", value_name = "HOST:PORT", requires = "listen")]
    pub allow_host: Vec<String>,
    /// An OAuth authorization server that issues the token (repeatable): published in the
    /// protected-resource metadata (RFC 9728) and named in every 401.
    #[arg(long, value_name = "URL", requires = "listen")]
    pub authorization_server: Vec<String>,
    /// Most sessions at once.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub max_sessions: usize,
    /// Most sessions at once made with one token.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub max_sessions_per_token: usize,
    /// Most open streams (requests in progress, GET streams) at once in all; each holds at most
    /// one request (16 MiB) and one reply (8 MiB), whether or not its client reads.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub max_streams: usize,
    /// Most open streams at once in the sessions of one token.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub max_streams_per_token: usize,
    /// Most open streams at once in one session.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_streams_per_session: usize,
    /// Most HTTP connections at once; one more is closed as it arrives.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_connections: usize,
    /// A session that makes no request for this long ends (seconds, or with a unit: 10m).
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = duration)]
    pub session_idle_timeout: Duration,
}
