//! What a connection keeps between its requests (its file system, `fs/open` handles, watches,
//! the session's processes), and what a handler gets beside its params.

use std::sync::Arc;

use super::codex::handles::Handles;
use super::codex::watch::Watches;
use super::payload::Outcome;
use super::process::table::Attached;
use crate::protocol::process::ProcessesInfo;
use crate::protocol::uri::PathForm;
use capfs::ExecutorFileSystem;

/// The protocol group a method belongs to, which decides how its paths are read and which error
/// codes it answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Group {
    /// The March 2026 methods and capfs's extensions: paths plain or `file:` URIs, errors in
    /// the codes of the form the request used.
    Files,
    /// The methods the current codex protocol added: paths either way, errors always in codex's
    /// codes (handle methods carry no path to tell the form by).
    Codex,
    /// The process methods: `-32601` on a server that serves no processes; their handlers
    /// read their own paths (`cwd`, the `sandbox` policy).
    Processes,
}

/// What a handler gets beside its params: the file system it works on, its connection's state,
/// its method's group, the form the request spelled its paths in, the message limit its reply
/// must fit, and where it records what it did.
pub(crate) struct Call<'a> {
    pub(crate) fs: &'a dyn ExecutorFileSystem,
    pub(crate) connection: &'a ConnectionState,
    pub(crate) group: Group,
    pub(crate) form: PathForm,
    pub(crate) max_message_bytes: usize,
    pub(crate) outcome: &'a mut Outcome,
}

impl Call<'_> {
    /// The form whose codes the handler's errors take: the request's, but always codex's for
    /// the methods the current codex protocol added (a handle method names no path to tell the
    /// form by).
    pub(crate) fn errors_form(&self) -> PathForm {
        match self.group {
            Group::Codex => PathForm::Uri,
            Group::Files => self.form,
            Group::Processes => PathForm::Plain,
        }
    }
}

/// What one connection keeps between its requests for these methods.
pub(crate) struct ConnectionState {
    /// The file system the connection serves (narrowed with it), for work that outlives a
    /// request (a replace handle's write, a watch); `None` where requests are handled without
    /// a connection.
    fs: std::sync::RwLock<Option<Arc<dyn ExecutorFileSystem>>>,
    pub(crate) handles: Handles,
    pub(crate) watches: Arc<Watches>,
    /// The session's processes, once the handshake named the session; `None` on a server
    /// that serves no processes.
    processes: std::sync::RwLock<Option<Attached>>,
    /// What `environmentInfo` says of processes, on a server that serves them.
    pub(crate) processes_info: Option<ProcessesInfo>,
}

impl ConnectionState {
    pub(crate) fn new(
        fs: Option<Arc<dyn ExecutorFileSystem>>,
        handles: Handles,
        watches: Watches,
    ) -> Self {
        Self {
            fs: std::sync::RwLock::new(fs),
            handles,
            watches: Arc::new(watches),
            processes: std::sync::RwLock::new(None),
            processes_info: None,
        }
    }

    /// The session's processes, once attached.
    pub(crate) fn processes(&self) -> Option<Attached> {
        self.processes.read().expect("connection processes").clone()
    }

    /// The connection now holds the session whose processes are `attached`.
    pub(crate) fn set_processes(&self, attached: Attached) {
        *self.processes.write().expect("connection processes") = Some(attached);
    }

    /// The file system the connection serves now.
    pub(crate) fn fs(&self) -> Option<Arc<dyn ExecutorFileSystem>> {
        self.fs.read().expect("connection file system").clone()
    }

    /// The connection now serves `fs` (a narrowing of what it served).
    pub(crate) fn set_fs(&self, fs: Arc<dyn ExecutorFileSystem>) {
        *self.fs.write().expect("connection file system") = Some(fs);
    }
}

impl std::fmt::Debug for ConnectionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionState").finish_non_exhaustive()
    }
}
