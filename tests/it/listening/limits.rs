//! Descriptor exhaustion, the shutdown deadline and the limits checked at start-up.

use super::*;

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
