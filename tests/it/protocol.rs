//! The wire protocol, spoken by hand over a raw WebSocket against the real `capfs serve`.

use std::io::ErrorKind;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode, header};
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};

use crate::serve::{RawPeer, ServerProcess, error_of, workspace};
use capfs::{AbsolutePathBuf, ExecutorFileSystem, RemoteFileSystem, RemoteOptions};

fn path_str(p: &std::path::Path) -> String {
    p.to_str().unwrap().to_string()
}

#[tokio::test]
async fn handshake_order_is_enforced() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start(&ws).await;
    let mut peer = RawPeer::connect(&server.url).await;
    let params = json!({"path": path_str(&ws)});

    let reply = peer.request("fs/getMetadata", params.clone()).await;
    assert_eq!(
        error_of(&reply),
        (
            -32600,
            None,
            "client must call initialize before using filesystem methods"
        )
    );

    let reply = peer.request("initialize", json!({"clientName": "t"})).await;
    assert!(reply["result"].is_object(), "{reply}");

    let reply = peer.request("fs/getMetadata", params.clone()).await;
    assert_eq!(
        error_of(&reply),
        (
            -32600,
            None,
            "client must send initialized before using filesystem methods"
        )
    );

    let reply = peer.request("initialize", json!({"clientName": "t"})).await;
    assert_eq!(
        error_of(&reply),
        (
            -32600,
            None,
            "initialize may only be sent once per connection"
        )
    );

    peer.send(json!({"jsonrpc": "2.0", "method": "initialized"}))
        .await;
    let reply = peer.request("fs/getMetadata", params).await;
    assert_eq!(reply["result"]["isDirectory"], json!(true), "{reply}");
}

#[tokio::test]
async fn malformed_json_gets_an_error_and_the_connection_stays_usable() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start(&ws).await;
    let mut peer = RawPeer::ready(&server.url).await;
    for garbage in ["not-json", "[1,2,3]", "{\"id\": 1}", "{"] {
        peer.send_text(garbage.to_string()).await;
        let reply = peer.next().await.expect("an error reply");
        assert_eq!(reply["id"], json!(-1), "{garbage}: {reply}");
        let (code, _, message) = error_of(&reply);
        assert_eq!(code, -32600, "{garbage}");
        assert!(
            message.starts_with("failed to parse websocket JSON-RPC message"),
            "{message}"
        );
    }
    let reply = peer
        .request("fs/getMetadata", json!({"path": path_str(&ws)}))
        .await;
    assert_eq!(reply["result"]["isDirectory"], json!(true), "{reply}");
}

#[tokio::test]
async fn string_ids_are_echoed_and_json_in_binary_frames_is_accepted() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start(&ws).await;
    let mut peer = RawPeer::ready(&server.url).await;
    peer.send(
        json!({"id": "abc-1", "method": "fs/readDirectory", "params": {"path": path_str(&ws)}}),
    )
    .await;
    let reply = peer.reply_to(&json!("abc-1")).await;
    assert_eq!(reply["result"]["entries"], json!([]), "{reply}");

    let binary = json!({"id": 99, "method": "fs/getMetadata", "params": {"path": path_str(&ws)}});
    use futures_util::SinkExt;
    peer.ws
        .send(WsMessage::binary(binary.to_string().into_bytes()))
        .await
        .unwrap();
    let reply = peer.reply_to(&json!(99)).await;
    assert_eq!(reply["result"]["isDirectory"], json!(true), "{reply}");
}

#[tokio::test]
async fn unknown_methods_bad_params_and_bad_base64_get_their_codes() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start(&ws).await;
    let mut peer = RawPeer::ready(&server.url).await;

    let reply = peer
        .request("fs/chmod", json!({"path": path_str(&ws)}))
        .await;
    assert_eq!(error_of(&reply).0, -32601);

    for params in [
        json!({"path": "relative/path"}),
        json!({}),
        json!({"path": format!("{}/a\u{0}b", path_str(&ws))}),
        json!({"path": 42}),
    ] {
        let reply = peer.request("fs/readFile", params.clone()).await;
        let (code, kind, _) = error_of(&reply);
        assert_eq!((code, kind), (-32602, Some("InvalidInput")), "{params}");
    }

    let file = path_str(&ws.join("f.txt"));
    let reply = peer
        .request(
            "fs/writeFile",
            json!({"path": file, "dataBase64": "@@not base64@@"}),
        )
        .await;
    assert_eq!(error_of(&reply).0, -32600);
    assert_eq!(error_of(&reply).1, Some("InvalidInput"));
    assert!(!ws.join("f.txt").exists());

    let reply = peer
        .request(
            "fs/readFile",
            json!({"path": path_str(&ws.join("missing"))}),
        )
        .await;
    assert_eq!(error_of(&reply).0, -32603);
    assert_eq!(error_of(&reply).1, Some("NotFound"));

    let reply = peer
        .request("fs/readFile", json!({"path": "/etc/passwd"}))
        .await;
    assert_eq!(error_of(&reply).1, Some("PermissionDenied"));
}

#[tokio::test]
async fn every_method_round_trips_with_codex_style_params() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start(&ws).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let p = |name: &str| path_str(&ws.join(name));

    let ok = |reply: serde_json::Value| {
        assert!(reply.get("result").is_some(), "{reply}");
        reply["result"].clone()
    };
    ok(peer
        .request(
            "fs/createDirectory",
            json!({"path": p("d/e"), "recursive": null}),
        )
        .await);
    ok(peer
        .request(
            "fs/writeFile",
            json!({"path": p("d/e/f.txt"), "dataBase64": STANDARD.encode("hello")}),
        )
        .await);
    let read = ok(peer
        .request("fs/readFile", json!({"path": p("d/e/f.txt")}))
        .await);
    assert_eq!(read, json!({"dataBase64": "aGVsbG8="}));
    let meta = ok(peer
        .request("fs/getMetadata", json!({"path": p("d/e/f.txt")}))
        .await);
    assert_eq!(meta["isFile"], json!(true));
    assert_eq!(meta["isDirectory"], json!(false));
    assert_eq!(meta["isSymlink"], json!(false));
    assert_eq!(meta["size"], json!(5));
    assert!(meta["modifiedAtMs"].as_i64().unwrap() > 0);
    assert!(meta.get("createdAtMs").is_some());
    ok(peer
        .request(
            "fs/copy",
            json!({"sourcePath": p("d"), "destinationPath": p("c"), "recursive": true}),
        )
        .await);
    let reply = peer
        .request(
            "fs/copy",
            json!({"sourcePath": p("d"), "destinationPath": p("c2")}),
        )
        .await;
    assert_eq!(
        error_of(&reply),
        (
            -32600,
            Some("InvalidInput"),
            "fs/copy requires recursive: true when sourcePath is a directory"
        )
    );
    ok(peer
        .request(
            "fs/rename",
            json!({"sourcePath": p("c"), "destinationPath": p("r")}),
        )
        .await);
    let reply = peer
        .request(
            "fs/rename",
            json!({"sourcePath": p("d"), "destinationPath": p("r"), "overwrite": false}),
        )
        .await;
    assert_eq!(error_of(&reply).1, Some("AlreadyExists"));
    let listing = ok(peer
        .request("fs/readDirectory", json!({"path": p("r/e")}))
        .await);
    assert_eq!(
        listing,
        json!({"entries": [{"fileName": "f.txt", "isDirectory": false, "isFile": true, "isSymlink": false}]})
    );
    let reply = peer
        .request("fs/remove", json!({"path": p("r"), "recursive": false}))
        .await;
    assert_eq!(error_of(&reply).1, Some("DirectoryNotEmpty"));
    ok(peer.request("fs/remove", json!({"path": p("r")})).await);
    ok(peer.request("fs/remove", json!({"path": p("r")})).await);
    let reply = peer
        .request("fs/remove", json!({"path": p("r"), "force": false}))
        .await;
    assert_eq!(error_of(&reply).1, Some("NotFound"));
    assert!(!ws.join("r").exists());
    assert_eq!(std::fs::read(ws.join("d/e/f.txt")).unwrap(), b"hello");
}

async fn handshake_status(url: &str, headers: &[(header::HeaderName, &str)]) -> Option<StatusCode> {
    let mut request = url.into_client_request().unwrap();
    for (name, value) in headers {
        request
            .headers_mut()
            .insert(name.clone(), HeaderValue::from_str(value).unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok(_) => None,
        Err(WsError::Http(response)) => Some(response.status()),
        Err(e) => panic!("unexpected handshake failure: {e}"),
    }
}

#[tokio::test]
async fn browser_origins_are_refused() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start(&ws).await;
    let status = handshake_status(&server.url, &[(header::ORIGIN, "https://evil.example")]).await;
    assert_eq!(status, Some(StatusCode::FORBIDDEN));
    assert_eq!(handshake_status(&server.url, &[]).await, None);
}

#[tokio::test]
async fn a_configured_token_is_required() {
    let (dir, ws) = workspace();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let server = ServerProcess::start_with(
        &[
            "--root".as_ref(),
            ws.as_os_str(),
            "--token-file".as_ref(),
            token_file.as_os_str(),
        ],
        &[],
    )
    .await;
    let auth = header::AUTHORIZATION;
    assert_eq!(
        handshake_status(&server.url, &[]).await,
        Some(StatusCode::UNAUTHORIZED)
    );
    assert_eq!(
        handshake_status(&server.url, &[(auth.clone(), "Bearer wrong")]).await,
        Some(StatusCode::UNAUTHORIZED)
    );
    assert_eq!(
        handshake_status(&server.url, &[(auth.clone(), "s3cret-token")]).await,
        Some(StatusCode::UNAUTHORIZED)
    );
    assert_eq!(
        handshake_status(&server.url, &[(auth, "Bearer s3cret-token")]).await,
        None
    );

    let refused = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::PermissionDenied, "{refused}");
    let options = RemoteOptions {
        token: Some("s3cret-token".into()),
        ..RemoteOptions::default()
    };
    let fs = RemoteFileSystem::connect(&server.url, options)
        .await
        .unwrap();
    let root = AbsolutePathBuf::new(&ws).unwrap();
    assert!(fs.get_metadata(&root).await.unwrap().is_directory);
}

#[tokio::test]
async fn the_token_may_come_from_the_environment() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start_with(
        &["--root".as_ref(), ws.as_os_str()],
        &[("CAPFS_TOKEN", "envtoken")],
    )
    .await;
    assert_eq!(
        handshake_status(&server.url, &[]).await,
        Some(StatusCode::UNAUTHORIZED)
    );
    assert_eq!(
        handshake_status(&server.url, &[(header::AUTHORIZATION, "Bearer envtoken")]).await,
        None
    );
}

#[test]
fn a_non_loopback_address_without_a_token_is_refused_at_start() {
    let (_dir, ws) = workspace();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_capfs"))
        .args(["serve", "--listen", "ws://0.0.0.0:0", "--root"])
        .arg(&ws)
        .env_remove("CAPFS_TOKEN")
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        output.stdout.is_empty(),
        "printed a URL: {:?}",
        output.stdout
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("capfs: cannot listen on ws://0.0.0.0:0: refusing"),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_oversized_message_is_refused_and_other_connections_carry_on() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start_with(
        &[
            "--root".as_ref(),
            ws.as_os_str(),
            "--max-message-bytes".as_ref(),
            "4096".as_ref(),
        ],
        &[],
    )
    .await;
    let mut bystander = RawPeer::ready(&server.url).await;
    let mut big = RawPeer::ready(&server.url).await;
    let payload = STANDARD.encode(vec![7u8; 8192]);
    let file = path_str(&ws.join("big"));
    big.send(
        json!({"id": 1, "method": "fs/writeFile", "params": {"path": file, "dataBase64": payload}}),
    )
    .await;
    use futures_util::StreamExt;
    let closed = tokio::time::timeout(crate::serve::WAIT, async {
        loop {
            match big.ws.next().await {
                Some(Ok(WsMessage::Close(frame))) => return frame,
                Some(Ok(_)) => continue,
                _ => return None,
            }
        }
    })
    .await
    .expect("the server closed the connection in time");
    let frame = closed.expect("a close frame with a reason");
    assert_eq!(u16::from(frame.code), 1009);
    assert!(frame.reason.contains("message too big"), "{}", frame.reason);
    assert!(!ws.join("big").exists());

    let reply = bystander
        .request("fs/getMetadata", json!({"path": path_str(&ws)}))
        .await;
    assert_eq!(reply["result"]["isDirectory"], json!(true));
}

#[tokio::test]
async fn connections_beyond_the_limit_get_a_clear_refusal() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start_with(
        &[
            "--root".as_ref(),
            ws.as_os_str(),
            "--max-connections".as_ref(),
            "2".as_ref(),
        ],
        &[],
    )
    .await;
    let mut first = RawPeer::ready(&server.url).await;
    let _second = RawPeer::ready(&server.url).await;
    assert_eq!(
        handshake_status(&server.url, &[]).await,
        Some(StatusCode::SERVICE_UNAVAILABLE)
    );
    let refused = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused, "{refused}");
    let reply = first
        .request("fs/getMetadata", json!({"path": path_str(&ws)}))
        .await;
    assert_eq!(reply["result"]["isDirectory"], json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_clients_write_and_read_concurrently() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start(&ws).await;
    let root = AbsolutePathBuf::new(&ws).unwrap();
    let mut tasks = Vec::new();
    for client in 0..16 {
        let url = server.url.clone();
        let root = root.clone();
        tasks.push(tokio::spawn(async move {
            let fs = RemoteFileSystem::connect(&url, RemoteOptions::default())
                .await
                .unwrap();
            for i in 0..100 {
                let path = root.join(format!("c{client}-{i}.txt")).unwrap();
                let contents = format!("client {client} write {i}")
                    .repeat(i + 1)
                    .into_bytes();
                fs.write_file(&path, contents.clone()).await.unwrap();
                assert_eq!(fs.read_file(&path).await.unwrap(), contents);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(std::fs::read_dir(&ws).unwrap().count(), 1600);
}

/// Sends a 40 MiB write (id 1) and then a metadata request (id 2) on one connection; the
/// server reads them in that order.
async fn send_big_write_then_metadata(peer: &mut RawPeer, ws: &std::path::Path) {
    let payload = STANDARD.encode(vec![1u8; 40 << 20]);
    let file = path_str(&ws.join("big.bin"));
    peer.send(
        json!({"id": 1, "method": "fs/writeFile", "params": {"path": file, "dataBase64": payload}}),
    )
    .await;
    peer.send(json!({"id": 2, "method": "fs/getMetadata", "params": {"path": path_str(ws)}}))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_request_does_not_hold_up_a_fast_one() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start(&ws).await;
    let mut peer = RawPeer::ready(&server.url).await;
    send_big_write_then_metadata(&mut peer, &ws).await;
    let first = peer.next().await.unwrap();
    assert_eq!(
        first["id"],
        json!(2),
        "the quick request was answered first: {first}"
    );
    let second = peer.next().await.unwrap();
    assert_eq!(second["id"], json!(1));
    assert_eq!(second["result"], json!({}));
    assert_eq!(
        std::fs::metadata(ws.join("big.bin")).unwrap().len(),
        40 << 20
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_fails_pending_and_later_calls_promptly() {
    let (_dir, ws) = workspace();
    let mut server = ServerProcess::start(&ws).await;
    let fs = Arc::new(
        RemoteFileSystem::connect(&server.url, RemoteOptions::default())
            .await
            .unwrap(),
    );
    let root = AbsolutePathBuf::new(&ws).unwrap();
    let mut calls = Vec::new();
    for i in 0..32 {
        let fs = Arc::clone(&fs);
        let path = root.join(format!("f{i}")).unwrap();
        calls.push(tokio::spawn(async move {
            loop {
                if let Err(e) = fs.write_file(&path, vec![0u8; 1 << 20]).await {
                    return e;
                }
            }
        }));
    }
    // Let the writers get going, proven by a file appearing.
    while std::fs::read_dir(&ws).unwrap().next().is_none() {
        tokio::task::yield_now().await;
    }
    server.child.start_kill().unwrap();
    let killed = Instant::now();
    for call in calls {
        let err = tokio::time::timeout(Duration::from_secs(5), call)
            .await
            .expect("a pending call failed instead of hanging")
            .unwrap();
        assert_eq!(err.kind(), ErrorKind::BrokenPipe, "{err}");
    }
    assert!(killed.elapsed() < Duration::from_secs(5));
    let err = fs.get_metadata(&root).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BrokenPipe);
    assert!(fs.is_closed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_in_flight_requests_and_exits_zero() {
    let (_dir, ws) = workspace();
    let mut server = ServerProcess::start(&ws).await;
    let mut peer = RawPeer::ready(&server.url).await;
    send_big_write_then_metadata(&mut peer, &ws).await;
    // The metadata reply proves the write before it was read and is running (or done).
    let mut replies = vec![peer.next().await.unwrap()];
    server.signal("TERM");
    while let Some(reply) = peer.next().await {
        replies.push(reply);
    }
    let write = replies
        .iter()
        .find(|r| r["id"] == json!(1))
        .expect("the write was answered");
    assert_eq!(write["result"], json!({}), "{write}");
    let status = tokio::time::timeout(crate::serve::WAIT, server.child.wait())
        .await
        .expect("the server exited in time")
        .unwrap();
    assert!(status.success(), "{status}");
    assert_eq!(
        std::fs::metadata(ws.join("big.bin")).unwrap().len(),
        40 << 20
    );
}
