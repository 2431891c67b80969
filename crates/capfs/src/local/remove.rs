//! `remove`: files and symlinks by name, directories by an iterative walk on handles.

use std::ffi::OsString;
use std::io::{self, ErrorKind};

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use rustix::fs::AtFlags;
use rustix::io::Errno;

use super::handles::{self, dir_id};
use super::{Inner, claim};
use crate::error::{self, with_path};
use crate::file_system::RemoveOptions;
use crate::path::AbsolutePathBuf;
use crate::sandbox::{FileId, Sandbox};

pub(crate) fn remove(fs: &Inner, path: &AbsolutePathBuf, options: RemoveOptions) -> io::Result<()> {
    let resolved = fs.sandbox.resolve(path)?;
    resolved.require_writable(path)?;
    if resolved.is_root() || fs.sandbox.contains_other_root(path, resolved.root) {
        return Err(error::root_protected(path));
    }
    let not_found = |e: io::Error| {
        if options.force && e.kind() == ErrorKind::NotFound {
            Ok(())
        } else {
            Err(with_path(path, e))
        }
    };
    let (parent_rel, name) = handles::split(resolved.rel);
    let parent = match handles::open_parent(resolved.root, parent_rel) {
        Ok(parent) => parent,
        Err(e) => return not_found(e),
    };
    handles::require_writable_dir(&fs.sandbox, resolved.root, &parent, path)?;
    // A root is a directory, and unlinking without AT_REMOVEDIR never removes one: files and
    // links go by name directly. Only a directory needs a claim first.
    match rustix::fs::unlinkat(&parent, name, AtFlags::empty()) {
        Ok(()) => return Ok(()),
        Err(e) if e == Errno::ISDIR => {}
        Err(e) => return not_found(e.into()),
    }
    let claim = match claim::claim(&fs.sandbox, &parent, name, path) {
        Ok(claim) => claim,
        Err(e) if e.kind() == ErrorKind::NotFound && options.force => return Ok(()),
        Err(e) => return Err(e),
    };
    if !claim.is_dir() {
        // Replaced by a file since the unlink: put back, like any other lost race.
        return Err(error::replaced_during(path));
    }
    if options.recursive {
        let top = parent
            .open_dir_nofollow(claim.name())
            .map_err(|e| with_path(path, e))?;
        if dir_id(&top).map_err(|e| with_path(path, e))? != claim.id() {
            return Err(error::replaced_during(path));
        }
        clear_tree(&fs.sandbox, path, top, claim.id())?;
    }
    claim.verify(path)?;
    rustix::fs::unlinkat(&parent, claim.name(), AtFlags::REMOVEDIR)
        .map_err(|e| with_path(path, e.into()))?;
    claim.release();
    Ok(())
}

/// A directory on the walk: its identity, its name in its parent, and the subdirectories still
/// to be removed.
struct Frame {
    id: FileId,
    name: OsString,
    subdirs: Vec<OsString>,
}

/// Removes everything below the directory `top` (whose identity is `top_id`), leaving it empty.
///
/// Iterative: the call stack does not grow with depth, and at most two directory handles are
/// open whatever the depth. Every directory is entered with `O_NOFOLLOW` and checked not to be
/// a sandbox root on its handle, so a directory swapped for a symlink mid-walk is removed as a
/// link, never followed, and a root moved into the tree is refused; climbing back up goes
/// through `..` and checks the identity recorded on the way down.
fn clear_tree(
    sandbox: &Sandbox,
    path: &AbsolutePathBuf,
    top: Dir,
    top_id: FileId,
) -> io::Result<()> {
    let err = |e| with_path(path, e);
    let mut current = top;
    let mut stack = vec![Frame {
        subdirs: clear_files(&current).map_err(err)?,
        id: top_id,
        name: OsString::new(),
    }];
    loop {
        let frame = stack
            .last_mut()
            .expect("the walk stops when the stack is empty");
        if let Some(child) = frame.subdirs.pop() {
            if let Some((dir, id)) = enter(sandbox, path, &current, &child)? {
                let subdirs = clear_files(&dir).map_err(err)?;
                current = dir;
                stack.push(Frame {
                    id,
                    name: child,
                    subdirs,
                });
            }
            continue;
        }
        let done = stack.pop().expect("non-empty");
        let Some(up) = stack.last() else {
            return Ok(());
        };
        current = handles::open_parent_verified(&current, up.id)
            .map_err(err)?
            .ok_or_else(|| error::moved_during_walk(path))?;
        // Removed by name: the name must still hold the directory just emptied (not a root
        // exchanged into its place meanwhile).
        match claim::identify(&current, &done.name) {
            Ok((id, _)) if id == done.id => {}
            Ok(_) => return Err(error::replaced_during(path)),
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(err(e)),
        }
        ignore_not_found(current.remove_dir(&done.name)).map_err(err)?;
    }
}

/// Opens the subdirectory `name` without following a symlink. `None` when it is gone, or when
/// it turned out not to be a directory (then it has been removed as a file or link).
fn enter(
    sandbox: &Sandbox,
    path: &AbsolutePathBuf,
    dir: &Dir,
    name: &OsString,
) -> io::Result<Option<(Dir, FileId)>> {
    match dir.open_dir_nofollow(name) {
        Ok(child) => {
            let id = dir_id(&child).map_err(|e| with_path(path, e))?;
            if sandbox.is_root_id(id) {
                return Err(error::root_protected(path));
            }
            Ok(Some((child, id)))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) if handles::is_not_a_directory(&e) => {
            ignore_not_found(dir.remove_file(name)).map_err(|e| with_path(path, e))?;
            Ok(None)
        }
        Err(e) => Err(with_path(path, e)),
    }
}

/// Removes every non-directory entry of `dir` and returns the names of its subdirectories.
fn clear_files(dir: &Dir) -> io::Result<Vec<OsString>> {
    let mut subdirs = Vec::new();
    for entry in dir.entries()? {
        let entry = entry?;
        match entry.file_type() {
            Ok(t) if t.is_dir() => subdirs.push(entry.file_name()),
            Ok(_) => ignore_not_found(dir.remove_file(entry.file_name()))?,
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(subdirs)
}

fn ignore_not_found(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        other => other,
    }
}
