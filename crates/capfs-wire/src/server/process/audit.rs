//! Audit lines of processes: one when a process starts (or its start fails), with its argv,
//! working directory, the roots it was narrowed to and the user it runs as; one when it ends,
//! saying whether it was ended (terminated, timed out, its session gone) or ended on its own.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use capfs::audit::{AuditLog, MAX_ERROR_CHARS, MAX_FIELD_CHARS, OUTCOME_OK, cut, timestamp};
use capfs::process::ProcessExit;

/// Most arguments or roots in a line; the last entry says how many more were left out.
const MAX_ITEMS: usize = 16;

/// What a process's audit lines say of it.
#[derive(Clone, Debug)]
pub(crate) struct ProcessLog {
    pub(crate) audit: Option<AuditLog>,
    pub(crate) connection: u64,
    pub(crate) peer: Arc<str>,
    pub(crate) process_id: String,
    pub(crate) pid: u32,
    pub(crate) started: Instant,
}

#[derive(Serialize)]
struct StartLine {
    time: String,
    connection: u64,
    peer: String,
    method: &'static str,
    #[serde(rename = "processId")]
    process_id: String,
    pid: Option<u32>,
    argv: Vec<String>,
    cwd: String,
    /// The roots the process was narrowed to, `access:path`; absent when not narrowed.
    narrowing: Option<Vec<String>>,
    uid: u32,
    outcome: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
struct EndLine<'a> {
    time: String,
    connection: u64,
    peer: &'a str,
    method: &'static str,
    #[serde(rename = "processId")]
    process_id: String,
    pid: u32,
    #[serde(rename = "exitCode")]
    exit_code: i32,
    signal: Option<i32>,
    killed: bool,
    micros: u64,
}

fn bounded(items: &[String]) -> Vec<String> {
    let mut out: Vec<String> = items
        .iter()
        .take(MAX_ITEMS)
        .map(|a| cut(a, MAX_FIELD_CHARS).into_owned())
        .collect();
    if items.len() > MAX_ITEMS {
        out.push(format!("…[cut {} items]", items.len() - MAX_ITEMS));
    }
    out
}

/// What a start line records.
pub(crate) struct StartRecord<'a> {
    pub(crate) argv: &'a [String],
    pub(crate) cwd: &'a str,
    pub(crate) narrowing: Option<Vec<String>>,
    pub(crate) uid: u32,
    pub(crate) error: Option<&'a std::io::Error>,
}

impl ProcessLog {
    /// The start line (`process/start`).
    pub(crate) fn started(&self, record: StartRecord<'_>) {
        let Some(audit) = &self.audit else { return };
        audit.write_line(&StartLine {
            time: timestamp(),
            connection: self.connection,
            peer: cut(&self.peer, MAX_FIELD_CHARS).into_owned(),
            method: "process/start",
            process_id: cut(&self.process_id, MAX_FIELD_CHARS).into_owned(),
            pid: record.error.is_none().then_some(self.pid),
            argv: bounded(record.argv),
            cwd: cut(record.cwd, MAX_FIELD_CHARS).into_owned(),
            narrowing: record.narrowing.as_deref().map(bounded),
            uid: record.uid,
            outcome: match record.error {
                None => OUTCOME_OK.to_string(),
                Some(e) => crate::protocol::error_kind_name(e.kind()).to_string(),
            },
            error: record
                .error
                .map(|e| cut(&e.to_string(), MAX_ERROR_CHARS).into_owned()),
        });
    }

    /// The end line (`process/exited`).
    pub(crate) fn exited(&self, exit: &ProcessExit) {
        let Some(audit) = &self.audit else { return };
        audit.write_line(&EndLine {
            time: timestamp(),
            connection: self.connection,
            peer: &cut(&self.peer, MAX_FIELD_CHARS),
            method: "process/exited",
            process_id: cut(&self.process_id, MAX_FIELD_CHARS).into_owned(),
            pid: self.pid,
            exit_code: exit.code,
            signal: exit.signal,
            killed: exit.killed,
            micros: self.started.elapsed().as_micros().min(u64::MAX as u128) as u64,
        });
    }
}
