//! The server's budget for outgoing bytes (`--max-outgoing-bytes`, and a connection's share,
//! `--max-outgoing-bytes-per-connection`): a reply no share can hold fails at once, naming the
//! limit and the streamed method; streamed reads and small replies go on under the same share;
//! the flags are checked at start-up; a peer that reads nothing for twice the idle timeout is
//! closed, so that its replies give their bytes back. What the budget bounds under a load of
//! peers that never read is asserted by the load test (`load.rs`).

use std::process::Stdio;

use capfs::{AbsolutePathBuf, Access, ExecutorFileSystem};
use capfs_wire::server::ServerConfig;
use capfs_wire::{RemoteFileSystem, RemoteOptions};
use serde_json::json;

use crate::common::InProcessServer;
use crate::serve::{RawPeer, ServerProcess, WAIT, error_of, workspace};

#[tokio::test]
async fn a_reply_larger_than_a_connection_share_fails_naming_the_limit() {
    let (_dir, ws) = workspace();
    let big = ws.join("big");
    let contents: Vec<u8> = (0..(3u32 << 20)).map(|i| (i % 251) as u8).collect();
    std::fs::write(&big, &contents).unwrap();
    std::fs::write(ws.join("small"), b"small").unwrap();
    let config = ServerConfig::default().with_max_outgoing_bytes_per_connection(4 << 20);
    let server = InProcessServer::serving_roots(&[(&ws, Access::ReadWrite)], config).await;
    let mut peer = RawPeer::ready(&server.url).await;
    // 3 MiB of contents and their 4 MiB of text: more than a share of 4 MiB.
    let reply = peer.request("fs/readFile", json!({"path": big})).await;
    let (_, kind, message) = error_of(&reply);
    assert_eq!(kind, Some("InvalidInput"), "{reply}");
    assert!(
        message.contains("--max-outgoing-bytes-per-connection")
            && message.contains("4194304")
            && message.contains("capfs/readFileStream"),
        "{message}"
    );
    let small = peer
        .request("fs/readFile", json!({"path": ws.join("small")}))
        .await;
    assert_eq!(small["result"]["dataBase64"], "c21hbGw=", "{small}");
    // The streamed read of the same file goes through the same share, frame by frame.
    let fs = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap();
    let mut read = Vec::new();
    let path = AbsolutePathBuf::new(&big).unwrap();
    fs.read_file_to(&path, &mut read, &mut |_| {})
        .await
        .unwrap();
    assert!(read == contents, "the streamed contents differ");
    drop(fs);
    server.stop().await;
}

#[tokio::test]
async fn outgoing_budgets_are_checked_at_start_up() {
    let (_dir, ws) = workspace();
    for (flags, expected) in [
        (
            ["--max-outgoing-bytes", "0"],
            "--max-outgoing-bytes 0: must be from 1048576",
        ),
        (
            ["--max-outgoing-bytes-per-connection", "1G"],
            "--max-outgoing-bytes-per-connection 1073741824: must be from 1048576 to 536870912",
        ),
    ] {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_capfs"))
            .arg("serve")
            .arg("--root")
            .arg(&ws)
            .args(flags)
            .env_remove("CAPFS_TOKEN")
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        assert!(!output.status.success(), "{flags:?} started");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{flags:?}: {stderr}");
    }
}

/// A peer that sends 64 whole-file reads of 4 MiB and reads nothing: once the server's writer
/// has waited on its socket for twice the idle timeout, the server says so and closes the
/// connection, dropping what was queued; the peer then finds fewer replies than it asked for
/// and the end of the stream. Another client's calls work throughout.
#[tokio::test]
async fn a_peer_that_reads_nothing_is_closed_after_the_idle_timeout() {
    let (_dir, ws) = workspace();
    let big = ws.join("big");
    std::fs::write(&big, vec![7u8; 4 << 20]).unwrap();
    let args = [
        "--root".as_ref(),
        ws.as_os_str(),
        "--stream-idle-timeout".as_ref(),
        "500ms".as_ref(),
    ];
    let (server, mut stderr) = ServerProcess::start_with_stderr(&args).await;
    let mut peer = RawPeer::ready(&server.url).await;
    for id in 1..=64 {
        peer.send(json!({"id": id, "method": "fs/readFile", "params": {"path": big}}))
            .await;
    }
    let warned = tokio::time::timeout(WAIT, async {
        while let Some(line) = stderr.recv().await {
            if line.contains("took nothing queued for it") {
                return true;
            }
        }
        false
    });
    assert!(
        warned.await.unwrap_or(false),
        "the server never closed the peer"
    );
    let fs = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap();
    let path = AbsolutePathBuf::new(&big).unwrap();
    assert_eq!(fs.read_file(&path).await.unwrap().len(), 4 << 20);
    let mut replies = 0;
    while let Some(message) = peer.next().await {
        if message.get("result").is_some() {
            replies += 1;
        }
    }
    assert!(replies < 64, "every reply came: the connection was not cut");
    drop(fs);
    server.stop().await;
}
