//! How a server is configured: limits, the listen address and the WebSocket settings they
//! imply (the parsers for command-line values are in `parse.rs`).

use std::io;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::Duration;

use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

#[cfg(doc)]
use crate::protocol::{DATA_CHUNK_BYTES, DATA_FRAME_HEADER_LEN};
use capfs::audit::AuditLog;

/// Default bound on one incoming message: 64 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// Default bound on simultaneous connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Default bound on requests running at once on one connection; further requests wait on tasks
/// of their own, up to as many again, and beyond that are answered `server busy`.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;
/// Default bound on requests doing file-system work at once across the server (each holds at
/// most one thread of tokio's blocking pool, whose own bound is 512).
pub const DEFAULT_MAX_BLOCKING: usize = 128;
/// Default bound on requests doing file-system work at once on one connection.
pub const DEFAULT_MAX_BLOCKING_PER_CONNECTION: usize = 16;
/// Default time a streamed transfer may go without progress before it fails.
pub const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default bound on how long a connection thread polls before it sleeps: a little more than a
/// client's own round trip between two calls on a machine whose idle CPUs halt.
pub const DEFAULT_POLL_BEFORE_SLEEP: Duration = Duration::from_micros(200);
/// Default bound on connections still in their handshake (accepted, not yet upgraded).
pub const DEFAULT_MAX_HANDSHAKES: usize = 64;
/// Default time a connection has from being accepted to a completed WebSocket handshake.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time a session of the current codex protocol waits for its client to reconnect.
pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(30);
/// Default time the server gives its connections to finish once asked to stop.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time a stopping server's processes get between `SIGTERM` and `SIGKILL`.
pub const DEFAULT_PROCESS_GRACE: Duration = Duration::from_secs(10);
/// Default budget for outgoing bytes across the server: 512 MiB, what replies and data frames
/// waiting for their sockets may hold together (each connection also has 1 MiB of its own).
pub const DEFAULT_MAX_OUTGOING_BYTES: u64 = 512 << 20;
/// Default share of that budget one connection may hold: 128 MiB, room for the largest
/// `fs/readFile` reply the default message limit allows (48 MiB of contents and their 64 MiB
/// of text, both held while the reply is built), so that four connections that never read
/// leave the rest of the pool to others.
pub const DEFAULT_MAX_OUTGOING_BYTES_PER_CONNECTION: u64 = 128 << 20;

/// The smallest message limit accepted: room for any request but `fs/writeFile`'s contents.
/// Below one data frame ([`DATA_CHUNK_BYTES`] + [`DATA_FRAME_HEADER_LEN`]) capfs clients'
/// streamed writes do not fit; the server still serves everything else.
const MIN_MESSAGE_BYTES: usize = 4096;
/// The largest message limit accepted: a message is held whole in memory.
const MAX_MESSAGE_BYTES: usize = 1024 * 1024 * 1024;
/// Accepted values of the connection and handshake bounds (each holds a descriptor).
const CONNECTIONS_RANGE: RangeInclusive<usize> = 1..=65_536;
/// Accepted values of the per-connection in-flight bound.
const IN_FLIGHT_RANGE: RangeInclusive<usize> = 1..=4_096;
/// Accepted values of the bounds on file work (server-wide and per connection).
const BLOCKING_RANGE: RangeInclusive<usize> = 1..=4_096;
/// `connection_threads`: 0 (the caller's runtime) up to a thread per core of a large host.
const THREADS_RANGE: RangeInclusive<usize> = 0..=1_024;
/// Accepted bounds on polling before sleeping: none up to a millisecond (a longer one costs
/// more than a wake-up it saves).
const POLL_BEFORE_SLEEP_RANGE: RangeInclusive<Duration> = Duration::ZERO..=Duration::from_millis(1);
/// Accepted stream idle timeouts.
const STREAM_IDLE_TIMEOUT_RANGE: RangeInclusive<Duration> =
    Duration::from_millis(10)..=Duration::from_secs(86_400);
/// Accepted handshake timeouts.
const HANDSHAKE_TIMEOUT_RANGE: RangeInclusive<Duration> =
    Duration::from_millis(100)..=Duration::from_secs(300);
/// Accepted session TTLs.
const SESSION_TTL_RANGE: RangeInclusive<Duration> =
    Duration::from_millis(1)..=Duration::from_secs(86_400);
/// Accepted outgoing budgets, server-wide and per connection: at least a few frames' worth, at
/// most what one host could hold.
const OUTGOING_RANGE: RangeInclusive<u64> = (1 << 20)..=(1 << 40);
/// Accepted shutdown timeouts.
const SHUTDOWN_TIMEOUT_RANGE: RangeInclusive<Duration> =
    Duration::from_millis(100)..=Duration::from_secs(3_600);

/// How `capfs serve` listens and what it allows. [`ServerConfig::validate`] says which values
/// are accepted; the server checks them before it binds or serves.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The address to bind (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Where `GET /healthz`, `/readyz` and `/metrics` are answered, when not on `listen`
    /// itself (the default, beside the WebSocket upgrade).
    pub admin_listen: Option<SocketAddr>,
    /// When set, every handshake must carry `Authorization: Bearer <token>` (the scheme in any
    /// case).
    pub token: Option<String>,
    /// Largest incoming message in bytes.
    pub max_message_bytes: usize,
    /// Most simultaneous connections past their handshake; beyond it a handshake that passes
    /// the other checks gets HTTP 503.
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
    /// Most connections still in their handshake, counted apart from `max_connections` so that
    /// peers that never finish one cannot take the slots of clients that did. Beyond it a new
    /// connection is closed as soon as it is accepted.
    pub max_handshakes: usize,
    /// Time from accepting a connection to a completed WebSocket handshake; a slower peer is
    /// dropped.
    pub handshake_timeout: Duration,
    /// Time connections get to finish their running requests once the server is asked to stop;
    /// after it they are cut and the server reports how many.
    pub shutdown_timeout: Duration,
    /// Time a stopping server's processes get between `SIGTERM` and `SIGKILL`, at most
    /// `shutdown_timeout` (a longer one is cut to it).
    pub process_grace: Duration,
    /// Threads that run connections, each a `current_thread` runtime; a connection and every
    /// task it spawns stay on one of them. Their blocking pools share `max_blocking` + 16
    /// threads, split evenly. 0 (the default) runs connections on the runtime that calls
    /// [`Server::run_until`](super::Server::run_until). `capfs serve` uses one per core.
    pub connection_threads: usize,
    /// Longest a connection thread polls for work before it sleeps (`docs/DESIGN.md` §7): a
    /// call that arrives within it is served without waking a sleeping CPU. The window adapts,
    /// down to none while calls come seldom. Zero never polls; it has no effect without
    /// `connection_threads`.
    pub poll_before_sleep: Duration,
    /// How long a session outlives its connection: a client that reconnects within it with
    /// `resumeSessionId` gets the session back.
    pub session_ttl: Duration,
    /// Most bytes replies and data frames may hold across the server between being built (or
    /// read from disk) and being written to their sockets; each is reserved before it is built
    /// and given back once written. Each connection also has 1 MiB of its own besides.
    pub max_outgoing_bytes: u64,
    /// Most of `max_outgoing_bytes` one connection may hold: a peer that does not read stalls
    /// its own requests once it holds this much. A reply larger than this fails at once.
    pub max_outgoing_bytes_per_connection: u64,
    /// Most processes running at once across the server (when it serves processes); a start
    /// beyond it is refused at once.
    pub max_processes: usize,
    /// Most processes running at once in one session (a connection and its resumes).
    pub max_processes_per_connection: usize,
    /// Where one JSON line per request goes, when set.
    pub audit: Option<AuditLog>,
    /// The processes the server starts for `process/start`, when it serves them; without
    /// them every process method is `-32601`.
    pub processes: Option<ServedProcesses>,
    /// A check of its own `GET /readyz` runs (on the blocking pool) besides the server's:
    /// what only the caller knows, such as the identity it acts as and its roots' paths.
    pub readiness: Option<Readiness>,
}

with_setters!(ServerConfig {
    with_listen => listen: SocketAddr,
    with_admin_listen => admin_listen: Option<SocketAddr>,
    with_token => token: Option<String>,
    with_max_message_bytes => max_message_bytes: usize,
    with_max_connections => max_connections: usize,
    with_max_in_flight => max_in_flight: usize,
    with_max_blocking => max_blocking: usize,
    with_max_blocking_per_connection => max_blocking_per_connection: usize,
    with_stream_idle_timeout => stream_idle_timeout: Duration,
    with_max_handshakes => max_handshakes: usize,
    with_handshake_timeout => handshake_timeout: Duration,
    with_shutdown_timeout => shutdown_timeout: Duration,
    with_process_grace => process_grace: Duration,
    with_connection_threads => connection_threads: usize,
    with_poll_before_sleep => poll_before_sleep: Duration,
    with_session_ttl => session_ttl: Duration,
    with_max_outgoing_bytes => max_outgoing_bytes: u64,
    with_max_outgoing_bytes_per_connection => max_outgoing_bytes_per_connection: u64,
    with_max_processes => max_processes: usize,
    with_max_processes_per_connection => max_processes_per_connection: usize,
    with_audit => audit: Option<AuditLog>,
    with_processes => processes: Option<ServedProcesses>,
    with_readiness => readiness: Option<Readiness>,
});

/// A readiness check of the caller's: `Ok` when the server can serve as far as it knows; the
/// error (logged, never answered) says why not.
#[derive(Clone)]
pub struct Readiness(pub std::sync::Arc<dyn Fn() -> io::Result<()> + Send + Sync>);

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Readiness")
    }
}

/// The processes a server serves: any [`ExecutorProcesses`](capfs::process::ExecutorProcesses).
#[derive(Clone)]
pub struct ServedProcesses(pub std::sync::Arc<dyn capfs::process::ExecutorProcesses>);

impl std::fmt::Debug for ServedProcesses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ServedProcesses")
            .field(&self.0.confinement())
            .finish()
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_listen: None,
            token: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            max_blocking: DEFAULT_MAX_BLOCKING,
            max_blocking_per_connection: DEFAULT_MAX_BLOCKING_PER_CONNECTION,
            stream_idle_timeout: DEFAULT_STREAM_IDLE_TIMEOUT,
            max_handshakes: DEFAULT_MAX_HANDSHAKES,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            process_grace: DEFAULT_PROCESS_GRACE,
            connection_threads: 0,
            poll_before_sleep: DEFAULT_POLL_BEFORE_SLEEP,
            session_ttl: DEFAULT_SESSION_TTL,
            max_outgoing_bytes: DEFAULT_MAX_OUTGOING_BYTES,
            max_outgoing_bytes_per_connection: DEFAULT_MAX_OUTGOING_BYTES_PER_CONNECTION,
            max_processes: super::DEFAULT_MAX_PROCESSES,
            max_processes_per_connection: super::DEFAULT_MAX_PROCESSES_PER_CONNECTION,
            audit: None,
            processes: None,
            readiness: None,
        }
    }
}

/// Processes a server may run at once.
const PROCESSES_RANGE: std::ops::RangeInclusive<usize> = 1..=65_536;

impl ServerConfig {
    /// Checks every limit against the range the server accepts: no zero, nothing so large that
    /// it stops being a bound.
    ///
    /// # Errors
    ///
    /// `InvalidInput` naming the first value out of range (by its `capfs serve` flag), the
    /// value and the accepted range; `InvalidInput` for an empty token.
    pub fn validate(&self) -> io::Result<()> {
        check_in(
            "--max-message-bytes",
            self.max_message_bytes,
            &(MIN_MESSAGE_BYTES..=MAX_MESSAGE_BYTES),
        )?;
        check_in(
            "--max-connections",
            self.max_connections,
            &CONNECTIONS_RANGE,
        )?;
        check_in("--max-in-flight", self.max_in_flight, &IN_FLIGHT_RANGE)?;
        check_in("--max-handshakes", self.max_handshakes, &CONNECTIONS_RANGE)?;
        check_duration(
            "--handshake-timeout",
            self.handshake_timeout,
            &HANDSHAKE_TIMEOUT_RANGE,
        )?;
        check_duration(
            "--shutdown-timeout",
            self.shutdown_timeout,
            &SHUTDOWN_TIMEOUT_RANGE,
        )?;
        check_duration(
            "--process-grace",
            self.process_grace,
            &SHUTDOWN_TIMEOUT_RANGE,
        )?;
        check_in("--max-blocking", self.max_blocking, &BLOCKING_RANGE)?;
        check_in("--threads", self.connection_threads, &THREADS_RANGE)?;
        check_duration(
            "--poll-before-sleep",
            self.poll_before_sleep,
            &POLL_BEFORE_SLEEP_RANGE,
        )?;
        check_in(
            "--max-blocking-per-connection",
            self.max_blocking_per_connection,
            &BLOCKING_RANGE,
        )?;
        check_duration(
            "--stream-idle-timeout",
            self.stream_idle_timeout,
            &STREAM_IDLE_TIMEOUT_RANGE,
        )?;
        check_duration("--session-ttl", self.session_ttl, &SESSION_TTL_RANGE)?;
        check_in(
            "--max-outgoing-bytes",
            self.max_outgoing_bytes,
            &OUTGOING_RANGE,
        )?;
        let share_range = *OUTGOING_RANGE.start()..=self.max_outgoing_bytes;
        check_in(
            "--max-outgoing-bytes-per-connection",
            self.max_outgoing_bytes_per_connection,
            &share_range,
        )?;
        check_in("--max-processes", self.max_processes, &PROCESSES_RANGE)?;
        check_in(
            "--max-processes-per-connection",
            self.max_processes_per_connection,
            &(1..=self.max_processes.max(1)),
        )?;
        if self.token.as_deref().is_some_and(str::is_empty) {
            return Err(crate::error::empty_token());
        }
        Ok(())
    }
}

/// Refuses `value` outside `range`, naming `flag` and the range, for every integer limit.
fn check_in<T: PartialOrd + std::fmt::Display>(
    flag: &str,
    value: T,
    range: &RangeInclusive<T>,
) -> io::Result<()> {
    if range.contains(&value) {
        return Ok(());
    }
    Err(crate::error::out_of_range(
        flag,
        value,
        range.start(),
        range.end(),
    ))
}

fn check_duration(flag: &str, value: Duration, range: &RangeInclusive<Duration>) -> io::Result<()> {
    if range.contains(&value) {
        return Ok(());
    }
    Err(crate::error::out_of_range(
        flag,
        format_args!("{value:?}"),
        format_args!("{:?}", range.start()),
        format_args!("{:?}", range.end()),
    ))
}

pub(crate) fn ws_config(config: &ServerConfig) -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(crate::transport::shared::READ_BUFFER_BYTES)
        .max_message_size(Some(config.max_message_bytes))
        .max_frame_size(Some(config.max_message_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid() {
        ServerConfig::default().validate().unwrap();
    }

    #[test]
    fn zero_and_absurd_limits_are_refused_by_name() {
        type Change = fn(&mut ServerConfig);
        let cases: [(Change, &str); 20] = [
            (|c| c.max_outgoing_bytes = 0, "--max-outgoing-bytes 0:"),
            (|c| c.max_outgoing_bytes = u64::MAX, "--max-outgoing-bytes"),
            (
                |c| c.max_outgoing_bytes_per_connection = c.max_outgoing_bytes + 1,
                "--max-outgoing-bytes-per-connection 536870913: must be from 1048576 to 536870912",
            ),
            (|c| c.max_blocking = 0, "--max-blocking 0:"),
            (
                |c| c.connection_threads = 5_000,
                "--threads 5000: must be from 0 to 1024",
            ),
            (
                |c| c.poll_before_sleep = Duration::from_millis(2),
                "--poll-before-sleep 2ms: must be from 0ns to 1ms",
            ),
            (
                |c| c.max_blocking_per_connection = 0,
                "--max-blocking-per-connection 0:",
            ),
            (
                |c| c.stream_idle_timeout = Duration::ZERO,
                "--stream-idle-timeout 0ns:",
            ),
            (
                |c| c.max_in_flight = 0,
                "--max-in-flight 0: must be from 1 to 4096",
            ),
            (|c| c.max_in_flight = 1 << 40, "--max-in-flight"),
            (|c| c.max_connections = 0, "--max-connections 0:"),
            (|c| c.max_connections = usize::MAX, "--max-connections"),
            (|c| c.max_handshakes = 0, "--max-handshakes 0:"),
            (|c| c.max_message_bytes = 0, "--max-message-bytes 0:"),
            (|c| c.max_message_bytes = 1024, "--max-message-bytes 1024:"),
            (|c| c.max_message_bytes = usize::MAX, "--max-message-bytes"),
            (
                |c| c.handshake_timeout = Duration::ZERO,
                "--handshake-timeout 0ns:",
            ),
            (
                |c| c.handshake_timeout = Duration::from_secs(86_400),
                "--handshake-timeout",
            ),
            (
                |c| c.shutdown_timeout = Duration::ZERO,
                "--shutdown-timeout 0ns:",
            ),
            (|c| c.token = Some(String::new()), "the token is empty"),
        ];
        for (change, message) in cases {
            let mut config = ServerConfig::default();
            change(&mut config);
            let err = config.validate().unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            assert!(err.to_string().starts_with(message), "{err} vs {message}");
        }
        let mut smallest = ServerConfig {
            max_message_bytes: MIN_MESSAGE_BYTES,
            max_connections: 1,
            max_in_flight: 1,
            max_handshakes: 1,
            ..ServerConfig::default()
        };
        smallest.validate().unwrap();
        smallest.shutdown_timeout = Duration::from_millis(100);
        smallest.validate().unwrap();
    }
}
