//! Operating capfs: the stdio transport and `--remote-command`, the audit log, `GET /readyz`.

use std::collections::HashSet;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::Role;

use crate::serve::{RawPeer, ServerProcess, WAIT, workspace};
use capfs::{
    AbsolutePathBuf, CopyOptions, ExecutorFileSystem, RemoteFileSystem, RemoteOptions,
    RemoveOptions, RenameOptions,
};

const BIN: &str = env!("CARGO_BIN_EXE_capfs");

fn abs(p: &Path) -> AbsolutePathBuf {
    AbsolutePathBuf::new(p).unwrap()
}

/// The shell command that serves `ws` on its stdin/stdout, quiet on stderr.
fn stdio_command(ws: &Path) -> String {
    format!(
        "RUST_LOG=capfs=warn exec '{BIN}' serve --listen stdio --root '{}'",
        ws.display()
    )
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_serves_every_method_with_data_frames() {
    let (_dir, ws) = workspace();
    let fs = RemoteFileSystem::connect_command(&stdio_command(&ws), RemoteOptions::default())
        .await
        .unwrap();
    assert!(fs.supports_data_frames());
    let p = |name: &str| abs(&ws.join(name));

    fs.create_directory(&p("d"), Default::default())
        .await
        .unwrap();
    fs.write_file(&p("d/small.txt"), b"hello".to_vec())
        .await
        .unwrap();
    // Large enough for data frames (several 256 KiB chunks) both ways.
    let big = pattern(3, 3 * 1024 * 1024 + 17);
    fs.write_file(&p("d/big.bin"), big.clone()).await.unwrap();
    assert_eq!(std::fs::read(ws.join("d/big.bin")).unwrap(), big);
    assert_eq!(fs.read_file(&p("d/big.bin")).await.unwrap(), big);
    assert_eq!(fs.read_file(&p("d/small.txt")).await.unwrap(), b"hello");
    assert_eq!(
        fs.get_metadata(&p("d/big.bin")).await.unwrap().size,
        big.len() as u64
    );
    fs.copy(&p("d"), &p("e"), CopyOptions { recursive: true })
        .await
        .unwrap();
    fs.rename(
        &p("e/small.txt"),
        &p("e/renamed.txt"),
        RenameOptions::default(),
    )
    .await
    .unwrap();
    let mut names: Vec<String> = fs
        .read_directory(&p("e"))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.file_name)
        .collect();
    names.sort();
    assert_eq!(names, ["big.bin", "renamed.txt"]);
    fs.remove(&p("e"), RemoveOptions::default()).await.unwrap();
    assert!(!ws.join("e").exists());

    let escape = fs
        .read_file(&AbsolutePathBuf::new("/etc/passwd").unwrap())
        .await
        .unwrap_err();
    assert_eq!(escape.kind(), ErrorKind::PermissionDenied, "{escape}");
    let missing = fs.read_file(&p("missing")).await.unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
}

#[tokio::test]
async fn a_command_that_is_not_a_server_fails_to_connect() {
    let err = RemoteFileSystem::connect_command("exit 3", RemoteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BrokenPipe, "{err}");
    assert!(err.to_string().contains("`exit 3`"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_child_dying_mid_call_fails_every_pending_call_promptly() {
    let (dir, ws) = workspace();
    let pid_file = dir.path().join("pid");
    // `exec` keeps the shell's pid, so the pid written is the server's.
    let command = format!("echo $$ > '{}'; {}", pid_file.display(), stdio_command(&ws));
    let fs = Arc::new(
        RemoteFileSystem::connect_command(&command, RemoteOptions::default())
            .await
            .unwrap(),
    );
    let root = abs(&ws);
    let (first_write_tx, mut first_write) = tokio::sync::mpsc::unbounded_channel();
    let mut calls = Vec::new();
    for i in 0..16 {
        let fs = Arc::clone(&fs);
        let path = root.join(format!("f{i}")).unwrap();
        let done = first_write_tx.clone();
        calls.push(tokio::spawn(async move {
            loop {
                // Alternate streamed and single-message writes.
                let size = if i % 2 == 0 { 1 << 20 } else { 1000 };
                match fs.write_file(&path, vec![i as u8; size]).await {
                    Ok(()) => {
                        let _ = done.send(());
                    }
                    Err(e) => return e,
                }
            }
        }));
    }
    tokio::time::timeout(WAIT, first_write.recv())
        .await
        .expect("a write completed in time");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let killed = Instant::now();
    for call in calls {
        let err = tokio::time::timeout(Duration::from_secs(1), call)
            .await
            .expect("a pending call failed within a second of the kill")
            .unwrap();
        assert_eq!(err.kind(), ErrorKind::BrokenPipe, "{err}");
    }
    assert!(killed.elapsed() < Duration::from_secs(1));
    let err = fs.get_metadata(&root).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BrokenPipe);
    assert!(fs.is_closed());
}

/// A WebSocket endpoint that only sends, onto a child's stdin; dropping it closes the stdin.
type Sender = WebSocketStream<tokio::io::Join<tokio::io::Empty, tokio::process::ChildStdin>>;
/// A WebSocket endpoint that only receives, from a child's stdout.
type Receiver = WebSocketStream<tokio::io::Join<tokio::process::ChildStdout, tokio::io::Sink>>;

async fn send_json(sender: &mut Sender, value: Value) {
    sender
        .send(WsMessage::text(value.to_string()))
        .await
        .unwrap();
}

async fn next_json(receiver: &mut Receiver) -> Option<Value> {
    loop {
        let frame = tokio::time::timeout(WAIT, receiver.next())
            .await
            .expect("the server answered in time")?;
        match frame.ok()? {
            WsMessage::Text(text) => return Some(serde_json::from_str(&text).unwrap()),
            WsMessage::Close(_) => return None,
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_finishes_in_flight_requests_when_stdin_closes_and_exits_zero() {
    let (_dir, ws) = workspace();
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "stdio", "--root"])
        .arg(&ws)
        .env("RUST_LOG", "capfs=warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = tokio::io::join(tokio::io::empty(), child.stdin.take().unwrap());
    let stdout = tokio::io::join(child.stdout.take().unwrap(), tokio::io::sink());
    let mut sender = WebSocketStream::from_raw_socket(stdin, Role::Client, None).await;
    let mut receiver = WebSocketStream::from_raw_socket(stdout, Role::Client, None).await;

    send_json(
        &mut sender,
        json!({"id": 1, "method": "initialize", "params": {"clientName": "t"}}),
    )
    .await;
    let reply = next_json(&mut receiver).await.unwrap();
    assert_eq!(
        reply["result"]["capfs"]["dataFrames"],
        json!(true),
        "{reply}"
    );
    send_json(&mut sender, json!({"method": "initialized"})).await;
    let file = ws.join("big.bin");
    let data = pattern(9, 8 << 20);
    send_json(
        &mut sender,
        json!({"id": 2, "method": "fs/writeFile",
               "params": {"path": file, "dataBase64": STANDARD.encode(&data)}}),
    )
    .await;
    send_json(
        &mut sender,
        json!({"id": 3, "method": "fs/getMetadata", "params": {"path": ws}}),
    )
    .await;
    // `send` returned, so every byte is in the pipe: close stdin with both requests unanswered
    // (or at most answered in part).
    drop(sender);

    let mut answered = HashSet::new();
    while let Some(reply) = next_json(&mut receiver).await {
        assert!(reply.get("result").is_some(), "{reply}");
        answered.insert(reply["id"].as_i64().unwrap());
    }
    assert_eq!(answered, HashSet::from([2, 3]));
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("the server exited in time")
        .unwrap();
    assert!(status.success(), "{status}");
    assert_eq!(std::fs::read(&file).unwrap(), data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_has_one_line_per_request_and_never_contents_or_the_token() {
    let (dir, ws) = workspace();
    let read_only = dir.path().join("ro");
    std::fs::create_dir(&read_only).unwrap();
    let read_only = read_only.canonicalize().unwrap();
    std::os::unix::fs::symlink("/etc/hostname", ws.join("escape")).unwrap();
    let token = "tok-3f9a1c7e5b";
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, token).unwrap();
    let audit_file = dir.path().join("audit.jsonl");
    let server = ServerProcess::start_with(
        &[
            "--root".as_ref(),
            ws.as_os_str(),
            "--read-only".as_ref(),
            read_only.as_os_str(),
            "--token-file".as_ref(),
            token_file.as_os_str(),
            "--audit-log".as_ref(),
            audit_file.as_os_str(),
        ],
        &[],
    )
    .await;
    let options = RemoteOptions {
        token: Some(token.to_string()),
        ..RemoteOptions::default()
    };
    let fs = RemoteFileSystem::connect(&server.url, options)
        .await
        .unwrap();
    let secret = b"SECRET-CONTENTS-do-not-log".to_vec();
    let big = pattern(5, 300_000);
    let p = |name: &str| abs(&ws.join(name));
    fs.write_file(&p("secret.txt"), secret.clone())
        .await
        .unwrap();
    assert_eq!(fs.read_file(&p("secret.txt")).await.unwrap(), secret);
    fs.write_file(&p("big.bin"), big.clone()).await.unwrap();
    assert_eq!(fs.read_file(&p("big.bin")).await.unwrap(), big);
    let denied = [
        fs.read_file(&AbsolutePathBuf::new("/etc/passwd").unwrap())
            .await
            .unwrap_err(),
        fs.read_file(&p("escape")).await.unwrap_err(),
        fs.write_file(&abs(&read_only.join("x")), b"x".to_vec())
            .await
            .unwrap_err(),
    ];
    for err in &denied {
        assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    }
    assert_eq!(
        fs.get_metadata(&p("missing")).await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    drop(fs);
    let wrong_token = tokio_tungstenite::connect_async(server.url.as_str()).await;
    assert!(wrong_token.is_err());
    server.stop().await;

    let text = std::fs::read_to_string(&audit_file).unwrap();
    assert!(!text.contains(token), "the token leaked into the audit log");
    assert!(!text.contains("SECRET-CONTENTS"), "contents leaked");
    assert!(
        !text.contains(&STANDARD.encode(&secret)[..16]),
        "contents leaked"
    );
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("every line is JSON"))
        .collect();
    let methods: Vec<&str> = lines
        .iter()
        .map(|l| l["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "fs/writeFile",
            "capfs/readFileStream",
            "capfs/writeFileStream",
            "capfs/readFileStream",
            "capfs/readFileStream",
            "capfs/readFileStream",
            "fs/writeFile",
            "fs/getMetadata",
            "handshake",
        ]
    );
    for line in &lines {
        for field in ["time", "connection", "peer", "paths", "bytes", "micros"] {
            assert!(line.get(field).is_some(), "{field} missing: {line}");
        }
        assert!(line["peer"].as_str().unwrap().starts_with("127.0.0.1:"));
        assert!(line["time"].as_str().unwrap().ends_with('Z'));
    }
    let secret_path = ws.join("secret.txt").display().to_string();
    assert_eq!(lines[1]["paths"], json!([secret_path]));
    assert_eq!(lines[1]["outcome"], "ok");
    assert_eq!(lines[1]["bytes"], secret.len() as u64);
    assert_eq!(lines[2]["bytes"], secret.len() as u64);
    assert_eq!(lines[3]["bytes"], big.len() as u64);
    assert_eq!(lines[4]["bytes"], big.len() as u64);
    for line in &lines[5..8] {
        assert_eq!(line["outcome"], "PermissionDenied", "{line}");
        assert_eq!(line["denied"], true, "{line}");
        assert_eq!(line["bytes"], 0);
    }
    assert_eq!(lines[8]["outcome"], "NotFound");
    assert_eq!(lines[8]["denied"], false);
    assert_eq!(lines[9]["outcome"], "PermissionDenied");
    assert_eq!(lines[9]["denied"], true);
    assert_eq!(lines[9]["code"], 401);
    // What the README tells a reviewer to grep for.
    let grepped = text
        .lines()
        .filter(|l| l.contains(r#""outcome":"PermissionDenied""#) && l.contains(r#""denied":true"#))
        .count();
    assert_eq!(grepped, 4);
}

/// Sends `request` on a fresh TCP connection and returns everything the server answers.
async fn http_exchange(url: &str, request: &str) -> String {
    let address = url.strip_prefix("ws://").unwrap();
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut answer))
        .await
        .expect("the server answered and closed in time")
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn readyz_answers_without_a_token_and_handshakes_keep_their_rules() {
    let (dir, ws) = workspace();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "t0ken").unwrap();
    let server = ServerProcess::start_with(
        &[
            "--root".as_ref(),
            ws.as_os_str(),
            "--token-file".as_ref(),
            token_file.as_os_str(),
            "--max-connections".as_ref(),
            "1".as_ref(),
        ],
        &[],
    )
    .await;
    // The only connection slot is taken first: the server stays ready, and refusals below come
    // from the token check, which precedes the connection limit.
    let options = RemoteOptions {
        token: Some("t0ken".into()),
        ..RemoteOptions::default()
    };
    let fs = RemoteFileSystem::connect(&server.url, options.clone())
        .await
        .unwrap();
    let ready = http_exchange(&server.url, "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(ready.starts_with("HTTP/1.1 200 OK\r\n"), "{ready}");
    assert!(ready.ends_with("\r\n\r\nready\n"), "{ready}");
    let with_query = http_exchange(&server.url, "GET /readyz?verbose HTTP/1.0\r\n\r\n").await;
    assert!(
        with_query.starts_with("HTTP/1.1 200 OK\r\n"),
        "{with_query}"
    );

    // A WebSocket handshake to /readyz is a handshake: without the token it is refused.
    let upgrade = "GET /readyz HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\
                   Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
                   Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    let refused = http_exchange(&server.url, upgrade).await;
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    // Other paths are not health checks either.
    let other = http_exchange(&server.url, "GET /other HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(!other.contains("200 OK"), "{other}");

    assert!(fs.get_metadata(&abs(&ws)).await.unwrap().is_directory);
    let full = RemoteFileSystem::connect(&server.url, options)
        .await
        .unwrap_err();
    assert_eq!(full.kind(), ErrorKind::ConnectionRefused, "{full}");
}

#[tokio::test]
async fn the_cli_works_through_remote_command() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    let command = stdio_command(&ws);
    let run = |args: &[&str]| {
        std::process::Command::new(BIN)
            .arg("--remote-command")
            .arg(&command)
            .args(args)
            .env_remove("CAPFS_REMOTE")
            .output()
            .unwrap()
    };
    let ws_str = ws.to_str().unwrap();
    let ls = run(&["ls", ws_str]);
    assert!(ls.status.success(), "{ls:?}");
    assert_eq!(String::from_utf8_lossy(&ls.stdout), "a.txt\n");
    let cat = run(&["cat", &format!("{ws_str}/a.txt")]);
    assert_eq!(cat.stdout, b"alpha\n");
    // From the environment, with the server's default log level: a stdio server is quiet, and
    // the client's CAPFS_REMOTE_COMMAND does not leak into the local server's arguments.
    let quiet = format!(
        "exec '{BIN}' serve --listen stdio --root '{}' --audit-log /dev/null",
        ws.display()
    );
    let stat = std::process::Command::new(BIN)
        .args(["stat", &format!("{ws_str}/a.txt")])
        .env("CAPFS_REMOTE_COMMAND", &quiet)
        .env_remove("CAPFS_REMOTE")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(stat.status.success(), "{stat:?}");
    assert!(
        String::from_utf8_lossy(&stat.stdout).contains("Size: 6 B (6 bytes)"),
        "{stat:?}"
    );
    assert_eq!(String::from_utf8_lossy(&stat.stderr), "");
    let denied = run(&["cat", "/etc/passwd"]);
    assert!(!denied.status.success());
    let stderr = String::from_utf8_lossy(&denied.stderr);
    assert!(
        stderr.contains("capfs: cannot read '/etc/passwd':")
            && stderr.contains("outside every sandbox root"),
        "{stderr}"
    );
}

#[tokio::test]
async fn raw_peers_are_audited_with_their_refusals() {
    let (dir, ws) = workspace();
    let audit_file = dir.path().join("audit.jsonl");
    let server = ServerProcess::start_audited(&ws, &audit_file).await;
    let mut peer = RawPeer::connect(&server.url).await;
    let early = peer
        .request("fs/readFile", json!({"path": "/etc/shadow"}))
        .await;
    assert!(early.get("error").is_some());
    let mut peer = RawPeer::ready(&server.url).await;
    let unknown = peer.request("fs/chmod", json!({"path": "/x"})).await;
    assert!(unknown.get("error").is_some());
    let dotdot = format!("{}{}/etc/passwd", ws.display(), "/..".repeat(40));
    let denied = peer.request("fs/readFile", json!({"path": dotdot})).await;
    assert!(denied.get("error").is_some());
    drop(peer);
    server.stop().await;
    let lines: Vec<Value> = std::fs::read_to_string(&audit_file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[0]["method"], "fs/readFile");
    assert_eq!(lines[0]["paths"], json!(["/etc/shadow"]));
    assert_eq!(lines[0]["outcome"], "InvalidInput");
    assert_eq!(lines[1]["method"], "initialize");
    assert_eq!(lines[2]["method"], "fs/chmod");
    assert_eq!(lines[3]["method"], "fs/readFile");
    // As sent, `..` and all; the error names where it led.
    assert_eq!(lines[3]["paths"], json!([dotdot]));
    assert!(
        lines[3]["error"]
            .as_str()
            .unwrap()
            .starts_with("/etc/passwd:")
    );
    assert_eq!(lines[3]["outcome"], "PermissionDenied");
    assert_eq!(lines[3]["denied"], true);
    assert_ne!(lines[0]["connection"], lines[3]["connection"]);
}
