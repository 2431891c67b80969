//! Processes an agent's tools start: the second feature beside [`ExecutorFileSystem`]. Whatever
//! a request asks for, an implementation starts a process that can reach only what its roots
//! allow, and says through [`ExecutorProcesses::confinement`] how that is enforced.
//!
//! A started process is two halves: a [`ProcessControl`] any task may use (write its input,
//! resize its terminal, signal or end it) and a bounded stream of [`ProcessEvent`]s. Nothing
//! is read from the process while its events are not taken, so a consumer that stops reading
//! stalls its process, never the memory of whoever runs it.
//!
//! [`ExecutorFileSystem`]: crate::ExecutorFileSystem

use std::io;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::{AbsolutePathBuf, Access};

mod cgroup;
mod child;
mod confine;
pub mod egress;
mod exec;
mod home;
mod id_maps;
mod init;
mod keeper;
mod listen;
mod local;
mod mounts;
mod policy;
mod prepare;
mod pty;
mod run;
mod run_dir;
mod seccomp;
mod session_net;

pub use home::Home;
pub use local::LocalProcesses;
pub use policy::{Network, ProcessPolicy, RunAs};

/// The events a consumer holds at most before the process stalls.
pub const PROCESS_EVENT_QUEUE: usize = 16;

/// What to start.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessRequest {
    /// The program (looked up on the environment's `PATH` when it has no `/`) and its
    /// arguments; never empty.
    pub argv: Vec<String>,
    /// What the program sees as its own name (`argv[0]`), when not `argv[0]`.
    pub arg0: Option<String>,
    /// The working directory: inside the roots.
    pub cwd: AbsolutePathBuf,
    /// The whole environment the process gets; nothing of the starter's own is added.
    pub env: Vec<(String, String)>,
    /// Runs on a terminal of its own (a pseudo-terminal) of this size; pipes when `None`.
    pub tty: Option<TerminalSize>,
    /// Keeps the process's input open for [`ProcessControl::write`]; otherwise it reads an
    /// empty input (a terminal's input is always open).
    pub pipe_stdin: bool,
    /// Narrows the roots for this process only: it reaches at most these directories, each
    /// with at most this access, and never more than the implementation's own roots allow.
    pub narrowing: Option<Vec<(AbsolutePathBuf, Access)>>,
    /// The private home of the process's session ([`ExecutorProcesses::new_home`]): its
    /// `HOME`, writable, whatever `env` says. Without one, `HOME` is what `env` says.
    pub home: Option<std::sync::Arc<Home>>,
    /// Narrows the implementation's egress policy for this process (a client's managed
    /// network): never widens it.
    pub egress: Option<egress::EgressNarrowing>,
}

impl ProcessRequest {
    /// A request to run `argv` in `cwd` with an empty environment, on pipes, with no input.
    pub fn new(argv: Vec<String>, cwd: AbsolutePathBuf) -> Self {
        Self {
            argv,
            arg0: None,
            cwd,
            env: Vec::new(),
            tty: None,
            pipe_stdin: false,
            narrowing: None,
            home: None,
            egress: None,
        }
    }
}

/// A terminal's size in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TerminalSize {
    /// Rows.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
}

impl Default for TerminalSize {
    fn default() -> Self {
        Self { rows: 24, cols: 80 }
    }
}

/// Which output a chunk came from. A terminal's output is all [`Stdout`](Self::Stdout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputStream {
    /// Standard output, or the terminal.
    Stdout,
    /// Standard error.
    Stderr,
}

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessExit {
    /// The exit code; for a process ended by a signal, `128 + signal` as a shell reports it.
    pub code: i32,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// Whether it was ended by the implementation (terminated, past its time limit, its
    /// connection gone) rather than on its own.
    pub killed: bool,
}

impl ProcessExit {
    /// An exit on its own with `code`.
    pub fn code(code: i32) -> Self {
        Self {
            code,
            signal: None,
            killed: false,
        }
    }

    /// An end by `signal`, `killed` when the implementation sent it.
    pub fn signal(signal: i32, killed: bool) -> Self {
        Self {
            code: 128 + signal,
            signal: Some(signal),
            killed,
        }
    }
}

/// What a started process reports, in order: output, then one `Exited`, then more output that
/// was still buffered, then one `Closed`, after which the stream ends.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProcessEvent {
    /// A chunk of output, never empty.
    Output {
        /// Where it came from.
        stream: OutputStream,
        /// The bytes, as written.
        bytes: Vec<u8>,
    },
    /// The process has ended.
    Exited(ProcessExit),
    /// Every output is drained and closed; nothing follows.
    Closed,
}

/// What one may do to a started process while its events are read elsewhere. Every call on a
/// process that has ended is harmless: writes fail with `BrokenPipe`, signals do nothing.
#[async_trait]
pub trait ProcessControl: Send + Sync + std::fmt::Debug {
    /// Writes `bytes` to the process's input (its terminal when it has one).
    ///
    /// # Errors
    ///
    /// `BrokenPipe` when the input is closed or was never open.
    async fn write(&self, bytes: &[u8]) -> io::Result<()>;

    /// Closes the process's input: it reads the end of its input.
    async fn close_input(&self) -> io::Result<()>;

    /// Tells the process's terminal its new size.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a process without a terminal.
    async fn resize(&self, size: TerminalSize) -> io::Result<()>;

    /// Sends `signal` to the process's whole group.
    async fn signal(&self, signal: i32) -> io::Result<()>;

    /// Ends the process and everything it started; returns whether it was still running.
    async fn terminate(&self) -> io::Result<bool>;
}

/// A started process: its control and its events.
#[derive(Debug)]
#[non_exhaustive]
pub struct StartedProcess {
    /// The process's id where it runs, for logs.
    pub pid: u32,
    /// Its control.
    pub control: std::sync::Arc<dyn ProcessControl>,
    /// Its events; a bounded queue that is filled only as fast as it is taken.
    pub events: mpsc::Receiver<ProcessEvent>,
}

impl StartedProcess {
    /// A started process from its parts.
    pub fn new(
        pid: u32,
        control: std::sync::Arc<dyn ProcessControl>,
        events: mpsc::Receiver<ProcessEvent>,
    ) -> Self {
        Self {
            pid,
            control,
            events,
        }
    }
}

/// How the processes an implementation starts are held to its roots.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Confinement {
    /// Enforced by the kernel; the text names the mechanisms (for `environmentInfo` and logs).
    Enforced(String),
    /// Processes are refused, and why (no Landlock, an ABI too old for a rule in force, no
    /// unprivileged user configured while running as root).
    Refused(String),
    /// Not confined, because the operator asked for it explicitly.
    Unconfined,
}

/// Starts processes, each confined to the implementation's roots.
#[async_trait]
pub trait ExecutorProcesses: Send + Sync {
    /// How processes are confined, or why they are refused.
    fn confinement(&self) -> Confinement;

    /// Starts `request`.
    ///
    /// # Errors
    ///
    /// `PermissionDenied` when the cwd or a narrowing directory is under no root (or processes
    /// are refused), `InvalidInput` for an empty `argv` or a name with a NUL, `NotFound` for a
    /// program that does not exist, `QuotaExceeded` when a bound on processes is reached.
    async fn start(&self, request: ProcessRequest) -> io::Result<StartedProcess>;

    /// The longest a process may run before it is ended, if bounded.
    fn time_limit(&self) -> Option<Duration> {
        None
    }

    /// Whether a request's [`egress`](ProcessRequest::egress) narrowing is held: processes
    /// reach the network only through an egress policy's proxy, or not at all. Never for
    /// processes with the host's network or unconfined ones.
    fn holds_egress_narrowing(&self) -> bool {
        false
    }

    /// Whether processes get transparent TCP ([`egress::EgressPolicy::with_transparent_tcp`]):
    /// a tool that ignores the proxy variables reaches the hosts the policy allows through
    /// capfs too. Never without [`holds_egress_narrowing`](Self::holds_egress_narrowing).
    fn serves_transparent_tcp(&self) -> bool {
        false
    }

    /// A new private home for the processes of one session, outside the roots, removed once
    /// the last holder drops it; `None` when the implementation has no private homes.
    fn new_home(&self) -> io::Result<Option<Home>> {
        Ok(None)
    }
}
