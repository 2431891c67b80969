//! What a start checks and takes before it spawns: the request's validity, a place among the
//! processes running at once, and a private temporary directory.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::ProcessRequest;
use super::policy::ProcessPolicy;
use super::run_dir::RunDir;
use crate::error;

/// A place among the processes running at once, given back when the process closes.
pub(crate) struct Slot(Arc<AtomicUsize>);

impl Slot {
    pub(crate) fn take(running: &Arc<AtomicUsize>, max: usize) -> io::Result<Self> {
        running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .map_err(|_| error::too_many_processes(max))?;
        Ok(Self(running.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A process's private temporary directory, removed when it closes; the server's run
/// directory it lies in goes after the last one.
pub(crate) struct TempDir {
    pub(crate) path: PathBuf,
    _within: Arc<RunDir>,
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // std's removal does not follow links the process may have planted.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

pub(crate) fn validate(request: &ProcessRequest) -> io::Result<()> {
    let Some(program) = request.argv.first() else {
        return Err(error::empty_argv());
    };
    let strings = request.argv.iter().chain(&request.arg0);
    if strings.clone().any(|s| s.contains('\0')) {
        return Err(error::nul_in_argument());
    }
    for (name, value) in &request.env {
        if name.is_empty() || name.contains(['=', '\0']) || value.contains('\0') {
            return Err(error::malformed_environment());
        }
    }
    if program.is_empty() {
        return Err(error::empty_program_name());
    }
    if !program.contains('/') && !request.env.iter().any(|(name, _)| name == "PATH") {
        return Err(error::no_path_to_search(program));
    }
    Ok(())
}

pub(crate) fn make_temp(within: &Arc<RunDir>, policy: &ProcessPolicy) -> io::Result<TempDir> {
    let path = within
        .path()
        .join(format!("capfs-process-{}", uuid::Uuid::new_v4().simple()));
    std::fs::DirBuilder::new().mode(0o700).create(&path)?;
    let temp = TempDir {
        path,
        _within: Arc::clone(within),
    };
    if let Some(run_as) = policy.run_as {
        std::os::unix::fs::chown(&temp.path, Some(run_as.uid), Some(run_as.gid))?;
    }
    Ok(temp)
}
