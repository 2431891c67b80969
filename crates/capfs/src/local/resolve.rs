//! Symlink resolution for absolute link texts.
//!
//! cap-std refuses every absolute symlink as an escape. capfs follows one when its text names a
//! place inside the same root (`/ws/a -> /ws/b`, or any absolute link under a root of `/`), so
//! each operation first tries cap-std alone and, only when cap-std reports an escape, resolves
//! the path here into a symlink-free path relative to the root and tries once more. Every step
//! still goes through the root's handle, so a race can only redirect within the root; a link
//! that leads out stays an escape.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::error;
use crate::path::AbsolutePathBuf;
use crate::sandbox::Root;

/// The most symlinks followed while resolving one path (the kernel's own limit).
pub(crate) const MAX_SYMLINK_HOPS: usize = 40;

/// The error a path operation gives for a loop of symlinks.
pub(crate) fn symlink_loop() -> io::Error {
    io::Error::from_raw_os_error(rustix::io::Errno::LOOP.raw_os_error())
}

/// Runs `op` on `rel` (relative to `root`, `.` for the root itself); when it is refused with
/// `PermissionDenied` (cap-std's answer to every absolute symlink and to a `..` that climbs out,
/// but also the OS's answer to permission bits), resolves the path's symlinks with
/// [`resolve_links`] and, when that changes the path, retries once on the result. Whether the
/// refusal was an escape is never read from cap-std's message: a path whose links lead out fails
/// in [`resolve_links`] with capfs's own typed escape error.
pub(crate) fn follow<T>(
    root: &Root,
    rel: &Path,
    follow_final: bool,
    op: impl Fn(&Path) -> io::Result<T>,
) -> io::Result<T> {
    match op(rel) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            let resolved = resolve_links(root, rel, follow_final)?;
            let resolved = cap_form(&resolved);
            if resolved == cap_form(rel) {
                return Err(e);
            }
            op(resolved)
        }
        other => other,
    }
}

/// The metadata of `rel` with every symlink followed, absolute ones inside `root` included.
/// When its last component is no symlink, that is what one `statx` without following finds
/// (cap-std's `metadata` opens an `O_PATH` handle to stat through it: three calls where one
/// does); otherwise, and on any error, it is found by [`follow`] as before, so that a link, a
/// refusal or a missing file gives exactly what following gives.
pub(crate) fn followed_metadata(root: &Root, rel: &Path) -> io::Result<cap_std::fs::Metadata> {
    match root.dir().symlink_metadata(cap_form(rel)) {
        Ok(metadata) if !metadata.is_symlink() => Ok(metadata),
        _ => follow(root, rel, true, |p| root.dir().metadata(p)),
    }
}

/// `.` for the empty path: the form cap-std takes for the root itself.
pub(crate) fn cap_form(rel: &Path) -> &Path {
    if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    }
}

/// Resolves every symlink in `rel` (the last component only when `follow_final`) and returns a
/// path relative to the root with no symlink, `.` or `..` in it. A component that does not exist
/// ends the resolution: it and the rest are appended as they are, for the caller's operation to
/// report `NotFound` or create them.
///
/// # Errors
///
/// `PermissionDenied` (capfs's typed escape error) when a link leads out of the root: a relative text
/// that climbs above it, or an absolute text under no part of the root's path.
pub(crate) fn resolve_links(root: &Root, rel: &Path, follow_final: bool) -> io::Result<PathBuf> {
    let mut done = PathBuf::new();
    let mut todo: VecDeque<OsString> = VecDeque::new();
    push_front(&mut todo, rel)?;
    let mut hops = 0;
    while let Some(name) = todo.pop_front() {
        if name == ".." {
            if !done.pop() {
                return Err(error::unnamed_escape());
            }
            continue;
        }
        let candidate = done.join(&name);
        if todo.is_empty() && !follow_final {
            return Ok(candidate);
        }
        let metadata = match root.dir().symlink_metadata(&candidate) {
            Ok(metadata) => metadata,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                done = candidate;
                done.extend(todo);
                return Ok(done);
            }
            Err(e) => return Err(e),
        };
        if !metadata.is_symlink() {
            done = candidate;
            continue;
        }
        hops += 1;
        if hops > MAX_SYMLINK_HOPS {
            return Err(symlink_loop());
        }
        let text = root.dir().read_link_contents(&candidate)?;
        if text.is_absolute() {
            let absolute = AbsolutePathBuf::new(&text)?;
            let inside = absolute
                .strip_prefix(root.path())
                .ok_or_else(error::unnamed_escape)?;
            done = PathBuf::new();
            push_front(&mut todo, inside)?;
        } else {
            push_front(&mut todo, &text)?;
        }
    }
    Ok(done)
}

/// Puts the components of `path` (`.` dropped, `..` kept) in front of `todo`.
fn push_front(todo: &mut VecDeque<OsString>, path: &Path) -> io::Result<()> {
    for component in path.components().rev() {
        match component {
            Component::Normal(name) => todo.push_front(name.to_os_string()),
            Component::ParentDir => todo.push_front(OsString::from("..")),
            Component::CurDir | Component::RootDir => {}
            Component::Prefix(_) => return Err(error::unnamed_escape()),
        }
    }
    Ok(())
}
