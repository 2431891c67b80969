//! The audit log and `GET /readyz`.

use super::*;

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
    let options = RemoteOptions::default().with_token(Some(token.to_string()));
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
            // A small file is read by one range, a larger one by a range and then a stream.
            "capfs/readFileRange",
            "capfs/writeFileStream",
            "capfs/readFileRange",
            "capfs/readFileStream",
            "capfs/readFileRange",
            "capfs/readFileRange",
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
    assert_eq!(lines[4]["bytes"], 16 * 1024 + 1);
    assert_eq!(lines[5]["bytes"], big.len() as u64);
    for line in &lines[6..9] {
        assert_eq!(line["outcome"], "PermissionDenied", "{line}");
        assert_eq!(line["denied"], true, "{line}");
        assert_eq!(line["bytes"], 0);
    }
    assert_eq!(lines[9]["outcome"], "NotFound");
    assert_eq!(lines[9]["denied"], false);
    assert_eq!(lines[10]["outcome"], "PermissionDenied");
    assert_eq!(lines[10]["denied"], true);
    assert_eq!(lines[10]["code"], 401);
    // What docs/operating.md tells a reviewer to grep for.
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
    let options = RemoteOptions::default().with_token(Some("t0ken".into()));
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
