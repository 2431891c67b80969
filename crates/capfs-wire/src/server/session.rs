//! One connection's protocol state without the socket: decode a message, apply the handshake
//! rules, and say what to answer. The connection (`connection.rs`) calls [`Session::receive`]
//! for every incoming message and runs fs calls concurrently; [`Session::handle`] runs the same
//! steps inline, for callers (tests, fuzzers) that have bytes but no socket.

use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::Semaphore;

use super::codex::handles::Handles;
use super::codex::watch::Watches;
use super::methods::{self, Method, Runs};
use super::params::{CallParams, Seed, decode};
use super::payload::{Outcome, Payload};
use super::reply::{error_message, reply_message};
use super::sessions::Sessions;
use super::state::ConnectionState;
use crate::protocol::codex::EnvironmentInfo;
use crate::protocol::{
    DUPLICATE_INITIALIZE_MESSAGE, ErrorObject, INITIALIZED_METHOD, INVALID_REQUEST, Incoming,
    InitializeParams, InitializeResponse, MALFORMED_MESSAGE_PREFIX, METHOD_NOT_FOUND, Message,
    NOT_INITIALIZED_MESSAGE, NOT_INITIALIZED_NOTIFICATION_MESSAGE, RequestId, RootDescription,
    ServerCapabilities, UNKNOWN_REQUEST_ID,
};
use capfs::ExecutorFileSystem;

/// Handles open at once on a server whose sessions have no server of their own to share them
/// with (requests handled without a connection).
const LONE_SESSION_HANDLES: usize = 128;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Handshake {
    AwaitingInitialize,
    AwaitingInitialized,
    Ready,
}

/// The server side of one connection's protocol: the handshake state and what each incoming
/// message gets in reply.
#[cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))]
#[derive(Debug)]
pub struct Session {
    state: Handshake,
    max_message_bytes: usize,
    read_limit: Option<u64>,
    roots: Vec<RootDescription>,
    environment: Option<EnvironmentInfo>,
    /// The server's sessions, where a reconnect finds its own; `None` without a server.
    sessions: Option<Arc<Sessions>>,
    session_id: Option<String>,
    connection: Arc<ConnectionState>,
    /// The transport carries data frames (not so over JSON lines).
    data_frames: bool,
}

/// What the transport does with one incoming message.
#[derive(Debug)]
pub(crate) enum Step {
    /// Send this message at once: the answer to input that is not a message.
    Unreadable(Message),
    /// Answer this request at once with `reply`, without running it (`initialize`, an unknown
    /// method, a call before the handshake completed).
    Answer {
        request: FsCall,
        reply: Result<Value, ErrorObject>,
    },
    /// Run this fs call (concurrently with other calls) and send its reply.
    Run(FsCall),
    /// Nothing to send: a notification or a stray response.
    Ignore,
}

/// A request, as the transport runs or answers it.
#[derive(Debug)]
pub(crate) struct FsCall {
    pub id: RequestId,
    pub method: String,
    /// The params: decoded into the method's type as the message was read, or their text,
    /// decoded once by whoever runs the method.
    pub params: CallParams,
    /// The method's row in the table, looked up once when the request arrived; `None` for a
    /// method the table does not have.
    pub row: Option<&'static Method>,
}

impl FsCall {
    /// Runs the call on `fs` and returns the reply to send; `outcome` records what it did.
    pub(crate) async fn run(
        self,
        fs: &dyn ExecutorFileSystem,
        connection: &ConnectionState,
        max_message_bytes: usize,
        outcome: &mut Outcome,
    ) -> Message {
        let runs = self.row.map(|m| m.runs);
        let reply = if matches!(runs, Some(Runs::ReadLoop(_))) {
            Err(ErrorObject::new(
                METHOD_NOT_FOUND,
                format!("{} needs a connection", self.method),
            ))
        } else if matches!(runs, Some(Runs::StreamRead(_) | Runs::StreamWrite(_))) {
            Err(ErrorObject::new(
                METHOD_NOT_FOUND,
                format!(
                    "{} needs a connection that carries data frames",
                    self.method
                ),
            ))
        } else {
            methods::dispatch(
                fs,
                connection,
                self.row,
                &self.method,
                self.params,
                max_message_bytes,
                outcome,
            )
            .await
            .map(Payload::into_value)
        };
        reply_message(self.id, reply)
    }
}

#[cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))]
impl Session {
    /// A new connection's state: waiting for `initialize`. `max_message_bytes` is announced to
    /// the client in the `initialize` result.
    pub fn new(max_message_bytes: usize) -> Self {
        Self {
            state: Handshake::AwaitingInitialize,
            max_message_bytes,
            read_limit: None,
            roots: Vec::new(),
            environment: None,
            sessions: None,
            session_id: None,
            connection: Arc::new(ConnectionState::new(
                None,
                Handles::new(Arc::new(Semaphore::new(LONE_SESSION_HANDLES))),
                Watches::new(Arc::new(Semaphore::new(LONE_SESSION_HANDLES))),
            )),
            data_frames: true,
        }
    }

    /// A session on a transport without data frames: the extension is not announced.
    pub(crate) fn without_data_frames(mut self) -> Self {
        self.data_frames = false;
        self
    }

    /// The session of a server's connection: `fs` is what it serves, `sessions` where
    /// reconnects find theirs, `handles` and `watches` the server's bounds on open handles and
    /// watches.
    pub(crate) fn serving(
        mut self,
        fs: Arc<dyn ExecutorFileSystem>,
        sessions: Arc<Sessions>,
        handles: Arc<Semaphore>,
        watches: Arc<Semaphore>,
    ) -> Self {
        self.environment = Some(super::codex::environment_info(&*fs, None));
        self.sessions = Some(sessions);
        self.connection = Arc::new(ConnectionState::new(
            Some(fs),
            Handles::new(handles),
            Watches::new(watches),
        ));
        self
    }

    /// The session of a server that serves processes: `environmentInfo` says how.
    pub(crate) fn serving_processes(
        mut self,
        info: crate::protocol::process::ProcessesInfo,
    ) -> Self {
        if let Some(environment) = &mut self.environment {
            environment.capabilities = super::codex::capabilities(Some(&info));
            environment.processes = Some(info.clone());
        }
        if let Some(state) = Arc::get_mut(&mut self.connection) {
            state.processes_info = Some(info);
        }
        self
    }

    /// What the connection keeps between requests (its handles).
    pub(crate) fn connection(&self) -> Arc<ConnectionState> {
        Arc::clone(&self.connection)
    }

    /// The session id given in `initialize`, once it was.
    pub(crate) fn id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// Announces `roots` in the `initialize` result, so that clients can find them.
    pub fn with_roots(mut self, roots: Vec<RootDescription>) -> Self {
        self.roots = roots;
        self
    }

    /// Also announces `read_limit` (the served file system's) in the `initialize` result.
    pub(crate) fn announcing(mut self, read_limit: Option<u64>) -> Self {
        self.read_limit = read_limit;
        self
    }

    /// Handles one incoming message as the server does and returns the reply, if any: fs calls
    /// run on `fs` before this returns. Never panics, whatever `bytes` hold; input that is not
    /// a message gets an error reply and leaves the state as it was.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// use capfs_wire::protocol::Message;
    /// use capfs::{Access, LocalFileSystem, Sandbox};
    /// use capfs_wire::server::Session;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let fs = LocalFileSystem::new(Sandbox::new().with_root(dir.path(), Access::ReadWrite)?);
    /// let mut session = Session::new(capfs_wire::server::DEFAULT_MAX_MESSAGE_BYTES);
    ///
    /// let reply = session.handle(&fs, br#"{"id":1,"method":"initialize","params":{}}"#).await;
    /// assert!(matches!(reply, Some(Message::Response(_))));
    /// assert!(session.handle(&fs, br#"{"method":"initialized"}"#).await.is_none());
    /// let reply = session.handle(&fs, br#"{"id":2,"method":"fs/readFile","params":{"path":"/"}}"#);
    /// assert!(matches!(reply.await, Some(Message::Error(_))));
    /// # Ok(()) }
    /// ```
    // The fuzz targets' entry point, compiled without their feature too so that its example
    // is built and run by the crate's own doctests.
    #[cfg_attr(not(feature = "fuzzing"), allow(dead_code))]
    pub async fn handle(&mut self, fs: &dyn ExecutorFileSystem, bytes: &[u8]) -> Option<Message> {
        match self.receive(bytes) {
            Step::Unreadable(message) => Some(message),
            Step::Answer { request, reply } => Some(reply_message(request.id, reply)),
            Step::Run(call) => {
                let mut outcome = Outcome::default();
                let connection = Arc::clone(&self.connection);
                Some(
                    call.run(fs, &connection, self.max_message_bytes, &mut outcome)
                        .await,
                )
            }
            Step::Ignore => None,
        }
    }

    /// Decodes `bytes` and applies the handshake rules.
    pub(crate) fn receive(&mut self, bytes: &[u8]) -> Step {
        let seed_for = |method: &str| methods::method(method)?.runs.decoder().map(Seed);
        let message = match Incoming::read(bytes, seed_for) {
            Ok(message) => message,
            Err(e) => {
                let error =
                    ErrorObject::new(INVALID_REQUEST, format!("{MALFORMED_MESSAGE_PREFIX}: {e}"));
                return Step::Unreadable(error_message(UNKNOWN_REQUEST_ID, error));
            }
        };
        match message {
            Incoming::Request { id, method, params } => self.on_request(id, method, params),
            Incoming::Notification { method } if method == INITIALIZED_METHOD => {
                if self.state == Handshake::AwaitingInitialized {
                    self.state = Handshake::Ready;
                }
                Step::Ignore
            }
            Incoming::Notification { method } => {
                tracing::debug!(method, "notification ignored");
                Step::Ignore
            }
            Incoming::Reply => {
                tracing::debug!("unexpected response from client ignored");
                Step::Ignore
            }
        }
    }

    fn on_request(&mut self, id: RequestId, method: String, params: CallParams) -> Step {
        let row = methods::method(&method);
        let reply = match row.map(|m| m.runs) {
            None => Err(ErrorObject::new(
                METHOD_NOT_FOUND,
                format!("unknown method: {method}"),
            )),
            Some(Runs::Session) if self.state == Handshake::AwaitingInitialize => {
                self.initialize(params.text())
            }
            Some(Runs::Session) => Err(ErrorObject::new(
                INVALID_REQUEST,
                DUPLICATE_INITIALIZE_MESSAGE,
            )),
            Some(_) => {
                let refusal = match self.state {
                    Handshake::AwaitingInitialize => NOT_INITIALIZED_MESSAGE,
                    Handshake::AwaitingInitialized => NOT_INITIALIZED_NOTIFICATION_MESSAGE,
                    Handshake::Ready => {
                        return Step::Run(FsCall {
                            id,
                            method,
                            params,
                            row,
                        });
                    }
                };
                Err(ErrorObject::new(INVALID_REQUEST, refusal))
            }
        };
        Step::Answer {
            request: FsCall {
                id,
                method,
                params,
                row,
            },
            reply,
        }
    }

    /// Answers `initialize`: a new session, or the one `resumeSessionId` names.
    fn initialize(&mut self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let params: InitializeParams = match params {
            None => InitializeParams::default(),
            // The handshake's refusals carry no kind: no file system is behind them.
            Some(raw) => decode(Some(raw)).map_err(|e| ErrorObject::new(e.code, e.message))?,
        };
        let session_id = match (params.resume_session_id, &self.sessions) {
            (Some(id), Some(sessions)) => {
                sessions
                    .resume(&id)
                    .map_err(|message| ErrorObject::new(INVALID_REQUEST, message))?;
                id
            }
            (Some(id), None) => {
                return Err(ErrorObject::new(
                    INVALID_REQUEST,
                    format!("unknown session id {id}"),
                ));
            }
            (None, Some(sessions)) => sessions.open(),
            (None, None) => uuid::Uuid::new_v4().to_string(),
        };
        self.session_id = Some(session_id);
        self.state = Handshake::AwaitingInitialized;
        Ok(self.initialize_response())
    }

    fn initialize_response(&self) -> Value {
        let response = InitializeResponse {
            session_id: self.session_id.clone(),
            environment_info: self.environment.clone(),
            capfs: Some(ServerCapabilities {
                version: env!("CARGO_PKG_VERSION").to_string(),
                max_message_bytes: self.max_message_bytes as u64,
                data_frames: self.data_frames,
                read_limit: self.read_limit,
                walk: true,
                roots: self.roots.clone(),
                narrow_roots: true,
                ranges: true,
            }),
        };
        serde_json::to_value(response).expect("protocol results always serialize")
    }
}
