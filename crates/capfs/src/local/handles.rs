//! Handle helpers shared by the operations: splitting a relative path into its parent and last
//! name, opening that parent under a root, and climbing back up a tree without holding one
//! handle per level.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::Dir;
use rustix::fs::{Mode, OFlags};

use super::resolve;
use crate::error;
use crate::path::AbsolutePathBuf;
use crate::sandbox::{FileId, Root, Sandbox};

/// How many ancestors an identity check climbs before giving up.
const MAX_ANCESTORS: usize = 65_536;

/// Splits a non-empty relative path into its parent (possibly empty) and last name.
pub(crate) fn split(rel: &Path) -> (&Path, &OsStr) {
    let name = rel
        .file_name()
        .expect("a normalised, non-empty relative path ends in a name");
    (rel.parent().unwrap_or(Path::new("")), name)
}

/// Opens the directory `parent` (relative, possibly empty) under `root`, following symlinks
/// only while they stay inside `root`.
pub(crate) fn open_parent(root: &Root, parent: &Path) -> io::Result<Dir> {
    if parent.as_os_str().is_empty() {
        root.dir().try_clone()
    } else {
        resolve::follow(root, parent, true, |p| root.dir().open_dir(p))
    }
}

/// The identity of an open directory.
pub(crate) fn dir_id(dir: &Dir) -> io::Result<FileId> {
    Ok(FileId::of(&dir.dir_metadata()?))
}

/// Opens the parent of `dir` through its `..` entry and checks that it is the directory
/// `expected`, which the caller descended from. A directory moved elsewhere mid-walk is reported
/// as an error instead of being climbed out of, so the walk never leaves the tree it started in.
pub(crate) fn open_parent_verified(dir: &Dir, expected: FileId) -> io::Result<Option<Dir>> {
    let parent = open_dot_dot(dir)?;
    if dir_id(&parent)? == expected {
        Ok(Some(parent))
    } else {
        Ok(None)
    }
}

fn open_dot_dot(dir: &Dir) -> io::Result<Dir> {
    let fd = rustix::fs::openat(
        dir,
        "..",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )?;
    Ok(Dir::from_std_file(std::fs::File::from(fd)))
}

/// True when `dir` or any directory above it (up to the file system's root) has identity
/// `needle`. Only identities are compared; nothing above `dir` is read or changed.
pub(crate) fn dir_or_ancestor_is(dir: &Dir, needle: FileId) -> io::Result<bool> {
    let mut current = dir.try_clone()?;
    let mut id = dir_id(&current)?;
    for _ in 0..MAX_ANCESTORS {
        if id == needle {
            return Ok(true);
        }
        let parent = open_dot_dot(&current)?;
        let parent_id = dir_id(&parent)?;
        if parent_id == id {
            return Ok(false);
        }
        current = parent;
        id = parent_id;
    }
    Ok(false)
}

/// Fails with `PermissionDenied` when `dir`, a directory reached from `root` that a mutation is
/// about to change, is a read-only root or lies inside one: climbs from `dir` through `..` to
/// `root`, comparing each directory's device and inode numbers with every read-only root's. A
/// read-only root is recognised by identity wherever its directory is now (moved below another
/// root, reached through a symlink or an alias), never by its configured path. A directory no
/// longer below `root` is an escape.
pub(crate) fn require_writable_dir(
    sandbox: &Sandbox,
    root: &Root,
    dir: &Dir,
    path: &AbsolutePathBuf,
) -> io::Result<()> {
    if !sandbox.has_read_only_root() {
        return Ok(());
    }
    let err = |e| error::with_path(path, e);
    let mut current = dir.try_clone().map_err(err)?;
    let mut id = dir_id(&current).map_err(err)?;
    for _ in 0..MAX_ANCESTORS {
        if sandbox.is_read_only_id(id) {
            return Err(error::read_only(path));
        }
        if id == root.id() {
            return Ok(());
        }
        let parent = open_dot_dot(&current).map_err(err)?;
        let parent_id = dir_id(&parent).map_err(err)?;
        if parent_id == id {
            break;
        }
        current = parent;
        id = parent_id;
    }
    Err(error::escape(path))
}

/// True when the directory with identity `id` is a sandbox root or an ancestor of one, wherever
/// the roots' directories are now: climbs from each root's handle, never looks at names.
pub(crate) fn is_or_holds_a_root(sandbox: &Sandbox, id: FileId) -> io::Result<bool> {
    for root in sandbox.roots_and_guarded() {
        if dir_or_ancestor_is(root.dir(), id)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Joins a relative symlink text to the directory that holds the link (both relative to the
/// root) and normalises the result lexically. `None` when the result climbs above the root.
pub(crate) fn join_link_target(link_dir: &Path, target: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in link_dir.components().chain(target.components()) {
        match component {
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// A name for a short-lived entry that no caller chose: unique within this process and with 64
/// random bits, so another process cannot guess it ahead of time.
pub(crate) fn temporary_name(purpose: &str) -> OsString {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // std seeds each `RandomState` from the OS's random source (and varies it per instance).
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(n);
    let random = hasher.finish();
    OsString::from(format!(".capfs-{purpose}-{n}-{random:016x}"))
}

/// True for the error of entering a name that is not a directory: `ELOOP` (a symlink under
/// `O_NOFOLLOW`) or `ENOTDIR` (a file).
pub(crate) fn is_not_a_directory(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::NotADirectory
        || err.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_targets_join_lexically_and_never_climb_above_the_root() {
        let j = |d: &str, t: &str| join_link_target(Path::new(d), Path::new(t));
        assert_eq!(j("a/b", "c"), Some(PathBuf::from("a/b/c")));
        assert_eq!(j("a/b", "../c"), Some(PathBuf::from("a/c")));
        assert_eq!(j("a", "../.."), None);
        assert_eq!(j("", "."), Some(PathBuf::new()));
        assert_eq!(j("a", "/etc"), None);
    }
}
