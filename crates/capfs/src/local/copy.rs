//! `copy`: files through a temporary file and a rename, symlinks as links, directory trees by an
//! iterative walk on handles that never enters the destination it is creating.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::io::{self, ErrorKind};
use std::path::Path;

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, File, Metadata, MetadataExt};

use super::handles::{self, dir_id};
use super::read::nonblocking_read_options;
use super::write::{WriteTarget, replace_file};
use super::{COPY_DEPTH_LIMIT, Inner, contents, resolve};
use crate::error::{self, with_path};
use crate::file_system::CopyOptions;
use crate::path::AbsolutePathBuf;
use crate::sandbox::{FileId, Resolved, Sandbox};

pub(crate) fn copy(
    fs: &Inner,
    source: &AbsolutePathBuf,
    destination: &AbsolutePathBuf,
    options: CopyOptions,
) -> io::Result<()> {
    let src = fs.sandbox.resolve(source)?;
    let dst = fs.sandbox.resolve(destination)?;
    dst.require_writable(destination)?;
    let metadata = resolve::follow(src.root, src.cap_path(), false, |p| {
        src.root.dir().symlink_metadata(p)
    })
    .map_err(|e| with_path(source, e))?;
    if metadata.is_dir() {
        if !options.recursive {
            return Err(error::fixed(
                ErrorKind::InvalidInput,
                error::COPY_DIRECTORY_NEEDS_RECURSIVE,
            ));
        }
        copy_tree(&fs.sandbox, &src, source, &dst, destination)
    } else if metadata.is_symlink() {
        if dst.is_root() {
            return Err(error::root_protected(destination));
        }
        let (parent_rel, name) = handles::split(src.rel);
        let text = handles::open_parent(src.root, parent_rel)
            .and_then(|parent| parent.read_link_contents(name))
            .map_err(|e| with_path(source, e))?;
        let (dst_parent_rel, dst_name) = handles::split(dst.rel);
        let dst_parent = handles::open_parent(dst.root, dst_parent_rel)
            .map_err(|e| with_path(destination, e))?;
        handles::require_writable_dir(&fs.sandbox, dst.root, &dst_parent, destination)?;
        place_symlink(&dst_parent, dst_name, &text).map_err(|e| with_path(destination, e))
    } else if metadata.is_file() {
        copy_file(&fs.sandbox, &src, source, &dst, destination)
    } else {
        Err(error::fixed(
            ErrorKind::InvalidInput,
            error::COPY_UNSUPPORTED_TYPE,
        ))
    }
}

/// Options that open a regular file for reading without following a final symlink and without
/// blocking on a special file.
fn source_options() -> cap_std::fs::OpenOptions {
    let mut options = nonblocking_read_options();
    options.follow(FollowSymlinks::No);
    options
}

/// Opens `name` in `dir` as a copy source, with its metadata: `Ok(None)` when it is not a
/// regular file (a socket refuses the open itself with `ENXIO`).
fn open_source(dir: &Dir, name: &Path) -> io::Result<Option<(File, Metadata)>> {
    let file = match dir.open_with(name, &source_options()) {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let metadata = file.metadata()?;
    Ok(metadata.is_file().then_some((file, metadata)))
}

fn copy_file(
    sandbox: &Sandbox,
    src: &Resolved<'_>,
    source: &AbsolutePathBuf,
    dst: &Resolved<'_>,
    destination: &AbsolutePathBuf,
) -> io::Result<()> {
    let opened = resolve::follow(src.root, src.cap_path(), false, |p| {
        open_source(src.root.dir(), p)
    })
    .map_err(|e| with_path(source, e))?;
    let Some((file, source_metadata)) = opened else {
        return Err(error::fixed(
            ErrorKind::InvalidInput,
            error::COPY_UNSUPPORTED_TYPE,
        ));
    };
    let target = WriteTarget::resolve(dst, destination)?;
    handles::require_writable_dir(sandbox, dst.root, &target.parent, destination)?;
    target.existing_file_permissions(destination)?;
    if let Some(existing) = &target.existing
        && FileId::of(existing) == FileId::of(&source_metadata)
    {
        return Err(error::fixed(
            ErrorKind::InvalidInput,
            error::COPY_ONTO_ITSELF,
        ));
    }
    let free = target.existing.is_none();
    let (parent, name, clone) = (&target.parent, &target.name, dst.root.may_clone());
    let owner = target.existing_owner();
    write_copy(&file, &source_metadata, parent, name, owner, free, clone)
        .map_err(|e| with_path(destination, e))
}

/// Copies `file` (whose metadata at opening is `metadata`) into a new file that replaces `name`
/// in `parent` and keeps its `owner`, with the source's permissions (without setuid and setgid, see [`replace_file`]). The
/// data moves inside the kernel and holes stay holes (see `contents.rs`); a reflink is tried
/// first when `may_clone`.
fn write_copy(
    file: &File,
    metadata: &Metadata,
    parent: &Dir,
    name: &OsStr,
    owner: Option<(u32, u32)>,
    name_is_free: bool,
    may_clone: bool,
) -> io::Result<()> {
    let len = metadata.len();
    let sparse = metadata.blocks().saturating_mul(512) < len;
    let permissions = Some(metadata.permissions());
    replace_file(parent, name, permissions, owner, name_is_free, |out| {
        contents::copy_contents(file, &*out, len, sparse, may_clone)
    })
}

/// Creates a symlink with the link text `text` at `name`, replacing a file or link already there.
fn place_symlink(parent: &Dir, name: &OsStr, text: &Path) -> io::Result<()> {
    match parent.symlink_contents(text, name) {
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            if parent.symlink_metadata(name)?.is_dir() {
                return Err(error::link_over_directory());
            }
            let temp = handles::temporary_name("link");
            parent.symlink_contents(text, &temp)?;
            parent.rename(&temp, parent, name).inspect_err(|_| {
                let _ = parent.remove_file(&temp);
            })
        }
        other => other,
    }
}

/// A directory pair on the walk: identities of the source and destination directories, and the
/// source subdirectories still to copy.
struct Frame {
    src_id: FileId,
    dst_id: FileId,
    subdirs: Vec<OsString>,
}

/// Copies the directory tree at `src` to `dst`, merging into an existing directory there.
///
/// Iterative, with at most four directory handles open whatever the depth. Source directories
/// are entered with `O_NOFOLLOW`; every destination directory created is remembered by identity
/// and never entered as a source, so a copy into itself (through any alias, or a concurrent
/// rename) cannot recurse into its own output.
fn copy_tree(
    sandbox: &Sandbox,
    src: &Resolved<'_>,
    source: &AbsolutePathBuf,
    dst: &Resolved<'_>,
    destination: &AbsolutePathBuf,
) -> io::Result<()> {
    let into_itself = || error::fixed(ErrorKind::InvalidInput, error::COPY_INTO_ITSELF);
    let src_err = |e| with_path(source, e);
    let dst_err = |e| with_path(destination, e);

    let mut src_dir = resolve::follow(src.root, src.cap_path(), false, |p| {
        src.root.dir().open_dir_nofollow(p)
    })
    .map_err(src_err)?;
    let src_id = dir_id(&src_dir).map_err(src_err)?;

    let mut dst_dir = if dst.is_root() {
        let root = dst.root.dir().try_clone().map_err(dst_err)?;
        if handles::dir_or_ancestor_is(&root, src_id).map_err(dst_err)? {
            return Err(into_itself());
        }
        root
    } else {
        let (parent_rel, name) = handles::split(dst.rel);
        let parent = handles::open_parent(dst.root, parent_rel).map_err(dst_err)?;
        handles::require_writable_dir(sandbox, dst.root, &parent, destination)?;
        if handles::dir_or_ancestor_is(&parent, src_id).map_err(dst_err)? {
            return Err(into_itself());
        }
        match parent.symlink_metadata(name) {
            Ok(m) if m.is_dir() && FileId::of(&m) == src_id => return Err(into_itself()),
            Ok(m) if !m.is_dir() => {
                return Err(error::exists_not_directory(destination));
            }
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {
                parent.create_dir(name).map_err(dst_err)?;
            }
            Err(e) => return Err(dst_err(e)),
        }
        parent.open_dir_nofollow(name).map_err(dst_err)?
    };
    let dst_id = dir_id(&dst_dir).map_err(dst_err)?;
    // Everything written lands below `dst_dir`, which is not in a read-only root; a directory
    // on the way down could still be one (moved there), so each is checked before it is entered.
    if sandbox.is_read_only_id(dst_id) {
        return Err(error::read_only(destination));
    }
    let mut created = HashSet::from([dst_id]);
    let may_clone = dst.root.may_clone();

    let mut stack = vec![Frame {
        src_id,
        dst_id,
        subdirs: copy_entries(&src_dir, &dst_dir, source, destination, may_clone)?,
    }];
    loop {
        let frame = stack
            .last_mut()
            .expect("the walk stops when the stack is empty");
        if let Some(name) = frame.subdirs.pop() {
            let child = match src_dir.open_dir_nofollow(&name) {
                Ok(child) => child,
                // Gone, or no longer a directory: nothing to copy as a directory.
                Err(e) if e.kind() == ErrorKind::NotFound || handles::is_not_a_directory(&e) => {
                    continue;
                }
                Err(e) => return Err(src_err(e)),
            };
            let child_id = dir_id(&child).map_err(src_err)?;
            if created.contains(&child_id) {
                continue;
            }
            if stack.len() >= COPY_DEPTH_LIMIT {
                return Err(error::too_deep(source, COPY_DEPTH_LIMIT));
            }
            match dst_dir.create_dir(&name) {
                Err(e) if e.kind() != ErrorKind::AlreadyExists => return Err(dst_err(e)),
                _ => {}
            }
            let child_dst = dst_dir.open_dir_nofollow(&name).map_err(dst_err)?;
            let child_dst_id = dir_id(&child_dst).map_err(dst_err)?;
            if sandbox.is_read_only_id(child_dst_id) {
                return Err(error::read_only(destination));
            }
            if child_dst_id == child_id {
                return Err(into_itself());
            }
            created.insert(child_dst_id);
            let subdirs = copy_entries(&child, &child_dst, source, destination, may_clone)?;
            src_dir = child;
            dst_dir = child_dst;
            stack.push(Frame {
                src_id: child_id,
                dst_id: child_dst_id,
                subdirs,
            });
            continue;
        }
        stack.pop();
        let Some(up) = stack.last() else {
            return Ok(());
        };
        src_dir = handles::open_parent_verified(&src_dir, up.src_id)
            .map_err(src_err)?
            .ok_or_else(|| error::moved_during_walk(source))?;
        dst_dir = handles::open_parent_verified(&dst_dir, up.dst_id)
            .map_err(dst_err)?
            .ok_or_else(|| error::moved_during_walk(destination))?;
    }
}

/// Copies the files and symlinks of `src_dir` into `dst_dir`, skips special files, and returns
/// the names of the subdirectories. `may_clone`: the destination's file system may have
/// reflinks.
fn copy_entries(
    src_dir: &Dir,
    dst_dir: &Dir,
    source: &AbsolutePathBuf,
    destination: &AbsolutePathBuf,
    may_clone: bool,
) -> io::Result<Vec<OsString>> {
    let src_err = |e| with_path(source, e);
    let mut subdirs = Vec::new();
    for entry in src_dir.entries().map_err(src_err)? {
        let entry = entry.map_err(src_err)?;
        let name = entry.file_name();
        let file_type = match entry.file_type() {
            Ok(t) => t,
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(src_err(e)),
        };
        if file_type.is_dir() {
            subdirs.push(name);
        } else if file_type.is_symlink() {
            let text = match src_dir.read_link_contents(&name) {
                Ok(text) => text,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(src_err(e)),
            };
            place_symlink(dst_dir, &name, &text).map_err(|e| with_path(destination, e))?;
        } else if file_type.is_file() {
            // Swapped for something else since readdir: skip it like any special file.
            let (file, metadata) = match open_source(src_dir, Path::new(&name)) {
                Ok(Some(opened)) => opened,
                Ok(None) => continue,
                Err(e) if e.kind() == ErrorKind::NotFound || handles::is_not_a_directory(&e) => {
                    continue;
                }
                Err(e) => return Err(src_err(e)),
            };
            // A tree is usually copied into a new directory: its names are taken to be free.
            write_copy(&file, &metadata, dst_dir, &name, None, true, may_clone)
                .map_err(|e| with_path(destination, e))?;
        }
    }
    Ok(subdirs)
}
