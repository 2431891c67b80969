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
