//! `Environment`: one way to obtain a file system, local or remote, and the processes that go
//! with it where there are some.

use std::io;
use std::sync::Arc;

use crate::{RemoteFileSystem, RemoteOptions};
use capfs::process::ExecutorProcesses;
use capfs::{ExecutorFileSystem, LocalFileSystem, Sandbox};

/// Where an agent's tools get their file system from.
#[derive(Clone)]
pub struct Environment {
    file_system: Arc<dyn ExecutorFileSystem>,
    processes: Option<Arc<dyn ExecutorProcesses>>,
}

/// A connection's file system, with the server's processes when it serves them.
impl From<RemoteFileSystem> for Environment {
    fn from(remote: RemoteFileSystem) -> Self {
        let processes = remote
            .processes()
            .map(|p| Arc::new(p) as Arc<dyn ExecutorProcesses>);
        Self {
            file_system: Arc::new(remote),
            processes,
        }
    }
}

impl Environment {
    /// A local file system confined to `sandbox`.
    pub fn local(sandbox: Sandbox) -> Self {
        Self {
            file_system: Arc::new(LocalFileSystem::new(sandbox)),
            processes: None,
        }
    }

    /// This environment, with `processes` for its commands (a
    /// [`LocalProcesses`](capfs::process::LocalProcesses) over the same roots, say).
    #[must_use]
    pub fn with_processes(mut self, processes: Arc<dyn ExecutorProcesses>) -> Self {
        self.processes = Some(processes);
        self
    }

    /// A remote file system served by `capfs serve` at `url` (`ws://HOST:PORT`).
    ///
    /// # Errors
    ///
    /// Whatever [`RemoteFileSystem::connect`] returns.
    pub async fn remote(url: &str, options: RemoteOptions) -> io::Result<Self> {
        Ok(RemoteFileSystem::connect(url, options).await?.into())
    }

    /// A remote file system served by `capfs serve --listen stdio` run by `command` (through
    /// `sh -c`), for example `ssh host capfs serve --listen stdio --root /srv/ws`.
    ///
    /// # Errors
    ///
    /// Whatever [`RemoteFileSystem::connect_command`] returns.
    pub async fn remote_command(command: &str, options: RemoteOptions) -> io::Result<Self> {
        Ok(RemoteFileSystem::connect_command(command, options)
            .await?
            .into())
    }

    /// The processes commands run as, when there are: a remote server's when it serves them
    /// (`capfs serve --exec`), or those given with [`with_processes`](Self::with_processes).
    pub fn processes(&self) -> Option<Arc<dyn ExecutorProcesses>> {
        self.processes.clone()
    }

    /// The file system, shareable across tasks.
    pub fn file_system(&self) -> Arc<dyn ExecutorFileSystem> {
        Arc::clone(&self.file_system)
    }
}
