//! The method table: every method the server answers, where it runs, the handler that answers
//! it with its typed params and which protocol group it belongs to. Session, connection, audit
//! and dispatch ask it; nothing else compares method names. Adding a method is one row here and
//! one handler (and, for a new params type, its [`Params`] impl: what it does to its paths).

use futures_util::future::BoxFuture;

use super::codex as codex_methods;
use super::codex::watch::WatchParams;
use super::file_methods as files;
use super::params::{self, CallParams, Decode, Params, decoder};
use super::payload::{Outcome, Payload};
use super::process::handlers as processes;
use super::state::{Call, ConnectionState, Group};
use crate::protocol::codex;
use crate::protocol::process;
use crate::protocol::uri::PathForm;
use crate::protocol::{
    CAPFS_CREATE_SYMLINK_METHOD, CAPFS_NARROW_ROOTS_METHOD, CAPFS_READ_FILE_RANGE_METHOD,
    CAPFS_READ_FILE_STREAM_METHOD, CAPFS_READ_LINK_METHOD, CAPFS_WALK_METHOD,
    CAPFS_WRITE_FILE_STREAM_METHOD, CopyParams, CreateDirectoryParams, CreateSymlinkParams,
    ErrorObject, FS_COPY_METHOD, FS_CREATE_DIRECTORY_METHOD, FS_GET_METADATA_METHOD,
    FS_READ_DIRECTORY_METHOD, FS_READ_FILE_METHOD, FS_REMOVE_METHOD, FS_RENAME_METHOD,
    FS_WRITE_FILE_METHOD, INITIALIZE_METHOD, METHOD_NOT_FOUND, NarrowRootsParams, PathParams,
    ReadRangeParams, ReadStreamParams, RemoveParams, RenameParams, WalkParams, WriteFileParams,
    WriteStreamParams,
};
use capfs::ExecutorFileSystem;

/// A handler as the table holds it: its params taken into the handler's own type, then the
/// handler run.
pub(crate) type Handler =
    for<'a> fn(Call<'a>, CallParams) -> BoxFuture<'a, Result<Payload, ErrorObject>>;

/// A method run on a task of its own: its handler, and how its params are decoded as the
/// message is read (`None` for a method that reads none).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TaskMethod {
    pub(crate) run: Handler,
    pub(crate) decode: Option<Decode>,
}

/// The row's task for `handler(call, params)`, whose params are `$params`, any [`Params`]
/// type: taken as decoded when the message was read, or decoded now (failures are -32602),
/// their paths checked against the request's `sandbox` policy, then the handler run and its
/// errors given the codes of the request's form.
macro_rules! typed {
    ($handler:path, $params:ty) => {{
        fn run(
            mut call: Call<'_>,
            params: CallParams,
        ) -> BoxFuture<'_, Result<Payload, ErrorObject>> {
            Box::pin(async move {
                let noted = call.outcome.paths.as_mut();
                let p: $params = params::read(call.fs, params, noted).await?;
                call.form = Params::form(&p);
                let errors = call.errors_form();
                $handler(call, p).await.map_err(|e| e.for_form(errors))
            })
        }
        Task(TaskMethod {
            run,
            decode: Some(decoder::<$params>),
        })
    }};
}

/// The row's task for `handler(call)`, a method whose params carry nothing it reads.
macro_rules! bare {
    ($handler:path) => {{
        fn run(call: Call<'_>, _: CallParams) -> BoxFuture<'_, Result<Payload, ErrorObject>> {
            Box::pin($handler(call))
        }
        Task(TaskMethod { run, decode: None })
    }};
}

/// Where a method runs on a connection, with how its params are decoded as its message is read.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Runs {
    /// Answered by the session itself: the handshake.
    Session,
    /// On a task of its own, by its handler.
    Task(TaskMethod),
    /// A streamed read: its data frames, then its reply.
    StreamRead(Decode),
    /// A streamed write: its data frames follow the request on the same socket.
    StreamWrite(Decode),
    /// In the read loop, before any request read after it: it changes the connection
    /// (`capfs/narrowRoots`).
    ReadLoop(Decode),
}

impl Runs {
    /// How the method's params are decoded as its message is read.
    pub(crate) fn decoder(self) -> Option<Decode> {
        match self {
            Runs::Session => None,
            Runs::Task(task) => task.decode,
            Runs::StreamRead(decode) | Runs::StreamWrite(decode) | Runs::ReadLoop(decode) => {
                Some(decode)
            }
        }
    }
}

/// One row of the method table.
#[derive(Debug)]
pub(crate) struct Method {
    pub(crate) name: &'static str,
    pub(crate) runs: Runs,
    pub(crate) group: Group,
}

impl Method {
    /// True for the methods whose bytes are written into the roots (or a process's input),
    /// rather than read out of them.
    pub(crate) fn writes_contents(&self) -> bool {
        matches!(self.runs, Runs::StreamWrite(_))
            || [
                FS_WRITE_FILE_METHOD,
                crate::protocol::codex::FS_WRITE_BLOCK_METHOD,
                crate::protocol::process::PROCESS_WRITE_METHOD,
            ]
            .contains(&self.name)
    }
}

const fn row(name: &'static str, runs: Runs, group: Group) -> Method {
    Method { name, runs, group }
}

use Group::{Codex, Files, Processes};
use Runs::{ReadLoop, Session, StreamRead, StreamWrite, Task};

/// Every method the server answers. A method missing from it is `-32601` before anything else
/// looks at it.
pub(crate) const METHODS: &[Method] = &[
    row(INITIALIZE_METHOD, Session, Files),
    row(
        FS_READ_FILE_METHOD,
        typed!(files::read_file, PathParams),
        Files,
    ),
    row(
        FS_WRITE_FILE_METHOD,
        typed!(files::write_file, WriteFileParams),
        Files,
    ),
    row(
        FS_CREATE_DIRECTORY_METHOD,
        typed!(files::create_directory, CreateDirectoryParams),
        Files,
    ),
    row(
        FS_GET_METADATA_METHOD,
        typed!(files::get_metadata, PathParams),
        Files,
    ),
    row(
        FS_READ_DIRECTORY_METHOD,
        typed!(files::read_directory, PathParams),
        Files,
    ),
    row(FS_REMOVE_METHOD, typed!(files::remove, RemoveParams), Files),
    row(FS_COPY_METHOD, typed!(files::copy, CopyParams), Files),
    row(FS_RENAME_METHOD, typed!(files::rename, RenameParams), Files),
    row(
        codex::FS_WALK_METHOD,
        typed!(codex_methods::walk, codex::CodexWalkParams),
        Codex,
    ),
    row(
        codex::FS_CANONICALIZE_METHOD,
        typed!(codex_methods::canonicalize, PathParams),
        Codex,
    ),
    row(
        codex::FS_OPEN_METHOD,
        typed!(codex_methods::open, codex::OpenParams),
        Codex,
    ),
    row(
        codex::FS_READ_BLOCK_METHOD,
        typed!(codex_methods::read_block, codex::ReadBlockParams),
        Codex,
    ),
    row(
        codex::FS_WRITE_BLOCK_METHOD,
        typed!(codex_methods::write_block, codex::WriteBlockParams),
        Codex,
    ),
    row(
        codex::FS_CLOSE_METHOD,
        typed!(codex_methods::close, codex::CloseParams),
        Codex,
    ),
    row(
        codex::FS_WATCH_MISSING_METHOD,
        typed!(codex_methods::watch_missing, WatchParams),
        Codex,
    ),
    row(
        codex::ENVIRONMENT_INFO_METHOD,
        bare!(codex_methods::info),
        Codex,
    ),
    row(
        codex::ENVIRONMENT_STATUS_METHOD,
        bare!(codex_methods::status),
        Codex,
    ),
    row(
        codex::ENVIRONMENT_CONFIG_READ_METHOD,
        typed!(
            codex_methods::config_read,
            codex::EnvironmentConfigReadParams
        ),
        Codex,
    ),
    row(
        process::PROCESS_START_METHOD,
        typed!(processes::start, process::StartParams),
        Processes,
    ),
    row(
        process::PROCESS_READ_METHOD,
        typed!(processes::read, process::ReadParams),
        Processes,
    ),
    row(
        process::PROCESS_WRITE_METHOD,
        typed!(processes::write, process::WriteParams),
        Processes,
    ),
    row(
        process::PROCESS_SIGNAL_METHOD,
        typed!(processes::signal, process::SignalParams),
        Processes,
    ),
    row(
        process::PROCESS_TERMINATE_METHOD,
        typed!(processes::terminate, process::TerminateParams),
        Processes,
    ),
    row(
        process::CAPFS_PROCESS_RESIZE_METHOD,
        typed!(processes::resize, process::ResizeParams),
        Processes,
    ),
    row(
        process::CAPFS_PROCESS_CLOSE_INPUT_METHOD,
        typed!(processes::close_input, process::TerminateParams),
        Processes,
    ),
    row(
        CAPFS_READ_LINK_METHOD,
        typed!(files::read_link, PathParams),
        Files,
    ),
    row(
        CAPFS_CREATE_SYMLINK_METHOD,
        typed!(files::create_symlink, CreateSymlinkParams),
        Files,
    ),
    row(CAPFS_WALK_METHOD, typed!(files::walk, WalkParams), Files),
    row(
        CAPFS_READ_FILE_RANGE_METHOD,
        typed!(files::read_range, ReadRangeParams),
        Files,
    ),
    row(
        CAPFS_NARROW_ROOTS_METHOD,
        ReadLoop(decoder::<NarrowRootsParams>),
        Files,
    ),
    row(
        CAPFS_READ_FILE_STREAM_METHOD,
        StreamRead(decoder::<ReadStreamParams>),
        Files,
    ),
    row(
        CAPFS_WRITE_FILE_STREAM_METHOD,
        StreamWrite(decoder::<WriteStreamParams>),
        Files,
    ),
];

/// The name of every method the server answers, in the table's order.
pub fn method_names() -> impl Iterator<Item = &'static str> {
    METHODS.iter().map(|m| m.name)
}

/// The table's row for `name`.
pub(crate) fn method(name: &str) -> Option<&'static Method> {
    METHODS.iter().find(|m| m.name == name)
}

fn unknown(method: &str) -> ErrorObject {
    ErrorObject::new(METHOD_NOT_FOUND, format!("unknown method: {method}"))
}

/// Runs the task method `method` with `params` on `fs`, as its row (`row`, the table's, looked
/// up once when the request arrived) says. A `fs/readFile` reply may be at most
/// `max_message_bytes` long, and walks and listings are cut to it.
pub(crate) async fn dispatch(
    fs: &dyn ExecutorFileSystem,
    connection: &ConnectionState,
    row: Option<&'static Method>,
    method: &str,
    params: CallParams,
    max_message_bytes: usize,
    outcome: &mut Outcome,
) -> Result<Payload, ErrorObject> {
    let (handler, group) = match row {
        Some(&Method {
            runs: Runs::Task(task),
            group,
            ..
        }) if group != Group::Processes || connection.processes().is_some() => (task.run, group),
        _ => {
            // Refused before its params are read: its line lists their path members as sent.
            if let Some(paths) = &mut outcome.paths {
                *paths = params::sent_before_run(&params);
            }
            return Err(unknown(method));
        }
    };
    let call = Call {
        fs,
        connection,
        group,
        form: PathForm::Plain,
        max_message_bytes,
        outcome,
    };
    handler(call, params).await
}
