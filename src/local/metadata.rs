//! `create_directory`, `get_metadata` and `read_directory`.

use std::io;
use std::time::{SystemTime, UNIX_EPOCH};

use super::errors::with_path;
use super::{Inner, resolve};
use crate::{AbsolutePathBuf, CreateDirectoryOptions, FileMetadata, ReadDirectoryEntry};

pub(crate) fn create_directory(
    fs: &Inner,
    path: &AbsolutePathBuf,
    options: CreateDirectoryOptions,
) -> io::Result<()> {
    let resolved = fs.sandbox.resolve(path)?;
    resolve::require_writable(&fs.sandbox, &resolved, path, options.recursive)?;
    let root = resolved.root;
    let result = if resolved.is_root() {
        if options.recursive {
            Ok(())
        } else {
            Err(io::Error::from(io::ErrorKind::AlreadyExists))
        }
    } else if options.recursive {
        resolve::follow(root, &resolved.rel, true, |p| root.dir().create_dir_all(p))
    } else {
        resolve::follow(root, &resolved.rel, false, |p| root.dir().create_dir(p))
    };
    result.map_err(|e| with_path(path, e))
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
    })
}

fn millis(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

pub(crate) fn read_directory(
    fs: &Inner,
    path: &AbsolutePathBuf,
) -> io::Result<Vec<ReadDirectoryEntry>> {
    let resolved = fs.sandbox.resolve(path)?;
    let root = resolved.root;
    let dir = resolve::follow(root, resolved.cap_path(), true, |p| root.dir().open_dir(p))
        .map_err(|e| with_path(path, e))?;
    let mut entries = Vec::new();
    for entry in dir.entries().map_err(|e| with_path(path, e))? {
        let entry = entry.map_err(|e| with_path(path, e))?;
        let file_type = match entry.file_type() {
            Ok(file_type) => file_type,
            // Removed between readdir and lstat: it is no longer there to list.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(with_path(path, e)),
        };
        entries.push(ReadDirectoryEntry {
            file_name: entry.file_name().to_string_lossy().into_owned(),
            is_directory: file_type.is_dir(),
            is_file: file_type.is_file(),
            is_symlink: file_type.is_symlink(),
        });
    }
    Ok(entries)
}
