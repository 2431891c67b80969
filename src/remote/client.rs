//! One connection's client side: requests multiplexed by id, the reader task that routes
//! replies and data frames to their callers, and the writer task.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};

use super::connect::{RemoteOptions, timed_out};
use super::stream::MAX_UPLOADS;
use crate::protocol::{
    DATA_FRAME_HEADER_LEN, ErrorObject, INITIALIZE_METHOD, INITIALIZED_METHOD, InitializeParams,
    InitializeResponse, METHOD_NOT_FOUND, Message, Notification, Request, RequestId,
    RootDescription, data_frame_stream,
};
use crate::{AbsolutePathBuf, WriteOptions};

pub(super) type Reply = Result<Value, ErrorObject>;
/// Calls awaiting their response; `None` once the connection is gone.
type Pending = Arc<Mutex<Option<HashMap<i64, oneshot::Sender<Reply>>>>>;
/// Streamed reads receiving data frames, by stream id.
pub(super) type Downloads = Arc<Mutex<HashMap<u64, mpsc::Sender<Bytes>>>>;

/// Messages queued for the connection's writer: with data frames of 256 KiB, at most 8 MiB.
const OUT_QUEUE_MESSAGES: usize = 32;

#[derive(Debug)]
pub(super) struct Client {
    pub(super) out: mpsc::Sender<WsMessage>,
    pub(super) pending: Pending,
    pub(super) downloads: Downloads,
    pub(super) upload_slots: tokio::sync::Semaphore,
    pub(super) next_id: AtomicI64,
    pub(super) reader: JoinHandle<()>,
    pub(super) data_frames: bool,
    /// The server announced capfs's extensions (optional params are sent only then).
    pub(super) capfs: bool,
    /// The roots the server announced.
    pub(super) roots: Vec<RootDescription>,
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
        options: &RemoteOptions,
        command: Option<CommandGroup>,
    ) -> io::Result<Self>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (sink, stream) = ws.split();
        let (out, out_rx) = mpsc::channel::<WsMessage>(OUT_QUEUE_MESSAGES);
        tokio::spawn(crate::transport::ws::write_queued(sink, out_rx));
        let pending: Pending = Arc::new(Mutex::new(Some(HashMap::new())));
        let downloads: Downloads = Arc::default();
        let reader = tokio::spawn(read_replies(
            stream,
            Arc::clone(&pending),
            Arc::clone(&downloads),
        ));
        let mut client = Client {
            out,
            pending,
            downloads,
            upload_slots: tokio::sync::Semaphore::new(MAX_UPLOADS),
            next_id: AtomicI64::new(1),
            reader,
            data_frames: false,
            capfs: false,
            roots: Vec::new(),
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
        client.capfs = initialized.capfs.is_some();
        client.roots = initialized.capfs.map(|c| c.roots).unwrap_or_default();
        client.notify(INITIALIZED_METHOD).await?;
        Ok(client)
    }

    pub(super) fn new_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Tells the server to give up a streamed write: an empty data frame of its stream.
    pub(super) fn abort_upload(&self, header: &[u8; DATA_FRAME_HEADER_LEN]) {
        let _ = self.out.try_send(WsMessage::Binary(header.to_vec().into()));
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
        match reply {
            Ok(Err(e)) if e.code == METHOD_NOT_FOUND => Err(unsupported()),
            reply => finish(method, reply),
        }
    }

    /// Sends a request and returns the receiver of its reply.
    pub(super) async fn start_call(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> io::Result<oneshot::Receiver<Reply>> {
        // Only a path that is not UTF-8 fails to serialise; it cannot be named on the wire.
        let params = serde_json::to_value(params)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let id = self.new_id();
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().expect("pending map lock");
            let map = pending.as_mut().ok_or_else(connection_lost)?;
            map.insert(id, tx);
        }
        let request = Message::Request(Request {
            id: RequestId::Integer(id),
            method: method.to_string(),
            params: Some(params),
        });
        if self
            .out
            .send(WsMessage::text(request.to_text()))
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
        self.out
            .send(WsMessage::text(notification.to_text()))
            .await
            .map_err(|_| connection_lost())
    }
}

/// The reader task: hands each reply to the call waiting for it and each data frame to the
/// streamed read it belongs to, until the connection ends; then every pending call fails.
async fn read_replies<S>(mut stream: S, pending: Pending, downloads: Downloads)
where
    S: Stream<Item = Result<WsMessage, WsError>> + Unpin,
{
    while let Some(Ok(frame)) = stream.next().await {
        let bytes = match &frame {
            WsMessage::Text(text) => text.as_bytes(),
            WsMessage::Binary(bytes) => {
                if let Some(stream_id) = data_frame_stream(bytes) {
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
                bytes.as_ref()
            }
            WsMessage::Close(_) => break,
            _ => continue,
        };
        let (id, reply) = match Message::from_slice(bytes) {
            Ok(Message::Response(r)) => (r.id, Ok(r.result)),
            Ok(Message::Error(e)) => (e.id, Err(e.error)),
            _ => continue,
        };
        let RequestId::Integer(id) = id else { continue };
        let waiter = pending
            .lock()
            .expect("pending map lock")
            .as_mut()
            .and_then(|map| map.remove(&id));
        if let Some(waiter) = waiter {
            let _ = waiter.send(reply);
        }
    }
    // Dropping every waiter wakes each pending call with `BrokenPipe`.
    pending.lock().expect("pending map lock").take();
    downloads.lock().expect("downloads lock").clear();
}

/// Decodes a reply: the server's error as the `io::Error` it stands for, a result as `T`.
pub(super) fn finish<T: DeserializeOwned>(
    method: &str,
    reply: Result<Reply, oneshot::error::RecvError>,
) -> io::Result<T> {
    let value = reply
        .map_err(|_| connection_lost())?
        .map_err(ErrorObject::into_io)?;
    serde_json::from_value(value).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{method}: unexpected result from server: {e}"),
        )
    })
}

/// The empty result of mutating methods; any object is accepted.
#[derive(serde::Deserialize)]
pub(super) struct Empty {}
