//! One connection's protocol state without the socket: decode a message, apply the handshake
//! rules, and say what to answer. The transport (`mod.rs`) calls [`Session::receive`] for every
//! incoming message and runs fs calls concurrently; [`Session::handle`] runs the same steps
//! inline, for callers (tests, fuzzers) that have bytes but no socket.

use serde_json::Value;

use super::handler::{self, error_message, reply_message};
use crate::ExecutorFileSystem;
use crate::protocol::{
    CAPFS_READ_FILE_STREAM_METHOD, CAPFS_WRITE_FILE_STREAM_METHOD, DUPLICATE_INITIALIZE_MESSAGE,
    ErrorObject, INITIALIZE_METHOD, INITIALIZED_METHOD, INVALID_REQUEST, InitializeResponse,
    MALFORMED_MESSAGE_PREFIX, METHOD_NOT_FOUND, Message, NOT_INITIALIZED_MESSAGE,
    NOT_INITIALIZED_NOTIFICATION_MESSAGE, Request, RequestId, RootDescription, ServerCapabilities,
    UNKNOWN_REQUEST_ID,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Handshake {
    AwaitingInitialize,
    AwaitingInitialized,
    Ready,
}

/// The server side of one connection's protocol: the handshake state and what each incoming
/// message gets in reply.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// use capfs::protocol::Message;
/// use capfs::{Access, LocalFileSystem, Sandbox, server::Session};
///
/// let dir = tempfile::tempdir()?;
/// let fs = LocalFileSystem::new(Sandbox::new().with_root(dir.path(), Access::ReadWrite)?);
/// let mut session = Session::new(capfs::server::DEFAULT_MAX_MESSAGE_BYTES);
///
/// let reply = session.handle(&fs, br#"{"id":1,"method":"initialize","params":{}}"#).await;
/// assert!(matches!(reply, Some(Message::Response(_))));
/// assert!(session.handle(&fs, br#"{"method":"initialized"}"#).await.is_none());
/// let reply = session.handle(&fs, br#"{"id":2,"method":"fs/readFile","params":{"path":"/"}}"#);
/// assert!(matches!(reply.await, Some(Message::Error(_))));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Session {
    state: Handshake,
    max_message_bytes: usize,
    read_limit: Option<u64>,
    roots: Vec<RootDescription>,
}

/// What the transport does with one incoming message.
#[derive(Debug)]
pub(crate) enum Step {
    /// Send this message at once: the answer to input that is not a message.
    Reply(Message),
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
    pub params: Option<Value>,
}

/// True for the methods of the data-frame extension, which need the transport.
pub(crate) fn is_stream_method(method: &str) -> bool {
    method == CAPFS_READ_FILE_STREAM_METHOD || method == CAPFS_WRITE_FILE_STREAM_METHOD
}

impl FsCall {
    /// Runs the call on `fs` and returns the reply to send; `outcome` records what it did.
    pub(crate) async fn run(
        self,
        fs: &dyn ExecutorFileSystem,
        max_message_bytes: usize,
        outcome: &mut handler::Outcome,
    ) -> Message {
        let reply = if is_stream_method(&self.method) {
            Err(ErrorObject::new(
                METHOD_NOT_FOUND,
                format!(
                    "{} needs a connection that carries data frames",
                    self.method
                ),
            ))
        } else {
            handler::dispatch(fs, &self.method, self.params, max_message_bytes, outcome)
                .await
                .map(handler::Payload::into_value)
        };
        reply_message(self.id, reply)
    }
}

impl Session {
    /// A new connection's state: waiting for `initialize`. `max_message_bytes` is announced to
    /// the client in the `initialize` result.
    pub fn new(max_message_bytes: usize) -> Self {
        Self {
            state: Handshake::AwaitingInitialize,
            max_message_bytes,
            read_limit: None,
            roots: Vec::new(),
        }
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
    pub async fn handle(&mut self, fs: &dyn ExecutorFileSystem, bytes: &[u8]) -> Option<Message> {
        match self.receive(bytes) {
            Step::Reply(message) => Some(message),
            Step::Answer { request, reply } => Some(reply_message(request.id, reply)),
            Step::Run(call) => {
                let mut outcome = handler::Outcome::default();
                Some(call.run(fs, self.max_message_bytes, &mut outcome).await)
            }
            Step::Ignore => None,
        }
    }

    /// Decodes `bytes` and applies the handshake rules.
    pub(crate) fn receive(&mut self, bytes: &[u8]) -> Step {
        let message = match Message::from_slice(bytes) {
            Ok(message) => message,
            Err(e) => {
                let error =
                    ErrorObject::new(INVALID_REQUEST, format!("{MALFORMED_MESSAGE_PREFIX}: {e}"));
                return Step::Reply(error_message(UNKNOWN_REQUEST_ID, error));
            }
        };
        match message {
            Message::Request(request) => self.on_request(request),
            Message::Notification(n) if n.method == INITIALIZED_METHOD => {
                if self.state == Handshake::AwaitingInitialized {
                    self.state = Handshake::Ready;
                }
                Step::Ignore
            }
            Message::Notification(n) => {
                tracing::debug!(method = n.method, "notification ignored");
                Step::Ignore
            }
            Message::Response(_) | Message::Error(_) => {
                tracing::debug!("unexpected response from client ignored");
                Step::Ignore
            }
        }
    }

    fn on_request(&mut self, request: Request) -> Step {
        let Request { id, method, params } = request;
        let reply = if method == INITIALIZE_METHOD {
            if self.state == Handshake::AwaitingInitialize {
                self.state = Handshake::AwaitingInitialized;
                Ok(self.initialize_response())
            } else {
                Err(ErrorObject::new(
                    INVALID_REQUEST,
                    DUPLICATE_INITIALIZE_MESSAGE,
                ))
            }
        } else if !handler::FS_METHODS.contains(&method.as_str())
            && !is_stream_method(&method)
            && method != crate::protocol::CAPFS_NARROW_ROOTS_METHOD
        {
            Err(ErrorObject::new(
                METHOD_NOT_FOUND,
                format!("unknown method: {method}"),
            ))
        } else {
            let refusal = match self.state {
                Handshake::AwaitingInitialize => NOT_INITIALIZED_MESSAGE,
                Handshake::AwaitingInitialized => NOT_INITIALIZED_NOTIFICATION_MESSAGE,
                Handshake::Ready => return Step::Run(FsCall { id, method, params }),
            };
            Err(ErrorObject::new(INVALID_REQUEST, refusal))
        };
        Step::Answer {
            request: FsCall { id, method, params },
            reply,
        }
    }

    fn initialize_response(&self) -> Value {
        let response = InitializeResponse {
            capfs: Some(ServerCapabilities {
                version: env!("CARGO_PKG_VERSION").to_string(),
                max_message_bytes: self.max_message_bytes as u64,
                data_frames: true,
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
