//! The private home of a sandbox's processes: one directory outside the roots, made for a
//! session at its first process, writable by the user processes run as, the `HOME` of every
//! process started with it, and removed once the session and all its processes are gone. It
//! also holds what else the session's processes share: the network namespace of those
//! without a network (`session_net.rs`).

use std::fs::File;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::policy::RunAs;
use super::run_dir::RunDir;
use super::session_net::SessionNet;

/// A private home directory, removed when dropped; share it with [`std::sync::Arc`] among the
/// requests of one session ([`ProcessRequest::home`](super::ProcessRequest::home)).
#[derive(Debug)]
pub struct Home {
    path: PathBuf,
    dir: File,
    /// The server's run directory it lies in, removed after the last home and process in it.
    _within: Arc<RunDir>,
    /// The session's network namespace, made at the first start that needs it.
    net: OnceLock<Arc<SessionNet>>,
}

impl Home {
    /// A new empty directory in `within`, mode 0700, owned by `owner` when given (else by
    /// the caller).
    pub(crate) fn create(within: &Arc<RunDir>, owner: Option<RunAs>) -> io::Result<Self> {
        let path = within
            .path()
            .join(format!("capfs-home-{}", uuid::Uuid::new_v4().simple()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| crate::error::home_unmade(within.parent(), &e))?;
        let home = Self {
            dir: File::open(&path)?,
            path,
            _within: Arc::clone(within),
            net: OnceLock::new(),
        };
        if let Some(owner) = owner {
            std::os::unix::fs::fchown(&home.dir, Some(owner.uid), Some(owner.gid))?;
        }
        Ok(home)
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open directory.
    pub(crate) fn dir(&self) -> &File {
        &self.dir
    }

    /// The session's network namespace, made by `make` the first time (two first starts at
    /// once may both make one; the second is dropped).
    pub(crate) fn session_net(
        &self,
        make: impl FnOnce() -> io::Result<SessionNet>,
    ) -> io::Result<Arc<SessionNet>> {
        if let Some(made) = self.net.get() {
            return Ok(Arc::clone(made));
        }
        let made = Arc::new(make()?);
        Ok(Arc::clone(self.net.get_or_init(|| made)))
    }
}

impl PartialEq for Home {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

impl Eq for Home {}

impl Drop for Home {
    fn drop(&mut self) {
        // std's removal does not follow links a process may have planted.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
