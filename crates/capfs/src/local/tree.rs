//! `walk`: a confined depth-first walk on directory handles. The start directory is opened
//! through the root like `read_directory`; every directory below it is opened from its
//! parent's handle with `O_NOFOLLOW`, so no symlink is followed and nothing a racing rename
//! puts in place of a name can lead the walk out. Special files are listed from their
//! directory entry and never opened. Directories it cannot enter are reported, not skipped.
//! Metadata comes from each entry's `lstat` and link text from `readlinkat` on the directory's
//! handle, as asked for.

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;

use super::metadata::millis;
use super::{Inner, handles, resolve};
use crate::error::{self, with_path};
use crate::path::AbsolutePathBuf;
use crate::sandbox::FileId;
use crate::walk::{Walk, WalkEntry, WalkOptions};
use crate::walk::{WalkFilter, raw_child, walk_child};

/// One directory entry as read: its name and its own type.
struct Listed {
    name: OsString,
    is_directory: bool,
    is_file: bool,
    is_symlink: bool,
    size: u64,
    mode: Option<u32>,
    modified_at_ms: Option<i64>,
    link_target: Option<PathBuf>,
}

/// Reads every entry of `dir`; entries removed between readdir and their `lstat` are left out.
/// Metadata or link text that cannot be read (the entry replaced meanwhile) is left unknown.
fn list(dir: &Dir, options: &WalkOptions) -> io::Result<Vec<Listed>> {
    let mut out = Vec::new();
    for entry in dir.entries()? {
        let entry = entry?;
        let file_type = match entry.file_type() {
            Ok(file_type) => file_type,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let is_symlink = file_type.is_symlink();
        let wants_stat =
            (options.sizes && file_type.is_file()) || (options.metadata && !is_symlink);
        let stat = if wants_stat {
            entry.metadata().ok()
        } else {
            None
        };
        let size = match &stat {
            Some(m) if options.sizes && file_type.is_file() => m.len(),
            _ => 0,
        };
        let (mode, modified_at_ms) = match &stat {
            Some(m) if options.metadata && !is_symlink => (
                Some(cap_std::fs::PermissionsExt::mode(&m.permissions()) & 0o7777),
                Some(m.modified().map_or(0, |t| millis(t.into_std()))),
            ),
            _ => (None, None),
        };
        let name = entry.file_name();
        let link_target = if options.link_targets && is_symlink {
            dir.read_link_contents(&name).ok()
        } else {
            None
        };
        out.push(Listed {
            name,
            is_directory: file_type.is_dir(),
            is_file: file_type.is_file(),
            is_symlink,
            size,
            mode,
            modified_at_ms,
            link_target,
        });
    }
    Ok(out)
}

/// A directory on the walk: its identity (to check the climb back to it), its relative path,
/// its depth (1 for the start) and the entries not yet visited.
struct Level {
    id: FileId,
    prefix: String,
    raw: Option<PathBuf>,
    depth: usize,
    entries: std::vec::IntoIter<Listed>,
}

/// Walks below `path`. At most two directory handles are open at a time whatever the depth:
/// the directory being listed, and its child or parent while the walk moves down or back up
/// (through `..`, checked against the identity recorded on the way down), so that walks cannot
/// take the process's descriptors from other requests.
pub(crate) fn walk(fs: &Inner, path: &AbsolutePathBuf, options: &WalkOptions) -> io::Result<Walk> {
    let filter = WalkFilter::new(options)?;
    let (max_depth, max_entries) = options.bounds();
    let resolved = fs.sandbox.resolve(path)?;
    let root = resolved.root;
    let err = |e| with_path(path, e);
    let mut current = resolve::follow(root, resolved.cap_path(), true, |p| root.dir().open_dir(p))
        .map_err(err)?;
    let mut walk = Walk::default();
    if max_depth == 0 {
        walk.truncated = true;
        return Ok(walk);
    }
    let first = list(&current, options).map_err(err)?;
    let mut bytes = 0;
    let mut stack = vec![Level {
        id: handles::dir_id(&current).map_err(err)?,
        prefix: String::new(),
        raw: None,
        depth: 1,
        entries: first.into_iter(),
    }];
    while let Some(level) = stack.last_mut() {
        let Some(mut entry) = level.entries.next() else {
            stack.pop();
            let Some(up) = stack.last() else {
                break;
            };
            // Back to the parent through `..`: it must be the directory the walk came down
            // from, or the walk would go on somewhere else.
            match handles::open_parent_verified(&current, up.id) {
                Ok(Some(parent)) => current = parent,
                Ok(None) => {
                    walk.failed(&up.prefix, &error::moved_during_walk(path));
                    break;
                }
                Err(e) => {
                    walk.failed(&up.prefix, &e);
                    break;
                }
            }
            continue;
        };
        // A name that is not UTF-8 has no faithful text form: its lossy rendering would name
        // another entry or none, so unless exact names are asked for it is left out (with what
        // is below it) and counted, as remote listings leave such names out.
        let raw = raw_child(level.raw.as_deref(), &level.prefix, &entry.name);
        if raw.is_some() && !options.raw_names {
            walk.non_utf8_names_omitted += 1;
            continue;
        }
        let rel = walk_child(&level.prefix, &entry.name.to_string_lossy());
        if filter.excludes(&rel) {
            continue;
        }
        if filter.selects(&rel) {
            let mut found = WalkEntry::new(rel.clone());
            found.is_directory = entry.is_directory;
            found.is_file = entry.is_file;
            found.is_symlink = entry.is_symlink;
            found.size = entry.size;
            found.mode = entry.mode;
            found.modified_at_ms = entry.modified_at_ms;
            found.link_target = entry.link_target.take();
            found.raw_path = raw.clone();
            if !walk.push(found, max_entries, &mut bytes) {
                break;
            }
        }
        if !entry.is_directory {
            continue;
        }
        if level.depth == max_depth {
            walk.truncated = true;
            continue;
        }
        let depth = level.depth + 1;
        // Never through a symlink: a name swapped for a link since readdir fails to open, as
        // does a directory removed or unreadable since; each is reported.
        let entered = current.open_dir_nofollow(&entry.name).and_then(|child| {
            let id = handles::dir_id(&child)?;
            let listed = list(&child, options)?;
            Ok((child, id, listed))
        });
        match entered {
            Ok((child, id, listed)) => {
                current = child;
                stack.push(Level {
                    id,
                    prefix: rel,
                    raw,
                    depth,
                    entries: listed.into_iter(),
                });
            }
            Err(e) => walk.failed(&rel, &e),
        }
    }
    Ok(walk)
}
