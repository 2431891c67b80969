//! Large files over the remote backend: data frames, `capfs get`/`put`, and what a plain peer
//! without the extension still gets.

use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common::InProcessServer;
use crate::serve::{RawPeer, ServerProcess, WAIT, workspace};
use capfs::{AbsolutePathBuf, ExecutorFileSystem, WriteOptions};
use capfs::{Access, LocalFileSystem, Sandbox};
use capfs_wire::server::ServerConfig;
use capfs_wire::{RemoteFileSystem, RemoteOptions};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message as WsMessage;

mod chunks;
mod data_frames;
mod transfers;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 11) as u8)
        .collect()
}

async fn client(url: &str) -> RemoteFileSystem {
    RemoteFileSystem::connect(url, RemoteOptions::default())
        .await
        .unwrap()
}

/// What a test server of one connection answers `initialize` with: data frames, one root.
fn frames_server_initialized() -> serde_json::Value {
    json!({"capfs": {"version": "0", "maxMessageBytes": 1 << 20, "dataFrames": true,
        "roots": [{"path": "/ws", "access": "read-write"}]}})
}
