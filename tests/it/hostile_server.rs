//! The `capfs` client against a hostile server written here, on 127.0.0.1 port 0: what the
//! server says (error messages, an HTTP body, names, link texts, roots) and what names carry
//! into error reasons reach the terminal escaped. The fake server and the helpers serve
//! `lying_server` too.

use std::path::Path;
use std::process::Output;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

use crate::serve::WAIT;

const BIN: &str = env!("CARGO_BIN_EXE_capfs");

/// What the fake server does with one request.
pub enum Answer {
    /// A result.
    Result(Value),
    /// An error with this message (kind `PermissionDenied`).
    Error(String),
    /// Nothing, ever.
    Silence,
    /// For a streamed read: these bytes as data frames, then `{"size": size}` when given.
    Stream(Vec<u8>, Option<u64>),
}

/// The `initialize` result of a capfs server with data frames and one root `/ws`.
pub fn capfs_initialize() -> Value {
    json!({"capfs": {"version": "0", "maxMessageBytes": 1 << 20, "dataFrames": true,
        "roots": [{"path": "/ws", "access": "read-write"}]}})
}

/// A server that answers each request of one connection as `answer` says, until the client
/// goes away.
pub async fn fake_server(
    answer: impl Fn(&str, &Value) -> Answer + Send + 'static,
) -> (String, JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        while let Some(Ok(frame)) = ws.next().await {
            let Message::Text(text) = frame else { continue };
            let request: Value = serde_json::from_str(&text).unwrap();
            let id = request["id"].clone();
            if id.is_null() {
                continue;
            }
            let method = request["method"].as_str().unwrap_or("");
            let reply = match answer(method, &request["params"]) {
                Answer::Result(result) => json!({"id": id, "result": result}),
                Answer::Error(message) => json!({"id": id, "error": {"code": -32603,
                    "message": message, "data": {"kind": "PermissionDenied"}}}),
                Answer::Silence => continue,
                Answer::Stream(data, size) => {
                    let stream = request["params"]["streamId"].as_u64().unwrap();
                    for chunk in data.chunks(64 << 10) {
                        let mut frame = vec![0u8];
                        frame.extend_from_slice(&stream.to_be_bytes());
                        frame.extend_from_slice(chunk);
                        if ws.send(Message::Binary(frame.into())).await.is_err() {
                            return;
                        }
                    }
                    match size {
                        Some(size) => json!({"id": id, "result": {"size": size}}),
                        None => continue,
                    }
                }
            };
            if ws.send(Message::text(reply.to_string())).await.is_err() {
                return;
            }
        }
    });
    (url, task)
}

/// Runs the client with `args` and a clean environment; fails the test if it takes longer
/// than [`WAIT`] (a client that hangs is a failure, not a stuck test).
pub async fn run(args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(BIN);
    for var in [
        "CAPFS_REMOTE",
        "CAPFS_REMOTE_COMMAND",
        "CAPFS_TOKEN",
        "RUST_LOG",
    ] {
        command.env_remove(var);
    }
    command
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    tokio::time::timeout(WAIT, command.output())
        .await
        .unwrap_or_else(|_| panic!("{args:?} did not end within {WAIT:?}"))
        .unwrap()
}

pub fn describe(output: &Output) -> String {
    format!(
        "status {:?}, stdout {:?}, stderr {:?}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Characters that must never reach a terminal raw: C0 controls but the newline and the tab
/// (which the client's own formats use), DEL, C1 controls, the bidirectional controls, the
/// line and paragraph separators.
fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}'
        )
        || matches!(c, '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// Asserts that neither stream of `output` holds a character a terminal would act on.
pub fn assert_terminal_safe(what: &str, output: &Output) {
    for (name, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        let raw: Vec<char> = text.chars().filter(|c| is_unsafe(*c)).collect();
        assert!(
            raw.is_empty(),
            "{what}: raw {raw:?} on {name}: {}",
            describe(output)
        );
    }
}

/// A text that would retitle the terminal and clear it, with an 8-bit CSI, DEL and a
/// right-to-left override.
pub const EVIL: &str = "\u{1b}]0;PWNED\u{7}\u{1b}[2J\u{9b}31m\u{7f}\u{202e}txt.exe";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_error_messages_reach_the_terminal_escaped() {
    let (url, server) = fake_server(|method, _| match method {
        "initialize" => Answer::Result(capfs_initialize()),
        _ => Answer::Error(format!("/ws/x: {EVIL}")),
    })
    .await;
    let out = run(&["--remote", &url, "stat", "/ws/x"]).await;
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("PWNED"),
        "the message is shown, escaped: {}",
        describe(&out)
    );
    assert_terminal_safe("stat", &out);
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_refusals_body_reaches_the_terminal_escaped() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = tokio::io::AsyncReadExt::read(&mut tcp, &mut buf)
                .await
                .unwrap();
            assert!(n > 0);
            request.extend_from_slice(&buf[..n]);
        }
        let body = format!("token refused {EVIL}");
        let answer = format!(
            "HTTP/1.1 401 Unauthorized\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        tcp.write_all(answer.as_bytes()).await.unwrap();
        let _ = tcp.shutdown().await;
    });
    let out = run(&["--remote", &url, "ls", "/ws"]).await;
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    assert_terminal_safe("401", &out);
    server.await.unwrap();
}

/// A server listing `/ws/d` with one entry of each name in `names` (files, each of 5 bytes, a
/// symlink to `names[0]` named `link`).
pub fn listing_server(names: Vec<String>) -> impl Fn(&str, &Value) -> Answer + Send + 'static {
    move |method, params| {
        let path = params["path"].as_str().unwrap_or("");
        match method {
            "initialize" => Answer::Result(capfs_initialize()),
            "fs/getMetadata" if path == "/ws/d" => Answer::Result(
                json!({"isDirectory": true, "isFile": false, "mode": 493, "size": 4096}),
            ),
            "fs/getMetadata" => Answer::Result(json!({"isDirectory": false, "isFile": true,
                "isSymlink": path.ends_with("/link"), "size": 5, "mode": 420})),
            "fs/readDirectory" => {
                let mut entries: Vec<Value> = names
                    .iter()
                    .map(|n| json!({"fileName": n, "isDirectory": false, "isFile": true}))
                    .collect();
                entries.push(
                    json!({"fileName": "link", "isDirectory": false, "isFile": false,
                    "isSymlink": true}),
                );
                Answer::Result(json!({"entries": entries}))
            }
            "capfs/readLink" => Answer::Result(json!({"target": names[0]})),
            _ => Answer::Error("refused".to_string()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_names_and_link_texts_are_escaped_in_text_and_json() {
    let names = vec![
        format!("a{EVIL}"),
        "b\u{9b}c".to_string(),
        "del\u{7f}".to_string(),
        "rtl\u{202e}gpj.exe".to_string(),
        "iso\u{2066}x\u{2069}".to_string(),
    ];
    for args in [
        &["ls", "/ws/d"][..],
        &["ls", "-l", "/ws/d"],
        &["ls", "--json", "/ws/d"],
        &["stat", "/ws/d/link"],
        &["stat", "--json", "/ws/d/link"],
    ] {
        let (url, server) = fake_server(listing_server(names.clone())).await;
        let mut all = vec!["--remote", url.as_str()];
        all.extend_from_slice(args);
        let out = run(&all).await;
        assert!(out.status.success(), "{args:?}: {}", describe(&out));
        assert_terminal_safe(&format!("{args:?}"), &out);
        if args.contains(&"--json") {
            // Escaped per JSON: a reader gets the exact names back.
            let parsed: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
            let shown: Vec<&str> = parsed
                .iter()
                .map(|e| {
                    e["target"]
                        .as_str()
                        .unwrap_or_else(|| e["name"].as_str().unwrap())
                })
                .collect();
            let expected: Vec<&str> = if args[0] == "stat" {
                vec![&names[0]]
            } else {
                let mut all: Vec<&str> = names.iter().map(String::as_str).collect();
                all.push(&names[0]);
                all.sort();
                all
            };
            let mut sorted = shown.clone();
            sorted.sort();
            assert_eq!(sorted, expected, "{args:?}");
        }
        server.abort();
    }
}

/// A local sandbox `ws/` (read-write) and `ro/` (read-only) with a file of name `name` in `ws`.
fn local_roots(name: &str) -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (ws, ro) = (base.join("ws"), base.join("ro"));
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&ro).unwrap();
    std::fs::write(ws.join(name), b"x").unwrap();
    let text = |p: &Path| p.to_str().unwrap().to_string();
    (dir, text(&ws), text(&ro))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destination_named_in_an_error_reason_is_escaped_locally_and_remotely() {
    let name = "evil\u{1b}]0;PWNED\u{7}\u{1b}[2J\u{202e}.txt";
    let (_dir, ws, ro) = local_roots(name);
    let source = format!("{ws}/{name}");
    for verb in ["cp", "mv"] {
        let local = run(&["--root", &ws, "--read-only", &ro, verb, "--", &source, &ro]).await;
        assert_eq!(local.status.code(), Some(4), "{}", describe(&local));
        assert_terminal_safe(&format!("local {verb}"), &local);
    }
    let server = crate::serve::ServerProcess::start_with(
        &[
            "--root".as_ref(),
            ws.as_ref(),
            "--read-only".as_ref(),
            ro.as_ref(),
        ],
        &[],
    )
    .await;
    for verb in ["cp", "mv"] {
        let remote = run(&["--remote", &server.url, verb, "--", &source, &ro]).await;
        assert_eq!(remote.status.code(), Some(4), "{}", describe(&remote));
        assert_terminal_safe(&format!("remote {verb}"), &remote);
    }
    assert!(Path::new(&source).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announced_roots_are_escaped_in_text_and_json() {
    let root = format!("/ws/{EVIL}");
    for json in [false, true] {
        let announced = root.clone();
        let (url, server) = fake_server(move |method, _| match method {
            "initialize" => Answer::Result(json!({"capfs": {"version": "0",
                "maxMessageBytes": 1 << 20,
                "roots": [{"path": announced, "access": "read-write"}]}})),
            _ => Answer::Silence,
        })
        .await;
        let mut args = vec!["--remote", url.as_str(), "roots"];
        if json {
            args.push("--json");
        }
        let out = run(&args).await;
        assert!(out.status.success(), "{}", describe(&out));
        assert_terminal_safe(&format!("roots {json}"), &out);
        if json {
            let parsed: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(parsed[0]["path"], root.as_str());
        }
        server.abort();
    }
}
