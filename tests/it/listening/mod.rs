//! What `capfs serve` admits: handshakes with their own budget and deadline, accepts under
//! descriptor exhaustion, the shutdown deadline, limits checked at start-up, the bearer scheme,
//! audit lines of refused params, and listings of names that are not UTF-8.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capfs::{AbsolutePathBuf, ExecutorFileSystem};
use capfs_wire::{RemoteFileSystem, RemoteOptions};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use crate::serve::{RawPeer, ServerProcess, WAIT, error_of, workspace};

mod handshakes;
mod limits;
mod serving;

const BIN: &str = env!("CARGO_BIN_EXE_capfs");

const TOKEN: &str = "listening-token-5b1e";

fn address(url: &str) -> &str {
    url.strip_prefix("ws://").expect("a ws:// URL")
}

fn with_token() -> RemoteOptions {
    RemoteOptions::default().with_token(Some(TOKEN.to_string()))
}

fn abs(path: &std::path::Path) -> AbsolutePathBuf {
    AbsolutePathBuf::try_from(path).unwrap()
}

/// Opens `count` TCP connections that each send `prefix` and then nothing.
async fn silent_peers(url: &str, count: usize, prefix: &[u8]) -> Vec<TcpStream> {
    let mut peers = Vec::with_capacity(count);
    for _ in 0..count {
        let mut peer = TcpStream::connect(address(url)).await.expect("connect");
        peer.write_all(prefix).await.expect("send");
        peers.push(peer);
    }
    peers
}

/// True when the server closes `peer` (end of stream or reset) within [`WAIT`].
async fn is_closed_by_server(peer: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match tokio::time::timeout(WAIT, peer.read(&mut byte)).await {
        Ok(Ok(0) | Err(_)) => true,
        Ok(Ok(_)) | Err(_) => false,
    }
}

/// Connects with `options`, retrying while the server has not yet noticed that earlier peers
/// went away, for at most [`WAIT`].
async fn connect_eventually(url: &str, options: RemoteOptions) -> RemoteFileSystem {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let attempt = RemoteFileSystem::connect(
            url,
            options.clone().with_connect_timeout(Duration::from_secs(2)),
        )
        .await;
        match attempt {
            Ok(fs) => return fs,
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("no connection within {WAIT:?}: {e}"),
        }
    }
}
