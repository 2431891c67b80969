//! The audit log: one JSON line per call, for operators and security reviewers.
//!
//! A line holds the time, the connection and its peer, the method, the paths the call named, the
//! outcome (`ok` or the `io::ErrorKind` name), whether it was a denial, the error's code and
//! message, the bytes moved and the duration. It never holds file contents or a token. Every
//! text field is bounded where the line is serialised, whoever built the record: a caller cannot
//! make a line longer than a few kilobytes, whatever it passes.
//!
//! [`Audited`] writes a line for every call made on any [`ExecutorFileSystem`]; a server that
//! answers requests writes its own line per request with the same [`AuditRecord`] (the
//! `capfs serve` audit log, whose format docs/operating.md describes).
//!
//! Lines are formatted off the lock and written whole under one mutex into a line-buffered
//! writer, so concurrent calls never interleave partial lines; a line reaches the kernel as soon
//! as it is complete (one `write(2)`, no `fsync`), so it survives a crash of the process.
//!
//! [`ExecutorFileSystem`]: crate::ExecutorFileSystem

use std::fmt;
use std::fs::OpenOptions;
use std::io::{self, LineWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::terminal::TerminalSafe;

mod audited;
mod record;

pub use audited::{Audited, Operation};
pub use record::{AuditRecord, MAX_ERROR_CHARS, MAX_FIELD_CHARS, OUTCOME_OK, cut, timestamp};

/// Where audit lines go. Cloning gives another handle on the same writer.
#[derive(Clone)]
pub struct AuditLog {
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    /// Lines that could not be written, for a server's metrics.
    failures: Arc<AtomicU64>,
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
    /// The error of opening `path`, naming it.
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
            .map_err(|e| crate::error::audit_log_unopened(path, &e))?;
        Ok(Self::to_writer(file))
    }

    /// Writes lines to `writer`, each flushed as soon as it is complete.
    pub fn to_writer(writer: impl Write + Send + 'static) -> Self {
        Self {
            writer: Arc::new(Mutex::new(Box::new(LineWriter::new(writer)))),
            failures: Arc::new(AtomicU64::new(0)),
        }
    }

    /// How many lines could not be written since the log was opened (its clones included).
    pub fn write_failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Writes one record as one line. A failing writer is reported in the tracing log; the call
    /// itself is not failed by it.
    pub fn record(&self, record: &AuditRecord<'_>) {
        self.write_line(record);
    }

    /// Writes a line of another shape (a process's start or end, say) as [`record`] does. Its
    /// type bounds its own fields, with [`cut`].
    ///
    /// [`record`]: Self::record
    pub fn write_line(&self, line: &impl Serialize) {
        // Written for a terminal too (`--audit-log -`): the characters a terminal would act
        // on are escaped as `\uXXXX`, C1 and bidirectional controls included.
        let mut text = Vec::with_capacity(256);
        let mut json = serde_json::Serializer::with_formatter(&mut text, TerminalSafe::compact());
        line.serialize(&mut json)
            .expect("audit lines always serialize");
        text.push(b'\n');
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = writer.write_all(&text) {
            self.failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("writing the audit log failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::Value;

    use super::*;

    /// A writer whose bytes the test reads back; at most `chunk` bytes are taken per call, so
    /// that a writer without the lock would interleave lines.
    #[derive(Clone)]
    struct Sink {
        bytes: Arc<Mutex<Vec<u8>>>,
        chunk: usize,
    }

    impl Sink {
        fn new(chunk: usize) -> Self {
            Self {
                bytes: Arc::default(),
                chunk,
            }
        }

        fn text(&self) -> String {
            String::from_utf8(self.bytes.lock().unwrap().clone()).unwrap()
        }
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.chunk);
            self.bytes.lock().unwrap().extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_carry_c1_and_bidi_controls_escaped() {
        let sink = Sink::new(usize::MAX);
        let paths = vec!["/ws/\u{1b}]0;x\u{7}\u{9b}2J\u{202e}gpj.exe".to_string()];
        AuditLog::to_writer(sink.clone()).record(&AuditRecord::new(
            1,
            "stdio",
            "fs/readFile\u{2028}",
            &paths,
        ));
        let text = sink.text();
        let line = text.strip_suffix('\n').unwrap();
        assert!(!line.chars().any(crate::terminal::is_unsafe), "{line:?}");
        let value: Value = serde_json::from_str(line).unwrap();
        assert_eq!(value["paths"][0], paths[0].as_str());
        assert_eq!(value["method"], "fs/readFile\u{2028}");
    }

    #[test]
    fn concurrent_records_stay_whole_lines() {
        let sink = Sink::new(7);
        let log = AuditLog::to_writer(sink.clone());
        std::thread::scope(|s| {
            for t in 0..8u64 {
                let log = log.clone();
                s.spawn(move || {
                    let paths = vec![format!("/ws/thread-{t}")];
                    for _ in 0..200 {
                        let record = AuditRecord::new(t, "stdio", "fs/getMetadata", &paths)
                            .with_elapsed(Duration::ZERO);
                        log.record(&record);
                    }
                });
            }
        });
        let text = sink.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 8 * 200);
        for line in lines {
            let value: Value = serde_json::from_str(line).expect("a whole line");
            let t = value["connection"].as_u64().unwrap();
            assert_eq!(value["paths"][0], format!("/ws/thread-{t}"));
        }
    }
}
