//! Starts the real `capfs serve` binary on `ws://127.0.0.1:0`, reads the URL it prints, and
//! stops it when dropped. Also a raw WebSocket peer for protocol tests.

#![allow(dead_code)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub const WAIT: Duration = Duration::from_secs(20);

/// A temporary directory holding an empty `ws/`, and the canonical path of `ws/` (the form a
/// sandbox root is addressed by).
pub fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    (dir, ws)
}

/// A running `capfs serve`, killed when dropped.
pub struct ServerProcess {
    pub child: Child,
    pub url: String,
}

impl ServerProcess {
    /// Serves `root` read-write.
    pub async fn start(root: &Path) -> Self {
        Self::start_with(&["--root".as_ref(), root.as_os_str()], &[]).await
    }

    /// Starts `capfs serve` on `root`, writing its audit log to `audit`.
    pub async fn start_audited(root: &Path, audit: &Path) -> Self {
        let args = [
            "--root".as_ref(),
            root.as_os_str(),
            "--audit-log".as_ref(),
            audit.as_os_str(),
        ];
        Self::start_with(&args, &[]).await
    }

    /// Starts `capfs serve` with extra arguments and environment variables.
    pub async fn start_with(args: &[&std::ffi::OsStr], envs: &[(&str, &str)]) -> Self {
        Self::spawn(args, envs, false).await.0
    }

    /// Starts `capfs serve` with extra arguments and returns the lines it writes to stderr
    /// (tracing at warn level, and the audit log with `--audit-log -`) as they come.
    pub async fn start_with_stderr(
        args: &[&std::ffi::OsStr],
    ) -> (Self, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let (server, lines) = Self::spawn(args, &[("RUST_LOG", "capfs=warn")], true).await;
        (server, lines.expect("stderr is piped"))
    }

    async fn spawn(
        args: &[&std::ffi::OsStr],
        envs: &[(&str, &str)],
        pipe_stderr: bool,
    ) -> (Self, Option<tokio::sync::mpsc::UnboundedReceiver<String>>) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_capfs"));
        command
            .arg("serve")
            .args(args)
            .env_remove("CAPFS_TOKEN")
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(if pipe_stderr {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn capfs serve");
        let stderr_lines = child.stderr.take().map(|stderr| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let mut lines = BufReader::new(stderr).lines();
            tokio::spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            rx
        });
        let stdout = child.stdout.take().expect("stdout piped");
        let mut lines = BufReader::new(stdout).lines();
        let url = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .expect("capfs serve printed its URL in time")
            .expect("read stdout")
            .expect("capfs serve printed a line");
        assert!(
            url.starts_with("ws://127.0.0.1:"),
            "unexpected first line {url:?}"
        );
        // Keep reading stdout so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        (Self { child, url }, stderr_lines)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("server still running")
    }

    /// Asks the server to stop (SIGTERM) and waits until it has exited successfully.
    pub async fn stop(mut self) {
        self.signal("TERM");
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the server exited in time")
            .expect("wait for the server");
        assert!(status.success(), "{status}");
    }

    /// Sends a signal to the server process.
    pub fn signal(&self, signal: &str) {
        send_signal(&self.child, signal);
    }
}

/// Sends `signal` (a name: `TERM`, `INT`) to the running `child`, by its id.
pub fn send_signal(child: &Child, signal: &str) {
    let pid = child.id().expect("server still running");
    let status = std::process::Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A raw WebSocket peer that speaks JSON by hand.
pub struct RawPeer {
    pub ws: Socket,
    next_id: i64,
}

impl RawPeer {
    pub async fn connect(url: &str) -> Self {
        let (ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("connect");
        Self { ws, next_id: 1 }
    }

    /// Connects and completes the handshake.
    pub async fn ready(url: &str) -> Self {
        let mut peer = Self::connect(url).await;
        let reply = peer
            .request("initialize", json!({"clientName": "raw"}))
            .await;
        assert!(reply.get("result").is_some(), "{reply}");
        peer.send(json!({"method": "initialized"})).await;
        peer
    }

    pub async fn send(&mut self, value: Value) {
        self.send_text(value.to_string()).await;
    }

    pub async fn send_text(&mut self, text: String) {
        self.ws.send(WsMessage::text(text)).await.expect("send");
    }

    /// Sends a request with the next integer id and waits for the message answering it.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.reply_to(&json!(id)).await
    }

    /// Waits for the response or error whose id is `id`.
    pub async fn reply_to(&mut self, id: &Value) -> Value {
        loop {
            let message = self
                .next()
                .await
                .expect("a reply before the connection closed");
            if message.get("id") == Some(id) {
                return message;
            }
        }
    }

    /// The next JSON message; `None` when the connection closes.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            let frame = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("server answered in time")?;
            match frame.ok()? {
                WsMessage::Text(text) => return Some(serde_json::from_str(&text).expect("JSON")),
                WsMessage::Binary(bytes) => {
                    return Some(serde_json::from_slice(&bytes).expect("JSON"));
                }
                WsMessage::Close(_) => return None,
                _ => {}
            }
        }
    }
}

/// The error code and `data.kind` of an error reply.
pub fn error_of(reply: &Value) -> (i64, Option<&str>, &str) {
    let error = reply
        .get("error")
        .unwrap_or_else(|| panic!("expected an error: {reply}"));
    (
        error["code"].as_i64().expect("code"),
        error.get("data").and_then(|d| d["kind"].as_str()),
        error["message"].as_str().expect("message"),
    )
}
