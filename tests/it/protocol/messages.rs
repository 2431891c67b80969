//! The handshake order, malformed input, ids, error codes, and every method spoken by hand.

use super::*;

#[tokio::test]
async fn handshake_order_is_enforced() {
    let (_dir, ws) = workspace();
    let server = InProcessServer::serving(&ws).await;
    let mut peer = RawPeer::connect(&server.url).await;
    let params = json!({"path": path_str(&ws)});

    let reply = peer.request("fs/getMetadata", params.clone()).await;
    assert_eq!(
        error_of(&reply),
        (
            -32600,
            None,
            "client must call initialize before using filesystem methods"
        )
    );

    let reply = peer.request("initialize", json!({"clientName": "t"})).await;
    assert!(reply["result"].is_object(), "{reply}");

    let reply = peer.request("fs/getMetadata", params.clone()).await;
    assert_eq!(
        error_of(&reply),
        (
            -32600,
            None,
            "client must send initialized before using filesystem methods"
        )
    );

    let reply = peer.request("initialize", json!({"clientName": "t"})).await;
    assert_eq!(
        error_of(&reply),
        (
            -32600,
            None,
            "initialize may only be sent once per connection"
        )
    );

    peer.send(json!({"jsonrpc": "2.0", "method": "initialized"}))
        .await;
    let reply = peer.request("fs/getMetadata", params).await;
    assert_eq!(reply["result"]["isDirectory"], json!(true), "{reply}");
}

#[tokio::test]
async fn malformed_json_gets_an_error_and_the_connection_stays_usable() {
    let (_dir, ws) = workspace();
    let server = InProcessServer::serving(&ws).await;
    let mut peer = RawPeer::ready(&server.url).await;
    for garbage in ["not-json", "[1,2,3]", "{\"id\": 1}", "{"] {
        peer.send_text(garbage.to_string()).await;
        let reply = peer.next().await.expect("an error reply");
        assert_eq!(reply["id"], json!(-1), "{garbage}: {reply}");
        let (code, _, message) = error_of(&reply);
        assert_eq!(code, -32600, "{garbage}");
        assert!(
            message.starts_with("failed to parse websocket JSON-RPC message"),
            "{message}"
        );
    }
    let reply = peer
        .request("fs/getMetadata", json!({"path": path_str(&ws)}))
        .await;
    assert_eq!(reply["result"]["isDirectory"], json!(true), "{reply}");
}

#[tokio::test]
async fn string_ids_are_echoed_and_json_in_binary_frames_is_accepted() {
    let (_dir, ws) = workspace();
    let server = InProcessServer::serving(&ws).await;
    let mut peer = RawPeer::ready(&server.url).await;
    peer.send(
        json!({"id": "abc-1", "method": "fs/readDirectory", "params": {"path": path_str(&ws)}}),
    )
    .await;
    let reply = peer.reply_to(&json!("abc-1")).await;
    assert_eq!(reply["result"]["entries"], json!([]), "{reply}");

    let binary = json!({"id": 99, "method": "fs/getMetadata", "params": {"path": path_str(&ws)}});
    use futures_util::SinkExt;
    peer.ws
        .send(WsMessage::binary(binary.to_string().into_bytes()))
        .await
        .unwrap();
    let reply = peer.reply_to(&json!(99)).await;
    assert_eq!(reply["result"]["isDirectory"], json!(true), "{reply}");
}

#[tokio::test]
async fn unknown_methods_bad_params_and_bad_base64_get_their_codes() {
    let (_dir, ws) = workspace();
    let server = InProcessServer::serving(&ws).await;
    let mut peer = RawPeer::ready(&server.url).await;

    let reply = peer
        .request("fs/chmod", json!({"path": path_str(&ws)}))
        .await;
    assert_eq!(error_of(&reply).0, -32601);

    for params in [
        json!({"path": "relative/path"}),
        json!({}),
        json!({"path": format!("{}/a\u{0}b", path_str(&ws))}),
        json!({"path": 42}),
    ] {
        let reply = peer.request("fs/readFile", params.clone()).await;
        let (code, kind, _) = error_of(&reply);
        assert_eq!((code, kind), (-32602, Some("InvalidInput")), "{params}");
    }

    let file = path_str(&ws.join("f.txt"));
    let reply = peer
        .request(
            "fs/writeFile",
            json!({"path": file, "dataBase64": "@@not base64@@"}),
        )
        .await;
    assert_eq!(error_of(&reply).0, -32600);
    assert_eq!(error_of(&reply).1, Some("InvalidInput"));
    assert!(!ws.join("f.txt").exists());

    let reply = peer
        .request(
            "fs/readFile",
            json!({"path": path_str(&ws.join("missing"))}),
        )
        .await;
    assert_eq!(error_of(&reply).0, -32603);
    assert_eq!(error_of(&reply).1, Some("NotFound"));

    let reply = peer
        .request("fs/readFile", json!({"path": "/etc/passwd"}))
        .await;
    assert_eq!(error_of(&reply).1, Some("PermissionDenied"));
}

#[tokio::test]
async fn every_method_round_trips_with_codex_style_params() {
    let (_dir, ws) = workspace();
    let server = InProcessServer::serving(&ws).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let p = |name: &str| path_str(&ws.join(name));

    let ok = |reply: serde_json::Value| {
        assert!(reply.get("result").is_some(), "{reply}");
        reply["result"].clone()
    };
    ok(peer
        .request(
            "fs/createDirectory",
            json!({"path": p("d/e"), "recursive": null}),
        )
        .await);
    ok(peer
        .request(
            "fs/writeFile",
            json!({"path": p("d/e/f.txt"), "dataBase64": STANDARD.encode("hello")}),
        )
        .await);
    let read = ok(peer
        .request("fs/readFile", json!({"path": p("d/e/f.txt")}))
        .await);
    assert_eq!(read, json!({"dataBase64": "aGVsbG8="}));
    let meta = ok(peer
        .request("fs/getMetadata", json!({"path": p("d/e/f.txt")}))
        .await);
    assert_eq!(meta["isFile"], json!(true));
    assert_eq!(meta["isDirectory"], json!(false));
    assert_eq!(meta["isSymlink"], json!(false));
    assert_eq!(meta["size"], json!(5));
    assert!(meta["modifiedAtMs"].as_i64().unwrap() > 0);
    assert!(meta.get("createdAtMs").is_some());
    // capfs's extension: the last access, as get_file_info shows it.
    assert!(meta["accessedAtMs"].as_i64().unwrap() > 0);
    ok(peer
        .request(
            "fs/copy",
            json!({"sourcePath": p("d"), "destinationPath": p("c"), "recursive": true}),
        )
        .await);
    let reply = peer
        .request(
            "fs/copy",
            json!({"sourcePath": p("d"), "destinationPath": p("c2")}),
        )
        .await;
    assert_eq!(
        error_of(&reply),
        (
            -32600,
            Some("InvalidInput"),
            "fs/copy requires recursive: true when sourcePath is a directory"
        )
    );
    ok(peer
        .request(
            "fs/rename",
            json!({"sourcePath": p("c"), "destinationPath": p("r")}),
        )
        .await);
    let reply = peer
        .request(
            "fs/rename",
            json!({"sourcePath": p("d"), "destinationPath": p("r"), "overwrite": false}),
        )
        .await;
    assert_eq!(error_of(&reply).1, Some("AlreadyExists"));
    let listing = ok(peer
        .request("fs/readDirectory", json!({"path": p("r/e")}))
        .await);
    assert_eq!(
        listing,
        json!({"entries": [{"fileName": "f.txt", "isDirectory": false, "isFile": true, "isSymlink": false}]})
    );
    let reply = peer
        .request("fs/remove", json!({"path": p("r"), "recursive": false}))
        .await;
    assert_eq!(error_of(&reply).1, Some("DirectoryNotEmpty"));
    ok(peer.request("fs/remove", json!({"path": p("r")})).await);
    ok(peer.request("fs/remove", json!({"path": p("r")})).await);
    let reply = peer
        .request("fs/remove", json!({"path": p("r"), "force": false}))
        .await;
    assert_eq!(error_of(&reply).1, Some("NotFound"));
    assert!(!ws.join("r").exists());
    assert_eq!(std::fs::read(ws.join("d/e/f.txt")).unwrap(), b"hello");
}

/// `fs/readFile` reads a local file's first 16 KiB and one more byte from one open, and looks at
/// the size of a file that holds more before reading it whole: every size either side of that
/// comes back whole, and the read limit and the message limit refuse the same files whichever
/// way a file is read.
#[tokio::test]
async fn read_file_gives_every_size_whole_and_refuses_by_both_limits_either_side_of_its_first_range()
 {
    const RANGE: usize = 16 * 1024;
    let (_dir, ws) = workspace();
    let file = path_str(&ws.join("f"));
    let contents = |size: usize| (0..size).map(|i| (i * 7 % 251) as u8).collect::<Vec<u8>>();
    let read = |reply: &serde_json::Value| {
        let text = reply["result"]["dataBase64"].as_str();
        STANDARD
            .decode(text.unwrap_or_else(|| panic!("{reply}")))
            .unwrap()
    };

    let server = InProcessServer::serving(&ws).await;
    let mut peer = RawPeer::ready(&server.url).await;
    for size in [0, 1, RANGE - 1, RANGE, RANGE + 1, RANGE + 2, 300 * 1024] {
        std::fs::write(ws.join("f"), contents(size)).unwrap();
        let reply = peer.request("fs/readFile", json!({"path": file})).await;
        assert_eq!(read(&reply), contents(size), "{size} bytes");
    }
    server.stop().await;

    // A read limit below the range, at it and above it: a file over the limit is refused, one
    // at the limit is read.
    for limit in [RANGE / 2, RANGE, RANGE + 100] {
        let sandbox = capfs::Sandbox::new()
            .with_root(&ws, capfs::Access::ReadWrite)
            .unwrap();
        let fs: Arc<dyn ExecutorFileSystem> = Arc::new(capfs::LocalFileSystem::with_read_limit(
            sandbox,
            limit as u64,
        ));
        let server = InProcessServer::start(fs, Default::default()).await;
        let mut peer = RawPeer::ready(&server.url).await;
        std::fs::write(ws.join("f"), contents(limit)).unwrap();
        let reply = peer.request("fs/readFile", json!({"path": file})).await;
        assert_eq!(read(&reply), contents(limit), "at the limit of {limit}");
        std::fs::write(ws.join("f"), contents(limit + 1)).unwrap();
        let reply = peer.request("fs/readFile", json!({"path": file})).await;
        let (_, kind, message) = error_of(&reply);
        assert_eq!(
            kind,
            Some("InvalidInput"),
            "past the limit of {limit}: {reply}"
        );
        assert!(message.contains("too large"), "{message}");
        server.stop().await;
    }

    // A message limit whose largest reply carries less than the range: a file whose reply
    // fits is read, one whose reply would not is refused, naming the streamed read.
    let config = capfs_wire::server::ServerConfig::default().with_max_message_bytes(12 * 1024);
    let server = InProcessServer::serving_roots(&[(&ws, capfs::Access::ReadWrite)], config).await;
    let mut peer = RawPeer::ready(&server.url).await;
    std::fs::write(ws.join("f"), contents(4 * 1024)).unwrap();
    let reply = peer.request("fs/readFile", json!({"path": file})).await;
    assert_eq!(read(&reply), contents(4 * 1024));
    std::fs::write(ws.join("f"), contents(10 * 1024)).unwrap();
    let reply = peer.request("fs/readFile", json!({"path": file})).await;
    let (_, _, message) = error_of(&reply);
    assert!(message.contains("capfs/readFileStream"), "{reply}");
    server.stop().await;
}

/// Through a backend that hands over no descriptor, `fs/readFile` reads nothing of a file before
/// its size is covered: a file whose reply no budget share can hold is refused with no byte of
/// it read (inotify sees no access), and a small one is still read.
#[tokio::test]
async fn read_file_through_a_backend_without_descriptors_reads_nothing_it_has_not_covered() {
    use rustix::fs::inotify;
    let env = crate::common::env(false).await;
    let big = env.mkfile("big", &vec![7u8; 3 << 20]);
    env.mkfile("small", b"small");
    let fs: Arc<dyn ExecutorFileSystem> = Arc::new(crate::walk::default_walk(&env));
    let config =
        capfs_wire::server::ServerConfig::default().with_max_outgoing_bytes_per_connection(4 << 20);
    let server = InProcessServer::start(fs, config).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let watch =
        inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
    inotify::add_watch(&watch, &big, inotify::WatchFlags::ACCESS).unwrap();

    let reply = peer
        .request("fs/readFile", json!({"path": path_str(&big)}))
        .await;
    let (_, _, message) = error_of(&reply);
    assert!(message.contains("outgoing budget"), "{reply}");
    let mut buffer = [std::mem::MaybeUninit::uninit(); 1024];
    let mut events = inotify::Reader::new(&watch, &mut buffer);
    assert_eq!(
        events.next().err(),
        Some(rustix::io::Errno::AGAIN),
        "the file was read before its size was covered"
    );

    let reply = peer
        .request(
            "fs/readFile",
            json!({"path": path_str(&env.ws_host("small"))}),
        )
        .await;
    assert_eq!(
        reply["result"]["dataBase64"],
        json!(STANDARD.encode(b"small"))
    );
    server.stop().await;
}
