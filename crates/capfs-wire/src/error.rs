//! Every error the wire builds itself: bounds of streams and replies, and what only a peer can
//! report. The file system's own errors are the library's ([`capfs::error`]).

use std::io::{self, ErrorKind};

use capfs::AbsolutePathBuf;

/// A resolution that met more links than the kernel follows (`ELOOP`).
pub(crate) fn too_many_links(path: &AbsolutePathBuf) -> io::Error {
    let err = io::Error::from_raw_os_error(rustix::io::Errno::LOOP.raw_os_error());
    io::Error::new(
        err.kind(),
        format!("{path}: too many levels of symbolic links"),
    )
}

/// A listing the server cut to its message limit.
pub(crate) fn listing_cut(path: &AbsolutePathBuf, arrived: usize) -> io::Error {
    io::Error::other(format!(
        "{path}: the server cut the listing to its message limit after {arrived} entries; \
         raise the server's --max-message-bytes to list it whole"
    ))
}

pub(crate) fn stream_aborted() -> io::Error {
    io::Error::new(
        ErrorKind::ConnectionAborted,
        "the data stream was aborted by the client",
    )
}

pub(crate) fn stream_idle(timeout: std::time::Duration) -> io::Error {
    io::Error::new(
        ErrorKind::TimedOut,
        format!(
            "the data stream was idle for longer than {} ms",
            timeout.as_millis()
        ),
    )
}

pub(crate) fn reply_too_large(path: &AbsolutePathBuf, limit: usize, method: &str) -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        format!(
            "{path}: file is too large for one message: limit is {limit} bytes of message; \
             use {method}"
        ),
    )
}

/// The client went away before a stream it asked for was carried.
pub(crate) fn client_gone() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the client went away")
}

/// The connection closed while a streamed write still expected data.
pub(crate) fn stream_cut() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the connection closed before the data stream ended",
    )
}
