//! The drain at SIGTERM: `/readyz` unready at once, new sessions refused, a streamed write in
//! flight finished whole, connections closed with 1001; a second signal, or a peer that never
//! reads, cut at once or at the deadline, leaving no partial file.

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::{Fleet, get, text, workspace};
use crate::serve::{RawPeer, WAIT};
use capfs_wire::protocol::data_frame_header;

async fn data_frame(peer: &mut RawPeer, stream_id: u64, payload: &[u8]) {
    let mut frame = data_frame_header(stream_id).to_vec();
    frame.extend_from_slice(payload);
    peer.ws
        .send(WsMessage::Binary(frame.into()))
        .await
        .expect("send a data frame");
}

/// Starts a streamed write of 10 bytes to `path` as request 1, stream 1, and sends its first
/// five; returns once the server has read them (it answered a request sent after them).
async fn half_a_put(peer: &mut RawPeer, path: &str, root: &str) {
    let params = json!({"path": path, "streamId": 1, "size": 10});
    peer.send(json!({"id": 1, "method": "capfs/writeFileStream", "params": params}))
        .await;
    data_frame(peer, 1, b"12345").await;
    let reply = peer.request("fs/getMetadata", json!({"path": root})).await;
    assert!(reply.get("result").is_some(), "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_finishes_a_streamed_write_and_closes_with_1001() {
    let (_dir, ws) = workspace();
    let mut server = Fleet::start(&["--root", &text(&ws)], &[], false).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let target = ws.join("put");
    half_a_put(&mut peer, &text(&target), &text(&ws)).await;

    server.signal("TERM");
    server.logged("shutting down: draining").await;
    let address = server.address().to_string();
    let ready = get(&address, "/readyz", "").await;
    assert!(ready.starts_with("HTTP/1.1 503"), "{ready}");
    assert!(ready.ends_with("\r\n\r\nnot ready\n"), "{ready}");
    let health = get(&address, "/healthz", "").await;
    assert!(health.starts_with("HTTP/1.1 200 OK\r\n"), "{health}");
    let refused = tokio_tungstenite::connect_async(&server.url)
        .await
        .expect_err("no session starts during the drain");
    assert!(refused.to_string().contains("503"), "{refused}");

    // The write in flight goes on to its end, whole.
    data_frame(&mut peer, 1, b"67890").await;
    let reply = peer.reply_to(&json!(1)).await;
    assert_eq!(reply["result"]["size"], 10, "{reply}");
    assert_eq!(std::fs::read(&target).unwrap(), b"1234567890");
    // Then the connection is closed, saying why.
    let close = loop {
        let frame = tokio::time::timeout(WAIT, peer.ws.next())
            .await
            .expect("closed in time")
            .expect("a close frame before the end")
            .expect("a frame");
        if let WsMessage::Close(close) = frame {
            break close.expect("a close frame with a code");
        }
    };
    assert_eq!(close.code, CloseCode::Away);
    assert_eq!(close.reason.as_str(), "server shutting down");
    assert!(server.exited().await.success());
    assert_eq!(crate::cli::names_in(&ws), ["put"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_cuts_the_drain_and_leaves_no_partial_file() {
    let (_dir, ws) = workspace();
    // Without the second signal, this drain would wait for the write for ten minutes.
    let args = [
        "--root",
        &text(&ws),
        "--shutdown-timeout",
        "600s",
        "--stream-idle-timeout",
        "600s",
    ];
    let mut server = Fleet::start(&args, &[], false).await;
    let mut peer = RawPeer::ready(&server.url).await;
    std::fs::write(ws.join("put"), b"old").unwrap();
    half_a_put(&mut peer, &text(&ws.join("put")), &text(&ws)).await;
    server.signal("TERM");
    server.logged("shutting down: draining").await;
    server.signal("TERM");
    let status = server.exited().await;
    assert!(!status.success(), "{status}");
    assert_eq!(std::fs::read(ws.join("put")).unwrap(), b"old");
    assert_eq!(crate::cli::names_in(&ws), ["put"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_reads_is_cut_at_the_deadline() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.join("big"), vec![7u8; 32 << 20]).unwrap();
    let args = [
        "--root",
        &text(&ws),
        "--shutdown-timeout",
        "1s",
        "--stream-idle-timeout",
        "600s",
    ];
    let mut server = Fleet::start(&args, &[], false).await;
    let mut peer = RawPeer::ready(&server.url).await;
    // A reply of some 43 MiB, far more than the sockets hold: it waits for a peer that reads
    // nothing from here on.
    let params = json!({"path": text(&ws.join("big"))});
    peer.send(json!({"id": 10, "method": "fs/readFile", "params": params}))
        .await;
    // The read loop answers an unknown method itself, at once, after it has read the request
    // before it: once this answer is here, the read is running.
    let unknown = peer.request("fs/unknown", json!({})).await;
    assert!(unknown.get("error").is_some(), "{unknown}");
    server.signal("TERM");
    server.logged("shutting down: draining").await;
    let cut = server.logged("shutdown timeout").await;
    assert!(cut.contains("cut 1 connection"), "{cut}");
    let status = server.exited().await;
    assert_eq!(status.code(), Some(1), "{status}");
    drop(peer);
}
