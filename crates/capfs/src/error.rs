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
use std::path::Path;

use crate::path::AbsolutePathBuf;

mod denial;
mod identity;
mod kinds;
mod process;
pub use denial::denied_from_message;
pub use denial::{Denial, denial, raw_os_error};
use denial::{Denied, WithPath};
pub(crate) use denial::{is_escape, unnamed_escape};
pub(crate) use identity::*;
pub use kinds::{kind_name, kind_of_name, named_kinds};
pub(crate) use process::*;

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

/// A sized stream that carried more than its announced `size` bytes.
pub fn stream_too_long(size: u64) -> io::Error {
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

/// An error of the OS about a host path (a root being opened), prefixed with that path; the
/// kind is kept, the error itself is not (the path is not yet a sandbox path).
pub(crate) fn at_host_path(path: &Path, err: &io::Error) -> io::Error {
    io::Error::new(err.kind(), format!("{}: {err}", path.display()))
}

pub(crate) fn already_a_root(path: &AbsolutePathBuf) -> io::Error {
    io::Error::new(
        ErrorKind::AlreadyExists,
        format!("{path}: already a sandbox root"),
    )
}

/// A directory created where an entry already is, or a link made over a root.
pub(crate) fn exists(path: &AbsolutePathBuf) -> io::Error {
    with_path(path, io::Error::from(ErrorKind::AlreadyExists))
}

/// A root's link text asked for: a root is never a link.
pub(crate) fn root_is_not_a_link(path: &AbsolutePathBuf) -> io::Error {
    with_path(path, io::Error::from(ErrorKind::InvalidInput))
}

/// A link copied over a directory, as the OS refuses it (the caller names the path).
pub(crate) fn link_over_directory() -> io::Error {
    io::Error::from(ErrorKind::IsADirectory)
}

pub(crate) fn exists_not_directory(path: &AbsolutePathBuf) -> io::Error {
    io::Error::new(
        ErrorKind::AlreadyExists,
        format!("{path}: exists and is not a directory"),
    )
}

pub(crate) fn rename_across_roots(path: &AbsolutePathBuf) -> io::Error {
    io::Error::new(
        ErrorKind::CrossesDevices,
        format!("{path}: cannot rename across sandbox roots"),
    )
}

pub(crate) fn too_many_temporaries() -> io::Error {
    io::Error::new(ErrorKind::AlreadyExists, "too many temporary files exist")
}

/// A blocking-pool task of the local backend that panicked or was cancelled.
pub(crate) fn task_failed(err: &tokio::task::JoinError) -> io::Error {
    io::Error::other(format!("file system task failed: {err}"))
}

/// What the sink of a range read by streaming returns once it holds the range, to stop the
/// stream.
pub(crate) fn range_read() -> io::Error {
    io::Error::other("the range is read")
}

/// The default of `narrowed`, for a file system that cannot narrow.
pub(crate) fn narrowing_unsupported() -> io::Error {
    io::Error::new(
        ErrorKind::Unsupported,
        "this file system cannot narrow its roots",
    )
}

pub(crate) fn artifact_not_base64(err: &base64::DecodeError) -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        format!("image generation result is not valid base64: {err}"),
    )
}

/// An audit log that could not be opened, naming it.
pub(crate) fn audit_log_unopened(path: &Path, err: &io::Error) -> io::Error {
    io::Error::new(err.kind(), format!("{}: {err}", path.display()))
}
