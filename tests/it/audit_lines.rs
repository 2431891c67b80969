//! The audit log under a hostile peer: every field of every line bounded, every path a request
//! names listed once and as sent, a link's target among them.

use serde_json::{Value, json};

use crate::serve::{RawPeer, ServerProcess, workspace};

/// Longest line a request can make: 8 paths and a method of 1,000 characters each (up to
/// 4 bytes each, escaped as JSON at most 6), a 200-character error, the fixed fields.
const MAX_LINE_BYTES: usize = 64 * 1024;

#[tokio::test]
async fn a_hostile_peer_cannot_make_long_lines_or_hide_a_links_target() {
    let (dir, ws) = workspace();
    let audit_file = dir.path().join("audit.jsonl");
    let server = ServerProcess::start_audited(&ws, &audit_file).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let root = ws.display().to_string();
    std::fs::create_dir(ws.join("sub")).unwrap();

    // A path of 2 MB under the root, a method name of 1 MiB.
    let long_path = format!("{root}/{}", "a/".repeat(1 << 20));
    let reply = peer
        .request("fs/getMetadata", json!({"path": long_path}))
        .await;
    assert!(reply.get("error").is_some(), "{reply}");
    let long_method = "m".repeat(1 << 20);
    let reply = peer.request(&long_method, json!({"path": "/x"})).await;
    assert!(reply.get("error").is_some());

    // A link to outside: its target is in the line.
    let link = format!("{root}/link");
    let reply = peer
        .request(
            "capfs/createSymlink",
            json!({"path": link, "target": "/etc/shadow"}),
        )
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
    let as_sent = format!("{root}/sub/../link");
    let reply = peer
        .request("capfs/readLink", json!({"path": as_sent}))
        .await;
    assert_eq!(reply["result"]["target"], "/etc/shadow", "{reply}");
    let walked = format!("{root}/sub/..");
    let reply = peer
        .request(
            "capfs/walk",
            json!({"path": walked, "maxDepth": 2, "maxEntries": 10}),
        )
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
    drop(peer);
    server.stop().await;

    let text = std::fs::read_to_string(&audit_file).unwrap();
    for line in text.lines() {
        assert!(
            line.len() <= MAX_LINE_BYTES,
            "a line of {} bytes",
            line.len()
        );
    }
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_method = |m: &str| {
        lines
            .iter()
            .find(|l| l["method"] == m)
            .unwrap_or_else(|| panic!("no line for {m}: {text}"))
    };
    let metadata = by_method("fs/getMetadata");
    let path = metadata["paths"][0].as_str().unwrap();
    assert!(
        path.ends_with(" bytes]") && path.contains("…[cut "),
        "{path}"
    );
    assert!(
        lines.iter().any(|l| l["method"]
            .as_str()
            .unwrap()
            .ends_with("…[cut 1047576 bytes]")),
        "the long method is cut with a marker"
    );
    assert_eq!(
        by_method("capfs/createSymlink")["paths"],
        json!([link, "/etc/shadow"])
    );
    assert_eq!(by_method("capfs/readLink")["paths"], json!([as_sent]));
    assert_eq!(by_method("capfs/walk")["paths"], json!([walked]));
}
