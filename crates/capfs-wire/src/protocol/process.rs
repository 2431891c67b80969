//! Wire types of the process methods of the codex exec-server protocol (codex 0.169), and
//! capfs's two extensions to them, `capfs/processResize` and `capfs/processCloseInput`. Serde only; no I/O happens here.
//!
//! A client names each process with an id of its own (`processId`, unique within its session).
//! Output and the end of a process are pushed as notifications, each with a `seq` counted per
//! process from 1: `process/output` chunks, one `process/exited`, then one `process/closed`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `process/start`: starts a process; answered once it runs.
pub const PROCESS_START_METHOD: &str = "process/start";
/// `process/read`: the output kept for a process, and its state.
pub const PROCESS_READ_METHOD: &str = "process/read";
/// `process/write`: bytes for a process's input.
pub const PROCESS_WRITE_METHOD: &str = "process/write";
/// `process/signal`: an interrupt for a process.
pub const PROCESS_SIGNAL_METHOD: &str = "process/signal";
/// `process/terminate`: ends a process and everything it started.
pub const PROCESS_TERMINATE_METHOD: &str = "process/terminate";
/// `capfs/processResize`: a new size for a process's terminal (capfs's extension).
pub const CAPFS_PROCESS_RESIZE_METHOD: &str = "capfs/processResize";
/// `capfs/processCloseInput`: the end of a process's input, `{processId}` (capfs's
/// extension; codex has no way to send it).
pub const CAPFS_PROCESS_CLOSE_INPUT_METHOD: &str = "capfs/processCloseInput";
/// The notification of a chunk of output.
pub const PROCESS_OUTPUT_METHOD: &str = "process/output";
/// The notification that a process ended.
pub const PROCESS_EXITED_METHOD: &str = "process/exited";
/// The notification that a process's outputs are drained: nothing follows for it.
pub const PROCESS_CLOSED_METHOD: &str = "process/closed";

/// codex's `envPolicy`: how the environment is built before `env` is laid over it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct EnvPolicy {
    /// `all`, `core` or `none`: what of the base environment is taken.
    #[serde(default)]
    pub inherit: Option<String>,
    /// Keeps names matching `*KEY*`, `*SECRET*` and `*TOKEN*`, which are otherwise dropped.
    #[serde(default)]
    pub ignore_default_excludes: bool,
    /// Name patterns (`*` and `?`, any case) dropped.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Variables set after the exclusions.
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    /// When not empty, only names matching one of these patterns are kept.
    #[serde(default)]
    pub include_only: Vec<String>,
}

/// Params of `process/start`. Members codex sends that capfs does not act on (`metadata`,
/// `managedNetwork`) are accepted and ignored. `enforceManagedNetwork` and `networkProxy`
/// (codex's managed network) narrow the server's egress policy for the process; a server that
/// cannot hold them refuses the start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct StartParams {
    /// The client's name for the process.
    pub process_id: String,
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// The working directory, a `file:` URI.
    pub cwd: String,
    /// Variables laid over what `env_policy` builds.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// How the environment is built; without it the environment is `env` alone.
    #[serde(default)]
    pub env_policy: Option<EnvPolicy>,
    /// Runs on a terminal of its own.
    #[serde(default)]
    pub tty: bool,
    /// Keeps the input open for `process/write`.
    #[serde(default)]
    pub pipe_stdin: bool,
    /// What the program sees as its own name.
    #[serde(default)]
    pub arg0: Option<String>,
    /// The turn's sandbox policy, as in the file-system methods: it narrows the roots.
    #[serde(default)]
    pub sandbox: Option<Value>,
    /// The process's network must be held to codex's managed network: with no
    /// `networkProxy`, no network at all.
    #[serde(default)]
    pub enforce_managed_network: bool,
    /// codex's managed network for the process (an executor-local proxy's configuration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_proxy: Option<super::network_proxy::NetworkProxyLaunch>,
}

/// The result of `process/start`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct StartResponse {
    /// The client's name for the process.
    pub process_id: String,
    /// How the process is confined, by codex's names: `linuxSeccomp` (by the kernel: the
    /// mechanisms are in `environmentInfo.processes`) or `none`.
    pub sandbox_type: String,
}

/// Params of `process/read`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ReadParams {
    /// The process.
    pub process_id: String,
    /// Only chunks after this `seq`.
    #[serde(default)]
    pub after_seq: Option<u64>,
    /// At most this many bytes of chunks (at least one chunk is given when there is one).
    #[serde(default)]
    pub max_bytes: Option<usize>,
    /// Waits at most this long for a chunk when there is none yet.
    #[serde(default)]
    pub wait_ms: Option<u64>,
}

/// One chunk of output kept for `process/read`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct OutputChunk {
    /// Its `seq`.
    pub seq: u64,
    /// `stdout`, `stderr` or `pty`.
    pub stream: String,
    /// The bytes, base64.
    pub chunk: String,
}

/// The result of `process/read`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ReadResponse {
    /// Chunks after `afterSeq`, oldest first.
    pub chunks: Vec<OutputChunk>,
    /// The `seq` to ask after next.
    pub next_seq: u64,
    /// The process has ended.
    pub exited: bool,
    /// Its exit code, once it ended.
    pub exit_code: Option<i32>,
    /// Its outputs are drained.
    pub closed: bool,
    /// Why it failed, when it did.
    pub failure: Option<String>,
    /// Whether its failure was a sandbox denial (never claimed by capfs).
    pub sandbox_denied: bool,
}

/// Params of `process/write`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct WriteParams {
    /// The process.
    pub process_id: String,
    /// The bytes, base64.
    pub chunk: String,
    /// The client's name for this write.
    #[serde(default)]
    pub write_id: Option<String>,
}

/// The result of `process/write`: `accepted`, `unknownProcess` or `stdinClosed`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WriteResponse {
    /// What became of the write.
    pub status: String,
}

/// Params of `process/signal`: `signal` is `interrupt`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SignalParams {
    /// The process.
    pub process_id: String,
    /// The signal's name.
    pub signal: String,
}

/// Params of `process/terminate`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TerminateParams {
    /// The process.
    pub process_id: String,
}

/// The result of `process/terminate`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TerminateResponse {
    /// Whether it was still running.
    pub running: bool,
}

/// Params of `capfs/processResize`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ResizeParams {
    /// The process.
    pub process_id: String,
    /// Rows.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
}

/// `process/output`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct OutputNotification {
    /// The process.
    pub process_id: String,
    /// Counted per process from 1.
    pub seq: u64,
    /// `stdout`, `stderr` or `pty` (a terminal).
    pub stream: String,
    /// The bytes, base64.
    pub chunk: String,
}

/// `process/exited`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ExitedNotification {
    /// The process.
    pub process_id: String,
    /// Counted per process from 1.
    pub seq: u64,
    /// Its code; `128 + signal` for a process a signal ended.
    pub exit_code: i32,
    /// Whether the end was a sandbox denial.
    #[serde(default)]
    pub sandbox_denied: bool,
}

/// `process/closed`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ClosedNotification {
    /// The process.
    pub process_id: String,
    /// Counted per process from 1.
    pub seq: u64,
}

/// capfs's addition to `environmentInfo`: whether processes are served, and how they are held
/// to the roots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ProcessesInfo {
    /// `process/start` is served (and not refused for want of confinement).
    pub served: bool,
    /// The mechanisms that confine processes, `none: ...` when the operator turned them off,
    /// or `refused: ...` with why processes are refused.
    pub confinement: String,
    /// A client's managed network (`networkProxy`) can be held: processes reach the network
    /// only through capfs's egress proxy, or not at all.
    #[serde(default)]
    pub managed_network: bool,
    /// A client's `transparentTcp` is held: a tool that ignores the proxy variables reaches
    /// the allowed hosts through capfs too (`--exec-transparent-tcp`).
    #[serde(default)]
    pub transparent_tcp: bool,
}
