//! The `capfs` client against a server that lies or stalls (the fake server of
//! `hostile_server`, or a `printf` behind `--remote-command`): frames and messages are bounded
//! before anything is allocated, a server that stops answering is given up on, and a reply
//! that lies (a name holding NUL, more data than announced, a tree without end, a walk that
//! contradicts itself or leaves entries out) is an error.

use futures_util::StreamExt;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::hostile_server::{Answer, capfs_initialize, describe, fake_server, listing_server, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_header_announcing_a_terabyte_is_refused_not_allocated() {
    // Over a command's stdio: a binary frame header of 2^40 bytes, then 2^64 - 1.
    for header in [
        r"\201\177\000\000\001\000\000\000\000\000",
        r"\201\177\377\377\377\377\377\377\377\377",
    ] {
        let command = format!("printf '{header}'; exec sleep 60");
        let out = run(&["--remote-command", &command, "ls", "/ws"]).await;
        assert_eq!(out.status.code(), Some(5), "{header}: {}", describe(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("over the client's limit"),
            "{}",
            describe(&out)
        );
        assert!(!stderr.contains("memory allocation"), "{}", describe(&out));
    }
    // Over TCP, after the handshake.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        let _ = ws.next().await;
        let tcp = ws.get_mut();
        tcp.write_all(b"\x82\x7f\x00\x00\x01\x00\x00\x00\x00\x00")
            .await
            .unwrap();
        // Held open until the client goes.
        let _ = ws.next().await;
    });
    let out = run(&["--remote", &url, "ls", "/ws"]).await;
    assert_eq!(out.status.code(), Some(5), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("over the client's limit"));
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_over_max_message_bytes_is_a_clear_error() {
    let many: Vec<String> = (0..400).map(|i| format!("name-{i:04}")).collect();
    let (url, server) = fake_server(listing_server(many)).await;
    let out = run(&["--remote", &url, "--max-message-bytes", "4K", "ls", "/ws/d"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("over the client's limit of 4096 bytes"),
        "{}",
        describe(&out)
    );
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_name_holding_nul_is_an_error_not_a_panic() {
    for args in [
        &["ls", "-l", "/ws/d"][..],
        &["ls", "--json", "/ws/d"],
        &["ls", "/ws/d/*"],
        &["get", "-r", "-q", "/ws/d"],
    ] {
        let (url, server) = fake_server(listing_server(vec!["a\u{0}b".to_string()])).await;
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("copy");
        let mut all = vec!["--remote", url.as_str()];
        all.extend_from_slice(args);
        if args[0] == "get" {
            all.push(dest.to_str().unwrap());
        }
        let out = run(&all).await;
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", describe(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("invalid name"),
            "{args:?}: {}",
            describe(&out)
        );
        assert!(!dest.exists(), "{args:?}");
        server.abort();
    }
}

/// Bounds the tests set, far below the defaults, so that a client that waits is seen at once.
const SHORT: &str = "300ms";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_answering_is_given_up_on() {
    // Calls: no reply ever.
    let (url, server) = fake_server(|method, _| match method {
        "initialize" => Answer::Result(capfs_initialize()),
        _ => Answer::Silence,
    })
    .await;
    let out = run(&["--remote", &url, "--call-timeout", SHORT, "stat", "/ws/x"]).await;
    assert_eq!(out.status.code(), Some(5), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("call timeout"),
        "{}",
        describe(&out)
    );
    server.abort();
    // Streams: one frame, then nothing; a call timeout longer than the test's wait shows that
    // the idle timeout is what ends them.
    for args in [&["cat", "/ws/f"][..], &["get", "-q", "/ws/f"]] {
        let (url, server) = fake_server(|method, _| match method {
            "initialize" => Answer::Result(capfs_initialize()),
            "fs/getMetadata" => Answer::Result(json!({"isDirectory": false, "isFile": true,
                "size": 1 << 20, "mode": 420})),
            "capfs/readFileStream" => Answer::Stream(vec![7; 1000], None),
            _ => Answer::Silence,
        })
        .await;
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("dest");
        let mut all = vec!["--remote", url.as_str(), "--call-timeout", "1h"];
        all.extend_from_slice(&["--stream-idle-timeout", SHORT]);
        all.extend_from_slice(args);
        if args[0] == "get" {
            all.push(dest.to_str().unwrap());
        }
        let out = run(&all).await;
        assert_eq!(out.status.code(), Some(5), "{args:?}: {}", describe(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("stream idle timeout"),
            "{args:?}: {}",
            describe(&out)
        );
        // No destination and no temporary file left behind.
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{args:?}"
        );
        server.abort();
    }
    // A streamed write the server takes in and never answers.
    let (url, server) = fake_server(|method, _| match method {
        "initialize" => Answer::Result(capfs_initialize()),
        "capfs/writeFileStream" => Answer::Silence,
        _ => Answer::Error("no such file".to_string()),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    std::fs::write(&source, vec![5u8; 200_000]).unwrap();
    let mut all = vec!["--remote", url.as_str(), "--call-timeout", "1h"];
    all.extend_from_slice(&["--stream-idle-timeout", SHORT, "put", "-q"]);
    all.extend_from_slice(&[source.to_str().unwrap(), "/ws/dest"]);
    let out = run(&all).await;
    assert_eq!(out.status.code(), Some(5), "put: {}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("stream idle timeout"),
        "put: {}",
        describe(&out)
    );
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_refuses_more_data_than_get_metadata_announced() {
    let (url, server) = fake_server(|method, _| match method {
        "initialize" => Answer::Result(capfs_initialize()),
        "fs/getMetadata" => Answer::Result(json!({"isDirectory": false, "isFile": true,
            "size": 5, "mode": 420})),
        "capfs/readFileStream" => Answer::Stream(vec![7; 300_000], Some(300_000)),
        _ => Answer::Silence,
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("dest");
    let out = run(&[
        "--remote",
        &url,
        "get",
        "-q",
        "/ws/f",
        dest.to_str().unwrap(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("more than the 5 bytes"),
        "{}",
        describe(&out)
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_r_of_an_endless_tree_stops_at_its_bound() {
    // Every directory holds a directory `d`, forever.
    let (url, server) = fake_server(|method, _| match method {
        "initialize" => Answer::Result(capfs_initialize()),
        "fs/getMetadata" => Answer::Result(json!({"isDirectory": true, "isFile": false,
            "mode": 493})),
        "fs/readDirectory" => Answer::Result(json!({"entries": [
            {"fileName": "d", "isDirectory": true, "isFile": false}]})),
        _ => Answer::Silence,
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("copy");
    let out = run(&[
        "--remote",
        &url,
        "get",
        "-r",
        "-q",
        "/ws/top",
        dest.to_str().unwrap(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("levels deep"),
        "{}",
        describe(&out)
    );
    // Refused while planning: nothing written.
    assert!(!dest.exists());
    server.abort();
}

/// A capfs server that walks: `/ws/top` is a directory, each `capfs/walk` and
/// `fs/readDirectory` is answered with what `walks` gives for the method and the path relative
/// to `/ws/top`, anything else is a file holding `hello`.
fn walking_server(
    walks: impl Fn(&str, &str) -> serde_json::Value + Send + 'static,
) -> impl Fn(&str, &serde_json::Value) -> Answer + Send + 'static {
    move |method, params| {
        let path = params["path"].as_str().unwrap_or("");
        match method {
            "initialize" => {
                let mut init = capfs_initialize();
                init["capfs"]["walk"] = json!(true);
                Answer::Result(init)
            }
            "fs/getMetadata" if path == "/ws/top" => Answer::Result(
                json!({"isDirectory": true, "isFile": false, "mode": 493, "size": 0}),
            ),
            "fs/getMetadata" => Answer::Result(
                json!({"isDirectory": false, "isFile": true, "mode": 420, "size": 5}),
            ),
            "capfs/walk" | "fs/readDirectory" => {
                let rel = path.strip_prefix("/ws/top").unwrap_or(path);
                Answer::Result(walks(method, rel.trim_start_matches('/')))
            }
            "capfs/readFileStream" => Answer::Stream(b"hello".to_vec(), Some(5)),
            _ => Answer::Error("refused".to_string()),
        }
    }
}

fn walked(kind: &str, path: &str) -> serde_json::Value {
    let (dir, file, link) = (kind == "dir", kind == "file", kind == "link");
    let mut entry = json!({"path": path, "isDirectory": dir, "isFile": file,
        "isSymlink": link, "size": if file { 5 } else { 0 }});
    if link {
        entry["linkTarget"] = json!("elsewhere");
    } else {
        entry["mode"] = json!(if dir { 493 } else { 420 });
        entry["modifiedAtMs"] = json!(1_000_000_000_000i64);
    }
    entry
}

/// `get -r /ws/top` from `walking_server(walks)` into a fresh destination: its output, and
/// the destination.
async fn get_r(
    walks: impl Fn(&str, &str) -> serde_json::Value + Send + 'static,
) -> (std::process::Output, tempfile::TempDir, std::path::PathBuf) {
    let (url, server) = fake_server(walking_server(walks)).await;
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("copy");
    let args = ["--remote", &url, "get", "-r", "-q", "/ws/top"];
    let out = run(&[&args[..], &[dest.to_str().unwrap()]].concat()).await;
    server.abort();
    (out, dir, dest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_r_refuses_a_walk_that_contradicts_itself_or_leaves_entries_out() {
    // The harness first: an honest walk is copied.
    let honest = || {
        json!({"entries": [walked("dir", "a"), walked("file", "a/b")],
        "truncated": false})
    };
    let (out, _dir, dest) = get_r(move |_, _| honest()).await;
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(std::fs::read(dest.join("a/b")).unwrap(), b"hello");
    let cases = [
        // An entry whose parent is never listed, or not listed as a directory.
        (
            vec![walked("file", "a/b")],
            0,
            "'/ws/top/a/b': listed without its parent directory '/ws/top/a'",
        ),
        (
            vec![
                walked("file", "x"),
                walked("dir", "a/b"),
                walked("file", "a/b/c"),
            ],
            0,
            "'/ws/top/a/b': listed without its parent directory '/ws/top/a'",
        ),
        (
            vec![walked("file", "a"), walked("file", "a/b")],
            0,
            "'/ws/top/a/b': listed without its parent directory '/ws/top/a'",
        ),
        (
            vec![walked("link", "a"), walked("file", "a/b")],
            0,
            "'/ws/top/a/b': listed without its parent directory '/ws/top/a'",
        ),
        // A name listed twice, alike or not.
        (
            vec![walked("file", "a"), walked("file", "a")],
            0,
            "'/ws/top/a': listed twice",
        ),
        (
            vec![walked("dir", "a"), walked("file", "a")],
            0,
            "'/ws/top/a': listed twice",
        ),
        (
            vec![
                walked("dir", "d"),
                walked("link", "d/a"),
                walked("file", "d/a"),
            ],
            0,
            "'/ws/top/d/a': listed twice",
        ),
        // Names the server could not send.
        (
            vec![walked("file", "a")],
            2,
            "'/ws/top': 2 entries below it whose names are not UTF-8 were left out",
        ),
    ];
    for (entries, omitted, expected) in cases {
        let reply = json!({"entries": entries, "truncated": false, "nonUtf8NamesOmitted": omitted});
        let shown = reply.to_string();
        let (out, _dir, dest) = get_r(move |_, _| reply.clone()).await;
        assert_eq!(out.status.code(), Some(1), "{shown}: {}", describe(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let message = format!("capfs: {expected} by the server; get -r copies no tree in part\n");
        assert_eq!(stderr, message, "{shown}");
        // Refused while planning: nothing written.
        assert!(!dest.exists(), "{shown}");
    }
}

/// A directory at the walk's last level has its entries unlisted, whether or not the walk
/// says it was cut there: they are walked from it and copied, never left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_r_walks_below_the_last_level_even_when_the_walk_says_it_is_whole() {
    // 256 levels: as deep as one walk goes.
    let deepest = vec!["d"; 256].join("/");
    let below = deepest.clone();
    let (out, _dir, dest) = get_r(move |_, rel| {
        if rel == below {
            return json!({"entries": [walked("file", "f")], "truncated": false});
        }
        let entries: Vec<_> = (1..=256)
            .map(|n| walked("dir", &vec!["d"; n].join("/")))
            .collect();
        json!({"entries": entries, "truncated": false})
    })
    .await;
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        std::fs::read(dest.join(&deepest).join("f")).unwrap(),
        b"hello"
    );
}

/// A walk that says it was cut at its depth but holds no directory at its last level was cut
/// elsewhere: the tree is listed again, and copied whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_r_lists_again_a_walk_cut_short_that_claims_only_its_depth_cut_it() {
    let (out, _dir, dest) = get_r(|method, _| match method {
        "capfs/walk" => json!({"entries": [walked("file", "a")], "truncated": true,
            "stopped": false}),
        _ => json!({"entries": [
            {"fileName": "a", "isDirectory": false, "isFile": true},
            {"fileName": "b", "isDirectory": false, "isFile": true}]}),
    })
    .await;
    assert!(out.status.success(), "{}", describe(&out));
    for name in ["a", "b"] {
        assert_eq!(std::fs::read(dest.join(name)).unwrap(), b"hello", "{name}");
    }
}
