//! Every error the wire builds itself, one constructor each with its message: bounds of streams
//! and replies and the transport's failures here, the client's in `error/remote.rs`, the
//! server's in `error/server.rs` and those of file handles and watches in `error/handles.rs`.
//! The file system's own errors are the library's ([`capfs::error`]).

use std::fmt::Display;
use std::io::{self, ErrorKind};

use capfs::AbsolutePathBuf;

mod handles;
mod remote;
mod server;
pub(crate) use handles::*;
pub(crate) use remote::*;
pub(crate) use server::*;

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

/// An error of the OS prefixed with what it concerns (a file, a URL, a command), its kind kept.
pub(crate) fn prefixed(what: impl Display, err: &io::Error) -> io::Error {
    io::Error::new(err.kind(), format!("{what}: {err}"))
}

/// A write to the socket that the kernel would block, to try again when it is writable.
pub(crate) fn would_block() -> io::Error {
    io::ErrorKind::WouldBlock.into()
}

pub(crate) fn socket_wrote_nothing() -> io::Error {
    io::Error::from(ErrorKind::WriteZero)
}

pub(crate) fn text_frame_length(made: usize, announced: usize) -> io::Error {
    io::Error::other(format!(
        "a text frame announced {announced} bytes and its pieces made {made}"
    ))
}

pub(crate) fn encoder_ended(piece: usize) -> io::Error {
    io::Error::other(format!(
        "the thread encoding a reply ended before its piece {piece}"
    ))
}

pub(crate) fn websocket_writer_failed() -> io::Error {
    io::Error::new(ErrorKind::BrokenPipe, "the WebSocket's writer failed")
}
