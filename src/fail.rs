//! How the client reports failures: coreutils-style messages (`capfs: cannot stat '/ws/x': No
//! such file or directory`) and one exit status per kind of failure.

use std::io::{self, ErrorKind};
use std::process::ExitCode;

use std::os::unix::ffi::OsStrExt;

use capfs::AbsolutePathBuf;

use crate::names::{quote, quote_bytes, sanitize};

/// Other failures.
pub const EXIT_FAILURE: u8 = 1;
/// A command line clap refused (clap exits with it itself).
pub const EXIT_USAGE: u8 = 2;
/// A path that does not exist.
pub const EXIT_NOT_FOUND: u8 = 3;
/// A refused operation: outside the roots, read-only root, token refused, OS permissions.
pub const EXIT_PERMISSION: u8 = 4;
/// No connection to the server, or it was lost.
pub const EXIT_CONNECTION: u8 = 5;
/// Ended by SIGINT or SIGTERM.
pub const EXIT_INTERRUPTED: u8 = 130;
/// The reader of stdout went away (128 + SIGPIPE, as a tool killed by it ends).
pub const EXIT_BROKEN_PIPE: u8 = 141;

/// A failure as the client prints it: the whole message and the exit status.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub status: u8,
}

impl Failure {
    /// `verb 'path': reason`, the reason taken from `err` without a repeated path or an
    /// `(os error N)`, the status from its kind.
    pub fn at(verb: &str, path: &str, err: &io::Error) -> Self {
        Self {
            message: format!("{verb} {}: {}", quote(path), reason(err, path)),
            status: status_of(err.kind()),
        }
    }

    /// [`at`](Self::at) for a sandbox path, shown by its bytes: escaped when they are not
    /// UTF-8, never as the lossy text that would name another entry.
    pub fn at_path(verb: &str, path: &AbsolutePathBuf, err: &io::Error) -> Self {
        let bytes = path.as_path().as_os_str().as_bytes();
        Self {
            message: format!(
                "{verb} {}: {}",
                quote_bytes(bytes),
                reason(err, &path.to_string())
            ),
            status: status_of(err.kind()),
        }
    }

    /// A failure that concerns no one path.
    pub fn plain(message: impl Into<String>, status: u8) -> Self {
        Self {
            message: message.into(),
            status,
        }
    }

    /// A failure that prints nothing (the reader of stdout is gone).
    pub fn quiet(status: u8) -> Self {
        Self::plain(String::new(), status)
    }

    /// A usage mistake found after parsing (a relative path without a start, two sources
    /// onto one file).
    pub fn usage(message: impl Into<String>) -> Self {
        Self::plain(message, EXIT_USAGE)
    }

    /// Failing to reach the server: always the connection status, whatever the kind.
    pub fn connection(what: &str, err: &io::Error) -> Self {
        let status = match err.kind() {
            ErrorKind::PermissionDenied => EXIT_PERMISSION,
            ErrorKind::InvalidInput => EXIT_USAGE,
            _ => EXIT_CONNECTION,
        };
        Self::plain(format!("{what}: {}", reason(err, "")), status)
    }

    /// Prints the message on stderr, its unsafe characters escaped (a reason may carry a
    /// server's text or a name), and gives the status.
    pub fn report(&self) -> ExitCode {
        if !self.message.is_empty() {
            eprintln!("capfs: {}", sanitize(&self.message));
        }
        ExitCode::from(self.status)
    }
}

/// The exit status for an error of `kind`.
pub fn status_of(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::NotFound => EXIT_NOT_FOUND,
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => EXIT_PERMISSION,
        ErrorKind::BrokenPipe
        | ErrorKind::ConnectionRefused
        | ErrorKind::ConnectionReset
        | ErrorKind::ConnectionAborted
        | ErrorKind::NotConnected
        | ErrorKind::TimedOut => EXIT_CONNECTION,
        ErrorKind::Interrupted => EXIT_INTERRUPTED,
        _ => EXIT_FAILURE,
    }
}

/// Longest reason shown, in characters: a server's error message is its own text, and may be
/// as long as a message can be.
const MAX_REASON_CHARS: usize = 1_000;

/// The reason an error gives, without a leading `path: ` (the message names the path already)
/// and without the `(os error N)` the standard library appends; cut at [`MAX_REASON_CHARS`]
/// with a note of how much was left out.
pub fn reason(err: &io::Error, path: &str) -> String {
    let text = err.to_string();
    let text = strip_os_error(&text);
    let text = if path.is_empty() {
        text
    } else {
        text.strip_prefix(path)
            .and_then(|rest| rest.strip_prefix(": "))
            .unwrap_or(text)
    };
    match text.char_indices().nth(MAX_REASON_CHARS) {
        Some((end, _)) => format!("{}…[cut {} bytes]", &text[..end], text.len() - end),
        None => text.to_string(),
    }
}

fn strip_os_error(text: &str) -> &str {
    match text.rfind(" (os error ") {
        Some(start) if text.ends_with(')') => &text[..start],
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_drop_the_repeated_path_and_the_os_error() {
        let err = io::Error::new(
            ErrorKind::NotFound,
            "/ws/x: No such file or directory (os error 2)",
        );
        assert_eq!(reason(&err, "/ws/x"), "No such file or directory");
        let failure = Failure::at("cannot stat", "/ws/x", &err);
        assert_eq!(
            failure.message,
            "cannot stat '/ws/x': No such file or directory"
        );
        assert_eq!(failure.status, EXIT_NOT_FOUND);
        let os = io::Error::from_raw_os_error(13);
        assert_eq!(reason(&os, "/a"), "Permission denied");
    }
}
