//! The method table: every method the server answers, where it runs, the handler that answers
//! it with its typed params and which protocol group it belongs to. Session, connection, audit
//! and dispatch ask it; nothing else compares method names. Adding a method is one row here and
//! one handler (and, for a new params type, its [`Params`] impl: what it does to its paths).

use futures_util::future::BoxFuture;

use super::audit::sent_paths;
use super::codex as codex_methods;
use super::file_methods as files;
use super::params::{self, Params, RawParams};
use super::payload::{Outcome, Payload};
use super::process::handlers as processes;
use super::state::{Call, ConnectionState, Group};
use crate::protocol::codex;
use crate::protocol::process;
use crate::protocol::uri::PathForm;
use crate::protocol::{
    CAPFS_CREATE_SYMLINK_METHOD, CAPFS_NARROW_ROOTS_METHOD, CAPFS_READ_FILE_RANGE_METHOD,
    CAPFS_READ_FILE_STREAM_METHOD, CAPFS_READ_LINK_METHOD, CAPFS_WALK_METHOD,
    CAPFS_WRITE_FILE_STREAM_METHOD, ErrorObject, FS_COPY_METHOD, FS_CREATE_DIRECTORY_METHOD,
    FS_GET_METADATA_METHOD, FS_READ_DIRECTORY_METHOD, FS_READ_FILE_METHOD, FS_REMOVE_METHOD,
    FS_RENAME_METHOD, FS_WRITE_FILE_METHOD, INITIALIZE_METHOD, METHOD_NOT_FOUND,
};
use capfs::ExecutorFileSystem;

/// A handler as the table holds it: its params decoded from their text into the handler's own
/// type, then the handler run.
pub(crate) type Handler =
    for<'a> fn(Call<'a>, RawParams) -> BoxFuture<'a, Result<Payload, ErrorObject>>;

/// The row's handler for `handler(call, params)`, whose params are any [`Params`] type: read
/// once (decoding failures are -32602), their paths checked against the request's `sandbox`
/// policy, then the handler run and its errors given the codes of the request's form.
macro_rules! typed {
    ($handler:path) => {{
        fn run(mut call: Call<'_>, raw: RawParams) -> BoxFuture<'_, Result<Payload, ErrorObject>> {
            Box::pin(async move {
                let noted = call.outcome.paths.as_mut();
                let p = params::read(call.fs, raw.as_deref(), noted).await?;
                call.form = Params::form(&p);
                let errors = call.errors_form();
                $handler(call, p).await.map_err(|e| e.for_form(errors))
            })
        }
        run as Handler
    }};
}

/// The row's handler for `handler(call)`, a method whose params carry nothing it reads.
macro_rules! bare {
    ($handler:path) => {{
        fn run(call: Call<'_>, _: RawParams) -> BoxFuture<'_, Result<Payload, ErrorObject>> {
            Box::pin($handler(call))
        }
        run as Handler
    }};
}

/// Where a method runs on a connection.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Runs {
    /// Answered by the session itself: the handshake.
    Session,
    /// On a task of its own, by its handler.
    Task(Handler),
    /// A streamed read: its data frames, then its reply.
    StreamRead,
    /// A streamed write: its data frames follow the request on the same socket.
    StreamWrite,
    /// In the read loop, before any request read after it: it changes the connection
    /// (`capfs/narrowRoots`).
    ReadLoop,
}

/// One row of the method table.
#[derive(Debug)]
pub(crate) struct Method {
    pub(crate) name: &'static str,
    pub(crate) runs: Runs,
    pub(crate) group: Group,
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
    row(FS_READ_FILE_METHOD, Task(typed!(files::read_file)), Files),
    row(FS_WRITE_FILE_METHOD, Task(typed!(files::write_file)), Files),
    row(
        FS_CREATE_DIRECTORY_METHOD,
        Task(typed!(files::create_directory)),
        Files,
    ),
    row(
        FS_GET_METADATA_METHOD,
        Task(typed!(files::get_metadata)),
        Files,
    ),
    row(
        FS_READ_DIRECTORY_METHOD,
        Task(typed!(files::read_directory)),
        Files,
    ),
    row(FS_REMOVE_METHOD, Task(typed!(files::remove)), Files),
    row(FS_COPY_METHOD, Task(typed!(files::copy)), Files),
    row(FS_RENAME_METHOD, Task(typed!(files::rename)), Files),
    row(
        codex::FS_WALK_METHOD,
        Task(typed!(codex_methods::walk)),
        Codex,
    ),
    row(
        codex::FS_CANONICALIZE_METHOD,
        Task(typed!(codex_methods::canonicalize)),
        Codex,
    ),
    row(
        codex::FS_OPEN_METHOD,
        Task(typed!(codex_methods::open)),
        Codex,
    ),
    row(
        codex::FS_READ_BLOCK_METHOD,
        Task(typed!(codex_methods::read_block)),
        Codex,
    ),
    row(
        codex::FS_WRITE_BLOCK_METHOD,
        Task(typed!(codex_methods::write_block)),
        Codex,
    ),
    row(
        codex::FS_CLOSE_METHOD,
        Task(typed!(codex_methods::close)),
        Codex,
    ),
    row(
        codex::FS_WATCH_MISSING_METHOD,
        Task(typed!(codex_methods::watch_missing)),
        Codex,
    ),
    row(
        codex::ENVIRONMENT_INFO_METHOD,
        Task(bare!(codex_methods::info)),
        Codex,
    ),
    row(
        codex::ENVIRONMENT_STATUS_METHOD,
        Task(bare!(codex_methods::status)),
        Codex,
    ),
    row(
        codex::ENVIRONMENT_CONFIG_READ_METHOD,
        Task(typed!(codex_methods::config_read)),
        Codex,
    ),
    row(
        process::PROCESS_START_METHOD,
        Task(typed!(processes::start)),
        Processes,
    ),
    row(
        process::PROCESS_READ_METHOD,
        Task(typed!(processes::read)),
        Processes,
    ),
    row(
        process::PROCESS_WRITE_METHOD,
        Task(typed!(processes::write)),
        Processes,
    ),
    row(
        process::PROCESS_SIGNAL_METHOD,
        Task(typed!(processes::signal)),
        Processes,
    ),
    row(
        process::PROCESS_TERMINATE_METHOD,
        Task(typed!(processes::terminate)),
        Processes,
    ),
    row(
        process::CAPFS_PROCESS_RESIZE_METHOD,
        Task(typed!(processes::resize)),
        Processes,
    ),
    row(
        process::CAPFS_PROCESS_CLOSE_INPUT_METHOD,
        Task(typed!(processes::close_input)),
        Processes,
    ),
    row(
        CAPFS_READ_LINK_METHOD,
        Task(typed!(files::read_link)),
        Files,
    ),
    row(
        CAPFS_CREATE_SYMLINK_METHOD,
        Task(typed!(files::create_symlink)),
        Files,
    ),
    row(CAPFS_WALK_METHOD, Task(typed!(files::walk)), Files),
    row(
        CAPFS_READ_FILE_RANGE_METHOD,
        Task(typed!(files::read_range)),
        Files,
    ),
    row(CAPFS_NARROW_ROOTS_METHOD, ReadLoop, Files),
    row(CAPFS_READ_FILE_STREAM_METHOD, StreamRead, Files),
    row(CAPFS_WRITE_FILE_STREAM_METHOD, StreamWrite, Files),
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
    params: RawParams,
    max_message_bytes: usize,
    outcome: &mut Outcome,
) -> Result<Payload, ErrorObject> {
    let (handler, group) = match row {
        Some(&Method {
            runs: Runs::Task(handler),
            group,
            ..
        }) if group != Group::Processes || connection.processes().is_some() => (handler, group),
        _ => {
            // Refused before its params are read: its line lists their path members as sent.
            if let Some(paths) = &mut outcome.paths {
                *paths = sent_paths(params.as_deref());
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
