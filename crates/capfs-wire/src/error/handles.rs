//! The errors of the current protocol's file handles (`fs/open`, its blocks and `fs/close`)
//! and of its watches (`fs/watchMissing`).

use std::fmt::Display;
use std::io::{self, ErrorKind};

fn invalid(message: String) -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, message)
}

pub(crate) fn unknown_handle(id: &str) -> io::Error {
    io::Error::new(ErrorKind::NotFound, format!("unknown file handle `{id}`"))
}

pub(crate) fn too_many_handles(limit: usize) -> io::Error {
    invalid(format!(
        "too many open file handles: at most {limit} per connection"
    ))
}

pub(crate) fn handles_busy() -> io::Error {
    io::Error::new(
        ErrorKind::ResourceBusy,
        "server busy: too many open file handles on this server",
    )
}

pub(crate) fn bad_handle_id(max_bytes: usize) -> io::Error {
    invalid(format!("file handle ID must be 1 to {max_bytes} bytes"))
}

pub(crate) fn handle_exists(id: &str) -> io::Error {
    invalid(format!("file handle `{id}` already exists"))
}

pub(crate) fn bad_block_length(max: u64) -> io::Error {
    invalid(format!(
        "file read block length must be between 1 and {max}"
    ))
}

pub(crate) fn not_open_for(id: &str, what: &str) -> io::Error {
    invalid(format!("file handle `{id}` is not open for {what}"))
}

pub(crate) fn block_out_of_order(id: &str, offset: u64, written: u64) -> io::Error {
    invalid(format!(
        "file handle `{id}`: block at offset {offset}, but {written} bytes are written; blocks go in order"
    ))
}

pub(crate) fn write_ended_before_first_block() -> io::Error {
    io::Error::other("the write ended before its first block")
}

/// The task writing a handle's file panicked or was cancelled.
pub(crate) fn write_failed(err: impl Display) -> io::Error {
    io::Error::other(format!("the write failed: {err}"))
}

pub(crate) fn block_read_failed(err: impl Display) -> io::Error {
    io::Error::other(format!("block read failed: {err}"))
}

pub(crate) fn handle_write_ended(id: &str) -> io::Error {
    io::Error::other(format!("file handle `{id}`: the write has ended"))
}

pub(crate) fn write_already_ended() -> io::Error {
    io::Error::other("the write has already ended")
}

pub(crate) fn handle_abandoned() -> io::Error {
    io::Error::new(
        ErrorKind::ConnectionAborted,
        "the file handle was abandoned before fs/close",
    )
}

pub(crate) fn too_many_watched_paths(limit: usize) -> io::Error {
    invalid(format!("fs/watchMissing: at most {limit} paths per watch"))
}

pub(crate) fn watch_needs_connection() -> io::Error {
    invalid("fs/watchMissing needs a connection".to_string())
}

pub(crate) fn watch_exists(id: u64) -> io::Error {
    invalid(format!("watch {id} already exists"))
}

pub(crate) fn too_many_watches(limit: usize) -> io::Error {
    invalid(format!("too many watches: at most {limit} per connection"))
}

pub(crate) fn watches_busy() -> io::Error {
    io::Error::new(
        ErrorKind::ResourceBusy,
        "server busy: too many watches on this server",
    )
}
