//! Processes and their sessions on the wire: kept across a resume within the TTL, ended once
//! it passes; a client that never reads stalls its process, not the server; the request's
//! sandbox policy narrows a process's roots; the environment never carries the server's; the
//! audit log records every start and end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::codex_protocol::{ready_with_session, resume_when_left, uri};
use crate::common::{TestEnv, env};
use crate::process_double::{ProcessServer, TestProcesses, alive};
use crate::process_wire::{Peer, until_closed};
use crate::serve::{RawPeer, error_of};
use capfs::Access;
use capfs::audit::AuditLog;
use capfs_wire::server::ServerConfig;

fn start(env: &TestEnv, id: &str, argv: &[&str]) -> Value {
    json!({
        "processId": id, "argv": argv, "cwd": uri(&env.ws), "env": {"PATH": "/usr/bin:/bin"},
        "tty": false, "pipeStdin": false, "arg0": null,
    })
}

async fn serve(env: &TestEnv, config: ServerConfig) -> (ProcessServer, Arc<TestProcesses>) {
    let processes = Arc::new(TestProcesses::default());
    let server = ProcessServer::start(env.fs.clone(), Arc::clone(&processes), config).await;
    (server, processes)
}

/// Polls `done` until it holds, for at most 20 s.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: never happened");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_process_outlives_its_connection_and_talks_to_the_resumed_one() {
    let env = env(false).await;
    let (server, processes) = serve(&env, ServerConfig::default()).await;
    let (peer, session) = ready_with_session(&server.url).await;
    let mut peer = Peer::new(peer);
    let mut params = start(&env, "r", &["sh", "-c", "read x; echo got:$x"]);
    params["pipeStdin"] = json!(true);
    let reply = peer.request("process/start", params).await;
    assert!(reply.get("result").is_some(), "{reply}");
    drop(peer);
    let (again, _) = resume_when_left(&server.url, &session).await;
    let mut again = Peer::new(again);
    let pid = processes.pids.lock().unwrap()[0];
    assert!(alive(pid), "the process was ended with its connection");
    let write = json!({"processId": "r", "chunk": STANDARD.encode(b"back\n"), "writeId": "w"});
    let reply = again.request("process/write", write).await;
    assert_eq!(reply["result"]["status"], "accepted", "{reply}");
    let told = until_closed(&mut again, "r").await;
    assert_eq!(told.stdout, b"got:back\n");
    assert_eq!(told.exit_code, Some(0));
}

#[tokio::test]
async fn a_process_whose_session_is_not_resumed_within_the_ttl_is_ended() {
    let env = env(false).await;
    let config = ServerConfig::default().with_session_ttl(Duration::from_millis(200));
    let (server, processes) = serve(&env, config).await;
    let (peer, session) = ready_with_session(&server.url).await;
    let mut peer = Peer::new(peer);
    let reply = peer
        .request("process/start", start(&env, "s", &["sleep", "100"]))
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
    let pid = processes.pids.lock().unwrap()[0];
    drop(peer);
    eventually("the process ended after the TTL", || !alive(pid)).await;
    let mut late = RawPeer::connect(&server.url).await;
    let resume = json!({"clientName": "c", "resumeSessionId": session});
    let reply = late.request("initialize", resume).await;
    assert!(error_of(&reply).2.contains("unknown session id"), "{reply}");
}

#[tokio::test]
async fn processes_end_with_their_server() {
    let env = env(false).await;
    let (server, processes) = serve(&env, ServerConfig::default()).await;
    let mut peer = Peer::ready(&server.url).await;
    peer.request("process/start", start(&env, "s", &["sleep", "100"]))
        .await;
    let pid = processes.pids.lock().unwrap()[0];
    drop(peer);
    server.stop().await;
    eventually("the process ended with the server", || !alive(pid)).await;
}

/// `(field, value)` of `/proc/pid/io`.
fn written(pid: u32) -> Option<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("wchar: "))
        .and_then(|v| v.trim().parse().ok())
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

#[tokio::test]
async fn a_client_that_never_reads_stalls_its_process_not_the_server() {
    const GIB: u64 = 1 << 30;
    let env = env(false).await;
    let config = ServerConfig::default().with_max_outgoing_bytes_per_connection(4 << 20);
    let (server, processes) = serve(&env, config).await;
    let mut peer = Peer::ready(&server.url).await;
    let before = rss_bytes();
    // `head` writes into a pipe of the double: the pipe's writer is `head` itself.
    let argv = ["head", "-c", "1073741824", "/dev/zero"];
    peer.raw
        .send(json!({"id": 7, "method": "process/start", "params": start(&env, "big", &argv)}))
        .await;
    let mut pid = None;
    eventually("the process started", || {
        pid = processes.pids.lock().unwrap().first().copied();
        pid.is_some()
    })
    .await;
    let pid = pid.unwrap();
    // Stalled: what it wrote stops growing, far below what it meant to write.
    let mut last = 0;
    let mut still = 0;
    eventually("the process stalled", || {
        let now = written(pid).unwrap_or(u64::MAX);
        still = if now == last { still + 1 } else { 0 };
        last = now;
        still >= 10
    })
    .await;
    assert!(alive(pid), "it ended: the server took its 1 GiB");
    assert!(last < GIB / 8, "it wrote {last} bytes before it stalled");
    let grown = rss_bytes().saturating_sub(before);
    assert!(grown < 256 << 20, "the server grew by {grown} bytes");
    // The connection still answers once read, and the process can be ended.
    let reply = peer
        .request("process/terminate", json!({"processId": "big"}))
        .await;
    assert_eq!(reply["result"]["running"], true, "{reply}");
}

#[tokio::test]
async fn the_sandbox_policy_narrows_a_process_and_never_widens_it() {
    let env = env(false).await;
    let (server, processes) = serve(&env, ServerConfig::default()).await;
    let mut peer = Peer::ready(&server.url).await;
    let last = || {
        processes
            .requests
            .lock()
            .unwrap()
            .last()
            .unwrap()
            .narrowing
            .clone()
    };
    peer.request("process/start", start(&env, "a", &["true"]))
        .await;
    assert_eq!(last(), None, "no policy: the server's roots as they are");
    let mut params = start(&env, "b", &["true"]);
    params["sandbox"] = json!({"permissions": {"type": "readOnly"}, "cwd": uri(&env.ws)});
    let reply = peer.request("process/start", params).await;
    assert!(reply.get("result").is_some(), "{reply}");
    let narrowed = last().expect("narrowed");
    assert!(!narrowed.is_empty());
    assert!(
        narrowed.iter().all(|(_, a)| *a == Access::ReadOnly),
        "{narrowed:?}"
    );
    let special = |kind: &str, access: &str| json!({"path": {"type": "special", "value": {"kind": kind}}, "access": access});
    let workspace_write = |extra: Vec<Value>| {
        let mut entries = vec![special("root", "read"), special("project_roots", "write")];
        entries.extend(extra);
        json!({
            "permissions": {"type": "managed",
                "file_system": {"type": "restricted", "entries": entries}},
            "cwd": uri(&env.ws), "workspaceRoots": [uri(&env.ws)],
        })
    };
    let mut params = start(&env, "c", &["true"]);
    params["sandbox"] = workspace_write(Vec::new());
    peer.request("process/start", params).await;
    let narrowed = last().unwrap();
    for (path, access) in &narrowed {
        let expected = if *path == env.ws {
            Access::ReadWrite
        } else {
            Access::ReadOnly
        };
        assert_eq!(*access, expected, "{path}");
    }
    // The read-only root stays read-only whatever the policy says of it.
    assert!(
        narrowed.contains(&(env.ro.clone(), Access::ReadOnly)),
        "{narrowed:?}"
    );
    // A directory kept read-only inside the writable root is part of the narrowing while it
    // exists (a process holds it by a read-only mount), nothing to keep while it does not.
    let git = json!({"path": {"type": "special", "value": {"kind": "project_roots",
        "subpath": ".git"}}, "access": "read"});
    let mut params = start(&env, "g", &["true"]);
    params["sandbox"] = workspace_write(vec![git.clone()]);
    let reply = peer.request("process/start", params.clone()).await;
    assert!(reply.get("result").is_some(), "no .git yet: {reply}");
    std::fs::create_dir(env.ws.as_path().join(".git")).unwrap();
    params["processId"] = json!("g2");
    let reply = peer.request("process/start", params).await;
    assert!(reply.get("result").is_some(), "{reply}");
    let narrowed = last().unwrap();
    let git_path = env.ws.join(".git").unwrap();
    assert!(
        narrowed.contains(&(git_path, Access::ReadOnly))
            && narrowed.contains(&(env.ws.clone(), Access::ReadWrite)),
        "{narrowed:?}"
    );
    let deny = json!({"path": {"type": "path", "path": uri(env.ws.join("secret").unwrap())},
        "access": "deny"});
    let mut params = start(&env, "d", &["true"]);
    params["sandbox"] = workspace_write(vec![deny]);
    let count = processes.requests.lock().unwrap().len();
    let reply = peer.request("process/start", params).await;
    assert_eq!(error_of(&reply).1, Some("PermissionDenied"), "{reply}");
    assert_eq!(
        processes.requests.lock().unwrap().len(),
        count,
        "started anyway"
    );
}

#[tokio::test]
async fn the_environment_never_carries_the_servers_own() {
    let env = env(false).await;
    let (server, processes) = serve(&env, ServerConfig::default()).await;
    let mut peer = Peer::ready(&server.url).await;
    let mut params = start(&env, "e", &["true"]);
    params["env"] = json!({"MINE": "1"});
    params["envPolicy"] = json!({"inherit": "all", "ignoreDefaultExcludes": false,
        "exclude": [], "set": {"SET": "2"}, "includeOnly": []});
    let reply = peer.request("process/start", params).await;
    assert!(reply.get("result").is_some(), "{reply}");
    let got = processes
        .requests
        .lock()
        .unwrap()
        .last()
        .unwrap()
        .env
        .clone();
    let names: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "HOME", "LANG", "MINE", "PATH", "SET", "SHELL", "TERM", "TMPDIR"
        ]
    );
    // The base is fixed, not the server's (the test process's) environment.
    let value = |name: &str| got.iter().find(|(k, _)| k == name).unwrap().1.clone();
    assert_eq!(
        value("PATH"),
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    );
    assert_eq!(value("HOME"), env.ws.to_string());
}

#[tokio::test]
async fn every_start_and_end_has_an_audit_line() {
    let env = env(false).await;
    let lines = crate::audit_lines::Lines::default();
    let config = ServerConfig::default().with_audit(Some(AuditLog::to_writer(lines.clone())));
    let (server, _processes) = serve(&env, config).await;
    let mut peer = Peer::ready(&server.url).await;
    peer.request("process/start", start(&env, "a", &["sh", "-c", "exit 4"]))
        .await;
    until_closed(&mut peer, "a").await;
    let missing = peer
        .request("process/start", start(&env, "b", &["/no/such"]))
        .await;
    assert_eq!(error_of(&missing).1, Some("NotFound"), "{missing}");
    let parsed = || lines.values();
    eventually("the exit line", || {
        parsed().iter().any(|l| l["method"] == "process/exited")
    })
    .await;
    let all = parsed();
    let started: Vec<&Value> = all
        .iter()
        .filter(|l| l["method"] == "process/start" && l.get("argv").is_some())
        .collect();
    assert_eq!(started.len(), 2, "{all:?}");
    assert_eq!(started[0]["argv"], json!(["sh", "-c", "exit 4"]));
    assert_eq!(started[0]["cwd"], env.ws.to_string());
    assert_eq!(started[0]["outcome"], "ok");
    assert!(started[0]["pid"].as_u64().is_some());
    assert_eq!(started[1]["outcome"], "NotFound");
    let exited = all
        .iter()
        .find(|l| l["method"] == "process/exited")
        .unwrap();
    assert_eq!(
        (exited["exitCode"].as_i64(), exited["killed"].as_bool()),
        (Some(4), Some(false))
    );
}
