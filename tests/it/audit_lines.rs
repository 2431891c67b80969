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

/// An audit log's writer whose lines a test reads back.
#[derive(Clone, Default)]
pub(crate) struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    pub(crate) fn values(&self) -> Vec<Value> {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// The decorator passes every call on, the streamed ones to the wrapped file system's own, and
/// what it narrows stays audited; named as the server names them when asked.
#[tokio::test]
async fn an_audited_file_system_lines_every_call_and_stays_audited_when_narrowed() {
    use capfs::audit::{AuditLog, Audited};
    use capfs::{ExecutorFileSystem, RootAccess, RootDescription, WriteOptions};

    let env = crate::common::env(false).await;
    env.mkfile("sub/a.txt", b"a");
    let lines = Lines::default();
    let log = AuditLog::to_writer(lines.clone());
    let fs = Audited::new(env.fs.clone(), log.clone()).with_peer("test");
    let target = env.p("sub/big.bin");
    let mut contents: &[u8] = &[7u8; 1000];
    let options = WriteOptions::default().with_mode(Some(0o600));
    let written = fs
        .write_file_from(&target, &mut contents, Some(1000), options, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(written, 1000);
    let sub = RootDescription::new(env.p("sub"), RootAccess::ReadOnly);
    let narrowed = fs.narrowed(&[sub]).await.unwrap();
    assert_eq!(
        narrowed.fs.read_file(&env.p("sub/a.txt")).await.unwrap(),
        b"a"
    );
    let outside = narrowed.fs.read_file(&env.p("other")).await.unwrap_err();
    assert_eq!(outside.kind(), std::io::ErrorKind::PermissionDenied);
    let served = capfs_wire::server::audited(env.fs.clone(), log);
    served.get_metadata(&env.p("sub")).await.unwrap();

    let lines = lines.values();
    let methods: Vec<&str> = lines
        .iter()
        .map(|l| l["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        [
            "write_file_from",
            "narrowed",
            "read_file",
            "read_file",
            "fs/getMetadata"
        ]
    );
    assert_eq!(lines[0]["bytes"], 1000);
    assert_eq!(lines[0]["peer"], "test");
    assert_eq!(lines[1]["paths"], json!([env.p("sub").to_string()]));
    assert_eq!(
        (lines[2]["outcome"].as_str(), lines[2]["bytes"].as_u64()),
        (Some("ok"), Some(1))
    );
    assert_eq!(lines[3]["denied"], true);
    assert!(
        lines[3].get("code").is_none(),
        "no wire, no code: {}",
        lines[3]
    );
}
