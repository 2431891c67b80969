//! What the client's files share below the connection itself: a reply as it arrived, and the
//! errors of a call that the server did not answer.

use std::io;
use std::time::Duration;

use bytes::Bytes;

/// A reply as it arrived: the whole message, which its caller decodes straight into the type
/// it expects (no `serde_json::Value` in between).
pub(super) type Reply = Bytes;

/// The error of every pending and later call once the connection is gone.
pub(super) fn connection_lost() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "connection to the capfs server was lost",
    )
}

/// A call or stream that heard nothing from the server within `bound` (`call timeout`,
/// `stream idle timeout`).
pub(super) fn no_reply(what: &str, bound: &str, after: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("{what}: nothing from the server within the {bound} ({after:?})"),
    )
}

pub(super) fn timed_out(what: &str, after: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("{what} timed out after {after:?}"),
    )
}
