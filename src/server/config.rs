//! How a server is configured: limits, the listen address, the WebSocket settings they imply,
//! and the parsers for the sizes and durations `capfs serve` takes on its command line.

use std::io;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::Duration;

use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::AuditLog;
#[cfg(doc)]
use crate::protocol::{DATA_CHUNK_BYTES, DATA_FRAME_HEADER_LEN};

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
/// Default bound on connections still in their handshake (accepted, not yet upgraded).
pub const DEFAULT_MAX_HANDSHAKES: usize = 64;
/// Default time a connection has from being accepted to a completed WebSocket handshake.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time a session of the current codex protocol waits for its client to reconnect.
pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(30);
/// Default time the server gives its connections to finish once asked to stop.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

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
/// Accepted stream idle timeouts.
const STREAM_IDLE_TIMEOUT_RANGE: RangeInclusive<Duration> =
    Duration::from_millis(10)..=Duration::from_secs(86_400);
/// Accepted handshake timeouts.
const HANDSHAKE_TIMEOUT_RANGE: RangeInclusive<Duration> =
    Duration::from_millis(100)..=Duration::from_secs(300);
/// Accepted session TTLs.
const SESSION_TTL_RANGE: RangeInclusive<Duration> =
    Duration::from_millis(1)..=Duration::from_secs(86_400);
/// Accepted shutdown timeouts.
const SHUTDOWN_TIMEOUT_RANGE: RangeInclusive<Duration> =
    Duration::from_millis(100)..=Duration::from_secs(3_600);

/// How `capfs serve` listens and what it allows. [`ServerConfig::validate`] says which values
/// are accepted; the server checks them before it binds or serves.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The address to bind (port 0 picks a free port).
    pub listen: SocketAddr,
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
    /// Threads that run connections, each a `current_thread` runtime; a connection and every
    /// task it spawns stay on one of them. Their blocking pools share `max_blocking` + 16
    /// threads, split evenly. 0 (the default) runs connections on the runtime that calls
    /// [`Server::run_until`](super::Server::run_until). `capfs serve` uses one per core.
    pub connection_threads: usize,
    /// How long a session outlives its connection: a client that reconnects within it with
    /// `resumeSessionId` gets the session back.
    pub session_ttl: Duration,
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
            max_handshakes: DEFAULT_MAX_HANDSHAKES,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            connection_threads: 0,
            session_ttl: DEFAULT_SESSION_TTL,
            audit: None,
        }
    }
}

impl ServerConfig {
    /// Checks every limit against the range the server accepts: no zero, nothing so large that
    /// it stops being a bound.
    ///
    /// # Errors
    ///
    /// `InvalidInput` naming the first value out of range (by its `capfs serve` flag), the
    /// value and the accepted range; `InvalidInput` for an empty token.
    pub fn validate(&self) -> io::Result<()> {
        check_usize(
            "--max-message-bytes",
            self.max_message_bytes,
            &(MIN_MESSAGE_BYTES..=MAX_MESSAGE_BYTES),
        )?;
        check_usize(
            "--max-connections",
            self.max_connections,
            &CONNECTIONS_RANGE,
        )?;
        check_usize("--max-in-flight", self.max_in_flight, &IN_FLIGHT_RANGE)?;
        check_usize("--max-handshakes", self.max_handshakes, &CONNECTIONS_RANGE)?;
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
        check_usize("--max-blocking", self.max_blocking, &BLOCKING_RANGE)?;
        check_usize("--threads", self.connection_threads, &THREADS_RANGE)?;
        check_usize(
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
        if self.token.as_deref().is_some_and(str::is_empty) {
            return Err(invalid_config("the token is empty".to_string()));
        }
        Ok(())
    }
}

fn invalid_config(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

fn check_usize(flag: &str, value: usize, range: &RangeInclusive<usize>) -> io::Result<()> {
    if range.contains(&value) {
        return Ok(());
    }
    Err(invalid_config(format!(
        "{flag} {value}: must be from {} to {}",
        range.start(),
        range.end()
    )))
}

fn check_duration(flag: &str, value: Duration, range: &RangeInclusive<Duration>) -> io::Result<()> {
    if range.contains(&value) {
        return Ok(());
    }
    Err(invalid_config(format!(
        "{flag} {value:?}: must be from {:?} to {:?}",
        range.start(),
        range.end()
    )))
}

/// Parses a size in bytes: a whole number, optionally followed by a binary unit `K`, `M`, `G`
/// or `T` (also written `KB`/`KiB` and so on, any case; each is a power of 1024) or `B`.
/// `64M` is 67,108,864 bytes; `4096` and `4096B` are 4,096.
///
/// # Errors
///
/// `InvalidInput` for anything else (empty, negative, fractional, an unknown unit) and for a
/// size that does not fit in 64 bits.
///
/// # Examples
///
/// ```
/// use capfs::server::parse_size;
///
/// assert_eq!(parse_size("512K").unwrap(), 512 * 1024);
/// assert_eq!(parse_size("1G").unwrap(), 1 << 30);
/// assert_eq!(parse_size("100").unwrap(), 100);
/// assert!(parse_size("1.5G").is_err());
/// ```
pub fn parse_size(text: &str) -> io::Result<u64> {
    let bad = || {
        invalid_config(format!(
            "{text}: not a size: expected bytes with an optional K, M, G or T suffix, like 64M"
        ))
    };
    let trimmed = text.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits_end);
    if number.is_empty() {
        return Err(bad());
    }
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad()),
    };
    let number: u64 = number.parse().map_err(|_| bad())?;
    number.checked_mul(1u64 << shift).ok_or_else(bad)
}

/// Parses a duration: a whole number of seconds (`30`), or a number with units as in `500ms`,
/// `10s`, `2m`, `1h 30m`.
///
/// # Errors
///
/// `InvalidInput` for anything else.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use capfs::server::parse_duration;
///
/// assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
/// assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
/// assert!(parse_duration("soon").is_err());
/// ```
pub fn parse_duration(text: &str) -> io::Result<Duration> {
    let trimmed = text.trim();
    if let Ok(seconds) = trimmed.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    let bad = || {
        invalid_config(format!(
            "{text}: not a duration: expected seconds or a number with a unit, like 500ms or 10s"
        ))
    };
    let parsed: jiff::SignedDuration = trimmed.parse().map_err(|_| bad())?;
    Duration::try_from(parsed).map_err(|_| bad())
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

    #[test]
    fn sizes_take_binary_suffixes() {
        let cases = [
            ("0", 0),
            ("4096", 4096),
            ("4096B", 4096),
            ("512K", 512 << 10),
            ("512kib", 512 << 10),
            ("64M", 64 << 20),
            ("64MB", 64 << 20),
            ("1G", 1 << 30),
            (" 2g ", 2 << 30),
            ("3T", 3 << 40),
        ];
        for (text, bytes) in cases {
            assert_eq!(parse_size(text).unwrap(), bytes, "{text}");
        }
        for bad in [
            "",
            "M",
            "-1",
            "1.5G",
            "1 G",
            "12X",
            "1e6",
            "99999999999999999999",
            "16777216T",
        ] {
            let err = parse_size(bad).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad}");
            assert!(
                err.to_string().starts_with(&format!("{bad}: not a size")),
                "{err}"
            );
        }
    }

    #[test]
    fn durations_take_seconds_or_units() {
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1m 30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7_200));
        for bad in ["", "-1", "-5s", "10 parsecs", "s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_defaults_are_valid() {
        ServerConfig::default().validate().unwrap();
    }

    #[test]
    fn zero_and_absurd_limits_are_refused_by_name() {
        type Change = fn(&mut ServerConfig);
        let cases: [(Change, &str); 16] = [
            (|c| c.max_blocking = 0, "--max-blocking 0:"),
            (
                |c| c.connection_threads = 5_000,
                "--threads 5000: must be from 0 to 1024",
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
