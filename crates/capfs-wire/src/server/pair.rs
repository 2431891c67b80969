//! A server and its client in one process, joined by an in-memory byte stream instead of a
//! socket: for tests, and for embedding a file system behind the protocol without a listener.

use std::io;
use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::byte_stream::serve_byte_stream;
use super::config::ServerConfig;
use crate::protocol::DATA_CHUNK_BYTES;
use crate::{RemoteFileSystem, RemoteOptions};
use capfs::ExecutorFileSystem;

/// Bytes each direction of the in-memory stream holds before its writer waits for the reader:
/// one data frame's contents, so a streamed transfer moves a frame per wake-up while the
/// pair's memory stays bounded whatever the traffic.
const PAIR_BUFFER_BYTES: usize = DATA_CHUNK_BYTES;

/// Serves `fs` with `config` on one end of an in-memory byte stream and connects a
/// [`RemoteFileSystem`] to the other end, with the default [`RemoteOptions`]: see
/// [`pair_with_options`].
///
/// # Errors
///
/// As [`pair_with_options`].
pub async fn pair(
    fs: Arc<dyn ExecutorFileSystem>,
    config: ServerConfig,
) -> io::Result<(RemoteFileSystem, ServingHandle)> {
    pair_with_options(fs, config, RemoteOptions::default()).await
}

/// Serves `fs` with `config` on one end of an in-memory byte stream ([`tokio::io::duplex`])
/// and connects a [`RemoteFileSystem`] with `options` to the other end; the server serves
/// processes too when `config.processes` names them ([`RemoteFileSystem::processes`]).
///
/// Both ends run the code of a byte-stream connection ([`serve_byte_stream`] and
/// [`RemoteFileSystem::connect_byte_stream`], as `capfs serve --listen stdio` and
/// `connect_command` do): RFC 6455 frames without the HTTP upgrade, the `initialize`
/// handshake, every method and notification as on TCP, and capfs's data frames as WebSocket
/// binary messages. What only a listener does is not there: the HTTP upgrade with its Origin,
/// token and connection-limit checks, and the TCP writers that send data frames past
/// tungstenite.
///
/// The server runs on a task of the current runtime and ends when the client's connection
/// ends (every clone of the file system and its processes dropped), or when
/// [`ServingHandle::stop`] stops it; dropping the handle leaves it serving until then.
///
/// # Errors
///
/// `InvalidInput` for a limit out of range (see [`ServerConfig::validate`]); the client's
/// error when `initialize` fails.
pub async fn pair_with_options(
    fs: Arc<dyn ExecutorFileSystem>,
    config: ServerConfig,
    options: RemoteOptions,
) -> io::Result<(RemoteFileSystem, ServingHandle)> {
    config.validate()?;
    let (client_end, server_end) = tokio::io::duplex(PAIR_BUFFER_BYTES);
    let stop = CancellationToken::new();
    let shutdown = stop.clone().cancelled_owned();
    let task = tokio::spawn(serve_byte_stream(fs, config, server_end, "pair", shutdown));
    let handle = ServingHandle { stop, task };
    // A client that fails drops its end, which ends the server's connection too.
    let client = RemoteFileSystem::connect_byte_stream(client_end, options).await?;
    Ok((client, handle))
}

/// The server side of a [`pair`]: stops it, or waits for it to end.
#[derive(Debug)]
pub struct ServingHandle {
    stop: CancellationToken,
    task: JoinHandle<io::Result<()>>,
}

impl ServingHandle {
    /// Stops the server as a listener's shutdown does: it reads no more requests, the running
    /// ones get the configured shutdown timeout to finish, then the connection is cut; returns
    /// once the server has ended.
    ///
    /// # Errors
    ///
    /// `TimedOut` when the connection had to be cut at the shutdown deadline.
    pub async fn stop(self) -> io::Result<()> {
        self.stop.cancel();
        self.finished().await
    }

    /// Waits for the server to end without stopping it: it ends once the client's connection
    /// has ended.
    ///
    /// # Errors
    ///
    /// As [`stop`](Self::stop); `Other` when the server's task was cancelled (its runtime
    /// shut down). A panic in the server is resumed here.
    pub async fn finished(self) -> io::Result<()> {
        match self.task.await {
            Ok(served) => served,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(crate::error::paired_server_lost(e)),
        }
    }

    /// True once the server has ended.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}
