//! Walks that cannot be silently incomplete: a directory the walk cannot open is reported, a
//! walk holds a bounded number of descriptors whatever the depth (so that many walks of deep
//! trees leave descriptors for other requests), names that are not UTF-8 are counted, and a
//! walk or listing reply is cut to the message limit and says so.

use std::path::Path;
use std::process::Stdio;

use capfs::{AbsolutePathBuf, Access, ExecutorFileSystem, WalkOptions};
use capfs_wire::server::ServerConfig;
use capfs_wire::{RemoteFileSystem, RemoteOptions};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::InProcessServer;
use crate::serve::{RawPeer, ServerProcess, WAIT, workspace};

/// A chain of `depth` directories below `top`: `top/d/d/…/d`, with a file at the bottom.
fn chain(top: &Path, depth: usize) -> std::path::PathBuf {
    let mut bottom = top.to_path_buf();
    for _ in 0..depth {
        bottom.push("d");
    }
    std::fs::create_dir_all(&bottom).unwrap();
    std::fs::write(bottom.join("leaf"), b"").unwrap();
    bottom
}

fn deep() -> WalkOptions {
    WalkOptions::default().with_max_depth(capfs::WALK_DEPTH_LIMIT)
}

fn abs(path: &Path) -> AbsolutePathBuf {
    AbsolutePathBuf::new(path).unwrap()
}

/// `capfs serve` on `ws` under `prlimit --nofile=N:N`.
async fn serve_with_descriptors(ws: &Path, nofile: u64) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new("prlimit")
        .arg(format!("--nofile={nofile}:{nofile}"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_capfs"))
        .args(["serve", "--root"])
        .arg(ws)
        .env_remove("CAPFS_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn prlimit capfs serve (util-linux's prlimit)");
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(WAIT, stdout.next_line())
        .await
        .expect("the URL in time")
        .unwrap()
        .expect("a URL line");
    tokio::spawn(async move { while let Ok(Some(_)) = stdout.next_line().await {} });
    (child, url)
}

/// Ends the child by its id and waits for it.
async fn end(mut child: tokio::process::Child) {
    child.start_kill().unwrap();
    let _ = child.wait().await;
}

/// Descriptors the process `pid` has open.
fn open_descriptors(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count() as u64
}

/// Under an `RLIMIT_NOFILE` of 48, a walk of a 200-level chain holds a few descriptors, not one
/// per level: it lists every entry and says it is complete.
#[tokio::test]
async fn a_deep_walk_holds_a_few_descriptors_whatever_the_depth() {
    let (_dir, ws) = workspace();
    chain(&ws.join("t"), 200);
    let (child, url) = serve_with_descriptors(&ws, 48).await;
    let fs = RemoteFileSystem::connect(&url, RemoteOptions::default())
        .await
        .unwrap();
    let walk = fs.walk(&abs(&ws.join("t")), &deep()).await.unwrap();
    assert_eq!(walk.entries.len(), 201, "errors {:?}", walk.errors);
    assert!(walk.is_complete(), "{:?}", walk.errors);
    drop(fs);
    end(child).await;
}

/// With its descriptors all but used up, a walk that cannot open a directory reports it (and is
/// not complete), instead of leaving it out in silence; once descriptors are back, the same walk
/// is complete.
#[tokio::test]
async fn a_directory_the_walk_cannot_open_is_reported() {
    let (_dir, ws) = workspace();
    chain(&ws.join("t"), 20);
    let server = ServerProcess::start(&ws).await;
    let pid = server.pid();
    let fs = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap();
    let start = abs(&ws.join("t"));
    assert!(fs.walk(&start, &deep()).await.unwrap().is_complete());
    let limit = |soft: u64| {
        let status = std::process::Command::new("prlimit")
            .args(["--pid", &pid.to_string(), &format!("--nofile={soft}:20000")])
            .status()
            .expect("run prlimit");
        assert!(status.success());
    };
    // The server's own descriptors come and go (its runtime, the connection), so the exact room
    // that lets the start directory open but not a child is found by trying: with too little,
    // the whole walk fails; the first limit at which it answers must leave a child unopened
    // (a chain of 20 needs more than one descriptor beyond the start's), and say so.
    let mut reported = None;
    for slack in 1..=8 {
        limit(open_descriptors(pid) + slack);
        let walk = fs.walk(&start, &deep()).await;
        limit(20000);
        match walk {
            Err(error) => assert!(error.to_string().contains("Too many open files"), "{error}"),
            Ok(walk) => {
                reported = Some(walk);
                break;
            }
        }
    }
    let walk = reported.expect("no limit let the walk open its start directory");
    assert!(!walk.is_complete(), "{walk:?}");
    assert!(walk.entries.len() < 21, "{} entries", walk.entries.len());
    let error = walk.errors.first().expect("the directory not opened");
    assert!(
        error.message.contains("Too many open files"),
        "{}",
        error.message
    );
    assert!(
        error.path == "d" || error.path.starts_with("d/d"),
        "{error:?}"
    );
    let walk = fs.walk(&start, &deep()).await.unwrap();
    assert_eq!(walk.entries.len(), 21);
    assert!(walk.is_complete());
    drop(fs);
    server.stop().await;
}

/// 32 walks of a 255-level chain on two connections, under an `RLIMIT_NOFILE` of 256: the
/// walks do not take the server's descriptors (one per level would need 8,000), so another
/// client's writes succeed meanwhile, and every walk comes back complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_deep_walks_leave_descriptors_for_other_requests() {
    let (_dir, ws) = workspace();
    chain(&ws.join("t"), 255);
    let (child, url) = serve_with_descriptors(&ws, 256).await;
    let start = abs(&ws.join("t"));
    let mut walks = tokio::task::JoinSet::new();
    for _ in 0..2 {
        let fs = std::sync::Arc::new(
            RemoteFileSystem::connect(&url, RemoteOptions::default())
                .await
                .unwrap(),
        );
        for _ in 0..16 {
            let (fs, start) = (std::sync::Arc::clone(&fs), start.clone());
            walks.spawn(async move { fs.walk(&start, &deep()).await });
        }
    }
    let writer = RemoteFileSystem::connect(&url, RemoteOptions::default())
        .await
        .unwrap();
    for n in 0..20 {
        let file = abs(&ws.join(format!("w{n}")));
        writer
            .write_file(&file, vec![n as u8; 1024])
            .await
            .unwrap_or_else(|e| panic!("write {n} beside the walks: {e}"));
    }
    while let Some(walk) = walks.join_next().await {
        let walk = walk.unwrap().unwrap();
        assert!(walk.is_complete(), "{:?}", walk.errors.first());
        assert_eq!(walk.entries.len(), 256);
    }
    drop(writer);
    end(child).await;
}

/// A `capfs/walk` and a `fs/readDirectory` whose replies would pass `--max-message-bytes` are
/// cut to it, and say so; without the cut their replies are as before.
#[tokio::test]
async fn walk_and_listing_replies_are_cut_to_the_message_limit() {
    let (_dir, ws) = workspace();
    let many = ws.join("many");
    std::fs::create_dir(&many).unwrap();
    for n in 0..3000 {
        std::fs::write(many.join(format!("{n:0>100}")), b"").unwrap();
    }
    let config = ServerConfig::default().with_max_message_bytes(64 * 1024);
    let server = InProcessServer::serving_roots(&[(&ws, Access::ReadWrite)], config).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let walk = peer
        .request("capfs/walk", json!({"path": many, "maxEntries": u64::MAX}))
        .await;
    let result = &walk["result"];
    let entries = result["entries"].as_array().expect("entries").len();
    assert!(entries > 100 && entries < 3000, "{entries} entries");
    assert_eq!(result["truncated"], true);
    assert!(walk.to_string().len() <= 64 << 10);
    let listing = peer
        .request("fs/readDirectory", json!({"path": many}))
        .await;
    let result = &listing["result"];
    let entries = result["entries"].as_array().expect("entries").len();
    assert!(entries > 100 && entries < 3000, "{entries} entries");
    assert_eq!(result["truncated"], true);
    assert!(listing.to_string().len() <= 64 << 10);
    // A listing that fits has no `truncated` member at all: the codex shape, unchanged.
    std::fs::write(ws.join("one"), b"").unwrap();
    let small = peer.request("fs/readDirectory", json!({"path": ws})).await;
    let members: Vec<&String> = small["result"].as_object().unwrap().keys().collect();
    assert_eq!(members, ["entries"], "{small}");
    assert_eq!(small["result"]["entries"].as_array().unwrap().len(), 2);
    let walk = peer
        .request("capfs/walk", json!({"path": ws, "maxDepth": 1}))
        .await;
    let members: Vec<&String> = walk["result"].as_object().unwrap().keys().collect();
    assert_eq!(members, ["entries", "truncated"], "{walk}");
    // The library's client never passes a cut listing off as whole.
    let remote =
        capfs_wire::RemoteFileSystem::connect(&server.url, capfs_wire::RemoteOptions::default())
            .await
            .expect("connect");
    let many = capfs::AbsolutePathBuf::new(&many).unwrap();
    let error = capfs::ExecutorFileSystem::read_directory(&remote, &many)
        .await
        .expect_err("a cut listing is an error");
    assert!(error.to_string().contains("message limit"), "{error}");
    server.stop().await;
}
