//! Every error capfs builds itself, one constructor each, with a fixed message.

use std::io::{self, ErrorKind};

use crate::AbsolutePathBuf;

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

pub(crate) fn outside_roots(path: &AbsolutePathBuf) -> io::Error {
    io::Error::new(
        ErrorKind::PermissionDenied,
        format!("{path}: path is outside every sandbox root"),
    )
}

pub(crate) fn read_only(path: &AbsolutePathBuf) -> io::Error {
    io::Error::new(
        ErrorKind::PermissionDenied,
        format!("{path}: sandbox root is read-only"),
    )
}

pub(crate) fn root_protected(path: &AbsolutePathBuf) -> io::Error {
    io::Error::new(
        ErrorKind::PermissionDenied,
        format!("{path}: a sandbox root cannot be removed, renamed or replaced"),
    )
}

pub(crate) fn escape(path: &AbsolutePathBuf) -> io::Error {
    io::Error::new(
        ErrorKind::PermissionDenied,
        format!("{path}: path leads outside the sandbox root"),
    )
}

pub(crate) fn too_large(limit: u64) -> io::Error {
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

pub(crate) fn fixed(kind: ErrorKind, message: &'static str) -> io::Error {
    io::Error::new(kind, message)
}

pub(crate) fn moved_during_walk(path: &AbsolutePathBuf) -> io::Error {
    io::Error::other(format!(
        "{path}: a directory was moved while the tree was being walked; stopped"
    ))
}

pub(crate) fn too_deep(path: &AbsolutePathBuf, limit: usize) -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        format!("{path}: directory tree is deeper than {limit} levels"),
    )
}

/// Prefixes an error from the OS or cap-std with the sandbox path it concerns, keeping its kind.
/// cap-std's escape error becomes capfs's own escape message.
pub(crate) fn with_path(path: &AbsolutePathBuf, err: io::Error) -> io::Error {
    if is_cap_std_escape(&err) {
        return escape(path);
    }
    io::Error::new(err.kind(), format!("{path}: {err}"))
}

/// The text cap-std gives its escape errors; capfs's own resolver uses it too, so one check
/// recognises both before [`with_path`] gives them capfs's message.
const CAP_STD_ESCAPE_TEXT: &str = "a path led outside of the filesystem";

pub(crate) fn is_cap_std_escape(err: &io::Error) -> bool {
    err.kind() == ErrorKind::PermissionDenied
        && err
            .get_ref()
            .is_some_and(|inner| inner.to_string() == CAP_STD_ESCAPE_TEXT)
}

pub(crate) fn cap_std_style_escape() -> io::Error {
    io::Error::new(ErrorKind::PermissionDenied, CAP_STD_ESCAPE_TEXT)
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
