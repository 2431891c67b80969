//! What the codex and process benches share: a server process they start and talk to over the
//! exec-server protocol, the handshake, and where the pinned codex binary is.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub(crate) type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A server process on 127.0.0.1 port 0 and the URL it printed, killed when dropped.
pub(crate) struct Spawned {
    pub(crate) child: Child,
    pub(crate) url: String,
}

impl Spawned {
    /// Starts `command` and reads its URL from its stdout: codex prints it after other lines,
    /// capfs first.
    pub(crate) fn start(name: &str, mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        let stdout = child.stdout.take().expect("stdout");
        let mut reader = std::io::BufReader::new(stdout);
        let mut line = String::new();
        while !line.starts_with("ws://") {
            line.clear();
            let n = std::io::BufRead::read_line(&mut reader, &mut line).expect("read the URL");
            assert!(n > 0, "{name} exited before printing its URL");
        }
        Self {
            child,
            url: line.trim().to_string(),
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The native codex binary of the pinned npm package, or `$CODEX_BIN`.
pub(crate) fn codex_bin() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("CODEX_BIN") {
        return Some(PathBuf::from(bin));
    }
    let vendor = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/codex/node_modules/@openai/codex-linux-x64/vendor");
    std::fs::read_dir(vendor)
        .ok()?
        .filter_map(Result::ok)
        .map(|target| target.path().join("bin/codex"))
        .find(|bin| bin.is_file())
}

/// The next text message.
pub(crate) async fn text(ws: &mut Ws) -> String {
    loop {
        match ws.next().await.expect("open").expect("frame") {
            Message::Text(text) => return text.to_string(),
            _ => continue,
        }
    }
}

/// A connection to `url` that has done the handshake.
pub(crate) async fn connect(url: &str) -> Ws {
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(64 << 20))
        .max_frame_size(Some(64 << 20));
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), true)
        .await
        .expect("connect");
    let initialize = json!({"id": 0, "method": "initialize", "params": {"clientName": "bench"}});
    ws.send(Message::text(initialize.to_string()))
        .await
        .unwrap();
    let reply: Value = serde_json::from_str(&text(&mut ws).await).expect("JSON");
    assert!(reply.get("result").is_some(), "initialize: {reply}");
    ws.send(Message::text(r#"{"method":"initialized","params":{}}"#))
        .await
        .unwrap();
    ws
}
