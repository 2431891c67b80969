//! The client's own errors: a server that cannot be reached or refuses, a reply that breaks
//! the protocol, a call the server does not support, and a call that waited too long.

use std::fmt::Display;
use std::io::{self, ErrorKind};
use std::time::Duration;

use capfs::AbsolutePathBuf;

fn bad_data(message: String) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, message)
}

/// A call that heard nothing from the server within `bound` (the `call timeout` or the
/// `stream idle timeout`).
pub(crate) fn no_reply(what: &str, bound: &str, after: Duration) -> io::Error {
    io::Error::new(
        ErrorKind::TimedOut,
        format!("{what}: nothing from the server within the {bound} ({after:?})"),
    )
}

pub(crate) fn timed_out(what: &str, after: Duration) -> io::Error {
    io::Error::new(
        ErrorKind::TimedOut,
        format!("{what} timed out after {after:?}"),
    )
}

pub(crate) fn connection_lost() -> io::Error {
    io::Error::new(
        ErrorKind::BrokenPipe,
        "connection to the capfs server was lost",
    )
}

/// The server broke the WebSocket protocol or the client's bounds: `message` says how.
pub(crate) fn broken_by_server(message: String) -> io::Error {
    bad_data(message)
}

pub(crate) fn unexpected_result(method: &str, err: impl Display) -> io::Error {
    bad_data(format!("{method}: unexpected result from server: {err}"))
}

pub(crate) fn invalid_base64(path: &AbsolutePathBuf, err: impl Display) -> io::Error {
    bad_data(format!("{path}: server sent invalid base64: {err}"))
}

pub(crate) fn range_overrun(path: &AbsolutePathBuf, got: u64, want: u64) -> io::Error {
    bad_data(format!(
        "{path}: the server sent {got} bytes of a {want}-byte range"
    ))
}

pub(crate) fn invalid_name(path: &AbsolutePathBuf, name: &str) -> io::Error {
    bad_data(format!(
        "{path}: the server listed an invalid name {name:?}"
    ))
}

pub(crate) fn stream_overrun(path: &AbsolutePathBuf, max: u64) -> io::Error {
    bad_data(format!(
        "{path}: the server sent more than the {max} bytes asked for"
    ))
}

pub(crate) fn stream_short(path: &AbsolutePathBuf, received: u64, size: u64) -> io::Error {
    bad_data(format!("{path}: received {received} bytes of {size}"))
}

pub(crate) fn write_finished_early(path: &AbsolutePathBuf) -> io::Error {
    bad_data(format!(
        "{path}: the server finished the write before its data was sent"
    ))
}

pub(crate) fn write_size_mismatch(path: &AbsolutePathBuf, wrote: u64, sent: u64) -> io::Error {
    bad_data(format!("{path}: the server wrote {wrote} bytes of {sent}"))
}

pub(crate) fn extension_unsupported(path: &AbsolutePathBuf, what: &str) -> io::Error {
    io::Error::new(
        ErrorKind::Unsupported,
        format!("{path}: the server does not support {what}"),
    )
}

pub(crate) fn narrowing_unsupported(path: &AbsolutePathBuf) -> io::Error {
    io::Error::new(
        ErrorKind::Unsupported,
        format!("{path}: the server does not support narrowing its roots"),
    )
}

pub(crate) fn narrowed_count(answered: usize, asked: usize) -> io::Error {
    bad_data(format!(
        "the server answered {answered} of {asked} narrowed roots"
    ))
}

/// A directory the server would not narrow to: its own reason, or that it refused.
pub(crate) fn narrowing_refused(path: &AbsolutePathBuf, reason: Option<String>) -> io::Error {
    io::Error::new(
        ErrorKind::PermissionDenied,
        reason.unwrap_or_else(|| format!("{path}: refused by the server")),
    )
}

pub(crate) fn link_text_not_utf8(path: &AbsolutePathBuf) -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        format!("{path}: the link's text is not UTF-8"),
    )
}

/// A request that cannot be written as JSON: only a path that is not UTF-8 does that.
pub(crate) fn unserialisable(err: &serde_json::Error) -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, err.to_string())
}

pub(crate) fn empty_argv() -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, "argv is empty")
}

pub(crate) fn process_input_closed(id: &str) -> io::Error {
    io::Error::new(
        ErrorKind::BrokenPipe,
        format!("process {id}: its input is closed"),
    )
}

pub(crate) fn signal_not_sendable(signal: i32) -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        format!("signal {signal} cannot be sent to a remote process"),
    )
}

pub(crate) fn invalid_url(url: &str, err: impl Display) -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, format!("{url}: {err}"))
}

pub(crate) fn token_not_a_header() -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, "token is not a valid header value")
}

/// The server answered the WebSocket upgrade with `status`: `kind` is what that status means
/// to the caller, `body` the start of what it said.
pub(crate) fn refused_by_server(
    url: &str,
    kind: ErrorKind,
    status: impl Display,
    body: &str,
) -> io::Error {
    io::Error::new(
        kind,
        format!("{url}: server refused the connection ({status}) {body}"),
    )
}

/// A connection that failed otherwise than by an error of the OS.
pub(crate) fn connect_failed(url: &str, err: impl Display) -> io::Error {
    io::Error::other(format!("{url}: {err}"))
}

#[cfg(feature = "tls")]
pub(crate) fn not_pem(file: &std::path::Path, err: &dyn Display) -> io::Error {
    bad_data(format!(
        "{}: not a PEM certificate file: {err}",
        file.display()
    ))
}

/// rustls refused the client's configuration; its error is the source.
#[cfg(feature = "tls")]
pub(crate) fn tls_setup(err: rustls::Error) -> io::Error {
    io::Error::other(err)
}

#[cfg(not(feature = "tls"))]
pub(crate) fn tls_not_built() -> io::Error {
    io::Error::new(
        ErrorKind::Unsupported,
        "wss:// needs capfs built with its `tls` feature",
    )
}
