//! The current codex protocol's handles, watches, per-request sandbox and stdio framing,
//! spoken by hand against an in-process server (and the binary, for stdio).

use std::fs;

use serde_json::{Value, json};

use crate::codex_protocol::{ready_with_session, resume_when_left, serve, uri};
use crate::common::{SECRET, TestEnv, env};
use crate::serve::{RawPeer, error_of};

#[tokio::test]
async fn read_handles_keep_reading_the_file_they_opened() {
    let env = env(false).await;
    env.mkfile("f", b"old contents");
    let server = serve(&env).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let open = |id: &str, path: String, mode: &str| json!({"handleId": id, "path": path, "mode": mode, "sandbox": null});
    let reply = peer
        .request("fs/open", open("r", uri(env.p("f")), "read"))
        .await;
    assert_eq!(reply["result"]["handleId"], "r", "{reply}");
    // The name now leads to another file; the handle still reads the one it opened.
    env.mkfile("f.new", b"NEW");
    fs::rename(env.ws_host("f.new"), env.ws_host("f")).unwrap();
    let block = |offset: u64, len: u64| json!({"handleId": "r", "offset": offset, "len": len});
    let reply = peer.request("fs/readBlock", block(4, 4)).await;
    assert_eq!(
        reply["result"],
        json!({"chunk": "Y29udA==", "eof": false}),
        "{reply}"
    );
    let reply = peer.request("fs/readBlock", block(4, 100)).await;
    assert_eq!(reply["result"]["eof"], true);
    let reply = peer.request("fs/readBlock", block(0, 0)).await;
    assert_eq!(error_of(&reply).0, -32600, "{reply}");
    let reply = peer.request("fs/readBlock", block(0, 1_048_577)).await;
    assert_eq!(error_of(&reply).0, -32600, "{reply}");
    let reply = peer
        .request("fs/open", open("r", uri(env.p("f")), "read"))
        .await;
    assert!(error_of(&reply).2.contains("already exists"), "{reply}");
    let long = "x".repeat(33);
    let reply = peer
        .request("fs/open", open(&long, uri(env.p("f")), "read"))
        .await;
    assert_eq!(error_of(&reply).0, -32600, "{reply}");
    let reply = peer
        .request(
            "fs/open",
            open("s", uri(env.outside.join("secret").display()), "read"),
        )
        .await;
    assert_eq!(error_of(&reply).1, Some("PermissionDenied"));
    assert!(
        peer.request("fs/close", json!({"handleId": "r"}))
            .await
            .get("result")
            .is_some()
    );
    let reply = peer.request("fs/readBlock", block(0, 1)).await;
    assert_eq!(error_of(&reply).0, -32004, "{reply}");
    // At most 128 handles per connection.
    for n in 0..128 {
        let reply = peer
            .request("fs/open", open(&format!("h{n}"), uri(env.p("f")), "read"))
            .await;
        assert!(reply.get("result").is_some(), "{n}: {reply}");
    }
    let reply = peer
        .request("fs/open", open("one-more", uri(env.p("f")), "read"))
        .await;
    assert!(
        error_of(&reply).2.contains("too many open file handles"),
        "{reply}"
    );
}

/// The names in the root's directory `dir`, sorted.
fn names_in(env: &TestEnv, dir: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(env.ws_host(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn replace_handles_show_the_old_file_until_closed_and_leave_it_when_abandoned() {
    let env = env(false).await;
    env.mkfile("d/f", b"old");
    let server = serve(&env).await;
    let (mut peer, session) = ready_with_session(&server.url).await;
    let open =
        json!({"handleId": "w", "path": uri(env.p("d/f")), "mode": "replace", "sandbox": null});
    assert!(
        peer.request("fs/open", open.clone())
            .await
            .get("result")
            .is_some()
    );
    let write =
        |offset: u64, chunk: &str| json!({"handleId": "w", "offset": offset, "chunk": chunk});
    assert!(
        peer.request("fs/writeBlock", write(0, "bmV3"))
            .await
            .get("result")
            .is_some()
    );
    let reply = peer.request("fs/writeBlock", write(0, "bmV3")).await;
    assert!(error_of(&reply).2.contains("blocks go in order"), "{reply}");
    assert!(
        peer.request("fs/writeBlock", write(3, "IQ=="))
            .await
            .get("result")
            .is_some()
    );
    assert_eq!(
        fs::read(env.ws_host("d/f")).unwrap(),
        b"old",
        "not before fs/close"
    );
    assert!(
        peer.request("fs/close", json!({"handleId": "w"}))
            .await
            .get("result")
            .is_some()
    );
    assert_eq!(fs::read(env.ws_host("d/f")).unwrap(), b"new!");
    assert_eq!(names_in(&env, "d"), ["f"], "no temporary left");

    // Abandoned: the connection goes before fs/close.
    assert!(peer.request("fs/open", open).await.get("result").is_some());
    assert!(
        peer.request("fs/writeBlock", write(0, "aGFsZg=="))
            .await
            .get("result")
            .is_some()
    );
    drop(peer);
    // Once the server has ended that connection (its session can be taken back), its handles
    // are gone; a few round trips give the abandoned write every chance to run to its end.
    let (mut other, _) = resume_when_left(&server.url, &session).await;
    for _ in 0..3 {
        let reply = other
            .request("fs/getMetadata", json!({"path": uri(env.p("d/f"))}))
            .await;
        assert!(reply.get("result").is_some(), "{reply}");
    }
    assert_eq!(names_in(&env, "d"), ["f"], "nothing left behind");
    assert_eq!(
        fs::read(env.ws_host("d/f")).unwrap(),
        b"new!",
        "the old file stays"
    );
    // A missing parent and a read-only root fail at open, as a write would.
    for (path, code) in [
        (env.p("nodir/f"), -32004),
        (env.ro.join("file").unwrap(), -32600),
    ] {
        let open = json!({"handleId": "x", "path": uri(&path), "mode": "replace"});
        assert_eq!(
            error_of(&other.request("fs/open", open).await).0,
            code,
            "{path}"
        );
    }
    assert!(fs::read(env.outside.join("secret")).unwrap() == SECRET);
}

/// The profile codex 0.169 sends on writes in `workspace-write` mode, for workspace `ws`, less
/// its `/tmp` entry (the test's roots are under `/tmp`).
fn workspace_write(ws: &str) -> Value {
    let special = |kind: &str, subpath: Option<&str>, access: &str| {
        let mut value = json!({"kind": kind});
        if let Some(subpath) = subpath {
            value["subpath"] = subpath.into();
        }
        json!({"path": {"type": "special", "value": value}, "access": access})
    };
    json!({
        "permissions": {"type": "managed", "file_system": {"type": "restricted", "entries": [
            special("root", None, "read"),
            special("project_roots", None, "write"),
            special("project_roots", Some(".git"), "read"),
            special("project_roots", Some(".agents"), "read"),
            special("project_roots", Some(".codex"), "read"),
        ]}, "network": "restricted"},
        "cwd": uri(ws),
        "workspaceRoots": [uri(ws)],
    })
}

#[tokio::test]
async fn a_requests_sandbox_narrows_what_the_roots_allow_and_never_widens_it() {
    let env = env(false).await;
    env.mkfile(".git/config", b"[core]");
    env.mkfile("a.txt", b"a");
    env.symlink("to_git", ".git");
    let server = serve(&env).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let policy = workspace_write(&env.ws.to_string());
    let write = |path: String, sandbox: &Value| json!({"path": uri(path), "dataBase64": "eA==", "sandbox": sandbox});
    let ok = peer
        .request("fs/writeFile", write(env.p("b.txt").to_string(), &policy))
        .await;
    assert!(ok.get("result").is_some(), "{ok}");
    // The read-only carve-outs hold, also through a link and for every kind of change.
    let refused = [
        (
            "fs/writeFile",
            write(env.p(".git/config").to_string(), &policy),
        ),
        (
            "fs/writeFile",
            write(env.p("to_git/config").to_string(), &policy),
        ),
        (
            "fs/writeFile",
            write(env.p(".agents/x").to_string(), &policy),
        ),
        (
            "fs/createDirectory",
            json!({"path": uri(env.p(".codex/d")), "sandbox": policy}),
        ),
        (
            "fs/remove",
            json!({"path": uri(env.p(".git/config")), "sandbox": policy}),
        ),
        (
            "fs/copy",
            json!({"sourcePath": uri(env.p("a.txt")), "destinationPath": uri(env.p(".git/a")), "recursive": false, "sandbox": policy}),
        ),
        (
            "fs/rename",
            json!({"sourcePath": uri(env.p(".git/config")), "destinationPath": uri(env.p("c")), "sandbox": policy}),
        ),
        (
            "fs/open",
            json!({"handleId": "h", "path": uri(env.p(".git/config")), "mode": "replace", "sandbox": policy}),
        ),
        // Another read-write root of capfs's, outside the turn's workspace.
        (
            "fs/writeFile",
            write(env.ws2.join("x").unwrap().to_string(), &policy),
        ),
    ];
    for (method, params) in refused {
        let reply = peer.request(method, params.clone()).await;
        let (code, kind, message) = error_of(&reply);
        assert_eq!(
            (code, kind),
            (-32600, Some("PermissionDenied")),
            "{method} {params}: {reply}"
        );
        assert!(message.contains("sandbox policy"), "{message}");
    }
    assert_eq!(fs::read(env.ws_host(".git/config")).unwrap(), b"[core]");
    assert!(!env.ws_host(".git/a").exists() && !env.ws_host(".codex").exists());
    assert!(!env.ws2.join("x").unwrap().as_path().exists());
    // Reads are allowed where the profile reads.
    let reply = peer
        .request(
            "fs/readFile",
            json!({"path": uri(env.p(".git/config")), "sandbox": policy}),
        )
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
    // A read-only turn writes nowhere, even under a read-write root.
    let read_only = json!({"permissions": {"type": "managed", "file_system": {"type": "restricted",
        "entries": [{"path": {"type": "special", "value": {"kind": "root"}}, "access": "read"}]}}});
    let reply = peer
        .request(
            "fs/writeFile",
            write(env.p("b.txt").to_string(), &read_only),
        )
        .await;
    assert_eq!(error_of(&reply).1, Some("PermissionDenied"), "{reply}");
    // The policy never widens: a profile granting `/` still cannot write a read-only root or
    // outside every root.
    let everything = json!({"permissions": {"type": "managed", "file_system": {"type": "restricted",
        "entries": [{"path": {"type": "special", "value": {"kind": "root"}}, "access": "write"}]}}});
    for path in [
        env.ro.join("new").unwrap().to_string(),
        env.outside.join("new").display().to_string(),
    ] {
        let reply = peer
            .request("fs/writeFile", write(path.clone(), &everything))
            .await;
        assert_eq!(
            error_of(&reply).1,
            Some("PermissionDenied"),
            "{path}: {reply}"
        );
    }
    // No policy: capfs's roots alone decide.
    let reply = peer
        .request(
            "fs/writeFile",
            write(env.p(".git/config").to_string(), &Value::Null),
        )
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
    assert!(!env.outside.join("new").exists());
}

#[test]
fn stdio_speaks_json_lines_when_the_first_byte_is_json() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let ws = fs::canonicalize(dir.path()).unwrap();
    fs::write(ws.join("a.txt"), b"hello").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_capfs"))
        .args(["serve", "--listen", "stdio", "--root"])
        .arg(&ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        json!({"id": 1, "method": "initialize", "params": {"clientName": "codex"}}).to_string(),
        json!({"method": "initialized"}).to_string(),
        // A line that is not JSON gets an error and the connection stays usable.
        "not json".to_string(),
        json!({"id": 2, "method": "fs/readFile", "params": {"path": format!("file://{}/a.txt", ws.display())}}).to_string(),
        json!({"id": 3, "method": "fs/getMetadata", "params": {"path": format!("{}/nope", ws.display())}}).to_string(),
    ];
    // Written whole, then stdin closed: every request before the end still gets its answer.
    stdin
        .write_all(format!("{}\r\n\n", lines.join("\n")).as_bytes())
        .unwrap();
    drop(stdin);
    let replies: Vec<Value> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|line| serde_json::from_str(&line.unwrap()).expect("one JSON message per line"))
        .collect();
    assert!(child.wait().unwrap().success());
    assert_eq!(replies.len(), 4, "{replies:?}");
    assert_eq!(
        replies[0]["result"]["capfs"]["dataFrames"], false,
        "no data frames on lines"
    );
    assert!(replies[0]["result"]["sessionId"].is_string());
    let by_id = |id: i64| {
        replies
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("{id}: {replies:?}"))
    };
    assert_eq!(by_id(2)["result"]["dataBase64"], "aGVsbG8=");
    assert_eq!(by_id(3)["error"]["data"]["kind"], "NotFound");
    assert!(
        replies
            .iter()
            .any(|r| r["error"]["code"] == -32600 && r["id"] == -1),
        "{replies:?}"
    );
}

#[tokio::test]
async fn a_watch_tells_once_when_a_missing_path_appears() {
    let env = env(false).await;
    let server = serve(&env).await;
    let (mut peer, session) = ready_with_session(&server.url).await;
    let watch = |id: u64, missing: Vec<String>| json!({"watchId": id, "missing": missing, "present": uri(&env.ws)});
    let reply = peer
        .request(
            "fs/watchMissing",
            watch(7, vec![uri(env.p("later")), uri(env.p("other"))]),
        )
        .await;
    assert_eq!(reply["result"], json!({"watching": true}), "{reply}");
    let reply = peer
        .request("fs/watchMissing", watch(7, vec![uri(env.p("x"))]))
        .await;
    assert!(error_of(&reply).2.contains("already exists"), "{reply}");
    // A path under no root is refused when the watch is made, and says nothing of outside.
    let outside = uri(env.outside.join("will-appear").display());
    let reply = peer
        .request("fs/watchMissing", watch(8, vec![outside]))
        .await;
    assert_eq!(error_of(&reply).1, Some("PermissionDenied"), "{reply}");
    env.mkfile("later", b"here");
    let notification = loop {
        let message = peer
            .next()
            .await
            .expect("the notification before the connection closed");
        if message.get("method").is_some() {
            break message;
        }
    };
    assert_eq!(
        notification,
        json!({"method": "fs/missingChanged", "params": {"watchId": 7}})
    );
    // The watch ended with its notification: its id is free again.
    let reply = peer
        .request("fs/watchMissing", watch(7, vec![uri(env.p("x"))]))
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
    for id in 100..163 {
        let reply = peer
            .request("fs/watchMissing", watch(id, vec![uri(env.p("y"))]))
            .await;
        assert!(reply.get("result").is_some(), "{id}: {reply}");
    }
    let reply = peer
        .request("fs/watchMissing", watch(999, vec![uri(env.p("y"))]))
        .await;
    assert!(error_of(&reply).2.contains("too many watches"), "{reply}");
    // The connection still ends with 64 watches running (its session is free once it has).
    drop(peer);
    resume_when_left(&server.url, &session).await;
}

/// A reply carrying more than 384 KiB of a file (`fs/readBlock` of 1 MiB, `fs/readFile` of
/// megabytes) is written by the connection's writer past tungstenite, its frame's header first
/// and its text in pieces encoded one after the other. With many other replies in flight on the
/// same connection, each arrives whole and alone: a frame begun inside another would be a
/// protocol error to the peer, and a piece out of place or a length announced wrong would change
/// the bytes or the JSON.
#[tokio::test]
async fn large_file_replies_arrive_whole_beside_other_replies() {
    use base64::Engine;
    let decode = |text: &Value| {
        let text = text.as_str().expect("base64 text");
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .expect("base64")
    };
    let env = env(false).await;
    let body: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    env.mkfile("big", &body);
    env.mkfile("small", b"small");
    let server = serve(&env).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let open = json!({"handleId": "r", "path": uri(env.p("big")), "mode": "read", "sandbox": null});
    let reply = peer.request("fs/open", open).await;
    assert_eq!(reply["result"]["handleId"], "r", "{reply}");
    // Everything is sent before any reply is read, so the replies queue up together.
    let mut sent = Vec::new();
    let mut id = 1_000;
    for round in 0..3u64 {
        let offset = round * 900_001;
        let mut request = |method: &str, params: Value| {
            id += 1;
            sent.push((id, method.to_owned(), params.clone()));
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        };
        let requests = [
            request(
                "fs/readBlock",
                json!({"handleId": "r", "offset": offset, "len": 1_048_576}),
            ),
            request("fs/readFile", json!({"path": uri(env.p("big"))})),
        ]
        .into_iter()
        .chain((0..16).map(|_| request("fs/getMetadata", json!({"path": uri(env.p("small"))}))));
        for message in requests.collect::<Vec<_>>() {
            peer.send(message).await;
        }
    }
    let mut answered = std::collections::HashMap::new();
    while answered.len() < sent.len() {
        let message = peer
            .next()
            .await
            .expect("every reply before the connection closed");
        let id = message["id"].as_i64().expect("a reply");
        assert!(answered.insert(id, message).is_none(), "one reply to {id}");
    }
    for (id, method, params) in sent {
        let reply = &answered[&id];
        let result = &reply["result"];
        match method.as_str() {
            "fs/readBlock" => {
                let offset = params["offset"].as_u64().unwrap() as usize;
                let end = (offset + 1_048_576).min(body.len());
                assert_eq!(decode(&result["chunk"]), &body[offset..end], "{id}");
                assert_eq!(result["eof"], end == body.len(), "{id}");
            }
            "fs/readFile" => assert!(decode(&result["dataBase64"]) == body, "{id}"),
            _ => assert_eq!(result["size"], 5, "{reply}"),
        }
    }
}
