//! The errors of confined processes: a policy or request refused before anything starts, a
//! confinement the kernel cannot give, and calls on a process that cannot take them.

use std::fmt::Display;
use std::io::{self, ErrorKind};
use std::path::Path;

use crate::path::AbsolutePathBuf;

pub(crate) fn run_as_root_id() -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        "processes cannot run as user or group 0",
    )
}

pub(crate) fn run_as_needs_root() -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        "a user to run processes as needs a starter running as root",
    )
}

pub(crate) fn root_needs_run_as() -> io::Error {
    io::Error::new(
        ErrorKind::PermissionDenied,
        "running as root: processes need an unprivileged user to run as",
    )
}

/// Roots nested otherwise than a read-only directory inside a writable root.
pub(crate) fn nested_roots_not_read_only(
    outer: &AbsolutePathBuf,
    inner: &AbsolutePathBuf,
) -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        format!(
            "{outer} and {inner}: nested roots cannot be given to processes unless a read-only \
             directory lies inside a writable root"
        ),
    )
}

pub(crate) fn too_many_processes(max: usize) -> io::Error {
    io::Error::new(
        ErrorKind::QuotaExceeded,
        format!("{max} processes are running: no more may start"),
    )
}

pub(crate) fn empty_argv() -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, "argv is empty")
}

pub(crate) fn nul_in_argument() -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, "an argument has a NUL byte")
}

pub(crate) fn malformed_environment() -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        "an environment variable's name or value is malformed",
    )
}

pub(crate) fn empty_program_name() -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, "the program's name is empty")
}

pub(crate) fn no_path_to_search(program: &str) -> io::Error {
    io::Error::new(
        ErrorKind::NotFound,
        format!("{program}: no PATH in the environment to find it on"),
    )
}

pub(crate) fn read_only_dir_through_link(path: &AbsolutePathBuf) -> io::Error {
    io::Error::new(
        ErrorKind::PermissionDenied,
        format!("{path}: a directory to keep read-only is reached through a link"),
    )
}

pub(crate) fn read_only_dir_unreachable() -> io::Error {
    io::Error::new(
        ErrorKind::NotFound,
        "a directory to keep read-only is no longer reachable",
    )
}

/// The spawn of `program` failed: the OS's error, prefixed with the program.
pub(crate) fn spawn_failed(program: &str, err: &io::Error) -> io::Error {
    io::Error::new(err.kind(), format!("{program}: {err}"))
}

/// A spawned child without what it was spawned with (a pid, a piped output): `what` it lacks.
pub(crate) fn child_lacks(what: &'static str) -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, what)
}

/// A path the confinement grants access to that cannot be opened.
pub(crate) fn grant_missing(path: &Path, err: impl Display) -> io::Error {
    io::Error::new(ErrorKind::NotFound, format!("{}: {err}", path.display()))
}

pub(crate) fn landlock_refused(err: impl Display) -> io::Error {
    io::Error::new(
        ErrorKind::PermissionDenied,
        format!("processes cannot be confined: landlock: {err}"),
    )
}

pub(crate) fn seccomp_refused(err: impl Display) -> io::Error {
    io::Error::new(
        ErrorKind::PermissionDenied,
        format!("processes cannot be confined: seccomp: {err}"),
    )
}

pub(crate) fn input_closed() -> io::Error {
    io::Error::new(ErrorKind::BrokenPipe, "the process's input is closed")
}

pub(crate) fn no_terminal() -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        "the process has no terminal to resize",
    )
}

pub(crate) fn not_a_signal(signal: i32) -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, format!("{signal}: not a signal"))
}

/// A session's private home could not be made under `parent`.
pub(crate) fn home_unmade(parent: &Path, err: &io::Error) -> io::Error {
    io::Error::new(
        err.kind(),
        format!(
            "cannot make a private home under {}: {err}",
            parent.display()
        ),
    )
}

pub(crate) fn egress_with_host_network() -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        "an egress policy (allowed hosts) holds only for processes without the host's network: \
         not with network all",
    )
}

pub(crate) fn too_many_transparent_ports(wanted: usize, max: usize) -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        format!(
            "transparent TCP listens on each port the allow rules name, and at most {max}: \
             these rules name {wanted} (with 80 and 443)"
        ),
    )
}
