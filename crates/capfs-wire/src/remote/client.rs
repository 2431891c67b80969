//! One connection's client side: requests multiplexed by id over a `transport::link`, and the
//! reader task that routes the replies and data frames it reads to their callers.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::common::{Reply, connection_lost, no_reply, timed_out};
use super::options::RemoteOptions;
use super::outgoing::{Outgoing, Writer};
use super::reply::{
    broken_by, error_code, finish, finish_with, local_error_reply, reply_id, too_big,
};
use super::routes::{Routes, route};
use crate::protocol::{
    DATA_FRAME_HEADER_LEN, INITIALIZE_METHOD, INITIALIZED_METHOD, InitializeParams,
    InitializeResponse, METHOD_NOT_FOUND, Message, Notification, RootDescription,
};
use crate::transport::link::{Incoming, Link, Received};
use crate::transport::shared::DirectSocket;
use capfs::{AbsolutePathBuf, WriteOptions};

/// Calls awaiting their response; `None` once the connection is gone.
type Pending = Arc<Mutex<Option<HashMap<i64, oneshot::Sender<Reply>, BuildIdHasher>>>>;

/// Hashes the ids of pending calls and streams: one multiplication, where the default hasher (SipHash)
/// costs some hundred instructions per lookup, twice a call. Only the client's own ids are
/// ever keys (a reply's id is only looked up), so a server cannot choose keys that collide.
#[derive(Default)]
pub(super) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_i64(&mut self, id: i64) {
        self.write_u64(id as u64);
    }

    fn write_u64(&mut self, id: u64) {
        // Fibonacci hashing: consecutive ids spread over every bit the table looks at.
        self.0 = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

pub(super) type BuildIdHasher = std::hash::BuildHasherDefault<IdHasher>;
/// Streamed reads receiving data frames, by stream id (the client's own ids, as calls').
pub(super) type Downloads = Arc<Mutex<HashMap<u64, mpsc::Sender<Bytes>, BuildIdHasher>>>;

/// Streamed writes at once per connection, well below the server's in-flight bound so that the
/// server never has to refuse one.
const MAX_UPLOADS: usize = 16;
/// Messages queued for the connection's writer: with data frames of 256 KiB, at most 8 MiB.
const OUT_QUEUE_MESSAGES: usize = 32;

#[derive(Debug)]
pub(super) struct Client {
    out: mpsc::Sender<Outgoing>,
    /// The writer sends streamed writes' data frames itself, past tungstenite (`outgoing.rs`).
    pub(super) writes_frames_itself: bool,
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
    /// How long a call waits for its reply.
    call_timeout: Duration,
    /// How long a stream goes without progress.
    pub(super) stream_idle_timeout: Duration,
    /// The server narrows a connection's roots (`capfs/narrowRoots`).
    pub(super) narrow_roots: bool,
    /// The server reads ranges of files (`capfs/readFileRange`).
    pub(super) ranges: bool,
    /// The largest message the server said it accepts (it bounds its replies too); 0 when it
    /// did not say.
    pub(super) server_max_message_bytes: u64,
    /// The processes started through this connection, by id, where their notifications go.
    pub(super) routes: Routes,
    /// What the server said of the processes it serves, when it serves them.
    pub(super) processes_info: Option<crate::protocol::process::ProcessesInfo>,
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
        // The writer runs until the queue closes, with the client.
        let writer = Writer::new();
        let answered = Arc::clone(&writer.answered);
        let link = Link::open(ws, socket, OUT_QUEUE_MESSAGES, writer);
        let pending: Pending = Arc::new(Mutex::new(Some(HashMap::default())));
        let downloads: Downloads = Arc::default();
        let routes = Routes::default();
        let reader = tokio::spawn(read_replies(
            link.incoming,
            Arc::clone(&pending),
            Arc::clone(&downloads),
            Arc::clone(&routes),
            answered,
        ));
        let mut client = Client {
            out: link.out,
            writes_frames_itself: link.writes_frames_itself,
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
            call_timeout: options.call_timeout,
            stream_idle_timeout: options.stream_idle_timeout,
            narrow_roots: false,
            ranges: false,
            server_max_message_bytes: 0,
            routes,
            processes_info: None,
            _command: command,
        };
        let params = InitializeParams {
            client_name: options.client_name.clone(),
            resume_session_id: None,
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
        client.server_max_message_bytes = initialized
            .capfs
            .as_ref()
            .map_or(0, |c| c.max_message_bytes);
        client.roots = initialized.capfs.map(|c| c.roots).unwrap_or_default();
        client.processes_info = initialized.environment_info.and_then(|e| e.processes);
        client.notify(INITIALIZED_METHOD).await?;
        Ok(client)
    }

    pub(super) fn new_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Tells the server to give up a streamed write: an empty data frame of its stream.
    pub(super) fn abort_upload(&self, header: &[u8; DATA_FRAME_HEADER_LEN]) {
        let message = WsMessage::Binary(header.to_vec().into());
        let _ = self.out.try_send(Outgoing::Message(message));
    }

    /// Queues `item` for the writer.
    pub(super) async fn send(&self, item: Outgoing) -> io::Result<()> {
        self.out.send(item).await.map_err(|_| connection_lost())
    }

    pub(super) async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> io::Result<T> {
        self.call_with(method, params, |_| None).await
    }

    /// [`call`](Self::call), the reply read by `fast` first (see `reply::finish_with`).
    pub(super) async fn call_with<T: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
        fast: impl FnOnce(&str) -> Option<T>,
    ) -> io::Result<T> {
        // Timed only when someone reads the time: two clock reads a call otherwise.
        let started = tracing::enabled!(tracing::Level::DEBUG).then(std::time::Instant::now);
        let (id, reply) = self.start_call(method, params).await?;
        let reply = self.reply_in_time(method, id, reply).await?;
        let result = finish_with(method, reply, fast);
        if let Some(started) = started {
            tracing::debug!(
                method,
                ms = started.elapsed().as_secs_f64() * 1000.0,
                ok = result.is_ok(),
                "call"
            );
        }
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
        let unsupported = || crate::error::extension_unsupported(path, what);
        if !self.capfs {
            return Err(unsupported());
        }
        let started = tracing::enabled!(tracing::Level::DEBUG).then(std::time::Instant::now);
        let (id, reply) = self.start_call(method, params).await?;
        let reply = self.reply_in_time(method, id, reply).await?;
        if let Some(started) = started {
            tracing::debug!(
                method,
                ms = started.elapsed().as_secs_f64() * 1000.0,
                "call"
            );
        }
        let reply = reply.map_err(|_| connection_lost())?;
        if error_code(&reply) == Some(METHOD_NOT_FOUND) {
            return Err(unsupported());
        }
        finish(method, Ok(reply))
    }

    /// Waits for the reply to call `id` for at most the call timeout; past it the call is
    /// forgotten (a late reply is dropped) and fails with `TimedOut`.
    async fn reply_in_time(
        &self,
        method: &str,
        id: i64,
        reply: oneshot::Receiver<Reply>,
    ) -> io::Result<Result<Reply, oneshot::error::RecvError>> {
        match tokio::time::timeout(self.call_timeout, reply).await {
            Ok(reply) => Ok(reply),
            Err(_) => {
                self.forget(id);
                Err(no_reply(method, "call timeout", self.call_timeout))
            }
        }
    }

    /// Sends a request; returns its id and the receiver of its reply.
    pub(super) async fn start_call(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> io::Result<(i64, oneshot::Receiver<Reply>)> {
        let id = self.new_id();
        // Only a path that is not UTF-8 fails to serialise; it cannot be named on the wire.
        let text = serde_json::to_string(&OutgoingRequest { id, method, params })
            .map_err(|e| crate::error::unserialisable(&e))?;
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().expect("pending map lock");
            let map = pending.as_mut().ok_or_else(connection_lost)?;
            map.insert(id, tx);
        }
        if self
            .send(Outgoing::Message(WsMessage::text(text)))
            .await
            .is_err()
        {
            self.forget(id);
            return Err(connection_lost());
        }
        Ok((id, rx))
    }

    /// Drops the waiter of call `id`: its reply, if it ever comes, is ignored.
    pub(super) fn forget(&self, id: i64) {
        if let Some(map) = self.pending.lock().expect("pending map lock").as_mut() {
            map.remove(&id);
        }
    }

    async fn notify(&self, method: &str) -> io::Result<()> {
        let notification = Message::Notification(Notification {
            method: method.to_string(),
            params: None,
        });
        self.send(Outgoing::Message(WsMessage::text(notification.to_text())))
            .await
    }
}

/// The reader task: hands each reply to the call waiting for it and each data frame to the
/// streamed read it belongs to, until the connection ends; then every pending call fails.
async fn read_replies<S>(
    mut incoming: Incoming<S>,
    pending: Pending,
    downloads: Downloads,
    routes: Routes,
    answered: Arc<AtomicUsize>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let broken = loop {
        let bytes = match incoming.next().await {
            Received::Message(bytes) => bytes,
            Received::Data {
                stream_id,
                last: false,
                payload,
            } => {
                let consumer = downloads
                    .lock()
                    .expect("downloads lock")
                    .get(&stream_id)
                    .cloned();
                if let Some(consumer) = consumer {
                    let _ = consumer.send(payload).await;
                }
                continue;
            }
            // A frame tagged last ends a streamed write, which only a client sends: one from
            // the server is dropped, as anything else that is not JSON is.
            Received::Data { last: true, .. } => continue,
            Received::TooBig(e) => break Some(too_big(e)),
            Received::Broken(e) => break broken_by(&e),
            Received::Closed => break None,
        };
        let Some(id) = reply_id(&bytes) else {
            route(&bytes, &routes).await;
            continue;
        };
        let waiter = pending
            .lock()
            .expect("pending map lock")
            .as_mut()
            .and_then(|map| map.remove(&id));
        if let Some(waiter) = waiter
            && waiter.send(bytes).is_ok()
        {
            answered.fetch_add(1, Ordering::Relaxed);
        }
    };
    // Dropping every waiter wakes each pending call with `BrokenPipe`; when the server broke
    // the protocol, each is answered with what it did instead.
    let waiters = pending.lock().expect("pending map lock").take();
    downloads.lock().expect("downloads lock").clear();
    routes.lock().expect("process routes").clear();
    if let (Some(broken), Some(waiters)) = (broken, waiters) {
        for (id, waiter) in waiters {
            let _ = waiter.send(local_error_reply(id, &broken));
        }
    }
}

/// A request as it goes out: the params serialised in place, without a `Value` in between.
#[derive(Serialize)]
struct OutgoingRequest<'a, P> {
    id: i64,
    method: &'a str,
    params: P,
}
