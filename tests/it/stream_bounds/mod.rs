//! What one client can hold on a server, and streams at their edges: no blocking thread waits
//! on a peer, file work is bounded per connection and per server, streams time out and abort
//! cleanly, data frames and requests never wait on each other, replies stay within the message
//! limit, and unsized writes work end to end.

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::{self, InProcessServer};
use crate::serve::{RawPeer, WAIT, error_of, workspace};
use async_trait::async_trait;
use capfs::{
    AbsolutePathBuf, Access, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, FileMetadata,
    FileSystemResult, LocalFileSystem, ReadDirectoryEntry, RemoveOptions, RenameOptions, Sandbox,
    WriteOptions,
};
use capfs_wire::protocol::{DATA_FRAME_LAST_TAG, data_frame_header};
use capfs_wire::server::ServerConfig;
use capfs_wire::{RemoteFileSystem, RemoteOptions};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as WsMessage;

mod stream_timeouts;
mod unsized_writes;
mod work_bounds;

/// A local file system over `ws`, as the server takes it.
fn local(ws: &Path) -> Arc<dyn ExecutorFileSystem> {
    let sandbox = Sandbox::new().with_root(ws, Access::ReadWrite).unwrap();
    Arc::new(LocalFileSystem::new(sandbox))
}

fn abs(path: &Path) -> AbsolutePathBuf {
    AbsolutePathBuf::new(path).unwrap()
}

fn text(path: &Path) -> String {
    path.display().to_string()
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

async fn client(url: &str) -> RemoteFileSystem {
    RemoteFileSystem::connect(url, RemoteOptions::default())
        .await
        .unwrap()
}

/// Sends a data frame of `stream_id` with the given tag.
async fn data_frame(peer: &mut RawPeer, tag: u8, stream_id: u64, payload: &[u8]) {
    let mut frame = data_frame_header(stream_id).to_vec();
    frame[0] = tag;
    frame.extend_from_slice(payload);
    peer.ws
        .send(WsMessage::Binary(frame.into()))
        .await
        .expect("send a data frame");
}

/// Sends a request with id `id` without waiting for its reply.
async fn send_request(peer: &mut RawPeer, id: i64, method: &str, params: Value) {
    peer.send(json!({"id": id, "method": method, "params": params}))
        .await;
}

/// Waits for the replies to every id in `ids`, in whatever order they come, and returns them.
async fn replies(peer: &mut RawPeer, ids: impl IntoIterator<Item = i64>) -> Vec<Value> {
    let mut waiting: std::collections::HashSet<i64> = ids.into_iter().collect();
    let mut got = Vec::new();
    while !waiting.is_empty() {
        let message = peer
            .next()
            .await
            .expect("a reply before the connection closed");
        if let Some(id) = message.get("id").and_then(Value::as_i64)
            && waiting.remove(&id)
        {
            got.push(message);
        }
    }
    got
}

/// A well-behaved client's everyday calls, each bounded in time.
async fn everyday_calls_succeed(url: &str, ws: &Path, tag: &str) {
    let calls = async {
        let fs = client(url).await;
        let file = abs(&ws.join(format!("ok-{tag}")));
        fs.write_file(&file, b"fine".to_vec()).await?;
        assert_eq!(fs.read_file(&file).await?, b"fine");
        fs.read_directory(&abs(ws)).await?;
        let copy = abs(&ws.join(format!("ok-{tag}-copy")));
        fs.copy(&file, &copy, CopyOptions::default()).await?;
        fs.remove(&copy, RemoveOptions::default()).await?;
        std::io::Result::Ok(())
    };
    tokio::time::timeout(WAIT, calls)
        .await
        .unwrap_or_else(|_| panic!("{tag}: a well-behaved client hung"))
        .unwrap_or_else(|e| panic!("{tag}: {e}"));
}

/// A runtime whose blocking pool has only `threads` threads, so that a server parking one per
/// waiting stream runs out at once.
fn small_pool_runtime(threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(threads)
        .enable_all()
        .build()
        .unwrap()
}
