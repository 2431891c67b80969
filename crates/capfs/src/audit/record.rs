//! One audit line: [`AuditRecord`], and how each of its fields is bounded when it is written.

use std::borrow::Cow;
use std::io;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::error::kind_name;

/// The outcome of a call that succeeded.
pub const OUTCOME_OK: &str = "ok";

/// Longest error message in a line, in characters; the rest is cut (with a marker), so a
/// hostile caller cannot make the log carry large text of its choosing.
pub const MAX_ERROR_CHARS: usize = 200;
/// Longest text of any other field in a line (a method name, each path), in characters.
pub const MAX_FIELD_CHARS: usize = 1_000;
/// Most paths in a line; a last entry says how many more were left out.
const MAX_PATHS: usize = 8;

/// One audit line. Field names are the documented format (docs/operating.md, "Audit log").
/// Writing it bounds every text field: at most 1,000 characters each (200 for `error`), at most
/// 8 paths, a longer text cut with `…[cut N bytes]` at its end.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use capfs::audit::{AuditLog, AuditRecord};
///
/// let paths = vec!["/ws/../etc/passwd".to_string()];
/// let record = AuditRecord::new(7, "127.0.0.1:9", "fs/readFile", &paths)
///     .failed(std::io::ErrorKind::PermissionDenied, Some(-32603), "/etc/passwd: outside")
///     .with_elapsed(Duration::from_micros(12));
/// AuditLog::to_writer(std::io::sink()).record(&record);
/// ```
#[derive(Debug)]
pub struct AuditRecord<'a> {
    /// UTC, RFC 3339 with milliseconds: `2026-01-31T12:00:00.123Z`.
    time: String,
    /// Numbered from 1 per server process.
    connection: u64,
    /// `IP:PORT` of the peer, `stdio`, or what the caller names itself.
    peer: &'a str,
    /// The method, as a server is sent it.
    method: &'a str,
    /// The paths the call named, in order (a link's target among them).
    paths: &'a [String],
    /// `ok`, or the `io::ErrorKind` name of the failure (`PermissionDenied`, `NotFound`, ...).
    outcome: &'a str,
    /// True exactly when the outcome is `PermissionDenied`: an escape, a path under no root,
    /// or a mutation under a read-only root.
    denied: bool,
    /// The error's code on the wire (the JSON-RPC code, or an HTTP status), for failures.
    code: Option<i64>,
    /// The error message (written cut to 200 characters), for failures.
    error: Option<String>,
    /// File bytes read or written.
    bytes: u64,
    /// How long the call took, in microseconds.
    micros: u64,
}

impl<'a> AuditRecord<'a> {
    /// The line of a call, now: `method` naming `paths`, on connection `connection` of `peer`,
    /// that succeeded, moved no bytes and took no time; the methods below say otherwise.
    pub fn new(connection: u64, peer: &'a str, method: &'a str, paths: &'a [String]) -> Self {
        Self {
            time: timestamp(),
            connection,
            peer,
            method,
            paths,
            outcome: OUTCOME_OK,
            denied: false,
            code: None,
            error: None,
            bytes: 0,
            micros: 0,
        }
    }

    /// The call failed with an error of `kind`, answered with `code` where there is one, and
    /// `message`.
    #[must_use]
    pub fn failed(
        mut self,
        kind: io::ErrorKind,
        code: Option<i64>,
        message: impl Into<String>,
    ) -> Self {
        self.outcome = kind_name(kind);
        self.denied = kind == io::ErrorKind::PermissionDenied;
        self.code = code;
        self.error = Some(message.into());
        self
    }

    /// The call moved `bytes` bytes of file contents.
    #[must_use]
    pub fn with_bytes(mut self, bytes: u64) -> Self {
        self.bytes = bytes;
        self
    }

    /// The call took `elapsed`.
    #[must_use]
    pub fn with_elapsed(mut self, elapsed: Duration) -> Self {
        self.micros = elapsed.as_micros().min(u64::MAX as u128) as u64;
        self
    }
}

/// An [`AuditRecord`] as it is written, every text bounded.
#[derive(Serialize)]
struct Line<'a> {
    time: Cow<'a, str>,
    connection: u64,
    peer: Cow<'a, str>,
    method: Cow<'a, str>,
    paths: Vec<Cow<'a, str>>,
    outcome: Cow<'a, str>,
    denied: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Cow<'a, str>>,
    bytes: u64,
    micros: u64,
}

impl Serialize for AuditRecord<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut paths: Vec<Cow<'_, str>> = self
            .paths
            .iter()
            .take(MAX_PATHS)
            .map(|p| cut(p, MAX_FIELD_CHARS))
            .collect();
        if self.paths.len() > MAX_PATHS {
            paths.push(Cow::Owned(format!(
                "…[cut {} paths]",
                self.paths.len() - MAX_PATHS
            )));
        }
        Line {
            time: cut(&self.time, MAX_FIELD_CHARS),
            connection: self.connection,
            peer: cut(self.peer, MAX_FIELD_CHARS),
            method: cut(self.method, MAX_FIELD_CHARS),
            paths,
            outcome: cut(self.outcome, MAX_FIELD_CHARS),
            denied: self.denied,
            code: self.code,
            error: self.error.as_deref().map(|e| cut(e, MAX_ERROR_CHARS)),
            bytes: self.bytes,
            micros: self.micros,
        }
        .serialize(serializer)
    }
}

/// `text` cut to `max` characters, with `…[cut N bytes]` for the N bytes left out; `text`
/// itself when it is short enough, or when it is what a cut to `max` gave already (a text cut
/// when it was noted is cut once more when its line is written).
pub fn cut(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        Some((end, _)) if !is_cut_marker(&text[end..]) => {
            Cow::Owned(format!("{}…[cut {} bytes]", &text[..end], text.len() - end))
        }
        _ => Cow::Borrowed(text),
    }
}

/// True for the end of a cut text: `…[cut N bytes]` and nothing else.
fn is_cut_marker(rest: &str) -> bool {
    rest.strip_prefix("…[cut ")
        .and_then(|r| r.strip_suffix(" bytes]"))
        .is_some_and(|n| !n.is_empty() && n.len() <= 20 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Now, as a line writes its time: UTC, RFC 3339 with milliseconds.
pub fn timestamp() -> String {
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
    use serde_json::Value;

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
        let record = AuditRecord::new(7, "127.0.0.1:9", "fs/readFile", &paths)
            .failed(
                io::ErrorKind::PermissionDenied,
                Some(-32603),
                "/etc/passwd: path is outside every sandbox root",
            )
            .with_elapsed(Duration::from_micros(12));
        let line: Value = serde_json::to_value(&record).unwrap();
        assert_eq!(line["outcome"], "PermissionDenied");
        assert_eq!(line["denied"], true);
        assert_eq!(line["code"], -32603);
        assert_eq!(line["micros"], 12);

        let ok = AuditRecord::new(7, "stdio", "fs/readFile", &paths).with_bytes(5);
        let line: Value = serde_json::to_value(&ok).unwrap();
        assert_eq!(line["outcome"], "ok");
        assert_eq!(line["denied"], false);
        assert_eq!(line["bytes"], 5);
        assert!(line.get("error").is_none() && line.get("code").is_none());
    }

    #[test]
    fn every_field_of_a_line_is_bounded() {
        let huge = "é".repeat(1 << 20);
        let paths: Vec<String> = (0..20).map(|_| huge.clone()).collect();
        let mut record = AuditRecord::new(1, &huge, &huge, &paths).failed(
            io::ErrorKind::NotFound,
            Some(-32603),
            huge.clone(),
        );
        record.outcome = &huge;
        let line = serde_json::to_string(&record).unwrap();
        assert!(line.len() < 24 * 1024, "{} bytes", line.len());
        let value: Value = serde_json::from_str(&line).unwrap();
        let cut_at = |chars: usize| {
            format!(
                "{}…[cut {} bytes]",
                "é".repeat(chars),
                huge.len() - chars * 2
            )
        };
        for field in ["method", "peer", "outcome"] {
            assert_eq!(value[field], cut_at(MAX_FIELD_CHARS), "{field}");
        }
        assert_eq!(value["error"], cut_at(MAX_ERROR_CHARS));
        let listed = value["paths"].as_array().unwrap();
        assert_eq!(listed.len(), MAX_PATHS + 1);
        assert_eq!(listed[0], cut_at(MAX_FIELD_CHARS));
        assert_eq!(listed[MAX_PATHS], "…[cut 12 paths]");
        // A text cut once keeps its cut when its line is written.
        let once = cut(&huge, MAX_FIELD_CHARS).into_owned();
        assert_eq!(cut(&once, MAX_FIELD_CHARS), once);
    }
}
