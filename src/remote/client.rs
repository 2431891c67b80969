//! One connection's client side: requests multiplexed by id, the reader task that routes
//! replies and data frames to their callers, and the writer task.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};

use super::RemoteOptions;
use super::outgoing::{Outbound, write_out};
use crate::protocol::{
    DATA_FRAME_HEADER_LEN, ErrorObject, INITIALIZE_METHOD, INITIALIZED_METHOD, InitializeParams,
    InitializeResponse, METHOD_NOT_FOUND, Message, Notification, RequestId, RootDescription,
    data_frame_stream,
};
use crate::transport::shared::DirectSocket;
use crate::{AbsolutePathBuf, WriteOptions};

/// A reply as it arrived: the whole message, which its caller decodes straight into the type
/// it expects (no `serde_json::Value` in between).
pub(super) type Reply = Bytes;
/// Calls awaiting their response; `None` once the connection is gone.
type Pending = Arc<Mutex<Option<HashMap<i64, oneshot::Sender<Reply>>>>>;
/// Streamed reads receiving data frames, by stream id.
pub(super) type Downloads = Arc<Mutex<HashMap<u64, mpsc::Sender<Bytes>>>>;

pub(super) fn timed_out(what: &str, after: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("{what} timed out after {after:?}"),
    )
}

/// Streamed writes at once per connection, well below the server's in-flight bound so that the
/// server never has to refuse one.
const MAX_UPLOADS: usize = 16;
/// Messages queued for the connection's writer: with data frames of 256 KiB, at most 8 MiB.
const OUT_QUEUE_MESSAGES: usize = 32;

#[derive(Debug)]
pub(super) struct Client {
    out: mpsc::Sender<Outbound>,
    /// The writer sends streamed writes' data frames itself, past tungstenite (`outgoing.rs`).
    pub(super) direct_frames: bool,
    pub(super) pending: Pending,
    pub(super) downloads: Downloads,
    pub(super) upload_slots: tokio::sync::Semaphore,
    pub(super) next_id: AtomicI64,
    pub(super) reader: JoinHandle<()>,
    pub(super) data_frames: bool,
    /// The server's bound on whole-file reads, when it announced one.
    pub(super) read_limit: Option<u64>,
    /// The server walks trees in one request (`capfs/walk`).
    pub(super) walk: bool,
    /// The server announced capfs's extensions (optional params are sent only then).
    pub(super) capfs: bool,
    /// The roots the server announced.
    pub(super) roots: Vec<RootDescription>,
    /// The server narrows a connection's roots (`capfs/narrowRoots`).
    pub(super) narrow_roots: bool,
    /// The server reads ranges of files (`capfs/readFileRange`).
    pub(super) ranges: bool,
    /// The command carrying the connection, its process group killed when the client goes
    /// away.
    _command: Option<CommandGroup>,
}

/// A command run in its own process group; dropping it kills the whole group.
#[derive(Debug)]
pub(super) struct CommandGroup(pub(super) tokio::process::Child);

impl Drop for CommandGroup {
    fn drop(&mut self) {
        let group = self
            .0
            .id()
            .and_then(|id| rustix::process::Pid::from_raw(id as i32));
        if let Some(group) = group {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

pub(super) fn connection_lost() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "connection to the capfs server was lost",
    )
}

impl Client {
    /// Starts the reader and writer tasks on an open WebSocket and completes `initialize`.
    pub(super) async fn start<S>(
        ws: tokio_tungstenite::WebSocketStream<S>,
        socket: Option<DirectSocket>,
        options: &RemoteOptions,
        command: Option<CommandGroup>,
    ) -> io::Result<Self>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (sink, stream) = ws.split();
        let (out, out_rx) = mpsc::channel::<Outbound>(OUT_QUEUE_MESSAGES);
        let direct_frames = socket.is_some();
        tokio::spawn(write_out(sink, socket, out_rx));
        let pending: Pending = Arc::new(Mutex::new(Some(HashMap::new())));
        let downloads: Downloads = Arc::default();
        let reader = tokio::spawn(read_replies(
            stream,
            Arc::clone(&pending),
            Arc::clone(&downloads),
        ));
        let mut client = Client {
            out,
            direct_frames,
            pending,
            downloads,
            upload_slots: tokio::sync::Semaphore::new(MAX_UPLOADS),
            next_id: AtomicI64::new(1),
            reader,
            data_frames: false,
            read_limit: None,
            walk: false,
            capfs: false,
            roots: Vec::new(),
            narrow_roots: false,
            ranges: false,
            _command: command,
        };
        let params = InitializeParams {
            client_name: options.client_name.clone(),
        };
        let initialized: InitializeResponse = tokio::time::timeout(
            options.connect_timeout,
            client.call(INITIALIZE_METHOD, params),
        )
        .await
        .map_err(|_| timed_out("initialize", options.connect_timeout))??;
        client.data_frames = initialized.capfs.as_ref().is_some_and(|c| c.data_frames);
        client.read_limit = initialized.capfs.as_ref().and_then(|c| c.read_limit);
        client.walk = initialized.capfs.as_ref().is_some_and(|c| c.walk);
        client.capfs = initialized.capfs.is_some();
        client.narrow_roots = initialized.capfs.as_ref().is_some_and(|c| c.narrow_roots);
        client.ranges = initialized.capfs.as_ref().is_some_and(|c| c.ranges);
        client.roots = initialized.capfs.map(|c| c.roots).unwrap_or_default();
        client.notify(INITIALIZED_METHOD).await?;
        Ok(client)
    }

    pub(super) fn new_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Tells the server to give up a streamed write: an empty data frame of its stream.
    pub(super) fn abort_upload(&self, header: &[u8; DATA_FRAME_HEADER_LEN]) {
        let message = WsMessage::Binary(header.to_vec().into());
        let _ = self.out.try_send(Outbound::Message(message));
    }

    /// Queues `item` for the writer.
    pub(super) async fn send(&self, item: Outbound) -> io::Result<()> {
        self.out.send(item).await.map_err(|_| connection_lost())
    }

    pub(super) async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> io::Result<T> {
        let started = std::time::Instant::now();
        let reply = self.start_call(method, params).await?;
        let result = finish(method, reply.await);
        tracing::debug!(
            method,
            ms = started.elapsed().as_secs_f64() * 1000.0,
            ok = result.is_ok(),
            "call"
        );
        result
    }

    /// `options` as they may be sent: none of them to a server that did not announce capfs,
    /// which would not expect the params.
    pub(super) fn capfs_options(&self, options: WriteOptions) -> WriteOptions {
        if self.capfs {
            options
        } else {
            WriteOptions::default()
        }
    }

    /// A call of a capfs extension: `Unsupported` without asking when the server did not
    /// announce capfs, and when it does not know the method.
    pub(super) async fn capfs_call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
        path: &AbsolutePathBuf,
        what: &str,
    ) -> io::Result<T> {
        let unsupported = || {
            io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{path}: the server does not support {what}"),
            )
        };
        if !self.capfs {
            return Err(unsupported());
        }
        let started = std::time::Instant::now();
        let reply = self.start_call(method, params).await?.await;
        tracing::debug!(
            method,
            ms = started.elapsed().as_secs_f64() * 1000.0,
            "call"
        );
        let reply = reply.map_err(|_| connection_lost())?;
        if error_code(&reply) == Some(METHOD_NOT_FOUND) {
            return Err(unsupported());
        }
        finish(method, Ok(reply))
    }

    /// Sends a request and returns the receiver of its reply.
    pub(super) async fn start_call(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> io::Result<oneshot::Receiver<Reply>> {
        let id = self.new_id();
        // Only a path that is not UTF-8 fails to serialise; it cannot be named on the wire.
        let text = serde_json::to_string(&OutgoingRequest { id, method, params })
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().expect("pending map lock");
            let map = pending.as_mut().ok_or_else(connection_lost)?;
            map.insert(id, tx);
        }
        if self
            .send(Outbound::Message(WsMessage::text(text)))
            .await
            .is_err()
        {
            self.forget(id);
            return Err(connection_lost());
        }
        Ok(rx)
    }

    fn forget(&self, id: i64) {
        if let Some(map) = self.pending.lock().expect("pending map lock").as_mut() {
            map.remove(&id);
        }
    }

    async fn notify(&self, method: &str) -> io::Result<()> {
        let notification = Message::Notification(Notification {
            method: method.to_string(),
            params: None,
        });
        self.send(Outbound::Message(WsMessage::text(notification.to_text())))
            .await
    }
}

/// The reader task: hands each reply to the call waiting for it and each data frame to the
/// streamed read it belongs to, until the connection ends; then every pending call fails.
async fn read_replies<S>(mut stream: S, pending: Pending, downloads: Downloads)
where
    S: Stream<Item = Result<WsMessage, WsError>> + Unpin,
{
    while let Some(Ok(frame)) = stream.next().await {
        let bytes = match frame {
            WsMessage::Text(text) => Bytes::clone(text.as_ref()),
            WsMessage::Binary(bytes) => {
                if let Some(stream_id) = data_frame_stream(&bytes) {
                    let consumer = downloads
                        .lock()
                        .expect("downloads lock")
                        .get(&stream_id)
                        .cloned();
                    if let Some(consumer) = consumer {
                        let _ = consumer.send(bytes.slice(DATA_FRAME_HEADER_LEN..)).await;
                    }
                    continue;
                }
                bytes
            }
            WsMessage::Close(_) => break,
            _ => continue,
        };
        let Some(id) = reply_id(&bytes) else { continue };
        let waiter = pending
            .lock()
            .expect("pending map lock")
            .as_mut()
            .and_then(|map| map.remove(&id));
        if let Some(waiter) = waiter {
            let _ = waiter.send(bytes);
        }
    }
    // Dropping every waiter wakes each pending call with `BrokenPipe`.
    pending.lock().expect("pending map lock").take();
    downloads.lock().expect("downloads lock").clear();
}

/// The id of the call a reply answers, or `None` when `message` is not a reply to one of ours
/// (a request or notification from the server, a string id, not a JSON object). Only the
/// envelope is looked at; the caller decodes the rest.
fn reply_id(message: &[u8]) -> Option<i64> {
    // A capfs server writes the id first: `{"id":7,"result":...` or `{"id":7,"error":...`.
    if let Some(rest) = message.strip_prefix(br#"{"id":"#) {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let tail = &rest[digits..];
        if (1..=18).contains(&digits)
            && (tail.starts_with(br#","result":"#) || tail.starts_with(br#","error":"#))
        {
            return std::str::from_utf8(&rest[..digits]).ok()?.parse().ok();
        }
    }
    /// Just the members that tell a reply from a message of another kind.
    #[derive(Deserialize)]
    struct Envelope {
        id: Option<RequestId>,
        #[serde(default, deserialize_with = "present")]
        method: bool,
        #[serde(default, deserialize_with = "present")]
        result: bool,
        #[serde(default, deserialize_with = "present")]
        error: bool,
    }
    /// True for a member that is there, whatever its value (`null` included).
    fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        IgnoredAny::deserialize(d).map(|_| true)
    }
    match serde_json::from_slice(message).ok()? {
        Envelope {
            id: Some(RequestId::Integer(id)),
            method: false,
            result,
            error,
        } if result || error => Some(id),
        _ => None,
    }
}

/// A request as it goes out: the params serialised in place, without a `Value` in between.
#[derive(Serialize)]
struct OutgoingRequest<'a, P> {
    id: i64,
    method: &'a str,
    params: P,
}

/// A reply decoded into the result type the caller expects.
#[derive(Deserialize)]
struct Answer<T> {
    result: Option<T>,
    error: Option<ErrorObject>,
}

/// Decodes a reply: the server's error as the `io::Error` it stands for, a result as `T`.
pub(super) fn finish<T: DeserializeOwned>(
    method: &str,
    reply: Result<Reply, oneshot::error::RecvError>,
) -> io::Result<T> {
    let reply = reply.map_err(|_| connection_lost())?;
    let unexpected = |e: &dyn std::fmt::Display| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{method}: unexpected result from server: {e}"),
        )
    };
    let answer: Answer<T> = serde_json::from_slice(&reply).map_err(|e| unexpected(&e))?;
    match answer {
        Answer {
            error: Some(error), ..
        } => Err(error.into_io()),
        Answer {
            result: Some(result),
            ..
        } => Ok(result),
        Answer { .. } => Err(unexpected(&"neither a result nor an error")),
    }
}

/// The code of an error reply; `None` for a result.
fn error_code(reply: &[u8]) -> Option<i64> {
    #[derive(Deserialize)]
    struct Code {
        code: i64,
    }
    #[derive(Deserialize)]
    struct Coded {
        error: Option<Code>,
    }
    serde_json::from_slice::<Coded>(reply)
        .ok()
        .and_then(|c| c.error)
        .map(|e| e.code)
}

/// The empty result of mutating methods; any object is accepted.
#[derive(Debug, Deserialize)]
pub(super) struct Empty {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_told_from_other_messages() {
        assert_eq!(reply_id(br#"{"id":7,"result":{}}"#), Some(7));
        assert_eq!(
            reply_id(br#"{"id":8,"error":{"code":1,"message":"m"}}"#),
            Some(8)
        );
        // Members in another order, as another server may send them.
        assert_eq!(
            reply_id(br#"{"jsonrpc":"2.0","result":null,"id":9}"#),
            Some(9)
        );
        // A request or notification from the server is not a reply, whatever its id.
        assert_eq!(reply_id(br#"{"id":7,"method":"x","result":1}"#), None);
        assert_eq!(reply_id(br#"{"method":"x"}"#), None);
        assert_eq!(reply_id(br#"{"id":"7","result":{}}"#), None);
        assert_eq!(reply_id(br#"{"id":7}"#), None);
        assert_eq!(reply_id(b"[1]"), None);
        assert_eq!(
            reply_id(br#"{"id":99999999999999999999,"result":{}}"#),
            None
        );
    }

    #[test]
    fn replies_decode_into_the_expected_type() {
        let ok: InitializeResponse =
            finish("m", Ok(Bytes::from_static(br#"{"id":1,"result":{}}"#))).unwrap();
        assert_eq!(ok, InitializeResponse::default());
        let reply =
            br#"{"id":1,"error":{"code":-32600,"message":"/a: nope","data":{"kind":"NotFound"}}}"#;
        let err = finish::<Empty>("m", Ok(Bytes::from_static(reply))).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        let reply = br#"{"id":1,"result":[1]}"#;
        let err = finish::<Empty>("m", Ok(Bytes::from_static(reply))).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let err = finish::<Empty>("m", Ok(Bytes::from_static(br#"{"id":1}"#))).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
