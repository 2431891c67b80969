//! The flags of `capfs serve`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::exec_flags::ExecFlags;
use crate::parse::{duration, size};

#[derive(Args)]
pub struct ServeArgs {
    /// A read-write sandbox root (repeatable).
    #[arg(long, value_name = "DIR", required_unless_present = "read_only")]
    pub root: Vec<PathBuf>,
    /// A read-only sandbox root (repeatable).
    #[arg(long = "read-only", value_name = "DIR")]
    pub read_only: Vec<PathBuf>,
    /// A file holding the bearer token clients must send (else the CAPFS_TOKEN environment
    /// variable).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Address to listen on (ws://HOST:PORT), or `stdio` for one connection on stdin/stdout.
    /// GET /healthz, /readyz and /metrics (with the token) are answered on it too, unless
    /// --admin-listen moves them.
    #[arg(long, default_value = "ws://127.0.0.1:0")]
    pub listen: String,
    /// Append one JSON line per request to FILE (`-` for stderr).
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// Largest incoming message (bytes; suffixes K, M, G).
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = size)]
    pub max_message_bytes: u64,
    /// Most simultaneous connections past their handshake.
    #[arg(long, value_name = "N", default_value_t = capfs_wire::server::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Most requests running at once per connection.
    #[arg(long, value_name = "N", default_value_t = capfs_wire::server::DEFAULT_MAX_IN_FLIGHT)]
    pub max_in_flight: usize,
    /// Most connections still in their handshake, apart from --max-connections.
    #[arg(long, value_name = "N", default_value_t = capfs_wire::server::DEFAULT_MAX_HANDSHAKES)]
    pub max_handshakes: usize,
    /// Time a connection has to complete its handshake (seconds, or with a unit: 500ms, 10s).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration)]
    pub handshake_timeout: Duration,
    /// Answer GET /healthz, /readyz and /metrics on this address (http://HOST:PORT) instead of
    /// beside the WebSocket upgrade on --listen; an address other than loopback needs a token.
    #[arg(long, value_name = "URL", value_parser = crate::parse::admin_listen)]
    pub admin_listen: Option<std::net::SocketAddr>,
    /// The drain's deadline: at SIGTERM or SIGINT the server stops taking sessions, /readyz
    /// answers 503, requests in flight finish, connections are closed (1001) and processes
    /// end; whatever is still open after this is cut and the exit status is 1. A second signal
    /// cuts at once (exit status 1).
    #[arg(
        long,
        visible_alias = "drain-timeout",
        value_name = "DURATION",
        default_value = "30s",
        value_parser = duration
    )]
    pub shutdown_timeout: Duration,
    /// Time processes get between SIGTERM and SIGKILL when the server stops (at most
    /// --shutdown-timeout).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub process_grace: Duration,
    /// Most requests doing file-system work at once across the server.
    #[arg(long, value_name = "N", default_value_t = capfs_wire::server::DEFAULT_MAX_BLOCKING)]
    pub max_blocking: usize,
    /// Most requests doing file-system work at once on one connection.
    #[arg(
        long,
        value_name = "N",
        default_value_t = capfs_wire::server::DEFAULT_MAX_BLOCKING_PER_CONNECTION
    )]
    pub max_blocking_per_connection: usize,
    /// Threads that serve connections, each connection staying on one; 0 serves them all on
    /// the accepting thread [default: one per core].
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Longest a connection thread polls for the next call before it sleeps (up to 1ms; 0:
    /// never): calls made one after another are then answered without waiting for a sleeping
    /// CPU to wake. The window adapts, down to none while calls come seldom.
    #[arg(long, value_name = "DURATION", default_value = "200us", value_parser = duration)]
    pub poll_before_sleep: Duration,
    /// Time a streamed read or write may make no progress before it fails (seconds, or with a
    /// unit: 500ms, 2m).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration)]
    pub stream_idle_timeout: Duration,
    /// How long a session outlives its connection: a codex client that reconnects within it
    /// (`resumeSessionId`) gets its session back.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration)]
    pub session_ttl: Duration,
    /// Largest file a whole-file read (fs/readFile) returns (bytes; suffixes K, M, G);
    /// streamed reads are not bound by it.
    #[arg(long, value_name = "SIZE", default_value = "512M", value_parser = size)]
    pub read_limit: u64,
    /// Most bytes replies and data frames may hold across the server until their sockets take
    /// them (suffixes K, M, G); each connection also has 1 MiB of its own.
    #[arg(long, value_name = "SIZE", default_value = "512M", value_parser = size)]
    pub max_outgoing_bytes: u64,
    /// Most of that one connection may hold; a larger reply fails at once (suffixes K, M, G).
    #[arg(long, value_name = "SIZE", default_value = "128M", value_parser = size)]
    pub max_outgoing_bytes_per_connection: u64,
    /// The one user (and group; else the same number) everything the agent causes acts as,
    /// its files and its processes. Served as root, the server becomes that user once it has
    /// bound its address and opened its roots. Default: the owner of the read-write roots (as
    /// root), or the server's own user.
    #[arg(long, alias = "exec-user", value_name = "UID[:GID]", value_parser = crate::exec_flags::parse_user)]
    pub user: Option<(u32, u32)>,
    /// The umask of every file and directory the server and its processes create (octal).
    #[arg(long, value_name = "MASK", default_value = "022", value_parser = crate::identity::parse_umask)]
    pub umask: u32,
    /// Processes: --exec and its policy.
    #[command(flatten)]
    pub exec: ExecFlags,
}

impl ServeArgs {
    /// Threads that run the connections: none (the command's own runtime) for a stdio
    /// server's one connection and for `--threads 0`, else `--threads` or one per core.
    pub fn connection_threads(&self) -> usize {
        if self.listen == "stdio" {
            return 0;
        }
        self.threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        })
    }
}
