//! What `capfs serve` admits: handshakes with their own budget and deadline, accepts under
//! descriptor exhaustion, the shutdown deadline, limits checked at start-up, the bearer scheme,
//! audit lines of refused params, and listings of names that are not UTF-8.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capfs::{AbsolutePathBuf, ExecutorFileSystem, RemoteFileSystem, RemoteOptions};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use crate::serve::{RawPeer, ServerProcess, WAIT, error_of, workspace};

const BIN: &str = env!("CARGO_BIN_EXE_capfs");
const TOKEN: &str = "listening-token-5b1e";

fn address(url: &str) -> &str {
    url.strip_prefix("ws://").expect("a ws:// URL")
}

fn with_token() -> RemoteOptions {
    RemoteOptions {
        token: Some(TOKEN.to_string()),
        ..RemoteOptions::default()
    }
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
            RemoteOptions {
                connect_timeout: Duration::from_secs(2),
                ..options.clone()
            },
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

#[tokio::test]
async fn half_open_handshakes_never_take_the_slots_of_authenticated_clients() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start_with(
        &[
            "--root".as_ref(),
            ws.as_os_str(),
            "--max-connections".as_ref(),
            "4".as_ref(),
            "--handshake-timeout".as_ref(),
            "60s".as_ref(),
        ],
        &[("CAPFS_TOKEN", TOKEN)],
    )
    .await;
    // Six peers send half an upgrade request and stop; the server accepts them (in order)
    // before any of the clients below.
    let half = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n";
    let _half_open = silent_peers(&server.url, 6, half).await;
    // Every slot still goes to clients with the right token...
    let mut clients = Vec::new();
    for n in 0..4 {
        let fs = RemoteFileSystem::connect(&server.url, with_token())
            .await
            .unwrap_or_else(|e| panic!("authenticated client {n} refused: {e}"));
        fs.read_directory(&abs(&ws)).await.expect("list");
        clients.push(fs);
    }
    // ...and the connection limit still holds for them.
    let fifth = RemoteFileSystem::connect(&server.url, with_token())
        .await
        .expect_err("a fifth connection is over --max-connections 4");
    assert!(fifth.to_string().contains("503"), "{fifth}");
    // A slot freed by a client that leaves goes to the next one with the token.
    drop(clients.pop());
    let again = connect_eventually(&server.url, with_token()).await;
    again.read_directory(&abs(&ws)).await.expect("list");
    drop(again);
    drop(clients);
    server.stop().await;
}

#[tokio::test]
async fn silent_peers_are_closed_at_the_handshake_deadline() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start_with(
        &[
            "--root".as_ref(),
            ws.as_os_str(),
            "--handshake-timeout".as_ref(),
            "300ms".as_ref(),
        ],
        &[],
    )
    .await;
    let mut silent = silent_peers(&server.url, 1, b"").await;
    let mut half = silent_peers(&server.url, 1, b"GET / HTTP/1.1\r\n").await;
    assert!(is_closed_by_server(&mut silent[0]).await);
    assert!(is_closed_by_server(&mut half[0]).await);
    server.stop().await;
}

#[tokio::test]
async fn beyond_the_handshake_budget_new_connections_are_closed_at_once() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start_with(
        &[
            "--root".as_ref(),
            ws.as_os_str(),
            "--max-handshakes".as_ref(),
            "4".as_ref(),
            "--handshake-timeout".as_ref(),
            "300s".as_ref(),
        ],
        &[],
    )
    .await;
    let budget = silent_peers(&server.url, 4, b"").await;
    let mut over = silent_peers(&server.url, 1, b"").await;
    // The fifth is closed while the four are still waiting for their deadline of 300 s.
    assert!(is_closed_by_server(&mut over[0]).await);
    drop(budget);
    // Once they are gone, a client gets in.
    let fs = connect_eventually(&server.url, RemoteOptions::default()).await;
    fs.read_directory(&abs(&ws)).await.expect("list");
    drop(fs);
    server.stop().await;
}

/// Everything a process wrote to its stderr: the size, and the start of the text.
#[derive(Default)]
struct Captured {
    bytes: usize,
    head: String,
}

#[tokio::test]
async fn descriptor_exhaustion_pauses_accepts_and_logs_once() {
    let prlimit = std::process::Command::new("prlimit")
        .arg("--version")
        .output();
    assert!(
        prlimit.is_ok_and(|o| o.status.success()),
        "this test needs util-linux's prlimit"
    );
    let (_dir, ws) = workspace();
    let mut child = tokio::process::Command::new("prlimit")
        .arg("--nofile=64:64")
        .arg("--")
        .arg(BIN)
        .args(["serve", "--root"])
        .arg(&ws)
        .args(["--max-handshakes", "1000", "--handshake-timeout", "300s"])
        .env("RUST_LOG", "capfs=warn")
        .env_remove("CAPFS_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn prlimit capfs serve");
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(WAIT, stdout.next_line())
        .await
        .expect("the URL in time")
        .unwrap()
        .expect("a URL line");
    let captured = Arc::new(Mutex::new(Captured::default()));
    let mut stderr = child.stderr.take().unwrap();
    let sink = Arc::clone(&captured);
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = stderr.read(&mut buf).await {
            let mut captured = sink.lock().unwrap();
            captured.bytes += n;
            if captured.head.len() < 16 * 1024 {
                captured.head.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        }
    });
    // 90 silent peers: more than 64 descriptors can hold.
    let silent = silent_peers(&url, 90, b"").await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while !captured.lock().unwrap().head.contains("accept failed") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never ran out of descriptors"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // An observation window with the descriptors exhausted throughout: the log must not grow
    // with every attempt (it used to grow by tens of MB a second).
    tokio::time::sleep(Duration::from_secs(1)).await;
    {
        let captured = captured.lock().unwrap();
        assert!(
            captured.bytes < 4 * 1024,
            "{} bytes of log: {}",
            captured.bytes,
            &captured.head[..captured.head.len().min(2_000)]
        );
        assert!(
            captured.head.contains("pausing accepts"),
            "{}",
            captured.head
        );
    }
    // Once the silent peers go away, a well-behaved client is served.
    drop(silent);
    let fs = connect_eventually(&url, RemoteOptions::default()).await;
    fs.read_directory(&abs(&ws)).await.expect("list");
    drop(fs);
    child.kill().await.unwrap();
}

#[tokio::test]
async fn shutdown_cuts_a_peer_that_stopped_reading_at_the_deadline() {
    let (_dir, ws) = workspace();
    // Sparse: 256 MiB of zeros, far more than the socket buffers and the reply queue hold.
    let big = ws.join("big");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(256 << 20)
        .unwrap();
    let (mut server, mut stderr) = ServerProcess::start_with_stderr(&[
        "--root".as_ref(),
        ws.as_os_str(),
        "--shutdown-timeout".as_ref(),
        "500ms".as_ref(),
    ])
    .await;
    let mut peer = RawPeer::ready(&server.url).await;
    peer.send(json!({
        "id": 1,
        "method": "capfs/readFileStream",
        "params": {"path": big, "streamId": 1},
    }))
    .await;
    // The stream has started; from now on the peer never reads its socket.
    let first = tokio::time::timeout(WAIT, peer.ws.next())
        .await
        .expect("a frame in time")
        .expect("a frame")
        .expect("a frame");
    assert!(matches!(first, WsMessage::Binary(_)), "{first:?}");
    server.signal("TERM");
    let status = tokio::time::timeout(WAIT, server.child.wait())
        .await
        .expect("the server exited at its shutdown deadline")
        .unwrap();
    assert!(!status.success(), "{status}");
    let mut lines = Vec::new();
    while let Ok(Some(line)) = tokio::time::timeout(WAIT, stderr.recv()).await {
        lines.push(line);
    }
    let cut: Vec<&String> = lines.iter().filter(|l| l.contains("cut")).collect();
    assert_eq!(cut.len(), 1, "{lines:?}");
    assert!(
        cut[0].contains("shutdown timeout of 500ms passed: cut 1 connection still open"),
        "{lines:?}"
    );
    drop(peer);
}

#[tokio::test]
async fn zero_and_nonsense_limits_are_refused_at_start_up() {
    let (_dir, ws) = workspace();
    let cases = [
        (
            "--max-in-flight",
            "0",
            "--max-in-flight 0: must be from 1 to 4096",
        ),
        ("--max-in-flight", "100000", "--max-in-flight 100000:"),
        ("--max-connections", "0", "--max-connections 0:"),
        ("--max-handshakes", "0", "--max-handshakes 0:"),
        ("--max-message-bytes", "0", "--max-message-bytes 0:"),
        ("--max-message-bytes", "12X", "12X: not a size"),
        ("--max-message-bytes", "64T", "--max-message-bytes"),
        ("--read-limit", "0", "--read-limit 0: must be at least 1"),
        ("--read-limit", "1.5G", "1.5G: not a size"),
        ("--handshake-timeout", "0", "--handshake-timeout 0ns:"),
        ("--handshake-timeout", "forever", "forever: not a duration"),
        ("--shutdown-timeout", "0", "--shutdown-timeout 0ns:"),
        ("--max-blocking", "0", "--max-blocking 0:"),
        (
            "--max-blocking-per-connection",
            "0",
            "--max-blocking-per-connection 0:",
        ),
        ("--stream-idle-timeout", "0", "--stream-idle-timeout 0ns:"),
        (
            "--threads",
            "5000",
            "--threads 5000: must be from 0 to 1024",
        ),
        (
            "--threads",
            "many",
            "invalid value 'many' for '--threads <N>'",
        ),
    ];
    let audit = ws.join("audit.jsonl");
    for (flag, value, message) in cases {
        let run = tokio::process::Command::new(BIN)
            .args(["serve", "--root"])
            .arg(&ws)
            .args([flag, value])
            .arg("--audit-log")
            .arg(&audit)
            .env_remove("CAPFS_TOKEN")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(WAIT, run)
            .await
            .unwrap_or_else(|_| panic!("{flag} {value}: the server started instead of refusing"))
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{flag} {value}: {stderr}");
        assert!(output.stdout.is_empty(), "{flag} {value}: printed a URL");
        assert!(stderr.contains(message), "{flag} {value}: {stderr}");
        // Refused before anything else: no audit file made, no root announced.
        assert!(!audit.exists(), "{flag} {value}: the audit log was created");
        assert!(!stderr.contains("sandbox root"), "{flag} {value}: {stderr}");
    }
}

#[tokio::test]
async fn size_flags_take_suffixes() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.join("600k"), vec![7u8; 600 * 1024]).unwrap();
    std::fs::write(ws.join("500k"), vec![7u8; 500 * 1024]).unwrap();
    let server = ServerProcess::start_with(
        &[
            "--root".as_ref(),
            ws.as_os_str(),
            "--read-limit".as_ref(),
            "512K".as_ref(),
            "--max-message-bytes".as_ref(),
            "2M".as_ref(),
        ],
        &[],
    )
    .await;
    let fs = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap();
    assert_eq!(
        fs.read_file(&abs(&ws.join("500k"))).await.unwrap().len(),
        500 * 1024
    );
    let err = fs.read_file(&abs(&ws.join("600k"))).await.unwrap_err();
    assert!(err.to_string().contains("limit is 524288 bytes"), "{err}");
    // The message limit announced to clients is the parsed 2M.
    let mut peer = RawPeer::connect(&server.url).await;
    let init = peer.request("initialize", json!({})).await;
    assert_eq!(
        init["result"]["capfs"]["maxMessageBytes"],
        2 << 20,
        "{init}"
    );
    drop((fs, peer));
    server.stop().await;
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start_with(
        &["--root".as_ref(), ws.as_os_str()],
        &[("CAPFS_TOKEN", TOKEN)],
    )
    .await;
    let connect = |value: String| {
        let mut request = server.url.as_str().into_client_request().unwrap();
        request
            .headers_mut()
            .insert("authorization", HeaderValue::from_str(&value).unwrap());
        tokio_tungstenite::connect_async(request)
    };
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let (ws, _) = connect(format!("{scheme} {TOKEN}"))
            .await
            .unwrap_or_else(|e| panic!("{scheme}: {e}"));
        drop(ws);
    }
    for refused in [
        format!("bearer {TOKEN}x"),
        format!("Basic {TOKEN}"),
        TOKEN.to_string(),
    ] {
        let err = connect(refused.clone()).await.expect_err(&refused);
        assert!(err.to_string().contains("401"), "{refused}: {err}");
    }
    server.stop().await;
}

#[tokio::test]
async fn requests_refused_while_their_params_are_parsed_are_audited_as_sent() {
    let (dir, ws) = workspace();
    let audit_file = dir.path().join("audit.jsonl");
    let server = ServerProcess::start_audited(&ws, &audit_file).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let long = format!("/{}", "y".repeat(5_000));
    let target = ws.join("t").display().to_string();
    let sent = [
        ("fs/readFile", json!({"path": "relative/x"})),
        ("fs/getMetadata", json!({"path": 7})),
        ("fs/copy", json!({"sourcePath": "/a"})),
        (
            "fs/rename",
            json!({"sourcePath": long, "destinationPath": "/b\u{0}c"}),
        ),
        ("fs/writeFile", json!({"path": target, "dataBase64": "!!"})),
    ];
    for (method, params) in &sent {
        let reply = peer.request(method, params.clone()).await;
        let (_, kind, _) = error_of(&reply);
        assert_eq!(kind, Some("InvalidInput"), "{method}: {reply}");
    }
    drop(peer);
    server.stop().await;
    let lines: Vec<Value> = std::fs::read_to_string(&audit_file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let paths: Vec<&Value> = lines
        .iter()
        .filter(|l| l["method"] != "initialize")
        .map(|l| &l["paths"])
        .collect();
    let cut_long = format!("/{}…[cut 4001 bytes]", "y".repeat(999));
    assert_eq!(
        paths,
        [
            &json!(["relative/x"]),
            &json!(["7"]),
            &json!(["/a"]),
            &json!([cut_long, "/b\u{0}c"]),
            &json!([target]),
        ]
    );
}

#[tokio::test]
async fn a_listed_name_reaches_that_entry_and_no_other() {
    let (_dir, ws) = workspace();
    let genuine = "a\u{FFFD}";
    let raw = |bytes: &[u8]| ws.join(OsStr::from_bytes(bytes));
    std::fs::write(raw(b"a\xff"), "not utf-8 (ff)").unwrap();
    std::fs::write(raw(b"a\xfe"), "not utf-8 (fe)").unwrap();
    std::fs::write(ws.join(genuine), "genuine").unwrap();
    std::fs::write(ws.join("plain"), "plain").unwrap();
    let server = ServerProcess::start(&ws).await;
    let fs = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap();
    let mut names: Vec<String> = fs
        .read_directory(&abs(&ws))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.file_name)
        .collect();
    names.sort();
    assert_eq!(names, [genuine, "plain"]);
    // Every listed name leads to its own entry: removing the one that looks like the others
    // removes exactly that file.
    assert_eq!(
        fs.read_file(&abs(&ws.join(genuine))).await.unwrap(),
        b"genuine"
    );
    fs.remove(&abs(&ws.join(genuine)), capfs::RemoveOptions::default())
        .await
        .unwrap();
    assert!(!ws.join(genuine).exists());
    assert_eq!(std::fs::read(raw(b"a\xff")).unwrap(), b"not utf-8 (ff)");
    assert_eq!(std::fs::read(raw(b"a\xfe")).unwrap(), b"not utf-8 (fe)");
    // On the wire, the entries left out are counted.
    let mut peer = RawPeer::ready(&server.url).await;
    let listing = peer.request("fs/readDirectory", json!({"path": ws})).await;
    assert_eq!(listing["result"]["nonUtf8NamesOmitted"], 2, "{listing}");
    assert_eq!(listing["result"]["entries"].as_array().unwrap().len(), 1);
    drop((fs, peer));
    server.stop().await;
}

/// `--threads 0` serves every connection on the accepting thread, `--threads 1` on one thread
/// beside it: both serve clients at once, streams included, and stop cleanly.
#[tokio::test]
async fn any_thread_count_serves_clients_at_once() {
    for threads in ["0", "1", "3"] {
        let (_dir, ws) = workspace();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(ws.join("big"), &data).unwrap();
        let args = [
            "--root".as_ref(),
            ws.as_os_str(),
            "--threads".as_ref(),
            threads.as_ref(),
        ];
        let server = ServerProcess::start_with(&args, &[]).await;
        let mut clients = Vec::new();
        for _ in 0..4 {
            let client = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
                .await
                .unwrap();
            clients.push(client);
        }
        let path = abs(&ws.join("big"));
        let reads = futures_util::future::join_all(clients.iter().map(|c| c.read_file(&path)));
        for read in reads.await {
            assert!(read.unwrap() == data, "--threads {threads}");
        }
        drop(clients);
        server.stop().await;
    }
}

/// How many threads of this process run a server's connections (their names, cut to the
/// kernel's 15 bytes).
fn connection_thread_count() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("capfs-connectio"))
        .count()
}

/// A server whose connections run on threads of their own (what `capfs serve` does): every
/// client is served, the threads end when the server stops, and a server whose future is
/// dropped closes the connections it was running. The only test of this process that starts
/// such threads, so that the count is its own.
#[tokio::test]
async fn connection_threads_serve_every_client_and_end_with_the_server() {
    use capfs::server::{Server, ServerConfig};
    use capfs::{Access, LocalFileSystem, Sandbox};

    let (_dir, ws) = workspace();
    std::fs::write(ws.join("f"), b"hello").unwrap();
    let start = || async {
        let sandbox = Sandbox::new().with_root(&ws, Access::ReadWrite).unwrap();
        let fs: Arc<dyn ExecutorFileSystem> = Arc::new(LocalFileSystem::new(sandbox));
        let config = ServerConfig {
            connection_threads: 3,
            ..ServerConfig::default()
        };
        Server::bind(fs, config).await.unwrap()
    };

    let server = start().await;
    let url = server.url().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.run_until(async {
        let _ = stopped.await;
    }));
    let mut clients = Vec::new();
    for _ in 0..7 {
        let client = RemoteFileSystem::connect(&url, RemoteOptions::default())
            .await
            .unwrap();
        clients.push(client);
    }
    assert_eq!(connection_thread_count(), 3);
    let path = abs(&ws.join("f"));
    let reads = futures_util::future::join_all(clients.iter().map(|c| c.read_file(&path))).await;
    for read in reads {
        assert_eq!(read.unwrap(), b"hello");
    }
    // A write through one connection is seen through every other, whichever thread runs it.
    let written = abs(&ws.join("written"));
    clients[0]
        .write_file(&written, b"new".to_vec())
        .await
        .unwrap();
    for client in &clients[1..] {
        assert_eq!(client.read_file(&written).await.unwrap(), b"new");
    }
    drop(clients);
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, serving)
        .await
        .expect("the server stopped in time")
        .unwrap()
        .unwrap();
    assert_eq!(connection_thread_count(), 0, "threads outlived the server");

    let server = start().await;
    let url = server.url().to_string();
    let serving = tokio::spawn(server.run_until(std::future::pending()));
    let mut peer = RawPeer::ready(&url).await;
    serving.abort();
    let _ = serving.await;
    let next = tokio::time::timeout(WAIT, peer.ws.next())
        .await
        .expect("the connection ended in time");
    assert!(
        matches!(next, None | Some(Err(_)) | Some(Ok(WsMessage::Close(_)))),
        "{next:?}"
    );
}
