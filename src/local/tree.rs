//! `walk`: a confined depth-first walk on directory handles. The start directory is opened
//! through the root like `read_directory`; every directory below it is opened from its
//! parent's handle with `O_NOFOLLOW`, so no symlink is followed and nothing a racing rename
//! puts in place of a name can lead the walk out. Special files are listed from their
//! directory entry and never opened.

use std::ffi::OsString;
use std::io;

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;

use super::{Inner, resolve};
use crate::error::with_path;
use crate::file_system::{WALK_DEPTH_LIMIT, WalkFilter, walk_child};
use crate::{AbsolutePathBuf, Walk, WalkEntry, WalkOptions};

/// One directory entry as read: its name and its own type.
struct Listed {
    name: OsString,
    is_directory: bool,
    is_file: bool,
    is_symlink: bool,
    size: u64,
}

/// Reads every entry of `dir`; entries removed between readdir and their `lstat` are left out.
fn list(dir: &Dir, sizes: bool) -> io::Result<Vec<Listed>> {
    let mut out = Vec::new();
    for entry in dir.entries()? {
        let entry = entry?;
        let file_type = match entry.file_type() {
            Ok(file_type) => file_type,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let size = if sizes && file_type.is_file() {
            entry.metadata().map_or(0, |m| m.len())
        } else {
            0
        };
        out.push(Listed {
            name: entry.file_name(),
            is_directory: file_type.is_dir(),
            is_file: file_type.is_file(),
            is_symlink: file_type.is_symlink(),
            size,
        });
    }
    Ok(out)
}

pub(crate) fn walk(fs: &Inner, path: &AbsolutePathBuf, options: &WalkOptions) -> io::Result<Walk> {
    let filter = WalkFilter::new(options)?;
    let max_depth = options.max_depth.min(WALK_DEPTH_LIMIT);
    let resolved = fs.sandbox.resolve(path)?;
    let root = resolved.root;
    let start = resolve::follow(root, resolved.cap_path(), true, |p| root.dir().open_dir(p))
        .map_err(|e| with_path(path, e))?;
    let mut walk = Walk::default();
    if max_depth == 0 {
        walk.truncated = true;
        return Ok(walk);
    }
    let first = list(&start, options.sizes).map_err(|e| with_path(path, e))?;
    // One level per directory being listed: its handle, its relative path, its depth (1 for
    // the start) and the entries not yet visited. At most `max_depth` handles are open.
    let mut stack = vec![(start, String::new(), 1usize, first.into_iter())];
    while let Some((dir, prefix, depth, entries)) = stack.last_mut() {
        let Some(entry) = entries.next() else {
            stack.pop();
            continue;
        };
        // A name that is not UTF-8 has no faithful text form: its lossy rendering would name
        // another entry or none, so it is left out (with what is below it), as remote listings
        // leave such names out.
        let Some(name) = entry.name.to_str() else {
            continue;
        };
        let rel = walk_child(prefix, name);
        if filter.excludes(&rel) {
            continue;
        }
        if filter.selects(&rel) {
            if walk.entries.len() == options.max_entries {
                walk.truncated = true;
                break;
            }
            walk.entries.push(WalkEntry {
                path: rel.clone(),
                is_directory: entry.is_directory,
                is_file: entry.is_file,
                is_symlink: entry.is_symlink,
                size: entry.size,
            });
        }
        if !entry.is_directory {
            continue;
        }
        if *depth == max_depth {
            walk.truncated = true;
            continue;
        }
        // Never through a symlink: a name swapped for a link since readdir fails to open (and
        // is skipped), as does a directory removed or unreadable since.
        let Ok(child) = dir.open_dir_nofollow(&entry.name) else {
            continue;
        };
        let Ok(listed) = list(&child, options.sizes) else {
            continue;
        };
        let depth = *depth + 1;
        stack.push((child, rel, depth, listed.into_iter()));
    }
    Ok(walk)
}
