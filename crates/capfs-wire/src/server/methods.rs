//! The method table: every method the server answers, where it runs and what it does to its
//! paths. Session, connection and dispatch ask it; nothing else compares method names.

use crate::protocol::codex;
use crate::protocol::process;
use crate::protocol::{
    CAPFS_CREATE_SYMLINK_METHOD, CAPFS_NARROW_ROOTS_METHOD, CAPFS_READ_FILE_RANGE_METHOD,
    CAPFS_READ_FILE_STREAM_METHOD, CAPFS_READ_LINK_METHOD, CAPFS_WALK_METHOD,
    CAPFS_WRITE_FILE_STREAM_METHOD, FS_COPY_METHOD, FS_CREATE_DIRECTORY_METHOD,
    FS_GET_METADATA_METHOD, FS_READ_DIRECTORY_METHOD, FS_READ_FILE_METHOD, FS_REMOVE_METHOD,
    FS_RENAME_METHOD, FS_WRITE_FILE_METHOD, INITIALIZE_METHOD,
};

/// Where a method runs on a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Runs {
    /// Answered by the session itself: the handshake.
    Session,
    /// On a task of its own, through the handler's `dispatch`.
    Task,
    /// A streamed read: its data frames, then its reply.
    StreamRead,
    /// A streamed write: its data frames follow the request on the same socket.
    StreamWrite,
    /// In the read loop, before any request read after it: it changes the connection
    /// (`capfs/narrowRoots`).
    ReadLoop,
}

/// What a method does to the paths it names, for the request's `sandbox` policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Touch {
    /// Names no path (or a handle already checked when it was opened).
    Nothing,
    /// Reads `path`.
    Reads,
    /// Changes `path`.
    Writes,
    /// Reads `sourcePath`, writes `destinationPath`.
    Copies,
    /// Changes both `sourcePath` and `destinationPath`.
    Moves,
    /// Reads or (`mode: "replace"`) writes `path`.
    Opens,
}

/// One row of the method table.
#[derive(Debug)]
pub(crate) struct Method {
    pub(crate) name: &'static str,
    pub(crate) runs: Runs,
    pub(crate) touch: Touch,
}

const fn row(name: &'static str, runs: Runs, touch: Touch) -> Method {
    Method { name, runs, touch }
}

/// Every method the server answers, where it runs and what it does to its paths. Session,
/// connection and dispatch ask this table; a method missing from it is `-32601` before anything else looks at it.
pub(crate) const METHODS: &[Method] = &[
    row(INITIALIZE_METHOD, Runs::Session, Touch::Nothing),
    row(FS_READ_FILE_METHOD, Runs::Task, Touch::Reads),
    row(FS_WRITE_FILE_METHOD, Runs::Task, Touch::Writes),
    row(FS_CREATE_DIRECTORY_METHOD, Runs::Task, Touch::Writes),
    row(FS_GET_METADATA_METHOD, Runs::Task, Touch::Reads),
    row(FS_READ_DIRECTORY_METHOD, Runs::Task, Touch::Reads),
    row(FS_REMOVE_METHOD, Runs::Task, Touch::Writes),
    row(FS_COPY_METHOD, Runs::Task, Touch::Copies),
    row(FS_RENAME_METHOD, Runs::Task, Touch::Moves),
    row(codex::FS_WALK_METHOD, Runs::Task, Touch::Reads),
    row(codex::FS_CANONICALIZE_METHOD, Runs::Task, Touch::Reads),
    row(codex::FS_OPEN_METHOD, Runs::Task, Touch::Opens),
    row(codex::FS_READ_BLOCK_METHOD, Runs::Task, Touch::Nothing),
    row(codex::FS_WRITE_BLOCK_METHOD, Runs::Task, Touch::Nothing),
    row(codex::FS_CLOSE_METHOD, Runs::Task, Touch::Nothing),
    row(codex::FS_WATCH_MISSING_METHOD, Runs::Task, Touch::Reads),
    row(codex::ENVIRONMENT_INFO_METHOD, Runs::Task, Touch::Nothing),
    row(codex::ENVIRONMENT_STATUS_METHOD, Runs::Task, Touch::Nothing),
    row(
        codex::ENVIRONMENT_CONFIG_READ_METHOD,
        Runs::Task,
        Touch::Nothing,
    ),
    row(process::PROCESS_START_METHOD, Runs::Task, Touch::Nothing),
    row(process::PROCESS_READ_METHOD, Runs::Task, Touch::Nothing),
    row(process::PROCESS_WRITE_METHOD, Runs::Task, Touch::Nothing),
    row(process::PROCESS_SIGNAL_METHOD, Runs::Task, Touch::Nothing),
    row(
        process::PROCESS_TERMINATE_METHOD,
        Runs::Task,
        Touch::Nothing,
    ),
    row(
        process::CAPFS_PROCESS_RESIZE_METHOD,
        Runs::Task,
        Touch::Nothing,
    ),
    row(
        process::CAPFS_PROCESS_CLOSE_INPUT_METHOD,
        Runs::Task,
        Touch::Nothing,
    ),
    row(CAPFS_READ_LINK_METHOD, Runs::Task, Touch::Reads),
    row(CAPFS_CREATE_SYMLINK_METHOD, Runs::Task, Touch::Writes),
    row(CAPFS_WALK_METHOD, Runs::Task, Touch::Reads),
    row(CAPFS_READ_FILE_RANGE_METHOD, Runs::Task, Touch::Reads),
    row(CAPFS_NARROW_ROOTS_METHOD, Runs::ReadLoop, Touch::Nothing),
    row(
        CAPFS_READ_FILE_STREAM_METHOD,
        Runs::StreamRead,
        Touch::Reads,
    ),
    row(
        CAPFS_WRITE_FILE_STREAM_METHOD,
        Runs::StreamWrite,
        Touch::Writes,
    ),
];

/// The table's row for `name`.
pub(crate) fn method(name: &str) -> Option<&'static Method> {
    METHODS.iter().find(|m| m.name == name)
}
