//! Every error capfs builds itself, one constructor each, with a fixed message.
//!
//! Errors are plain `std::io::Error`s: callers match on their `io::ErrorKind`. A refusal of the
//! sandbox also says why, as a [`Denial`] read with [`denial`]; an error from the OS that capfs
//! names the path of keeps its errno, read with [`raw_os_error`]. The messages of the copy
//! refusals are fixed strings shared with the codex exec-server, public here so that callers
//! and tests can compare them.
//!
//! The few public constructors are for backends built on the trait (the remote client is one):
//! an error they report for the same situation then reads and matches as the local backend's.

use std::io::{self, ErrorKind};

use crate::path::AbsolutePathBuf;

mod denial;
pub use denial::denied_from_message;
pub use denial::{Denial, denial, raw_os_error};
use denial::{Denied, WithPath};
pub(crate) use denial::{is_escape, unnamed_escape};

/// Message of a directory copy without `recursive`.
pub const COPY_DIRECTORY_NEEDS_RECURSIVE: &str =
    "fs/copy requires recursive: true when sourcePath is a directory";
/// Message of a directory copied into itself or a descendant.
pub const COPY_INTO_ITSELF: &str =
    "fs/copy cannot copy a directory to itself or one of its descendants";
/// Message of a copy whose source is neither a regular file, a directory nor a symlink.
pub const COPY_UNSUPPORTED_TYPE: &str =
    "fs/copy only supports regular files, directories, and symlinks";
/// Message of a file copied onto itself (same inode).
pub const COPY_ONTO_ITSELF: &str = "fs/copy cannot copy a file onto itself";

/// A path under no root of the sandbox (a [`Denial::OutsideRoots`]).
pub fn outside_roots(path: &AbsolutePathBuf) -> io::Error {
    Denied::error(Denial::OutsideRoots, path)
}

/// A mutation under a read-only root (a [`Denial::ReadOnlyRoot`]).
pub fn read_only(path: &AbsolutePathBuf) -> io::Error {
    Denied::error(Denial::ReadOnlyRoot, path)
}

/// A root itself removed, moved or replaced (a [`Denial::ProtectedRoot`]).
pub fn root_protected(path: &AbsolutePathBuf) -> io::Error {
    Denied::error(Denial::ProtectedRoot, path)
}

/// A path that leads out of its root through a link or `..` (a [`Denial::Escape`]).
pub fn escape(path: &AbsolutePathBuf) -> io::Error {
    Denied::error(Denial::Escape, path)
}

/// A file larger than the read limit `limit`.
pub fn too_large(limit: u64) -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        format!("file is too large to read: limit is {limit} bytes"),
    )
}

pub(crate) fn not_regular_file(path: &AbsolutePathBuf) -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        format!("{path}: not a regular file"),
    )
}

pub(crate) fn is_a_directory(path: &AbsolutePathBuf) -> io::Error {
    io::Error::new(ErrorKind::IsADirectory, format!("{path}: is a directory"))
}

pub(crate) fn unsupported(path: &AbsolutePathBuf, what: &str) -> io::Error {
    io::Error::new(
        ErrorKind::Unsupported,
        format!("{path}: this file system does not support {what}"),
    )
}

pub(crate) fn fixed(kind: ErrorKind, message: &'static str) -> io::Error {
    io::Error::new(kind, message)
}

pub(crate) fn moved_during_walk(path: &AbsolutePathBuf) -> io::Error {
    io::Error::other(format!(
        "{path}: a directory was moved while the tree was being walked; stopped"
    ))
}

pub(crate) fn replaced_during(path: &AbsolutePathBuf) -> io::Error {
    io::Error::other(format!(
        "{path}: the entry was replaced while it was being changed; stopped"
    ))
}

pub(crate) fn too_deep(path: &AbsolutePathBuf, limit: usize) -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        format!("{path}: directory tree is deeper than {limit} levels"),
    )
}

/// Prefixes an error from the OS or cap-std with the sandbox path it concerns, keeping its kind:
/// the error is wrapped, so that [`raw_os_error`] and `source()` still reach it. An escape found
/// by capfs's resolver becomes capfs's own escape message.
pub fn with_path(path: &AbsolutePathBuf, err: io::Error) -> io::Error {
    if is_escape(&err) {
        return escape(path);
    }
    WithPath::wrap(path, err)
}

pub(crate) fn write_options_unsupported(path: &AbsolutePathBuf) -> io::Error {
    io::Error::new(
        ErrorKind::Unsupported,
        format!("{path}: this file system cannot apply a mode or modification time"),
    )
}

/// A file system without descriptors to hand out for `fs/open`.
pub(crate) fn open_unsupported(path: &AbsolutePathBuf) -> io::Error {
    io::Error::new(
        ErrorKind::Unsupported,
        format!("{path}: this file system cannot open files for block reads"),
    )
}

/// Checks what a sized stream carried against its announced `size`.
pub fn check_stream_size(got: u64, size: u64) -> io::Result<()> {
    if got < size {
        return Err(stream_ended_early(got, size));
    }
    if got > size {
        return Err(stream_too_long(size));
    }
    Ok(())
}

/// A sized stream that ended after `got` of its announced `size` bytes.
pub fn stream_ended_early(got: u64, size: u64) -> io::Error {
    io::Error::new(
        ErrorKind::UnexpectedEof,
        format!("the data stream ended after {got} of {size} bytes"),
    )
}

pub(crate) fn stream_too_long(size: u64) -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        format!("the data stream carried more than the announced {size} bytes"),
    )
}

pub(crate) fn invalid_glob(pattern: &str, err: &globset::Error) -> io::Error {
    let reason = match err.kind() {
        globset::ErrorKind::UnclosedClass => "unclosed character class".to_string(),
        globset::ErrorKind::UnclosedAlternates => "unclosed alternates".to_string(),
        other => other.to_string().to_lowercase(),
    };
    io::Error::new(
        ErrorKind::InvalidInput,
        format!("{pattern}: invalid glob: {reason}"),
    )
}
