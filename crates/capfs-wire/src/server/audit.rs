//! The server's audit lines: one per request, written when it is answered, with the paths it
//! named as sent (`..`, URIs and all, even when its params do not parse) and the code the
//! client was answered; and one per refused WebSocket handshake. The line's format, its bounds
//! and the log itself are the library's ([`capfs::audit`]); so is [`Audited`], the decorator a
//! caller that makes the file system calls itself audits them with, whose lines [`audited`]
//! names as this server's.

use std::io;
use std::sync::Arc;

use serde_json::Value;

use super::params::{CallParams, sent_before_run};

use crate::protocol::codex::FS_OPEN_METHOD;
use crate::protocol::{
    CAPFS_CREATE_SYMLINK_METHOD, CAPFS_NARROW_ROOTS_METHOD, CAPFS_READ_FILE_RANGE_METHOD,
    CAPFS_READ_FILE_STREAM_METHOD, CAPFS_READ_LINK_METHOD, CAPFS_WALK_METHOD,
    CAPFS_WRITE_FILE_STREAM_METHOD, ErrorObject, FS_COPY_METHOD, FS_CREATE_DIRECTORY_METHOD,
    FS_GET_METADATA_METHOD, FS_READ_DIRECTORY_METHOD, FS_READ_FILE_METHOD, FS_REMOVE_METHOD,
    FS_RENAME_METHOD, FS_WRITE_FILE_METHOD,
};
use capfs::audit::{AuditLog, AuditRecord, Audited, Operation};

/// `inner` audited into `log` with lines that read as this server's for the same calls: each
/// named by the method the server is sent for it, a failure with the code it answers it with.
/// For a caller that makes the calls itself (`capfs mcp` over local directories).
pub fn audited<F: ?Sized>(inner: Arc<F>, log: AuditLog) -> Audited<F> {
    Audited::new(inner, log)
        .with_names(method_of)
        .with_error_codes(|e| ErrorObject::from_io(e).code)
}

/// The method a capfs server is sent for `operation`.
fn method_of(operation: Operation) -> &'static str {
    match operation {
        Operation::ReadFile => FS_READ_FILE_METHOD,
        Operation::ReadFileTo | Operation::OpenForTransfer => CAPFS_READ_FILE_STREAM_METHOD,
        Operation::ReadFileRange => CAPFS_READ_FILE_RANGE_METHOD,
        Operation::OpenFile => FS_OPEN_METHOD,
        Operation::WriteFile => FS_WRITE_FILE_METHOD,
        Operation::WriteFileFrom => CAPFS_WRITE_FILE_STREAM_METHOD,
        Operation::CreateDirectory => FS_CREATE_DIRECTORY_METHOD,
        Operation::GetMetadata => FS_GET_METADATA_METHOD,
        Operation::ReadDirectory => FS_READ_DIRECTORY_METHOD,
        Operation::Remove => FS_REMOVE_METHOD,
        Operation::Copy => FS_COPY_METHOD,
        Operation::Rename => FS_RENAME_METHOD,
        Operation::ReadLink => CAPFS_READ_LINK_METHOD,
        Operation::CreateSymlink => CAPFS_CREATE_SYMLINK_METHOD,
        Operation::Narrowed => CAPFS_NARROW_ROOTS_METHOD,
        Operation::Walk => CAPFS_WALK_METHOD,
        _ => "unknown",
    }
}

/// What the server knows about a request from its start to its reply: enough to write its
/// audit line and its debug log line once the reply is known.
#[derive(Clone, Debug)]
pub(crate) struct RequestLog {
    pub(crate) audit: Option<AuditLog>,
    /// Where the request is counted, under its method's name in the method table (or
    /// `unknown`), its file bytes as written into the roots when `writes`.
    pub(crate) metrics: Arc<super::metrics::Metrics>,
    pub(crate) label: &'static str,
    pub(crate) writes: bool,
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
    pub(crate) fn note_sent(&mut self, params: &CallParams) {
        if let Some(paths) = &mut self.paths {
            *paths = sent_before_run(params);
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
        let error = reply.as_ref().err().map(|e| e.clone().into_io());
        self.metrics
            .request(self.label, self.writes, error.as_ref(), bytes);
        if let Some(audit) = &self.audit {
            let paths = self.paths.as_deref().unwrap_or_default();
            let record = AuditRecord::new(self.connection, &self.peer, &self.method, paths)
                .with_elapsed(elapsed);
            audit.record(&match (reply, &error) {
                (Err(e), Some(io)) => record.failed(io.kind(), Some(e.code), &*e.message),
                _ => record.with_bytes(bytes),
            });
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
    let record = AuditRecord::new(connection, peer, HANDSHAKE_METHOD, &[]);
    let status = Some(i64::from(status.as_u16()));
    audit.record(&record.failed(kind, status, reason));
}

/// True when a request's paths will be written somewhere: to `audit`, or to the debug log.
/// Otherwise the server does not spend time copying them.
pub(crate) fn keeps_paths(audit: Option<&AuditLog>) -> bool {
    audit.is_some() || tracing::enabled!(tracing::Level::DEBUG)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every call an audited file system names, it names by a method this server answers.
    #[test]
    fn every_operation_is_named_by_a_served_method() {
        for operation in Operation::ALL {
            let name = method_of(operation);
            assert!(
                super::super::method_names().any(|m| m == name),
                "{operation:?}: {name}"
            );
        }
    }
}
