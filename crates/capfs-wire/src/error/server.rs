//! The server's own errors: what it refuses of a configuration, a request or a client, and what
//! it reports of its own work. Each becomes the reply's `message` as written here.

use std::fmt::Display;
use std::io::{self, ErrorKind};
use std::net::SocketAddr;
use std::time::Duration;

use capfs::AbsolutePathBuf;

fn invalid(message: String) -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, message)
}

/// A limit of the configuration outside the range the server accepts.
pub(crate) fn out_of_range(
    flag: &str,
    value: impl Display,
    start: impl Display,
    end: impl Display,
) -> io::Error {
    invalid(format!("{flag} {value}: must be from {start} to {end}"))
}

pub(crate) fn empty_token() -> io::Error {
    invalid("the token is empty".to_string())
}

pub(crate) fn token_required(listen: SocketAddr) -> io::Error {
    io::Error::new(
        ErrorKind::PermissionDenied,
        format!(
            "refusing to listen on non-loopback address {listen} without a token \
             (use --token-file or CAPFS_TOKEN)"
        ),
    )
}

pub(crate) fn shutdown_deadline_passed(timeout: Duration, open: usize) -> io::Error {
    let noun = if open == 1 {
        "connection"
    } else {
        "connections"
    };
    io::Error::new(
        ErrorKind::TimedOut,
        format!("shutdown timeout of {timeout:?} passed: cut {open} {noun} still open"),
    )
}

pub(crate) fn handshake_timed_out() -> io::Error {
    io::Error::new(ErrorKind::TimedOut, "no complete handshake in time")
}

/// The error of a reply that no budget could ever hold.
pub(crate) fn never_fits(bytes: u64, share: u64) -> io::Error {
    invalid(format!(
        "reply too large for the server's outgoing budget: {bytes} bytes, limit is {share} \
         bytes per connection (--max-outgoing-bytes-per-connection); use \
         capfs/readFileStream for large files"
    ))
}

pub(crate) fn client_gone() -> io::Error {
    io::Error::new(ErrorKind::BrokenPipe, "the client went away")
}

pub(crate) fn stream_cut() -> io::Error {
    io::Error::new(
        ErrorKind::UnexpectedEof,
        "the connection closed before the data stream ended",
    )
}

pub(crate) fn no_socket_for_frames() -> io::Error {
    io::Error::other("this connection has no socket for data frames")
}

/// A blocking read of the server's own that panicked or was cancelled; the task's error is the
/// source.
pub(crate) fn read_task_failed(err: tokio::task::JoinError) -> io::Error {
    io::Error::other(err)
}

pub(crate) fn too_many_processes_per_connection(limit: usize) -> io::Error {
    io::Error::new(
        ErrorKind::QuotaExceeded,
        format!(
            "too many processes: at most {limit} per connection (--max-processes-per-connection)"
        ),
    )
}

pub(crate) fn too_many_processes(limit: usize) -> io::Error {
    io::Error::new(
        ErrorKind::QuotaExceeded,
        format!("server busy: at most {limit} processes on this server (--max-processes)"),
    )
}

pub(crate) fn input_stalled(process_id: &str, waited: Duration) -> io::Error {
    io::Error::new(
        ErrorKind::TimedOut,
        format!(
            "process {process_id}: its input took nothing in {}s",
            waited.as_secs()
        ),
    )
}

/// A request's `sandbox` policy that cannot be read.
pub(crate) fn bad_policy(reason: impl Display) -> io::Error {
    invalid(format!("sandbox: {reason}"))
}

fn refused(message: String) -> io::Error {
    io::Error::new(ErrorKind::PermissionDenied, message)
}

pub(crate) fn policy_denies_part_of_root(root: impl Display) -> io::Error {
    refused(format!(
        "{root}: the request's sandbox policy denies parts of this root, which \
         a process's roots cannot express"
    ))
}

pub(crate) fn policy_denies_inside_root(path: impl Display) -> io::Error {
    refused(format!(
        "{path}: the request's sandbox policy denies this path inside a root it \
         allows, which a process's confinement cannot enforce"
    ))
}

pub(crate) fn policy_denies(path: &AbsolutePathBuf, what: &str) -> io::Error {
    refused(format!(
        "{path}: the request's sandbox policy does not allow it to {what} here"
    ))
}

/// The task of an in-memory pair's server ended without its result (its runtime shut down).
pub(crate) fn paired_server_lost(task: impl Display) -> io::Error {
    io::Error::other(format!("the paired server's task: {task}"))
}

pub(crate) fn server_stopping() -> io::Error {
    io::Error::new(
        ErrorKind::ConnectionAborted,
        "the server is shutting down: no process starts",
    )
}

pub(crate) fn shutdown_forced(open: usize) -> io::Error {
    io::Error::new(
        ErrorKind::Interrupted,
        format!("shutdown forced: cut {open} connection(s) still open"),
    )
}

pub(crate) fn admin_token_required(address: std::net::SocketAddr) -> io::Error {
    io::Error::new(
        ErrorKind::PermissionDenied,
        format!(
            "--admin-listen {address}: an address other than loopback serves /metrics only \
             with a token (--token-file or CAPFS_TOKEN)"
        ),
    )
}
