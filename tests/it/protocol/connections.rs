//! Message and connection limits, concurrent clients, slow requests, and a server that is
//! killed or asked to stop.

use super::*;

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
