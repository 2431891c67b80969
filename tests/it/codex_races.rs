//! The current codex protocol's methods under a racing attacker: a thread keeps exchanging a
//! directory inside the root with a link to an outside tree while `fs/walk`, `fs/canonicalize`
//! and `fs/open` (both modes) run below it. Nothing outside may be read, named or changed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use rustix::fs::{CWD, RenameFlags};
use serde_json::json;

use crate::common::{CANARY, InProcessServer, assert_no_outside_content, env};
use crate::serve::RawPeer;

/// How long the race runs, and the most rounds it runs (whichever ends first).
const RACE_TIME: Duration = Duration::from_millis(2500);
const MAX_ROUNDS: usize = 5_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walks_canonical_paths_and_handles_never_reach_outside_under_a_racing_attacker() {
    let env = env(false).await;
    let victim = env.outside.join("victim");
    std::fs::create_dir_all(victim.join("deeper")).unwrap();
    std::fs::write(victim.join("f"), format!("{CANARY} f")).unwrap();
    std::fs::write(victim.join("outside_only"), format!("{CANARY} only")).unwrap();
    std::fs::write(victim.join("deeper/h"), format!("{CANARY} h")).unwrap();
    env.mkfile("v/sub/f", b"inside f");
    env.mkfile("v/sub/deeper/h", b"inside h");
    env.symlink("v/swap", &victim);
    let before = env.outside_snapshot();

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let attacker = {
        let (stop, swaps) = (Arc::clone(&stop), Arc::clone(&swaps));
        let (sub, swap) = (env.ws_host("v/sub"), env.ws_host("v/swap"));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if rustix::fs::renameat_with(CWD, &sub, CWD, &swap, RenameFlags::EXCHANGE).is_ok() {
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };

    let server = InProcessServer::start(env.fs.clone(), Default::default()).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let uri = |rel: &str| format!("file://{}", env.p(rel));
    let started = Instant::now();
    let mut rounds = 0;
    let mut read_inside = 0;
    while rounds < MAX_ROUNDS && started.elapsed() < RACE_TIME {
        rounds += 1;
        let options = json!({"maxDepth": 4, "maxDirectories": 50, "maxEntries": 200,
            "followDirectorySymlinks": true, "pruneHiddenDirectories": false});
        let reply = peer
            .request("fs/walk", json!({"path": uri("v"), "options": options}))
            .await;
        assert!(
            !reply.to_string().contains("outside_only"),
            "a walk named an outside entry: {reply}"
        );
        for rel in ["v/sub/deeper/h", "v/swap/deeper/h"] {
            let reply = peer
                .request("fs/canonicalize", json!({"path": uri(rel)}))
                .await;
            if let Some(path) = reply["result"]["path"].as_str() {
                assert!(
                    path.starts_with(&format!("file://{}/", env.ws)),
                    "{rel}: {reply}"
                );
            }
        }
        let id = format!("r{rounds}");
        let reply = peer
            .request(
                "fs/open",
                json!({"handleId": id, "path": uri("v/sub/f"), "mode": "read"}),
            )
            .await;
        if reply.get("result").is_some() {
            let block = peer
                .request(
                    "fs/readBlock",
                    json!({"handleId": id, "offset": 0, "len": 64}),
                )
                .await;
            let chunk = block["result"]["chunk"].as_str().unwrap_or_default();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(chunk)
                .unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(CANARY),
                "read outside: {block}"
            );
            read_inside += usize::from(bytes == b"inside f");
            peer.request("fs/close", json!({"handleId": id})).await;
        }
        let id = format!("w{rounds}");
        let open = json!({"handleId": id, "path": uri("v/sub/planted"), "mode": "replace"});
        if peer.request("fs/open", open).await.get("result").is_some() {
            let write = json!({"handleId": id, "offset": 0, "chunk": "cGxhbnRlZA=="});
            peer.request("fs/writeBlock", write).await;
            peer.request("fs/close", json!({"handleId": id})).await;
        }
    }
    stop.store(true, Ordering::Relaxed);
    attacker.join().unwrap();
    let swaps = swaps.load(Ordering::Relaxed);
    eprintln!("{rounds} rounds, {swaps} exchanges, {read_inside} reads of the inside file");
    assert!(
        swaps > 0 && rounds > 10,
        "the race ran: {rounds} rounds, {swaps} exchanges"
    );
    env.assert_outside_unchanged(&before);
    assert_no_outside_content(env.ws.as_path());
}
