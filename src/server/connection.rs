//! One connection: the read loop, requests run concurrently up to the in-flight bound, replies
//! queued for the writer task, and the drain at shutdown.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::{Semaphore, mpsc};
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::audit::{self, RequestLog};
use super::config::ServerConfig;
use super::session::{self, FsCall, Session, Step, is_stream_method};
use super::{handler, stream};
use crate::protocol::{
    CAPFS_READ_FILE_STREAM_METHOD, CAPFS_WRITE_FILE_STREAM_METHOD, DATA_FRAME_HEADER_LEN,
    ErrorObject, FS_GET_METADATA_METHOD, RequestId, RootDescription, SERVER_BUSY,
    data_frame_stream,
};
use crate::{ExecutorFileSystem, LocalFileSystem};

/// Messages queued for one connection's writer. With data frames of 256 KiB this bounds what a
/// streamed read can have in memory at 8 MiB per connection.
const OUT_QUEUE_MESSAGES: usize = 32;

/// What every connection of one server shares.
pub(crate) struct Shared {
    pub(crate) fs: LocalFileSystem,
    pub(crate) config: ServerConfig,
    pub(crate) connections: Arc<Semaphore>,
}

pub(crate) struct Connection {
    shared: Arc<Shared>,
    id: u64,
    peer: Arc<str>,
    session: Session,
    in_flight: Arc<Semaphore>,
    /// Streamed writes still expecting data frames, by stream id.
    uploads: HashMap<u64, stream::Upload>,
}

impl Connection {
    pub(crate) fn new(shared: Arc<Shared>, id: u64, peer: Arc<str>) -> Self {
        let in_flight = Arc::new(Semaphore::new(shared.config.max_in_flight));
        let roots = shared
            .fs
            .sandbox()
            .roots()
            .iter()
            .map(|root| RootDescription {
                path: root.path().clone(),
                access: root.access().into(),
            });
        let session = Session::new(shared.config.max_message_bytes).with_roots(roots.collect());
        Self {
            shared,
            id,
            peer,
            session,
            in_flight,
            uploads: HashMap::new(),
        }
    }

    pub(crate) async fn run<S>(
        mut self,
        ws: tokio_tungstenite::WebSocketStream<S>,
        stop: CancellationToken,
    ) where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (sink, mut stream) = ws.split();
        let (out_tx, out_rx) = mpsc::channel::<WsMessage>(OUT_QUEUE_MESSAGES);
        // Dropping the connection (cut at the shutdown deadline) ends its writer too.
        let writer = AbortOnDropHandle::new(tokio::spawn(crate::transport::ws::write_queued(
            sink, out_rx,
        )));
        loop {
            let incoming = tokio::select! {
                () = stop.cancelled() => break,
                incoming = stream.next() => incoming,
            };
            match incoming {
                Some(Ok(WsMessage::Text(text))) => self.on_message(text.as_bytes(), &out_tx).await,
                Some(Ok(WsMessage::Binary(bytes))) => match data_frame_stream(&bytes) {
                    Some(stream_id) => {
                        let payload = bytes.slice(DATA_FRAME_HEADER_LEN..);
                        stream::route_data(&mut self.uploads, stream_id, payload).await;
                    }
                    None => self.on_message(&bytes, &out_tx).await,
                },
                Some(Ok(WsMessage::Close(_))) | None => break,
                Some(Ok(_)) => continue,
                Some(Err(WsError::Capacity(e))) => {
                    tracing::warn!(connection = self.id, "message refused: {e}");
                    let close = CloseFrame {
                        code: CloseCode::Size,
                        reason: format!(
                            "message too big: limit is {} bytes",
                            self.shared.config.max_message_bytes
                        )
                        .into(),
                    };
                    let _ = out_tx.send(WsMessage::Close(Some(close))).await;
                    break;
                }
                Some(Err(e)) => {
                    tracing::debug!(connection = self.id, "read failed: {e}");
                    break;
                }
            }
        }
        // Streamed writes still waiting for data will never get it: they fail and leave their
        // files as they were.
        self.uploads.clear();
        // Let every running request finish and queue its response before the writer closes.
        let _ = self
            .in_flight
            .acquire_many(self.shared.config.max_in_flight as u32)
            .await;
        drop(out_tx);
        let _ = writer.await;
    }

    async fn on_message(&mut self, bytes: &[u8], out: &mpsc::Sender<WsMessage>) {
        match self.session.receive(bytes) {
            Step::Reply(message) => send(out, WsMessage::text(message.to_text())).await,
            Step::Answer { request, reply } => {
                let log =
                    self.request_log(&request.method, audit::raw_paths(request.params.as_ref()));
                self.answer(out, log, request.id, reply).await;
            }
            Step::Run(call) => self.on_request(call, out).await,
            Step::Ignore => {}
        }
    }

    /// The log of a request that starts now.
    fn request_log(&self, method: &str, paths: Vec<String>) -> RequestLog {
        RequestLog {
            audit: self.shared.config.audit.clone(),
            connection: self.id,
            peer: Arc::clone(&self.peer),
            method: method.to_string(),
            paths,
            started: Instant::now(),
        }
    }

    /// Sends a reply decided here, without running the request, and logs it.
    async fn answer(
        &self,
        out: &mpsc::Sender<WsMessage>,
        log: RequestLog,
        id: RequestId,
        reply: Result<Value, ErrorObject>,
    ) {
        log.finish(&reply, 0);
        send(out, reply_message(id, reply)).await;
    }

    /// Runs a request that passed the handshake rules.
    async fn on_request(&mut self, call: FsCall, out: &mpsc::Sender<WsMessage>) {
        let FsCall { id, method, params } = call;
        let log = self.request_log(&method, audit::raw_paths(params.as_ref()));
        let is_stream = is_stream_method(&method);
        // A streamed write must not wait for a permit here: the data frames that would let the
        // running writes finish arrive behind it on this same socket. It is refused instead.
        let permit = if method == CAPFS_WRITE_FILE_STREAM_METHOD {
            match Arc::clone(&self.in_flight).try_acquire_owned() {
                Ok(permit) => permit,
                Err(_) => {
                    let message = format!(
                        "server busy: {} requests already in flight on this connection",
                        self.shared.config.max_in_flight
                    );
                    let error = ErrorObject::new(SERVER_BUSY, message);
                    self.answer(out, log, id, Err(error)).await;
                    return;
                }
            }
        } else {
            match Arc::clone(&self.in_flight).acquire_owned().await {
                Ok(permit) => permit,
                Err(_) => return,
            }
        };
        if is_stream {
            let fs = self.shared.fs.clone();
            let out = out.clone();
            if method == CAPFS_READ_FILE_STREAM_METHOD {
                stream::start_read(fs, id, params, out, permit, log);
            } else if let Err(error) = stream::start_write(
                fs,
                &mut self.uploads,
                id.clone(),
                params,
                out.clone(),
                permit,
                log.clone(),
            ) {
                self.answer(&out, log, id, Err(error)).await;
            }
            return;
        }
        let inline = method == FS_GET_METADATA_METHOD;
        let shared = Arc::clone(&self.shared);
        let out = out.clone();
        let run = async move {
            let mut outcome = handler::Outcome::default();
            let fs: &dyn ExecutorFileSystem = &shared.fs;
            let reply = handler::dispatch(fs, &method, params, &mut outcome).await;
            let log = RequestLog {
                paths: outcome.paths,
                ..log
            };
            log.finish(&reply, outcome.bytes);
            send(&out, reply_message(id, reply)).await;
            drop(permit);
        };
        // The local backend answers `getMetadata` with a few `stat` calls and no hand-off to the
        // blocking pool: cheaper to run here than to spawn. Everything else runs beside this loop.
        if inline {
            run.await;
        } else {
            tokio::spawn(run);
        }
    }
}

/// The text frame answering request `id` with `reply`.
pub(crate) fn reply_message(id: RequestId, reply: Result<Value, ErrorObject>) -> WsMessage {
    WsMessage::text(session::reply_message(id, reply).to_text())
}

pub(crate) async fn send(out: &mpsc::Sender<WsMessage>, message: WsMessage) {
    // A closed writer means the peer is gone; there is no one left to tell.
    let _ = out.send(message).await;
}
