//! The current codex exec-server protocol (codex 0.169) spoken by hand against an in-process
//! server: `file:` URIs beside plain paths, codex's error codes, sessions, the environment,
//! `fs/walk`, `fs/canonicalize` and `fs/open` handles, and JSON lines on stdio.

use std::fs;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{InProcessServer, TestEnv, env};
use crate::serve::{RawPeer, error_of};
use capfs_wire::server::ServerConfig;

pub(crate) fn uri(path: impl std::fmt::Display) -> String {
    format!("file://{path}")
}

pub(crate) async fn serve(env: &TestEnv) -> InProcessServer {
    InProcessServer::start(env.fs.clone(), ServerConfig::default()).await
}

/// Connects and completes the handshake; the peer and its session id.
pub(crate) async fn ready_with_session(url: &str) -> (RawPeer, String) {
    let mut peer = RawPeer::connect(url).await;
    let reply = peer.request("initialize", json!({"clientName": "c"})).await;
    let session = reply["result"]["sessionId"].as_str().unwrap().to_string();
    peer.send(json!({"method": "initialized"})).await;
    (peer, session)
}

/// Session `id` taken back on a new connection, once the server has ended the connection that
/// held it (within a bounded wait): the new peer, past the handshake, and the `initialize`
/// reply.
pub(crate) async fn resume_when_left(url: &str, id: &str) -> (RawPeer, Value) {
    let resume = json!({"clientName": "c", "resumeSessionId": id});
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut again = RawPeer::connect(url).await;
        let reply = again.request("initialize", resume.clone()).await;
        if reply.get("result").is_some() {
            again.send(json!({"method": "initialized"})).await;
            return (again, reply);
        }
        assert!(error_of(&reply).2.contains("in use"), "{reply}");
        assert!(
            Instant::now() < deadline,
            "the connection never ended: {reply}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn walk_options(max_depth: u64, max_entries: u64, follow: bool, prune: bool) -> Value {
    json!({
        "maxDepth": max_depth, "maxDirectories": 100, "maxEntries": max_entries,
        "followDirectorySymlinks": follow, "pruneHiddenDirectories": prune,
    })
}

#[tokio::test]
async fn uris_and_plain_paths_name_the_same_files_with_each_generations_codes() {
    let env = env(false).await;
    env.mkfile("sp ace/#h?q%.txt", b"odd");
    let server = serve(&env).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let odd = format!("{}/sp%20ace/%23h%3Fq%25.txt", env.ws);
    for path in [
        uri(&odd),
        format!("file://localhost{odd}"),
        format!("FILE://LocalHost{odd}"),
    ] {
        let reply = peer
            .request("fs/readFile", json!({"path": path, "sandbox": null}))
            .await;
        assert_eq!(reply["result"]["dataBase64"], "b2Rk", "{path}: {reply}");
    }
    // NotFound: -32004 for a URI (codex reads the kind from the code), -32603 for a plain path.
    let missing = env.p("missing");
    let reply = peer
        .request("fs/getMetadata", json!({"path": uri(&missing)}))
        .await;
    assert_eq!(error_of(&reply).0, -32004, "{reply}");
    assert_eq!(error_of(&reply).1, Some("NotFound"));
    let reply = peer
        .request("fs/getMetadata", json!({"path": missing.to_string()}))
        .await;
    assert_eq!(error_of(&reply).0, -32603, "{reply}");
    // PermissionDenied: -32600 for a URI.
    let secret = env.outside.join("secret");
    let reply = peer
        .request("fs/readFile", json!({"path": uri(secret.display())}))
        .await;
    assert_eq!(error_of(&reply).0, -32600, "{reply}");
    assert_eq!(error_of(&reply).1, Some("PermissionDenied"));
    // Encoded `..` is a `..`, resolved lexically like any other: still outside.
    let dotted = format!("{}/%2e%2e/outside/secret", env.ws);
    let reply = peer
        .request("fs/readFile", json!({"path": uri(dotted)}))
        .await;
    assert_eq!(error_of(&reply).1, Some("PermissionDenied"), "{reply}");
    for (path, why) in [
        ("http://x/a".to_string(), "unsupported path URI scheme"),
        (format!("file://elsewhere{}", env.ws), "is not this machine"),
        (format!("{}?q", uri(&env.ws)), "no query or fragment"),
        ("file:///a%00b".to_string(), "NUL"),
    ] {
        let reply = peer.request("fs/readFile", json!({"path": path})).await;
        let (code, _, message) = error_of(&reply);
        assert_eq!(code, -32602, "{path}: {reply}");
        assert!(message.contains(why), "{path}: {message}");
    }
    // Writes through a URI land where the plain path names.
    let reply = peer
        .request(
            "fs/writeFile",
            json!({"path": uri(env.p("w.txt")), "dataBase64": "aGk=", "sandbox": null}),
        )
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
    assert_eq!(fs::read(env.ws_host("w.txt")).unwrap(), b"hi");
    let reply = peer
        .request(
            "fs/writeFile",
            json!({"path": uri(env.p("no/dir/x")), "dataBase64": "aGk="}),
        )
        .await;
    assert_eq!(
        error_of(&reply).0,
        -32004,
        "apply_patch relies on it: {reply}"
    );
}

#[tokio::test]
async fn sessions_are_given_and_taken_back_within_the_ttl() {
    let env = env(false).await;
    let config = ServerConfig::default().with_session_ttl(Duration::from_secs(600));
    let server = InProcessServer::start(env.fs.clone(), config).await;
    let mut first = RawPeer::connect(&server.url).await;
    let reply = first
        .request(
            "initialize",
            json!({"clientName": "codex", "resumeSessionId": null}),
        )
        .await;
    let id = reply["result"]["sessionId"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 36, "a UUID: {id}");
    let resume = json!({"clientName": "codex", "resumeSessionId": id});
    // Held by a live connection: refused.
    let mut second = RawPeer::connect(&server.url).await;
    let reply = second.request("initialize", resume.clone()).await;
    assert!(error_of(&reply).2.contains("in use"), "{reply}");
    // Once that connection is gone, a reconnect gets the same session back.
    drop(first);
    let (_again, reply) = resume_when_left(&server.url, &id).await;
    assert_eq!(reply["result"]["sessionId"], id, "{reply}");
    let mut stranger = RawPeer::connect(&server.url).await;
    let reply = stranger
        .request(
            "initialize",
            json!({"clientName": "c", "resumeSessionId": "nonsense"}),
        )
        .await;
    assert_eq!(
        error_of(&reply),
        (-32600, None, "unknown session id nonsense")
    );
}

#[tokio::test]
async fn an_expired_session_is_unknown() {
    let env = env(false).await;
    let config = ServerConfig::default().with_session_ttl(Duration::from_millis(1));
    let server = InProcessServer::start(env.fs.clone(), config).await;
    let mut first = RawPeer::connect(&server.url).await;
    let reply = first
        .request("initialize", json!({"clientName": "c"}))
        .await;
    let id = reply["result"]["sessionId"].as_str().unwrap().to_string();
    drop(first);
    let resume = json!({"clientName": "c", "resumeSessionId": id});
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // Past the TTL, whenever the server saw the connection end.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut again = RawPeer::connect(&server.url).await;
        let reply = again.request("initialize", resume.clone()).await;
        let message = error_of(&reply).2.to_string();
        if message.contains("unknown session id") {
            break;
        }
        assert!(
            message.contains("in use") && Instant::now() < deadline,
            "{reply}"
        );
    }
}

#[tokio::test]
async fn the_environment_claims_only_what_is_served() {
    let env = env(false).await;
    let server = serve(&env).await;
    let mut peer = RawPeer::connect(&server.url).await;
    let reply = peer.request("initialize", json!({"clientName": "c"})).await;
    let info = &reply["result"]["environmentInfo"];
    assert_eq!(
        info["cwd"],
        uri(&env.ws),
        "the first read-write root: {info}"
    );
    assert_eq!(info["platformOs"], "linux");
    let served: Vec<&str> = info["capabilities"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, on)| on.as_bool() == Some(true))
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(
        served,
        [
            "environmentConfigRead",
            "fileWriteStreaming",
            "fsWatchMissing",
            "sandboxedFileStreaming"
        ]
    );
    peer.send(json!({"method": "initialized"})).await;
    assert_eq!(
        peer.request("environment/info", Value::Null).await["result"],
        *info
    );
    let status = peer.request("environment/status", Value::Null).await;
    assert_eq!(status["result"], json!({"status": "ready"}));
    let config = peer
        .request(
            "environmentConfig/read",
            json!({"cwd": uri(&env.ws), "configPaths": [["mcp_servers"]], "requirementsPaths": []}),
        )
        .await;
    assert_eq!(config["result"]["config"]["layers"], json!([]), "{config}");
    // Not served, so not advertised: codex gets -32601 and says so.
    let reply = peer.request("process/start", json!({})).await;
    assert_eq!(error_of(&reply).0, -32601);
}

#[tokio::test]
async fn walks_go_breadth_first_in_codex_shape_and_stay_inside() {
    let env = env(false).await;
    env.mkfile("t/b.txt", b"b");
    env.mkfile("t/A.md", b"a");
    env.mkfile("t/sub/deep/f", b"f");
    env.mkfile("t/.hid/x", b"x");
    env.symlink("t/to_sub", "sub");
    env.symlink("t/to_file", "b.txt");
    env.symlink("t/to_outside", &env.outside);
    let server = serve(&env).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let top = env.p("t");
    let walk = |options: Value| json!({"path": uri(&top), "options": options, "sandbox": null});
    let names = |reply: &Value| -> Vec<String> {
        let prefix = uri(&top);
        reply["result"]["entries"]
            .as_array()
            .unwrap_or_else(|| panic!("{reply}"))
            .iter()
            .map(|e| {
                let path = e["path"].as_str().unwrap();
                format!(
                    "{} {}",
                    &path[prefix.len() + 1..],
                    e["kind"].as_str().unwrap()
                )
            })
            .collect()
    };
    let reply = peer
        .request("fs/walk", walk(walk_options(5, 100, false, true)))
        .await;
    assert_eq!(
        names(&reply),
        [
            ".hid directory",
            "A.md file",
            "b.txt file",
            "sub directory",
            "sub/deep directory",
            "sub/deep/f file"
        ]
    );
    assert_eq!(reply["result"]["truncated"], false);
    assert_eq!(reply["result"]["errors"], json!([]));
    // Following links to directories: the one inside is listed as a directory, and what it
    // leads to is entered once (here as `sub`, met first); the one leading out is not.
    let reply = peer
        .request("fs/walk", walk(walk_options(2, 100, true, false)))
        .await;
    let found = names(&reply);
    assert!(found.contains(&"to_sub directory".to_string()), "{found:?}");
    assert!(
        found.contains(&"sub/deep directory".to_string()),
        "{found:?}"
    );
    assert!(
        !found.iter().any(|n| n.starts_with("to_sub/")),
        "entered twice: {found:?}"
    );
    assert!(
        found.iter().all(|n| !n.starts_with("to_outside")),
        "{found:?}"
    );
    assert!(!reply.to_string().contains("secret"), "{reply}");
    // Depth 0 and 1 list the top only; a bound on entries truncates and says so.
    let top_only = names(
        &peer
            .request("fs/walk", walk(walk_options(0, 100, false, false)))
            .await,
    );
    assert_eq!(
        top_only,
        [".hid directory", "A.md file", "b.txt file", "sub directory"]
    );
    let reply = peer
        .request("fs/walk", walk(walk_options(5, 2, false, false)))
        .await;
    assert_eq!(names(&reply).len(), 2);
    assert_eq!(reply["result"]["truncated"], true);
    let reply = peer
        .request(
            "fs/walk",
            json!({"path": uri(env.p("nope")), "options": walk_options(1, 1, false, false)}),
        )
        .await;
    assert_eq!(error_of(&reply).0, -32004);
}

#[tokio::test]
async fn canonical_paths_resolve_inside_and_never_reveal_outside() {
    let env = env(false).await;
    env.mkfile("real/f", b"f");
    env.symlink("rel", "real");
    env.symlink("abs", env.ws_host("real"));
    env.symlink("out", &env.outside);
    env.symlink("loop", "loop");
    let server = serve(&env).await;
    let mut peer = RawPeer::ready(&server.url).await;
    for link in ["rel/f", "abs/f", "real/../real/f"] {
        let reply = peer
            .request(
                "fs/canonicalize",
                json!({"path": uri(env.p(link)), "sandbox": null}),
            )
            .await;
        assert_eq!(
            reply["result"]["path"],
            uri(env.p("real/f")),
            "{link}: {reply}"
        );
    }
    let reply = peer
        .request(
            "fs/canonicalize",
            json!({"path": env.p("rel/f").to_string()}),
        )
        .await;
    assert_eq!(
        reply["result"]["path"],
        env.p("real/f").to_string(),
        "plain in, plain out"
    );
    let reply = peer
        .request("fs/canonicalize", json!({"path": uri(env.p("out/secret"))}))
        .await;
    assert_eq!(error_of(&reply).1, Some("PermissionDenied"), "{reply}");
    assert!(
        !reply.to_string().contains("outside/secret"),
        "never revealed: {reply}"
    );
    let reply = peer
        .request("fs/canonicalize", json!({"path": uri(env.p("loop"))}))
        .await;
    assert!(reply.get("error").is_some(), "{reply}");
    let reply = peer
        .request("fs/canonicalize", json!({"path": uri(env.p("gone"))}))
        .await;
    assert_eq!(error_of(&reply).0, -32004);
}
