//! The typed payloads behind capfs's errors: why the sandbox refused a path, and an OS error
//! named with the path it concerns. Both keep the message text capfs has always given, so the
//! wire and the terminal see the same bytes; what they add is reachable only by type.

use std::error::Error;
use std::fmt;
use std::io::{self, ErrorKind};

use crate::path::AbsolutePathBuf;

/// Why capfs refused a path. Every refusal is a `PermissionDenied` error; this says which rule
/// of the sandbox it broke, for callers that must tell an attack from a read-only root without
/// reading the message.
///
/// More reasons may be added; match with a wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Denial {
    /// The path leads out of its root through `..` or a symlink (checked at every component).
    Escape,
    /// The path is under no sandbox root.
    OutsideRoots,
    /// The call would change something under a read-only root.
    ReadOnlyRoot,
    /// The call would remove, move or replace a sandbox root itself.
    ProtectedRoot,
}

const REASONS: [Denial; 4] = [
    Denial::Escape,
    Denial::OutsideRoots,
    Denial::ReadOnlyRoot,
    Denial::ProtectedRoot,
];

impl Denial {
    /// The fixed text that follows the path in the message of this refusal, for example
    /// `path is outside every sandbox root`.
    pub fn text(self) -> &'static str {
        match self {
            Denial::Escape => "path leads outside the sandbox root",
            Denial::OutsideRoots => "path is outside every sandbox root",
            Denial::ReadOnlyRoot => "sandbox root is read-only",
            Denial::ProtectedRoot => "a sandbox root cannot be removed, renamed or replaced",
        }
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

/// Why `err` is a refusal of the sandbox, or `None` when it is not one (a missing file, an
/// error of the OS, a refusal by something other than the sandbox).
///
/// Errors of the local backend carry the reason by type. Errors of a remote backend carry it
/// when the server sent one of the fixed refusal messages (`{path}: ` and [`Denial::text`])
/// with the kind `PermissionDenied`; the server is trusted for this as for every other answer.
///
/// # Example
///
/// ```
/// # use capfs::{AbsolutePathBuf, Access, ExecutorFileSystem, LocalFileSystem, Sandbox};
/// # use capfs::error::{Denial, denial};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let root = dir.path().canonicalize().unwrap();
/// let fs = LocalFileSystem::new(Sandbox::new().with_root(&root, Access::ReadOnly).unwrap());
/// let path = AbsolutePathBuf::new(root.join("new.txt")).unwrap();
/// let err = fs.write_file(&path, b"x".to_vec()).await.unwrap_err();
/// assert_eq!(denial(&err), Some(Denial::ReadOnlyRoot));
/// # });
/// ```
pub fn denial(err: &io::Error) -> Option<Denial> {
    if err.kind() != ErrorKind::PermissionDenied {
        return None;
    }
    let inner = err.get_ref()?;
    if let Some(denied) = inner.downcast_ref::<Denied>() {
        return Some(denied.reason);
    }
    if inner.is::<UnnamedEscape>() {
        return Some(Denial::Escape);
    }
    inner
        .downcast_ref::<WithPath>()
        .and_then(|wrapped| denial(&wrapped.source))
}

/// The OS error code behind `err`, also when capfs has prefixed it with the path it concerns
/// (which [`io::Error::raw_os_error`] alone does not see through); `None` when no OS call failed.
pub fn raw_os_error(err: &io::Error) -> Option<i32> {
    err.raw_os_error().or_else(|| {
        err.get_ref()?
            .downcast_ref::<WithPath>()
            .and_then(|wrapped| raw_os_error(&wrapped.source))
    })
}

/// A refusal of the sandbox: its reason, and the message as capfs words it.
#[derive(Debug)]
pub(super) struct Denied {
    reason: Denial,
    message: String,
}

impl Denied {
    pub(super) fn error(reason: Denial, path: &AbsolutePathBuf) -> io::Error {
        let message = format!("{path}: {}", reason.text());
        io::Error::new(ErrorKind::PermissionDenied, Denied { reason, message })
    }
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error for Denied {}

/// A `PermissionDenied` error from a peer's `message`: typed as a [`Denial`] when the message is
/// one of the fixed refusals, plain otherwise.
pub fn denied_from_message(message: String) -> io::Error {
    let reason = REASONS.into_iter().find(|reason| {
        message
            .strip_suffix(reason.text())
            .is_some_and(|head| head.ends_with(": "))
    });
    match reason {
        Some(reason) => io::Error::new(ErrorKind::PermissionDenied, Denied { reason, message }),
        None => io::Error::new(ErrorKind::PermissionDenied, message),
    }
}

/// The payload of the escape errors capfs's resolver builds before the path is known,
/// recognised by its type (never by the text of someone else's error).
#[derive(Debug)]
struct UnnamedEscape;

impl fmt::Display for UnnamedEscape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Denial::Escape.text())
    }
}

impl Error for UnnamedEscape {}

/// The error of a path that resolves outside its root, before [`super::with_path`] names the
/// path.
pub(crate) fn unnamed_escape() -> io::Error {
    io::Error::new(ErrorKind::PermissionDenied, UnnamedEscape)
}

/// True for an error made by [`unnamed_escape`].
pub(crate) fn is_escape(err: &io::Error) -> bool {
    err.kind() == ErrorKind::PermissionDenied
        && err
            .get_ref()
            .is_some_and(|inner| inner.is::<UnnamedEscape>())
}

/// An error named with the sandbox path it concerns: `{path}: {source}`, with the source kept
/// as `source()` so that its errno stays readable.
#[derive(Debug)]
pub(super) struct WithPath {
    path: AbsolutePathBuf,
    source: io::Error,
}

impl WithPath {
    pub(super) fn wrap(path: &AbsolutePathBuf, source: io::Error) -> io::Error {
        let kind = source.kind();
        let path = path.clone();
        io::Error::new(kind, WithPath { path, source })
    }
}

impl fmt::Display for WithPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.source)
    }
}

impl Error for WithPath {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.source)
    }
}
