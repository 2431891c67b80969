//! The process methods of the codex protocol over [`ExecutorProcesses`]: `process/start`,
//! `process/read`, `process/write`, `process/signal`, `process/terminate`, capfs's
//! `capfs/processResize`, and the notifications `process/output`, `process/exited` and
//! `process/closed`.
//!
//! Processes belong to a session, not to a connection: a client that reconnects with
//! `resumeSessionId` within the session TTL finds them running, and their notifications go to
//! its new connection. Once the TTL passes without a resume, or when the server stops, they are
//! ended. Each process has a task (`pump.rs`) that takes its events one at a time and sends each
//! as a notification under the connection's outgoing budget: while a client reads nothing, its
//! budget stays held, the task waits, the process's bounded event queue fills, and the process
//! itself stalls. The server's memory never grows with what a process writes.

mod audit;
pub(crate) mod env;
pub(crate) mod handlers;
mod kept;
mod network;
mod pump;
pub(crate) mod table;

pub use table::{DEFAULT_MAX_PROCESSES, DEFAULT_MAX_PROCESSES_PER_CONNECTION};
