//! The directory that holds one [`LocalProcesses`](super::LocalProcesses)' private homes and
//! temporary directories under a parent (the system's temporary directory by default).
//!
//! Each is named `capfs-run-<uuid>` and is held under an exclusive `flock` by the server that
//! made it for as long as it lives. A server that is killed (`SIGKILL`, an OOM kill, a node
//! losing power) cannot remove what its sessions left; the lock goes with its last descriptor,
//! so the next server to use the same parent finds the directory unlocked and removes it. In a
//! pod whose `/tmp` is an `emptyDir`, which outlives a container's restart, the leftovers of a
//! crashed container then never add up against its storage limit.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, Mode, OFlags};

/// The name every run directory starts with; nothing else under the parent is touched.
const PREFIX: &str = "capfs-run-";

/// One server's run directory, locked while it lives and removed when the last holder drops
/// it.
#[derive(Debug)]
pub(crate) struct RunDir {
    parent: PathBuf,
    path: PathBuf,
    /// Holds the lock.
    _dir: File,
}

impl RunDir {
    /// Removes the run directories under `parent` that no live server holds, then makes and
    /// locks a new one, mode 0711 (the user processes run as reaches the homes and temporary
    /// directories made inside, by their unguessable names, and lists nothing).
    pub(crate) fn open(parent: &Path) -> io::Result<Self> {
        sweep(parent);
        let id = uuid::Uuid::new_v4().simple();
        // Made and locked under a name the sweep ignores, then renamed: no other server's
        // sweep can take it for a dead one in between.
        let unnamed = parent.join(format!(".{PREFIX}{id}"));
        std::fs::create_dir(&unnamed).map_err(|e| crate::error::home_unmade(parent, &e))?;
        let locked = (|| {
            let dir = File::open(&unnamed)?;
            rustix::fs::fchmod(&dir, Mode::from_raw_mode(0o711))?;
            rustix::fs::flock(&dir, FlockOperation::NonBlockingLockExclusive)?;
            let path = parent.join(format!("{PREFIX}{id}"));
            std::fs::rename(&unnamed, &path)?;
            Ok(Self {
                parent: parent.to_path_buf(),
                path,
                _dir: dir,
            })
        })();
        if locked.is_err() {
            let _ = std::fs::remove_dir_all(&unnamed);
        }
        locked.map_err(|e: io::Error| crate::error::home_unmade(parent, &e))
    }

    /// The parent it was made under.
    pub(crate) fn parent(&self) -> &Path {
        &self.parent
    }

    /// Where it is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        // std's removal does not follow links a process may have planted; the lock goes after.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Removes every `capfs-run-*` directory under `parent` whose lock can be taken: its server is
/// gone. Links are never followed, and what this user may not remove (another user's, under a
/// sticky `/tmp`) is left as it is.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.as_encoded_bytes().starts_with(PREFIX.as_bytes()) {
            continue;
        }
        let path = entry.path();
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let Ok(dir) = rustix::fs::open(&path, flags, Mode::empty()) else {
            continue;
        };
        if rustix::fs::flock(&dir, FlockOperation::NonBlockingLockExclusive).is_ok() {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_servers_directory_is_swept_and_a_live_ones_is_not() {
        let parent = tempfile::tempdir().unwrap();
        let live = RunDir::open(parent.path()).unwrap();
        std::fs::write(live.path().join("kept"), b"").unwrap();
        // What a killed server leaves: a run directory nobody holds, with a home inside.
        let dead = parent.path().join(format!("{PREFIX}0123"));
        std::fs::create_dir_all(dead.join("capfs-home-x/.cache")).unwrap();
        // Neither a link to a directory nor an entry of another name is touched.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("canary"), b"").unwrap();
        std::os::unix::fs::symlink(outside.path(), parent.path().join(format!("{PREFIX}link")))
            .unwrap();
        std::fs::create_dir(parent.path().join("capfs-other")).unwrap();

        let second = RunDir::open(parent.path()).unwrap();
        assert!(
            !dead.exists(),
            "a dead server's directory outlived the sweep"
        );
        assert!(
            live.path().join("kept").exists(),
            "a live server's was swept"
        );
        assert!(outside.path().join("canary").exists());
        assert!(parent.path().join(format!("{PREFIX}link")).exists());
        assert!(parent.path().join("capfs-other").exists());
        let (first, second_path) = (live.path().to_path_buf(), second.path().to_path_buf());
        drop((live, second));
        assert!(!first.exists() && !second_path.exists());
    }
}
