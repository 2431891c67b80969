//! The process methods on the wire, against an in-process server whose processes are the
//! test double of `process_double`: output order and `seq`, exit codes, input, terminate,
//! 1,000 starts at once, a client that never reads, sessions resumed and expired, `-32601`
//! without processes, the sandbox policy's narrowing, the environment and the audit log.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::codex_protocol::uri;
use crate::common::{InProcessServer, TestEnv, env};
use crate::process_double::{ProcessServer, TestProcesses, alive};
use crate::serve::{RawPeer, error_of};
use capfs_wire::server::ServerConfig;

/// A peer that keeps the notifications that arrive while it waits for a reply, for
/// [`until_closed`] to read: a process's output may come before the answer to any request.
pub(crate) struct Peer {
    pub(crate) raw: RawPeer,
    kept: std::collections::VecDeque<Value>,
    next_id: i64,
}

impl Peer {
    pub(crate) fn new(raw: RawPeer) -> Self {
        Self {
            raw,
            kept: std::collections::VecDeque::new(),
            next_id: 1_000_000,
        }
    }

    pub(crate) async fn ready(url: &str) -> Self {
        Self::new(RawPeer::ready(url).await)
    }

    /// Sends a request and waits for its answer, keeping whatever else arrives.
    pub(crate) async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.raw
            .send(json!({"id": id, "method": method, "params": params}))
            .await;
        loop {
            let message = self.raw.next().await.expect("an answer");
            if message.get("id") == Some(&id) {
                return message;
            }
            self.kept.push_back(message);
        }
    }

    /// The next message: a kept one first.
    pub(crate) async fn next(&mut self) -> Option<Value> {
        match self.kept.pop_front() {
            Some(message) => Some(message),
            None => self.raw.next().await,
        }
    }
}

/// What a process told the client, gathered from its notifications.
#[derive(Debug, Default)]
pub(crate) struct Told {
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
    pub(crate) seqs: Vec<u64>,
    pub(crate) exit_code: Option<i64>,
    pub(crate) closed: bool,
}

/// Reads notifications until process `id` closed (every other message is left aside).
pub(crate) async fn until_closed(peer: &mut Peer, id: &str) -> Told {
    let mut told = Told::default();
    while !told.closed {
        let message = peer.next().await.expect("the connection stays open");
        let params = &message["params"];
        if params["processId"] != id {
            continue;
        }
        told.seqs.push(params["seq"].as_u64().unwrap());
        match message["method"].as_str().unwrap() {
            "process/output" => {
                assert!(told.exit_code.is_none() || !told.closed, "{message}");
                let bytes = STANDARD.decode(params["chunk"].as_str().unwrap()).unwrap();
                match params["stream"].as_str().unwrap() {
                    "stdout" | "pty" => told.stdout.extend(bytes),
                    "stderr" => told.stderr.extend(bytes),
                    other => panic!("stream {other}"),
                }
            }
            "process/exited" => told.exit_code = params["exitCode"].as_i64(),
            "process/closed" => told.closed = true,
            other => panic!("{other}: {message}"),
        }
    }
    told
}

fn start_params(env: &TestEnv, id: &str, argv: &[&str]) -> Value {
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

#[tokio::test]
async fn output_comes_in_order_with_one_seq_per_notification_and_the_exit_code() {
    let env = env(false).await;
    let (server, _processes) = serve(&env, ServerConfig::default()).await;
    let mut peer = Peer::ready(&server.url).await;
    let script = "for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; done; exit 3";
    let reply = peer
        .request(
            "process/start",
            start_params(&env, "p", &["sh", "-c", script]),
        )
        .await;
    assert_eq!(
        reply["result"],
        json!({"processId": "p", "sandboxType": "none"})
    );
    let told = until_closed(&mut peer, "p").await;
    assert_eq!(told.stdout, b"out1\nout2\nout3\nout4\nout5\n");
    assert_eq!(told.stderr, b"err1\nerr2\nerr3\nerr4\nerr5\n");
    let expected: Vec<u64> = (1..=told.seqs.len() as u64).collect();
    assert_eq!(told.seqs, expected, "one seq per notification, from 1");
    assert_eq!(told.exit_code, Some(3));
    // The same id again is refused, as codex refuses it; an empty argv is invalid params.
    let again = peer
        .request("process/start", start_params(&env, "p", &["true"]))
        .await;
    assert_eq!(error_of(&again).0, -32600, "{again}");
    let empty = peer
        .request("process/start", start_params(&env, "q", &[]))
        .await;
    assert_eq!(
        error_of(&empty),
        (-32602, Some("InvalidInput"), "argv must not be empty")
    );
    // An id is kept with its process and sent with each notification: it is bounded.
    let long = "i".repeat(257);
    let too_long = peer
        .request("process/start", start_params(&env, &long, &["true"]))
        .await;
    assert_eq!(
        error_of(&too_long),
        (
            -32602,
            Some("InvalidInput"),
            "processId must be 1 to 256 bytes"
        )
    );
    let none = peer
        .request("process/start", start_params(&env, "", &["true"]))
        .await;
    assert_eq!(error_of(&none).0, -32602, "{none}");
    // What process/read keeps: every chunk, and the end.
    let read = peer
        .request("process/read", json!({"processId": "p", "afterSeq": 0}))
        .await;
    assert_eq!(read["result"]["exitCode"], 3, "{read}");
    assert_eq!(read["result"]["closed"], true);
    let missing = peer
        .request("process/read", json!({"processId": "nope"}))
        .await;
    assert_eq!(error_of(&missing).0, -32600);
}

#[tokio::test]
async fn input_reaches_a_process_with_pipe_stdin_and_terminate_ends_it() {
    let env = env(false).await;
    let (server, processes) = serve(&env, ServerConfig::default()).await;
    let mut peer = Peer::ready(&server.url).await;
    let mut params = start_params(
        &env,
        "cat",
        &["sh", "-c", "read x; echo got:$x; exec sleep 100"],
    );
    params["pipeStdin"] = json!(true);
    peer.request("process/start", params).await;
    let chunk = STANDARD.encode(b"hello\n");
    let write = json!({"processId": "cat", "chunk": chunk, "writeId": "w1"});
    let reply = peer.request("process/write", write).await;
    assert_eq!(reply["result"]["status"], "accepted", "{reply}");
    let unknown = json!({"processId": "nope", "chunk": chunk, "writeId": "w2"});
    let reply = peer.request("process/write", unknown).await;
    assert_eq!(reply["result"]["status"], "unknownProcess");
    let bad = json!({"processId": "cat", "chunk": "!!", "writeId": "w3"});
    assert_eq!(
        error_of(&peer.request("process/write", bad).await).0,
        -32602
    );
    // The output first, then the end: terminate while it sleeps.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while !seen.ends_with(b"got:hello\n") {
        assert!(Instant::now() < deadline, "no output");
        let message = peer.next().await.unwrap();
        if message["method"] == "process/output" {
            seen.extend(
                STANDARD
                    .decode(message["params"]["chunk"].as_str().unwrap())
                    .unwrap(),
            );
        }
    }
    let pid = processes.pids.lock().unwrap()[0];
    assert!(alive(pid));
    let reply = peer
        .request("process/terminate", json!({"processId": "cat"}))
        .await;
    assert_eq!(reply["result"]["running"], true, "{reply}");
    let told = until_closed(&mut peer, "cat").await;
    assert_eq!(told.exit_code, Some(128 + 9));
    let reply = peer
        .request("process/terminate", json!({"processId": "nope"}))
        .await;
    assert_eq!(reply["result"]["running"], false);
    // A process without pipeStdin has its input closed.
    peer.request("process/start", start_params(&env, "s", &["sleep", "100"]))
        .await;
    let write = json!({"processId": "s", "chunk": chunk, "writeId": "w4"});
    let reply = peer.request("process/write", write).await;
    assert_eq!(reply["result"]["status"], "stdinClosed", "{reply}");
    let sig = json!({"processId": "s", "signal": "interrupt"});
    assert_eq!(
        peer.request("process/signal", sig).await["result"],
        json!({})
    );
    assert_eq!(until_closed(&mut peer, "s").await.exit_code, Some(128 + 2));
    let sig = json!({"processId": "s", "signal": "bogus"});
    assert_eq!(
        error_of(&peer.request("process/signal", sig).await).0,
        -32602
    );
}

#[tokio::test]
async fn without_processes_every_process_method_is_method_not_found() {
    let env = env(false).await;
    let server = InProcessServer::start(env.fs.clone(), ServerConfig::default()).await;
    let mut peer = Peer::ready(&server.url).await;
    for method in [
        "process/start",
        "process/read",
        "process/write",
        "process/signal",
        "process/terminate",
        "capfs/processResize",
    ] {
        let reply = peer
            .request(method, start_params(&env, "p", &["true"]))
            .await;
        assert_eq!(error_of(&reply).0, -32601, "{method}: {reply}");
    }
    let info = peer.request("environment/info", json!({})).await;
    assert!(info["result"].get("processes").is_none(), "{info}");
}

#[tokio::test]
async fn a_thousand_starts_at_once_are_all_answered_and_the_connection_keeps_flowing() {
    let env = env(false).await;
    let config = ServerConfig::default()
        .with_max_processes(32)
        .with_max_processes_per_connection(16);
    let (server, _processes) = serve(&env, config).await;
    let mut peer = Peer::ready(&server.url).await;
    for i in 0..1000 {
        let mut params = start_params(&env, &format!("p{i}"), &["sleep", "100"]);
        params["processId"] = json!(format!("p{i}"));
        peer.raw
            .send(json!({"id": 10_000 + i, "method": "process/start", "params": params}))
            .await;
    }
    let stat = json!({"path": uri(&env.ws)});
    peer.raw
        .send(json!({"id": 1, "method": "fs/getMetadata", "params": stat}))
        .await;
    let (mut started, mut refused, mut stat_answered) = (0, 0, false);
    let mut quota = 0;
    while started + refused < 1000 || !stat_answered {
        let message = peer.next().await.expect("every start answered");
        match message["id"].as_i64() {
            Some(1) => stat_answered = true,
            Some(_) if message.get("result").is_some() => started += 1,
            Some(_) => {
                let (code, kind, text) = error_of(&message);
                assert!(code == -32000 || kind == Some("QuotaExceeded"), "{message}");
                quota += usize::from(kind == Some("QuotaExceeded") && text.contains("16"));
                refused += 1;
            }
            None => {}
        }
    }
    assert_eq!(started, 16, "the per-connection bound, exactly");
    assert!(quota > 0);
    // Ending them frees their places: a start succeeds again.
    for i in 0..1000 {
        peer.raw
            .send(json!({"id": 20_000 + i, "method": "process/terminate",
            "params": {"processId": format!("p{i}")}}))
            .await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reply = peer
            .request("process/start", start_params(&env, "after", &["true"]))
            .await;
        if reply.get("result").is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "places never freed: {reply}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
