//! `Environment`: one way to obtain a file system, local or remote.

use std::io;
use std::sync::Arc;

use crate::{ExecutorFileSystem, LocalFileSystem, RemoteFileSystem, RemoteOptions, Sandbox};

/// Where an agent's tools get their file system from.
#[derive(Clone)]
pub struct Environment {
    file_system: Arc<dyn ExecutorFileSystem>,
}

impl Environment {
    /// A local file system confined to `sandbox`.
    pub fn local(sandbox: Sandbox) -> Self {
        Self {
            file_system: Arc::new(LocalFileSystem::new(sandbox)),
        }
    }

    /// A remote file system served by `capfs serve` at `url` (`ws://HOST:PORT`).
    ///
    /// # Errors
    ///
    /// Whatever [`RemoteFileSystem::connect`] returns.
    pub async fn remote(url: &str, options: RemoteOptions) -> io::Result<Self> {
        let remote = RemoteFileSystem::connect(url, options).await?;
        Ok(Self {
            file_system: Arc::new(remote),
        })
    }

    /// A remote file system served by `capfs serve --listen stdio` run by `command` (through
    /// `sh -c`), for example `ssh host capfs serve --listen stdio --root /srv/ws`.
    ///
    /// # Errors
    ///
    /// Whatever [`RemoteFileSystem::connect_command`] returns.
    pub async fn remote_command(command: &str, options: RemoteOptions) -> io::Result<Self> {
        let remote = RemoteFileSystem::connect_command(command, options).await?;
        Ok(Self {
            file_system: Arc::new(remote),
        })
    }

    /// The file system, shareable across tasks.
    pub fn file_system(&self) -> Arc<dyn ExecutorFileSystem> {
        Arc::clone(&self.file_system)
    }
}
