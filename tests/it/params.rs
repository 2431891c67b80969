//! A request's params are read once, straight into their method's type: the request's `sandbox`
//! policy holds for every method that names a path (streamed reads and writes, watches), and a
//! member sent twice is refused instead of being read one way by one reader and another way by
//! the next.

use futures_util::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use capfs_wire::protocol::data_frame_header;

use crate::codex_protocol::{serve, uri};
use crate::common::env;
use crate::serve::{RawPeer, error_of};

/// A profile that reads everywhere and denies `denied` outright.
fn reads_all_but(denied: &str) -> Value {
    json!({"permissions": {"type": "managed", "file_system": {"type": "restricted", "entries": [
        {"path": {"type": "special", "value": {"kind": "root"}}, "access": "read"},
        {"path": {"type": "path", "path": uri(denied)}, "access": "deny"},
    ]}}})
}

fn refused_by_policy(reply: &Value) {
    let (code, kind, message) = error_of(reply);
    assert_eq!((code, kind), (-32603, Some("PermissionDenied")), "{reply}");
    assert!(message.contains("sandbox policy"), "{reply}");
}

#[tokio::test]
async fn streamed_writes_and_reads_keep_the_requests_policy() {
    let env = env(false).await;
    env.mkfile("secret.txt", b"kept");
    let server = serve(&env).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let secret = env.p("secret.txt").to_string();
    let policy = reads_all_but(&secret);

    // A write the profile does not allow: refused, its data frames dropped as they come, the
    // file as it was, and the connection still answering.
    let write = json!({"path": env.p("new.txt").to_string(), "streamId": 7, "size": 3,
        "sandbox": policy});
    let id = json!(100);
    peer.send(json!({"id": id, "method": "capfs/writeFileStream", "params": write}))
        .await;
    let mut frame = data_frame_header(7).to_vec();
    frame.extend_from_slice(b"abc");
    peer.ws.send(WsMessage::Binary(frame.into())).await.unwrap();
    refused_by_policy(&peer.reply_to(&id).await);
    assert!(!env.ws_host("new.txt").exists());

    // A read of the denied file: refused before any data frame.
    let read = json!({"path": secret, "streamId": 8, "sandbox": policy});
    let reply = peer.request("capfs/readFileStream", read).await;
    refused_by_policy(&reply);
    // Without the policy, the file is read.
    let reply = peer.request("fs/readFile", json!({"path": secret})).await;
    assert_eq!(reply["result"]["dataBase64"], "a2VwdA==", "{reply}");
}

#[tokio::test]
async fn a_watch_names_paths_the_policy_must_let_it_read() {
    let env = env(false).await;
    let server = serve(&env).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let hidden = env.p("hidden").to_string();
    let watch = |missing: &str| json!({"watchId": 1, "missing": [uri(missing)], "sandbox": reads_all_but(&hidden)});
    let reply = peer
        .request("fs/watchMissing", watch(&format!("{hidden}/later")))
        .await;
    let (code, kind, _) = error_of(&reply);
    assert_eq!((code, kind), (-32600, Some("PermissionDenied")), "{reply}");
    let allowed = env.p("later").to_string();
    let reply = peer.request("fs/watchMissing", watch(&allowed)).await;
    assert_eq!(reply["result"]["watching"], true, "{reply}");
}

#[tokio::test]
async fn a_member_sent_twice_is_refused() {
    let env = env(false).await;
    let server = serve(&env).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let first = env.p("a.txt").to_string();
    let params = format!(r#"{{"path":"{first}","streamId":1,"path":"/etc/passwd"}}"#);
    for method in ["fs/readFile", "capfs/readFileStream", "fs/getMetadata"] {
        // Params after their method are decoded as the message is read, params before it from
        // their text: both refuse alike.
        for text in [
            format!(r#"{{"id":5,"method":"{method}","params":{params}}}"#),
            format!(r#"{{"params":{params},"id":5,"method":"{method}"}}"#),
        ] {
            peer.send_text(text.clone()).await;
            let reply = peer.reply_to(&json!(5)).await;
            let (code, _, message) = error_of(&reply);
            assert_eq!(code, -32602, "{text}: {reply}");
            assert_eq!(message, "invalid params: duplicate field `path`", "{text}");
        }
    }
}

#[tokio::test]
async fn params_are_read_alike_before_and_after_their_method() {
    let env = env(false).await;
    env.mkfile("a.txt", b"kept");
    let server = serve(&env).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let path = env.p("a.txt");
    let orders = |params: &str| {
        [
            format!(r#"{{"id":6,"method":"fs/readFile","params":{params}}}"#),
            format!(r#"{{"params":{params},"method":"fs/readFile","id":6}}"#),
        ]
    };
    let mut replies = Vec::new();
    for text in orders(&format!(r#"{{"path":"{path}","unread":[1,"x"]}}"#)) {
        peer.send_text(text).await;
        replies.push(peer.reply_to(&json!(6)).await);
    }
    assert_eq!(
        replies[0]["result"]["dataBase64"], "a2VwdA==",
        "{}",
        replies[0]
    );
    assert_eq!(replies[0], replies[1]);

    // A value no one reads is still checked as decoding the message would check it: the
    // message is refused as unreadable, whichever order its members come in.
    for unread in [r#""\ud800""#, "1e999"] {
        for text in orders(&format!(r#"{{"path":"{path}","unread":{unread}}}"#)) {
            peer.send_text(text.clone()).await;
            let reply = peer.reply_to(&json!(-1)).await;
            let (code, _, message) = error_of(&reply);
            assert_eq!(code, -32600, "{text}: {reply}");
            assert!(message.starts_with("failed to parse"), "{text}: {reply}");
        }
    }
}
