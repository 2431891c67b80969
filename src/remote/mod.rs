//! `RemoteFileSystem`: the trait proxied to a `capfs serve` (or any codex-style exec-server) over
//! one WebSocket connection.
//!
//! Requests are multiplexed by id: any number of calls may be outstanding at once, and each
//! completes when its own response arrives. When the connection drops, every pending call and
//! every later call fails at once with `BrokenPipe`; no call waits for a peer that is gone.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures_util::{SinkExt, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode, header};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};

use crate::protocol::{
    CopyParams, CreateDirectoryParams, ErrorObject, FS_COPY_METHOD, FS_CREATE_DIRECTORY_METHOD,
    FS_GET_METADATA_METHOD, FS_READ_DIRECTORY_METHOD, FS_READ_FILE_METHOD, FS_REMOVE_METHOD,
    FS_RENAME_METHOD, FS_WRITE_FILE_METHOD, GetMetadataResponse, INITIALIZE_METHOD,
    INITIALIZED_METHOD, InitializeParams, InitializeResponse, Message, Notification, PathParams,
    ReadDirectoryResponse, ReadFileResponse, RemoveParams, RenameParams, Request, RequestId,
    WriteFileParams,
};
use crate::{
    AbsolutePathBuf, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, FileMetadata,
    FileSystemResult, ReadDirectoryEntry, RemoveOptions, RenameOptions,
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
    next_id: AtomicI64,
    reader: JoinHandle<()>,
    server: Option<crate::protocol::ServerCapabilities>,
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
        let config = WebSocketConfig::default()
            .max_message_size(None)
            .max_frame_size(None);
        let connect = tokio_tungstenite::connect_async_with_config(request, Some(config), true);
        let (ws, _) = tokio::time::timeout(options.connect_timeout, connect)
            .await
            .map_err(|_| timed_out("connecting", options.connect_timeout))?
            .map_err(|e| connect_error(url, e))?;

        let (mut sink, mut stream) = ws.split();
        let (out, mut out_rx) = mpsc::channel::<WsMessage>(256);
        tokio::spawn(async move {
            while let Some(message) = out_rx.recv().await {
                if sink.send(message).await.is_err() {
                    break;
                }
            }
            let _ = sink.close().await;
        });
        let pending: Pending = Arc::new(Mutex::new(Some(HashMap::new())));
        let reader_pending = Arc::clone(&pending);
        let reader = tokio::spawn(async move {
            while let Some(Ok(frame)) = stream.next().await {
                let bytes = match &frame {
                    WsMessage::Text(text) => text.as_bytes(),
                    WsMessage::Binary(bytes) => bytes.as_ref(),
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
        });
        let mut client = Client {
            out,
            pending,
            next_id: AtomicI64::new(1),
            reader,
            server: None,
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
        client.server = initialized.capfs;
        client.notify(INITIALIZED_METHOD).await?;
        Ok(Self {
            client: Arc::new(client),
        })
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

impl Client {
    async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> io::Result<T> {
        // Only a path that is not UTF-8 fails to serialise; it cannot be named on the wire.
        let params = serde_json::to_value(params)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
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
        let reply = rx.await.map_err(|_| connection_lost())?;
        let value = reply.map_err(ErrorObject::into_io)?;
        serde_json::from_value(value).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{method}: unexpected result from server: {e}"),
            )
        })
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
}
