//! `create_directory`, `get_metadata` and `read_directory`.

use std::ffi::OsStr;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use cap_std::fs::Dir;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir};

use super::{Inner, handles, resolve};
use crate::error::{self, with_path};
use crate::file_system::{CreateDirectoryOptions, FileMetadata, ReadDirectoryEntry};
use crate::path::AbsolutePathBuf;
use crate::sandbox::Root;

pub(crate) fn create_directory(
    fs: &Inner,
    path: &AbsolutePathBuf,
    options: CreateDirectoryOptions,
) -> io::Result<()> {
    let resolved = fs.sandbox.resolve(path)?;
    resolved.require_writable(path)?;
    if resolved.is_root() {
        return if options.recursive {
            Ok(())
        } else {
            Err(error::exists(path))
        };
    }
    // Every directory is created through a handle on its parent, checked first: a read-only root
    // nested in this one may be reached through a symlink.
    let writable_parent = |rel: &Path| -> io::Result<Dir> {
        let parent = handles::open_parent(resolved.root, rel).map_err(|e| with_path(path, e))?;
        handles::require_writable_dir(&fs.sandbox, resolved.root, &parent, path)?;
        Ok(parent)
    };
    if !options.recursive {
        let (parent_rel, name) = handles::split(resolved.rel);
        return writable_parent(parent_rel)?
            .create_dir(name)
            .map_err(|e| with_path(path, e));
    }
    let mut prefix = PathBuf::new();
    let count = resolved.rel.components().count();
    for (i, component) in resolved.rel.components().enumerate() {
        let parent = writable_parent(&prefix)?;
        prefix.push(component);
        match parent.create_dir(component) {
            Ok(()) => {}
            // An existing name on the way is entered (or refused) by the next `open_parent`; the
            // last one must be a directory.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                if i + 1 == count && !is_directory_following_links(resolved.root, &prefix) {
                    return Err(with_path(path, e));
                }
            }
            Err(e) => return Err(with_path(path, e)),
        }
    }
    Ok(())
}

/// True when `rel` is a directory once its symlinks are followed (absolute ones included, while
/// they stay inside `root`), as `get_metadata` would report it.
fn is_directory_following_links(root: &Root, rel: &Path) -> bool {
    resolve::followed_metadata(root, rel).is_ok_and(|m| m.is_dir())
}

pub(crate) fn get_metadata(fs: &Inner, path: &AbsolutePathBuf) -> io::Result<FileMetadata> {
    let resolved = fs.sandbox.resolve(path)?;
    let root = resolved.root;
    let link = resolve::follow(root, resolved.cap_path(), false, |p| {
        root.dir().symlink_metadata(p)
    })
    .map_err(|e| with_path(path, e))?;
    let is_symlink = link.is_symlink();
    let metadata = if is_symlink {
        resolve::follow(root, resolved.cap_path(), true, |p| root.dir().metadata(p))
            .map_err(|e| with_path(path, e))?
    } else {
        link
    };
    Ok(FileMetadata {
        is_directory: metadata.is_dir(),
        is_file: metadata.is_file(),
        is_symlink,
        size: metadata.len(),
        created_at_ms: metadata.created().map_or(0, |t| millis(t.into_std())),
        modified_at_ms: metadata.modified().map_or(0, |t| millis(t.into_std())),
        accessed_at_ms: metadata.accessed().map_or(0, |t| millis(t.into_std())),
        mode: cap_std::fs::PermissionsExt::mode(&metadata.permissions()) & 0o7777,
    })
}

pub(crate) fn millis(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// Bytes of directory entries read per `getdents64`: a few hundred typical names.
const LISTING_BUFFER_BYTES: usize = 32 * 1024;

/// A directory listed up to a bound: `entries` so far, and the directory (read up to where the
/// listing stopped) when there may be more.
pub(crate) struct Listing {
    entries: Vec<ReadDirectoryEntry>,
    rest: Option<OwnedFd>,
}

impl Listing {
    /// The whole listing, when the bound was not reached.
    pub(crate) fn complete(self) -> Result<Vec<ReadDirectoryEntry>, Self> {
        match self.rest {
            None => Ok(self.entries),
            Some(_) => Err(self),
        }
    }

    /// Reads the rest of the directory.
    pub(crate) fn finish(mut self, path: &AbsolutePathBuf) -> io::Result<Vec<ReadDirectoryEntry>> {
        if let Some(dir) = self.rest.take() {
            list_into(&mut self.entries, &dir, usize::MAX, path)?;
        }
        Ok(self.entries)
    }
}

pub(crate) fn read_directory(
    fs: &Inner,
    path: &AbsolutePathBuf,
) -> io::Result<Vec<ReadDirectoryEntry>> {
    start_listing(fs, path, usize::MAX)?.finish(path)
}

/// Opens the directory at `path` and lists its entries until it ends or, at the end of a
/// `getdents64` batch, `bound` are listed.
pub(crate) fn start_listing(
    fs: &Inner,
    path: &AbsolutePathBuf,
    bound: usize,
) -> io::Result<Listing> {
    let resolved = fs.sandbox.resolve(path)?;
    let root = resolved.root;
    let dir = resolve::follow(root, resolved.cap_path(), true, |p| root.dir().open_dir(p))
        .map_err(|e| with_path(path, e))?;
    // The directory was opened as a path only (O_PATH); reading its entries needs a handle
    // that can: `.` of that same directory.
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dir = rustix::fs::openat(&dir, ".", flags, Mode::empty())
        .map_err(|e| with_path(path, e.into()))?;
    let mut entries = Vec::new();
    let more = list_into(&mut entries, &dir, bound, path)?;
    Ok(Listing {
        entries,
        rest: more.then_some(dir),
    })
}

/// Appends the entries of the open directory `dir`, from where its reading stands, to
/// `entries`, with `getdents64` into one buffer (the kernel gives each entry's type; an entry
/// whose type it leaves unknown is looked up without following it). Stops at the directory's
/// end (false) or, once `entries` holds `bound`, at the end of a batch (true: the directory's
/// position is then just past what was listed, so a later call goes on from there).
fn list_into(
    entries: &mut Vec<ReadDirectoryEntry>,
    dir: &OwnedFd,
    bound: usize,
    path: &AbsolutePathBuf,
) -> io::Result<bool> {
    let mut buffer = vec![MaybeUninit::<u8>::uninit(); LISTING_BUFFER_BYTES];
    let mut batch = RawDir::new(dir, &mut buffer);
    loop {
        if entries.len() >= bound && batch.is_buffer_empty() {
            return Ok(true);
        }
        let entry = match batch.next() {
            None => return Ok(false),
            // The directory was removed while listed: nothing more is in it.
            Some(Err(rustix::io::Errno::NOENT)) => return Ok(false),
            Some(Err(e)) => return Err(with_path(path, e.into())),
            Some(Ok(entry)) => entry,
        };
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        let file_type = match entry.file_type() {
            FileType::Unknown => match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                // Removed between readdir and lstat: it is no longer there to list.
                Err(rustix::io::Errno::NOENT) => continue,
                Err(e) => return Err(with_path(path, e.into())),
            },
            known => known,
        };
        entries.push(ReadDirectoryEntry {
            file_name: name.to_string_lossy().into_owned(),
            lossy_name: name.to_str().is_none(),
            raw_name: name.to_str().is_none().then(|| name.to_os_string()),
            is_directory: file_type == FileType::Directory,
            is_file: file_type == FileType::RegularFile,
            is_symlink: file_type == FileType::Symlink,
        });
    }
}

pub(crate) fn read_link(fs: &Inner, path: &AbsolutePathBuf) -> io::Result<PathBuf> {
    let resolved = fs.sandbox.resolve(path)?;
    if resolved.is_root() {
        return Err(error::root_is_not_a_link(path));
    }
    let (parent_rel, name) = handles::split(resolved.rel);
    let parent = handles::open_parent(resolved.root, parent_rel).map_err(|e| with_path(path, e))?;
    parent
        .read_link_contents(name)
        .map_err(|e| with_path(path, e))
}

pub(crate) fn create_symlink(fs: &Inner, path: &AbsolutePathBuf, target: &Path) -> io::Result<()> {
    let resolved = fs.sandbox.resolve(path)?;
    resolved.require_writable(path)?;
    if resolved.is_root() {
        return Err(error::exists(path));
    }
    let (parent_rel, name) = handles::split(resolved.rel);
    let parent = handles::open_parent(resolved.root, parent_rel).map_err(|e| with_path(path, e))?;
    handles::require_writable_dir(&fs.sandbox, resolved.root, &parent, path)?;
    parent
        .symlink_contents(target, name)
        .map_err(|e| with_path(path, e))
}
