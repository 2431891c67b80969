//! The audit log: one JSON line per request, for operators and security reviewers.
//!
//! A line holds the time, the connection and its peer, the method, the paths it named (each
//! once, as sent), the outcome (`ok` or the `io::ErrorKind` name), whether it was a denial, the
//! bytes moved and the duration. It never holds file contents or the token. Every text field is
//! bounded where the line is serialised, whoever built the record: a peer cannot make a line
//! longer than a few kilobytes, whatever it sends.
//!
//! Lines are formatted off the lock and written whole under one mutex into a line-buffered
//! writer, so concurrent requests never interleave partial lines; a line reaches the kernel as
//! soon as it is complete (one `write(2)`, no `fsync`), so it survives a crash of the server.

use std::fmt;
use std::fs::OpenOptions;
use std::io::{self, LineWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::Value;

mod bounds;

pub(crate) use bounds::{cut, note_paths, sent_paths};

use serde::Serialize;

use crate::protocol::{ErrorObject, error_kind_name};
use capfs::terminal::TerminalSafe;

/// The outcome of a request that succeeded.
pub const OUTCOME_OK: &str = "ok";
/// Where audit lines go. Cloning gives another handle on the same writer.
#[derive(Clone)]
pub struct AuditLog {
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AuditLog")
    }
}

impl AuditLog {
    /// Appends to `path` (created with mode 0600 when missing), or writes to stderr for `-`.
    ///
    /// # Errors
    ///
    /// The error of opening `path`.
    pub fn open(path: &Path) -> io::Result<Self> {
        if path == Path::new("-") {
            return Ok(Self::to_writer(io::stderr()));
        }
        use std::os::unix::fs::OpenOptionsExt;
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| crate::error::prefixed(path.display(), &e))?;
        Ok(Self::to_writer(file))
    }

    /// Writes lines to `writer`, each flushed as soon as it is complete.
    pub fn to_writer(writer: impl Write + Send + 'static) -> Self {
        Self {
            writer: Arc::new(Mutex::new(Box::new(LineWriter::new(writer)))),
        }
    }

    /// Writes one record as one line. A failing writer is reported in the tracing log; the
    /// request itself is not failed by it.
    pub fn record(&self, record: &AuditRecord<'_>) {
        self.write_line(record);
    }

    /// Writes any bounded record (a process's start or end) as one line, as [`record`] does.
    ///
    /// [`record`]: Self::record
    pub(crate) fn write_line(&self, record: &impl Serialize) {
        // Written for a terminal too (`--audit-log -`): the characters a terminal would act
        // on are escaped as `\uXXXX`, C1 and bidirectional controls included.
        let mut line = Vec::with_capacity(256);
        let mut json = serde_json::Serializer::with_formatter(&mut line, TerminalSafe::compact());
        record
            .serialize(&mut json)
            .expect("audit records always serialize");
        line.push(b'\n');
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = writer.write_all(&line) {
            tracing::warn!("writing the audit log failed: {e}");
        }
    }
}

/// One audit line. Field names are the documented format (docs/operating.md, "Audit log"). Serialising
/// it bounds every text field: at most 1,000 characters each (200 for `error`),
/// at most 8 paths, a longer text cut with `…[cut N bytes]` at its end.
#[derive(Debug)]
pub struct AuditRecord<'a> {
    /// UTC, RFC 3339 with milliseconds: `2026-01-31T12:00:00.123Z`.
    time: String,
    /// Numbered from 1 per server process.
    connection: u64,
    /// `IP:PORT` of the peer, or `stdio`.
    peer: &'a str,
    /// The request's method, or [`HANDSHAKE_METHOD`] for a refused handshake.
    method: &'a str,
    /// The paths the request named, each once, as sent (a link's target included).
    paths: &'a [String],
    /// `ok`, or the `io::ErrorKind` name of the failure (`PermissionDenied`, `NotFound`, ...).
    outcome: &'a str,
    /// True exactly when the outcome is `PermissionDenied`: an escape, a path under no root,
    /// or a mutation under a read-only root.
    denied: bool,
    /// The JSON-RPC error code, for failures.
    code: Option<i64>,
    /// The error message (written cut to 200 characters), for failures.
    error: Option<String>,
    /// File bytes read or written.
    bytes: u64,
    /// Time from reading the request to queueing its reply, in microseconds.
    micros: u64,
}

impl<'a> AuditRecord<'a> {
    /// A record of a request that ended with `reply`.
    pub(crate) fn new(
        connection: u64,
        peer: &'a str,
        method: &'a str,
        paths: &'a [String],
        reply: &Result<Value, ErrorObject>,
        bytes: u64,
        elapsed: Duration,
    ) -> Self {
        let (outcome, code, error) = match reply {
            Ok(_) => (OUTCOME_OK, None, None),
            Err(e) => {
                let kind = error_kind_name(e.clone().into_io().kind());
                (kind, Some(e.code), Some(e.message.clone()))
            }
        };
        Self::with_outcome(
            (connection, peer, method, paths),
            (outcome, code, error),
            bytes,
            elapsed,
        )
    }

    /// A record of a call a caller made on a file system itself, without a server between
    /// (`capfs mcp` over a local one): its line reads as `capfs serve`'s for the same request.
    /// `bytes` are the file bytes the call read or wrote.
    pub fn of_call(
        connection: u64,
        peer: &'a str,
        method: &'a str,
        paths: &'a [String],
        result: Result<(), &io::Error>,
        bytes: u64,
        elapsed: Duration,
    ) -> Self {
        let (outcome, code, error) = match result {
            Ok(()) => (OUTCOME_OK, None, None),
            Err(e) => {
                // Cut with a marker when the line is written, as the server cuts its own.
                let reply = ErrorObject::from_io(e);
                (
                    error_kind_name(e.kind()),
                    Some(reply.code),
                    Some(reply.message),
                )
            }
        };
        Self::with_outcome(
            (connection, peer, method, paths),
            (outcome, code, error),
            bytes,
            elapsed,
        )
    }

    /// The line of a request by `who` (connection, peer, method, paths) that ended with
    /// `outcome` (its kind name or `ok`, the wire code and message of an error).
    fn with_outcome(
        who: (u64, &'a str, &'a str, &'a [String]),
        outcome: (&'a str, Option<i64>, Option<String>),
        bytes: u64,
        elapsed: Duration,
    ) -> Self {
        let (connection, peer, method, paths) = who;
        let (outcome, code, error) = outcome;
        Self {
            time: rfc3339_now(),
            connection,
            peer,
            method,
            paths,
            outcome,
            denied: outcome == error_kind_name(io::ErrorKind::PermissionDenied),
            code,
            error,
            bytes,
            micros: elapsed.as_micros().min(u64::MAX as u128) as u64,
        }
    }
}

/// What the server knows about a request from its start to its reply: enough to write its
/// audit line and its debug log line once the reply is known.
#[derive(Clone, Debug)]
pub(crate) struct RequestLog {
    pub(crate) audit: Option<AuditLog>,
    pub(crate) connection: u64,
    pub(crate) peer: Arc<str>,
    pub(crate) method: String,
    /// The paths the request named as sent, once its params are read; `None` when they are
    /// written nowhere.
    pub(crate) paths: Option<Vec<String>>,
    /// A stream method (the method table says so), whose reply's `size` is what it moved.
    pub(crate) streamed: bool,
    pub(crate) started: std::time::Instant,
}

impl RequestLog {
    /// Notes the paths the request names from its params' members, as they were sent: for a
    /// request answered without its params being read.
    pub(crate) fn note_sent(&mut self, raw: Option<&serde_json::value::RawValue>) {
        if let Some(paths) = &mut self.paths {
            *paths = sent_paths(raw);
        }
    }

    /// Logs the request's end. `bytes` is what the handler counted; for the stream methods,
    /// whose replies carry `{"size"}`, the size in a successful reply counts instead; a failed
    /// request counts 0.
    pub(crate) fn finish(&self, reply: &Result<Value, ErrorObject>, bytes: u64) {
        let is_stream = self.streamed;
        // A failed request moved nothing, whatever it had counted before failing.
        let bytes = match reply {
            Ok(result) if is_stream => result.get("size").and_then(Value::as_u64).unwrap_or(bytes),
            Ok(_) => bytes,
            Err(_) => 0,
        };
        let elapsed = self.started.elapsed();
        tracing::debug!(
            connection = self.connection,
            method = self.method,
            paths = ?self.paths.as_deref().unwrap_or_default(),
            ok = reply.is_ok(),
            bytes,
            micros = elapsed.as_micros() as u64,
            "request"
        );
        if let Some(audit) = &self.audit {
            audit.record(&AuditRecord::new(
                self.connection,
                &self.peer,
                &self.method,
                self.paths.as_deref().unwrap_or_default(),
                reply,
                bytes,
                elapsed,
            ));
        }
    }
}

/// The method name under which refused WebSocket handshakes are audited.
pub const HANDSHAKE_METHOD: &str = "handshake";

/// Audits a WebSocket handshake refused with HTTP `status` (401 bad token, 403 `Origin`, 503
/// connection limit): outcome `PermissionDenied` (denied) or `ConnectionRefused`, `code` the
/// HTTP status.
pub(crate) fn record_refused_handshake(
    audit: &AuditLog,
    connection: u64,
    peer: &str,
    (status, reason): (tokio_tungstenite::tungstenite::http::StatusCode, &str),
) {
    let kind = if status.is_server_error() {
        io::ErrorKind::ConnectionRefused
    } else {
        io::ErrorKind::PermissionDenied
    };
    let outcome = error_kind_name(kind);
    audit.record(&AuditRecord {
        time: rfc3339_now(),
        connection,
        peer,
        method: HANDSHAKE_METHOD,
        paths: &[],
        outcome,
        denied: kind == io::ErrorKind::PermissionDenied,
        code: Some(i64::from(status.as_u16())),
        error: Some(reason.to_string()),
        bytes: 0,
        micros: 0,
    });
}

/// True when a request's paths will be written somewhere: to `audit`, or to the debug log.
/// Otherwise the server does not spend time copying them.
pub(crate) fn keeps_paths(audit: Option<&AuditLog>) -> bool {
    audit.is_some() || tracing::enabled!(tracing::Level::DEBUG)
}

pub(crate) fn rfc3339_now() -> String {
    rfc3339(SystemTime::now())
}

/// Formats a time as UTC, RFC 3339 with milliseconds; times outside jiff's range (years
/// before -9999 or after 9999) are clamped to it.
fn rfc3339(time: SystemTime) -> String {
    let timestamp = jiff::Timestamp::try_from(time).unwrap_or(if time < SystemTime::UNIX_EPOCH {
        jiff::Timestamp::MIN
    } else {
        jiff::Timestamp::MAX
    });
    format!("{timestamp:.3}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_format_as_rfc3339() {
        let at = |since: Duration| rfc3339(std::time::UNIX_EPOCH + since);
        assert_eq!(at(Duration::ZERO), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            at(Duration::from_millis(951_782_400_007)),
            "2000-02-29T00:00:00.007Z"
        );
        assert_eq!(
            at(Duration::from_secs(1_709_251_199)),
            "2024-02-29T23:59:59.000Z"
        );
        assert_eq!(
            at(Duration::from_secs(4_102_444_800)),
            "2100-01-01T00:00:00.000Z"
        );
    }

    #[test]
    fn a_denial_is_marked_and_carries_no_contents() {
        let paths = vec!["/etc/passwd".to_string()];
        let err = ErrorObject::from_io(&io::Error::new(
            io::ErrorKind::PermissionDenied,
            "/etc/passwd: path is outside every sandbox root",
        ));
        let record = AuditRecord::new(
            7,
            "127.0.0.1:9",
            "fs/readFile",
            &paths,
            &Err(err),
            0,
            Duration::from_micros(12),
        );
        let line: Value = serde_json::to_value(&record).unwrap();
        assert_eq!(line["outcome"], "PermissionDenied");
        assert_eq!(line["denied"], true);
        assert_eq!(line["code"], -32603);
        assert_eq!(line["micros"], 12);

        let ok = AuditRecord::new(
            7,
            "stdio",
            "fs/readFile",
            &paths,
            &Ok(Value::Null),
            5,
            Duration::ZERO,
        );
        let line: Value = serde_json::to_value(&ok).unwrap();
        assert_eq!(line["outcome"], "ok");
        assert_eq!(line["denied"], false);
        assert!(line.get("error").is_none());
    }

    #[test]
    fn lines_carry_c1_and_bidi_controls_escaped() {
        #[derive(Clone, Default)]
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl Write for Sink {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let sink = Sink::default();
        let paths = vec!["/ws/\u{1b}]0;x\u{7}\u{9b}2J\u{202e}gpj.exe".to_string()];
        AuditLog::to_writer(sink.clone()).record(&AuditRecord::new(
            1,
            "stdio",
            "fs/readFile\u{2028}",
            &paths,
            &Ok(Value::Null),
            0,
            Duration::ZERO,
        ));
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let line = text.strip_suffix('\n').unwrap();
        assert!(!line.chars().any(capfs::terminal::is_unsafe), "{line:?}");
        let value: Value = serde_json::from_str(line).unwrap();
        assert_eq!(value["paths"][0], paths[0].as_str());
        assert_eq!(value["method"], "fs/readFile\u{2028}");
    }

    #[test]
    fn concurrent_records_stay_whole_lines() {
        #[derive(Clone, Default)]
        struct Shared(Arc<Mutex<Vec<u8>>>);
        impl Write for Shared {
            // Accepts at most 7 bytes per call, so an unlocked writer would interleave.
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                let n = buf.len().min(7);
                self.0.lock().unwrap().extend_from_slice(&buf[..n]);
                Ok(n)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let sink = Shared::default();
        let log = AuditLog::to_writer(sink.clone());
        std::thread::scope(|s| {
            for t in 0..8u64 {
                let log = log.clone();
                s.spawn(move || {
                    let paths = vec![format!("/ws/thread-{t}")];
                    for _ in 0..200 {
                        log.record(&AuditRecord::new(
                            t,
                            "stdio",
                            "fs/getMetadata",
                            &paths,
                            &Ok(Value::Null),
                            0,
                            Duration::ZERO,
                        ));
                    }
                });
            }
        });
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1600);
        for line in lines {
            let value: Value = serde_json::from_str(line).unwrap();
            let t = value["connection"].as_u64().unwrap();
            assert_eq!(value["paths"][0], format!("/ws/thread-{t}"));
        }
    }
}
