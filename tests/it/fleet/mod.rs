//! Running a fleet of executors: `GET /healthz`, `/readyz` and `/metrics` on the server's
//! listener or its admin address, the drain at SIGTERM (sessions refused, requests and
//! streamed writes finished, connections closed with 1001, processes sent SIGTERM then
//! SIGKILL, a second signal cutting it), and the container's arguments from `deploy/`.

use std::path::Path;
use std::process::{ExitStatus, Stdio};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::serve::WAIT;

mod deploy;
mod drain;
mod probes;
mod processes;

/// A `capfs serve` started here, its stderr read line by line at info level.
pub(crate) struct Fleet {
    pub(crate) child: Child,
    pub(crate) url: String,
    /// `http://HOST:PORT` of the admin address, when one was asked for.
    pub(crate) admin: Option<String>,
    pub(crate) stderr: UnboundedReceiver<String>,
}

impl Fleet {
    /// Starts `capfs serve ARGS` with `envs`; `admin` says whether it prints an admin URL.
    pub(crate) async fn start(args: &[&str], envs: &[(&str, &str)], admin: bool) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_capfs"));
        command
            .arg("serve")
            .args(args)
            .env("RUST_LOG", "capfs=info,capfs_wire=info")
            .envs(envs.iter().copied());
        Self::spawn(command, admin).await
    }

    /// Runs `command` (a `capfs serve`) as [`Fleet::start`] does.
    pub(crate) async fn spawn(mut command: Command, admin: bool) -> Self {
        let mut child = command
            .env_remove("CAPFS_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn capfs serve");
        let (tx, stderr) = tokio::sync::mpsc::unbounded_channel();
        let mut errors = BufReader::new(child.stderr.take().unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = errors.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut next = async || {
            tokio::time::timeout(WAIT, lines.next_line())
                .await
                .expect("capfs serve printed its address in time")
                .unwrap()
                .expect("capfs serve printed a line")
        };
        let url = next().await;
        assert!(url.starts_with("ws://"), "{url}");
        let admin = if admin { Some(next().await) } else { None };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            child,
            url,
            admin,
            stderr,
        }
    }

    /// `host:port` of the WebSocket listener.
    pub(crate) fn address(&self) -> &str {
        self.url.strip_prefix("ws://").unwrap()
    }

    pub(crate) fn signal(&self, signal: &str) {
        crate::serve::send_signal(&self.child, signal);
    }

    /// Waits until the server logs a line holding `text`, and returns it.
    pub(crate) async fn logged(&mut self, text: &str) -> String {
        loop {
            let line = tokio::time::timeout(WAIT, self.stderr.recv())
                .await
                .unwrap_or_else(|_| panic!("the server logged {text:?} in time"))
                .unwrap_or_else(|| panic!("the server ended before logging {text:?}"));
            if line.contains(text) {
                return line;
            }
            eprintln!("server: {line}");
        }
    }

    /// Waits for the server's exit.
    pub(crate) async fn exited(&mut self) -> ExitStatus {
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the server exited in time")
            .unwrap()
    }
}

/// Sends `request` to `address` (`host:port`) and returns the whole answer once the server
/// closes.
pub(crate) async fn http(address: &str, request: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut answer))
        .await
        .expect("answered and closed in time")
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

/// `GET path` on `address`, with the headers in `extra` (each ending in CRLF).
pub(crate) async fn get(address: &str, path: &str, extra: &str) -> String {
    http(
        address,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n"),
    )
    .await
}

/// A workspace `ws/` whose canonical path is returned beside its directory.
pub(crate) fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    crate::serve::workspace()
}

pub(crate) fn text(path: &Path) -> String {
    path.to_str().unwrap().to_string()
}
