//! Processes at the drain: each is sent SIGTERM first, and one that does not end within
//! `--process-grace` is killed; the server still exits 0 within its shutdown timeout.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::{Fleet, get, text};
use crate::codex_protocol::uri;
use crate::process_serve::tree;
use crate::process_wire::Peer;

fn start(ws: &std::path::Path, id: &str, script: &str) -> Value {
    json!({
        "processId": id, "argv": ["sh", "-c", script], "cwd": uri(ws.display()), "env": {},
        "envPolicy": {"inherit": "all", "ignoreDefaultExcludes": false, "exclude": [],
            "set": {}, "includeOnly": []},
        "tty": false, "pipeStdin": false, "arg0": null,
    })
}

/// Waits until process `id` has written `up` on its stdout.
async fn until_up(peer: &mut Peer, id: &str) {
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("up") {
        let message = peer
            .next()
            .await
            .expect("output before the connection closed");
        if message["method"] == "process/output" && message["params"]["processId"] == id {
            let chunk = message["params"]["chunk"].as_str().unwrap();
            seen.extend(STANDARD.decode(chunk).unwrap());
        }
    }
}

/// `capfs serve --exec` on `ws` as uid 65534, with the processes' `grace` and the drain's
/// `deadline`.
async fn serve_processes(ws: &std::path::Path, grace: &str, deadline: &str) -> Fleet {
    let args = [
        "--root",
        &text(ws),
        "--exec",
        "--user",
        "65534:65534",
        "--process-grace",
        grace,
        "--shutdown-timeout",
        deadline,
    ];
    Fleet::start(&args, &[], false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_get_sigterm_then_sigkill_and_the_server_exits_0() {
    let (_dir, ws, _outside) = tree();
    let mut server = serve_processes(&ws, "1s", "60s").await;
    let mut peer = Peer::ready(&server.url).await;
    // One ends on SIGTERM, saying so in a file; one ignores it and is killed at the grace.
    let polite = "trap 'echo term > termed; exit 0' TERM; echo up; \
                  while :; do sleep 1 & wait $!; done";
    let stubborn = "trap '' TERM; echo up; while :; do sleep 1; done";
    for (id, script) in [("polite", polite), ("stubborn", stubborn)] {
        let reply = peer.request("process/start", start(&ws, id, script)).await;
        assert!(reply.get("result").is_some(), "{reply}");
        until_up(&mut peer, id).await;
    }
    let metrics = get(server.address(), "/metrics", "").await;
    for line in [
        "capfs_processes_running 2",
        "capfs_process_starts_total{method=\"process/start\",outcome=\"ok\"} 2",
        "capfs_process_start_seconds_count 2",
    ] {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }

    server.signal("TERM");
    server.logged("shutting down: draining").await;
    server
        .logged("processes still running after 1s: killed")
        .await;
    let status = server.exited().await;
    assert!(status.success(), "{status}");
    assert_eq!(std::fs::read(ws.join("termed")).unwrap(), b"term\n");
    drop(peer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_kills_the_processes_before_the_server_exits() {
    let (_dir, ws, _outside) = tree();
    // Without the second signal, the process would have ten minutes before its SIGKILL.
    let mut server = serve_processes(&ws, "600s", "600s").await;
    let mut peer = Peer::ready(&server.url).await;
    // The process and every child of it hold a lock on `held` while they live.
    let stubborn = "exec 9>held; flock 9; trap '' TERM; echo up; while :; do sleep 1; done";
    let reply = peer
        .request("process/start", start(&ws, "stubborn", stubborn))
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
    until_up(&mut peer, "stubborn").await;
    server.signal("TERM");
    server.logged("asking processes to end (SIGTERM)").await;
    server.signal("TERM");
    let status = server.exited().await;
    assert!(!status.success(), "{status}");
    // The lock comes free once the last of them is gone.
    let held = std::fs::File::open(ws.join("held")).unwrap();
    let freed = tokio::task::spawn_blocking(move || {
        rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive)
    });
    tokio::time::timeout(crate::serve::WAIT, freed)
        .await
        .expect("every process ended")
        .unwrap()
        .unwrap();
    drop(peer);
}
