//! `RemoteFileSystem`: the trait proxied to a `capfs serve` (or any codex-style exec-server) over
//! one WebSocket connection.
//!
//! Requests are multiplexed by id: any number of calls may be outstanding at once, and each
//! completes when its own response arrives. When the connection drops, every pending call and
//! every later call fails at once with `BrokenPipe`; no call waits for a peer that is gone.
//!
//! The connection runs over TCP ([`RemoteFileSystem::connect`]) or over the stdin and stdout of
//! a command such as `ssh host capfs serve --listen stdio` ([`RemoteFileSystem::connect_command`]):
//! the same WebSocket frames, there without the HTTP upgrade.

use std::collections::HashMap;
use std::io;
use std::process::Stdio;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use futures_util::StreamExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode, header};
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};

use crate::file_system::walk_by_listing;
use crate::protocol::{
    CAPFS_READ_FILE_STREAM_METHOD, CAPFS_WALK_METHOD, CAPFS_WRITE_FILE_STREAM_METHOD, CopyParams,
    CreateDirectoryParams, DATA_CHUNK_BYTES, DATA_FRAME_HEADER_LEN, ErrorObject, FS_COPY_METHOD,
    FS_CREATE_DIRECTORY_METHOD, FS_GET_METADATA_METHOD, FS_READ_DIRECTORY_METHOD,
    FS_READ_FILE_METHOD, FS_REMOVE_METHOD, FS_RENAME_METHOD, FS_WRITE_FILE_METHOD,
    GetMetadataResponse, INITIALIZE_METHOD, INITIALIZED_METHOD, InitializeParams,
    InitializeResponse, Message, Notification, PathParams, ReadDirectoryResponse, ReadFileResponse,
    ReadStreamParams, RemoveParams, RenameParams, Request, RequestId, StreamResponse, WalkParams,
    WalkResponse, WriteFileParams, WriteStreamParams, data_frame_header, data_frame_stream,
};
use crate::{
    AbsolutePathBuf, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, FileMetadata,
    FileSystemResult, ReadDirectoryEntry, RemoveOptions, RenameOptions, Walk, WalkOptions,
};

/// How to reach a server.
#[derive(Clone, Debug)]
pub struct RemoteOptions {
    /// Sent as `Authorization: Bearer <token>` when set.
    pub token: Option<String>,
    /// Bound on the TCP connect plus the WebSocket handshake, and separately on `initialize`.
    pub connect_timeout: Duration,
    /// Sent in `initialize`.
    pub client_name: String,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        Self {
            token: None,
            connect_timeout: Duration::from_secs(10),
            client_name: format!("capfs/{}", env!("CARGO_PKG_VERSION")),
        }
    }
}

type Reply = Result<Value, ErrorObject>;
/// Calls awaiting their response; `None` once the connection is gone.
type Pending = Arc<Mutex<Option<HashMap<i64, oneshot::Sender<Reply>>>>>;
/// Streamed reads receiving data frames, by stream id.
type Downloads = Arc<Mutex<HashMap<u64, mpsc::Sender<Bytes>>>>;

/// Messages queued for the connection's writer: with data frames of 256 KiB, at most 8 MiB.
const OUT_QUEUE_MESSAGES: usize = 32;
/// Data frames a streamed read may have queued between the socket and its consumer.
const DOWNLOAD_QUEUE_CHUNKS: usize = 8;
/// Streamed writes at once per connection, well below the server's in-flight bound so that the
/// server never has to refuse one.
const MAX_UPLOADS: usize = 16;
/// Writes at least this large use data frames when the server offers them.
const STREAM_WRITE_THRESHOLD: usize = 64 * 1024;

/// An [`ExecutorFileSystem`] served by a remote `capfs serve`.
///
/// # Examples
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// use capfs::{AbsolutePathBuf, ExecutorFileSystem, RemoteFileSystem, RemoteOptions};
///
/// let fs = RemoteFileSystem::connect("ws://127.0.0.1:4000", RemoteOptions::default()).await?;
/// let data = fs.read_file(&AbsolutePathBuf::try_from("/ws/a.txt")?).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RemoteFileSystem {
    client: Arc<Client>,
}

#[derive(Debug)]
struct Client {
    out: mpsc::Sender<WsMessage>,
    pending: Pending,
    downloads: Downloads,
    upload_slots: tokio::sync::Semaphore,
    next_id: AtomicI64,
    reader: JoinHandle<()>,
    data_frames: bool,
    /// The server walks trees in one request ([`CAPFS_WALK_METHOD`]).
    walk: bool,
    /// The command carrying the connection, killed when the client goes away.
    _command: Option<tokio::process::Child>,
}

impl Drop for Client {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

fn connection_lost() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "connection to the capfs server was lost",
    )
}

fn timed_out(what: &str, after: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("{what} timed out after {after:?}"),
    )
}

/// No bound on incoming messages: the server is trusted to send what the client asked for.
fn client_ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(None)
        .max_frame_size(None)
}

/// Maps a failed WebSocket connect to an `io::Error` a person can act on.
fn connect_error(url: &str, err: WsError) -> io::Error {
    match err {
        WsError::Http(response) => {
            let status = response.status();
            let body = response
                .body()
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            let kind = match status {
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => io::ErrorKind::PermissionDenied,
                StatusCode::SERVICE_UNAVAILABLE => io::ErrorKind::ConnectionRefused,
                _ => io::ErrorKind::Other,
            };
            io::Error::new(
                kind,
                format!("{url}: server refused the connection ({status}) {body}"),
            )
        }
        WsError::Io(e) => io::Error::new(e.kind(), format!("{url}: {e}")),
        other => io::Error::other(format!("{url}: {other}")),
    }
}

impl RemoteFileSystem {
    /// Connects to `url` (`ws://HOST:PORT`) and completes the `initialize` handshake.
    ///
    /// # Errors
    ///
    /// `TimedOut` past `connect_timeout`; `PermissionDenied` when the server refuses the token or
    /// the request; `ConnectionRefused` when nothing listens or the server is full.
    pub async fn connect(url: &str, options: RemoteOptions) -> io::Result<Self> {
        let mut request = url
            .into_client_request()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: {e}")))?;
        if let Some(token) = &options.token {
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "token is not a valid header value",
                )
            })?;
            request.headers_mut().insert(header::AUTHORIZATION, value);
        }
        let connect =
            tokio_tungstenite::connect_async_with_config(request, Some(client_ws_config()), true);
        let (ws, _) = tokio::time::timeout(options.connect_timeout, connect)
            .await
            .map_err(|_| timed_out("connecting", options.connect_timeout))?
            .map_err(|e| connect_error(url, e))?;
        Self::start(ws, &options, None).await
    }

    /// Runs `command` with `sh -c` and speaks the protocol over its stdin and stdout, as
    /// `capfs serve --listen stdio` expects: WebSocket frames without the HTTP upgrade. The
    /// command's stderr is the caller's. `options.token` is not used: the command's own channel
    /// (ssh, `kubectl exec`) authenticates. The command is killed when the file system is
    /// dropped; when it exits, every pending and later call fails with `BrokenPipe`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run() -> std::io::Result<()> {
    /// use capfs::{RemoteFileSystem, RemoteOptions};
    ///
    /// let command = "ssh executor capfs serve --listen stdio --root /srv/ws";
    /// let fs = RemoteFileSystem::connect_command(command, RemoteOptions::default()).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The error of spawning `sh`; `TimedOut` when the command does not complete `initialize`
    /// within `connect_timeout`; `BrokenPipe` when it exits before.
    pub async fn connect_command(command: &str, options: RemoteOptions) -> io::Result<Self> {
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // A local `capfs serve` must not take these as its own client settings.
            .env_remove("CAPFS_REMOTE_COMMAND")
            .env_remove("CAPFS_REMOTE")
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("starting `sh -c {command}`: {e}")))?;
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let io = tokio::io::join(stdout, stdin);
        let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
            io,
            Role::Client,
            Some(client_ws_config()),
        )
        .await;
        Self::start(ws, &options, Some(child))
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("`{command}`: {e}")))
    }

    /// Starts the reader and writer tasks on an open WebSocket and completes `initialize`.
    async fn start<S>(
        ws: tokio_tungstenite::WebSocketStream<S>,
        options: &RemoteOptions,
        command: Option<tokio::process::Child>,
    ) -> io::Result<Self>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (sink, mut stream) = ws.split();
        let (out, out_rx) = mpsc::channel::<WsMessage>(OUT_QUEUE_MESSAGES);
        tokio::spawn(crate::ws::write_queued(sink, out_rx));
        let pending: Pending = Arc::new(Mutex::new(Some(HashMap::new())));
        let reader_pending = Arc::clone(&pending);
        let downloads: Downloads = Arc::default();
        let reader_downloads = Arc::clone(&downloads);
        let reader = tokio::spawn(async move {
            while let Some(Ok(frame)) = stream.next().await {
                let bytes = match &frame {
                    WsMessage::Text(text) => text.as_bytes(),
                    WsMessage::Binary(bytes) => {
                        if let Some(stream_id) = data_frame_stream(bytes) {
                            let consumer = reader_downloads
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
                let waiter = reader_pending
                    .lock()
                    .expect("pending map lock")
                    .as_mut()
                    .and_then(|map| map.remove(&id));
                if let Some(waiter) = waiter {
                    let _ = waiter.send(reply);
                }
            }
            // Dropping every waiter wakes each pending call with `BrokenPipe`.
            reader_pending.lock().expect("pending map lock").take();
            reader_downloads.lock().expect("downloads lock").clear();
        });
        let mut client = Client {
            out,
            pending,
            downloads,
            upload_slots: tokio::sync::Semaphore::new(MAX_UPLOADS),
            next_id: AtomicI64::new(1),
            reader,
            data_frames: false,
            walk: false,
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
        client.walk = initialized.capfs.is_some_and(|c| c.walk);
        client.notify(INITIALIZED_METHOD).await?;
        Ok(Self {
            client: Arc::new(client),
        })
    }

    /// True when the server offers capfs's data frames, so large files move without base64 and
    /// without a bound on their size.
    pub fn supports_data_frames(&self) -> bool {
        self.client.data_frames
    }

    /// Streams the file at `path` into `writer`, calling `progress` with the running byte count.
    /// Memory stays bounded whatever the file size. Returns the number of bytes written.
    ///
    /// # Errors
    ///
    /// As [`ExecutorFileSystem::read_file`]; the error of `writer`; `BrokenPipe` when the
    /// connection drops. What was already written to `writer` stays there.
    pub async fn read_file_to<W>(
        &self,
        path: &AbsolutePathBuf,
        writer: &mut W,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> io::Result<u64>
    where
        W: tokio::io::AsyncWrite + Unpin + Send,
    {
        if !self.client.data_frames {
            let data = self.read_file(path).await?;
            writer.write_all(&data).await?;
            progress(data.len() as u64);
            return Ok(data.len() as u64);
        }
        let client = &self.client;
        let stream_id = client.new_id() as u64;
        let (tx, mut chunks) = mpsc::channel(DOWNLOAD_QUEUE_CHUNKS);
        client
            .downloads
            .lock()
            .expect("downloads lock")
            .insert(stream_id, tx);
        let _registered = Registered(&client.downloads, stream_id);
        let params = ReadStreamParams {
            path: path.clone(),
            stream_id,
        };
        let mut reply = client
            .start_call(CAPFS_READ_FILE_STREAM_METHOD, params)
            .await?;
        let mut received = 0u64;
        let reply = loop {
            tokio::select! {
                biased;
                chunk = chunks.recv() => match chunk {
                    Some(chunk) => {
                        writer.write_all(&chunk).await?;
                        received += chunk.len() as u64;
                        progress(received);
                    }
                    None => break (&mut reply).await,
                },
                reply = &mut reply => break reply,
            }
        };
        // Every data frame precedes the reply on the socket, so the rest are queued already.
        while let Ok(chunk) = chunks.try_recv() {
            writer.write_all(&chunk).await?;
            received += chunk.len() as u64;
            progress(received);
        }
        writer.flush().await?;
        let announced: StreamResponse = finish(CAPFS_READ_FILE_STREAM_METHOD, reply)?;
        if announced.size != received {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{path}: received {received} bytes of {}", announced.size),
            ));
        }
        Ok(received)
    }

    /// Streams `size` bytes from `reader` into the file at `path`, which is replaced atomically
    /// once they have all arrived. Memory stays bounded whatever the size.
    ///
    /// # Errors
    ///
    /// As [`ExecutorFileSystem::write_file`]; `UnexpectedEof` when `reader` ends before `size`
    /// bytes (the file is then left as it was); `BrokenPipe` when the connection drops.
    pub async fn write_file_from<R>(
        &self,
        path: &AbsolutePathBuf,
        size: u64,
        reader: &mut R,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> io::Result<()>
    where
        R: tokio::io::AsyncRead + Unpin + Send,
    {
        if !self.client.data_frames {
            let mut data = Vec::new();
            (&mut *reader).take(size).read_to_end(&mut data).await?;
            if (data.len() as u64) < size {
                return Err(short_source(data.len() as u64, size));
            }
            self.write_file(path, data).await?;
            progress(size);
            return Ok(());
        }
        let client = &self.client;
        let _slot = client
            .upload_slots
            .acquire()
            .await
            .map_err(|_| connection_lost())?;
        let stream_id = client.new_id() as u64;
        let params = WriteStreamParams {
            path: path.clone(),
            stream_id,
            size,
        };
        let mut reply = client
            .start_call(CAPFS_WRITE_FILE_STREAM_METHOD, params)
            .await?;
        let header = data_frame_header(stream_id);
        let mut sent = 0u64;
        while sent < size {
            if let Ok(early) = reply.try_recv() {
                // Refused before all the data went out (bad path, read-only root, ...).
                let _: StreamResponse = finish(CAPFS_WRITE_FILE_STREAM_METHOD, Ok(early))?;
                break;
            }
            let want = (size - sent).min(DATA_CHUNK_BYTES as u64) as usize;
            let mut frame = Vec::with_capacity(DATA_FRAME_HEADER_LEN + want);
            frame.extend_from_slice(&header);
            let n = (&mut *reader)
                .take(want as u64)
                .read_to_end(&mut frame)
                .await
                .inspect_err(|_| client.abort_upload(&header))?;
            if n == 0 {
                client.abort_upload(&header);
                return Err(short_source(sent, size));
            }
            client
                .out
                .send(WsMessage::Binary(frame.into()))
                .await
                .map_err(|_| connection_lost())?;
            sent += n as u64;
            progress(sent);
        }
        let _: StreamResponse = finish(CAPFS_WRITE_FILE_STREAM_METHOD, reply.await)?;
        Ok(())
    }

    /// True when the connection is gone; every call then fails with `BrokenPipe`.
    pub fn is_closed(&self) -> bool {
        self.client
            .pending
            .lock()
            .expect("pending map lock")
            .is_none()
    }
}

/// Removes a streamed read's consumer when the read ends, however it ends.
struct Registered<'a>(&'a Downloads, u64);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.lock().expect("downloads lock").remove(&self.1);
    }
}

fn short_source(got: u64, size: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("the source ended after {got} of {size} bytes"),
    )
}

/// Decodes a reply: the server's error as the `io::Error` it stands for, a result as `T`.
fn finish<T: DeserializeOwned>(
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

impl Client {
    fn new_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Tells the server to give up a streamed write: an empty data frame of its stream.
    fn abort_upload(&self, header: &[u8; DATA_FRAME_HEADER_LEN]) {
        let _ = self.out.try_send(WsMessage::Binary(header.to_vec().into()));
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> io::Result<T> {
        let reply = self.start_call(method, params).await?;
        finish(method, reply.await)
    }

    /// Sends a request and returns the receiver of its reply.
    async fn start_call(
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

/// The empty result of mutating methods; any object is accepted.
#[derive(serde::Deserialize)]
struct Empty {}

#[async_trait]
impl ExecutorFileSystem for RemoteFileSystem {
    async fn read_file(&self, path: &AbsolutePathBuf) -> FileSystemResult<Vec<u8>> {
        if self.client.data_frames {
            let mut data = Vec::new();
            self.read_file_to(path, &mut data, &mut |_| {}).await?;
            return Ok(data);
        }
        let params = PathParams { path: path.clone() };
        let response: ReadFileResponse = self.client.call(FS_READ_FILE_METHOD, params).await?;
        STANDARD
            .decode(response.data_base64.as_bytes())
            .map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{path}: server sent invalid base64: {e}"),
                )
            })
    }

    async fn write_file(&self, path: &AbsolutePathBuf, contents: Vec<u8>) -> FileSystemResult<()> {
        if self.client.data_frames && contents.len() >= STREAM_WRITE_THRESHOLD {
            let size = contents.len() as u64;
            return self
                .write_file_from(path, size, &mut contents.as_slice(), &mut |_| {})
                .await;
        }
        let params = WriteFileParams {
            path: path.clone(),
            data_base64: STANDARD.encode(&contents),
        };
        let _: Empty = self.client.call(FS_WRITE_FILE_METHOD, params).await?;
        Ok(())
    }

    async fn create_directory(
        &self,
        path: &AbsolutePathBuf,
        options: CreateDirectoryOptions,
    ) -> FileSystemResult<()> {
        let params = CreateDirectoryParams {
            path: path.clone(),
            recursive: Some(options.recursive),
        };
        let _: Empty = self.client.call(FS_CREATE_DIRECTORY_METHOD, params).await?;
        Ok(())
    }

    async fn get_metadata(&self, path: &AbsolutePathBuf) -> FileSystemResult<FileMetadata> {
        let params = PathParams { path: path.clone() };
        let response: GetMetadataResponse =
            self.client.call(FS_GET_METADATA_METHOD, params).await?;
        Ok(response.into())
    }

    async fn read_directory(
        &self,
        path: &AbsolutePathBuf,
    ) -> FileSystemResult<Vec<ReadDirectoryEntry>> {
        let params = PathParams { path: path.clone() };
        let response: ReadDirectoryResponse =
            self.client.call(FS_READ_DIRECTORY_METHOD, params).await?;
        Ok(response.entries.into_iter().map(Into::into).collect())
    }

    async fn remove(&self, path: &AbsolutePathBuf, options: RemoveOptions) -> FileSystemResult<()> {
        let params = RemoveParams {
            path: path.clone(),
            recursive: Some(options.recursive),
            force: Some(options.force),
        };
        let _: Empty = self.client.call(FS_REMOVE_METHOD, params).await?;
        Ok(())
    }

    async fn copy(
        &self,
        source: &AbsolutePathBuf,
        destination: &AbsolutePathBuf,
        options: CopyOptions,
    ) -> FileSystemResult<()> {
        let params = CopyParams {
            source_path: source.clone(),
            destination_path: destination.clone(),
            recursive: Some(options.recursive),
        };
        let _: Empty = self.client.call(FS_COPY_METHOD, params).await?;
        Ok(())
    }

    async fn rename(
        &self,
        source: &AbsolutePathBuf,
        destination: &AbsolutePathBuf,
        options: RenameOptions,
    ) -> FileSystemResult<()> {
        let params = RenameParams {
            source_path: source.clone(),
            destination_path: destination.clone(),
            overwrite: Some(options.overwrite),
        };
        let _: Empty = self.client.call(FS_RENAME_METHOD, params).await?;
        Ok(())
    }

    async fn walk(&self, path: &AbsolutePathBuf, options: &WalkOptions) -> FileSystemResult<Walk> {
        if !self.client.walk {
            return walk_by_listing(self, path, options).await;
        }
        let params = WalkParams::new(path.clone(), options);
        let response: WalkResponse = self.client.call(CAPFS_WALK_METHOD, params).await?;
        Ok(response.into())
    }
}
