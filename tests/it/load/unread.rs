//! Hostile shapes of the load test that ask for large replies and never read them: whole-file
//! reads, walks and listings of a large tree. Each reply must wait for the server's outgoing
//! budget before it is built, so that what such peers hold stays within the budget.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::SinkExt;
use serde_json::json;

use super::{raw_ready, request};

/// Connections of each shape below, and the requests each sends.
pub const UNREAD_CONNECTIONS: usize = 4;
pub const UNREAD_REQUESTS: u64 = 64;
/// Size of the file the whole-file readers ask for: its reply is 4 MiB + 5.3 MiB of text while
/// it is built. 64 of them held at once would be 600 MiB per connection.
pub const UNREAD_FILE_BYTES: usize = 4 << 20;
/// Files of the tree the walkers and listers ask for, each with a 100-byte name: a listing of
/// it is 1.8 MiB of JSON, a walk 2 MiB.
const TREE_FILES: usize = 12_000;

/// What the unread shapes ask for: a large file, and a directory of many long names.
pub struct UnreadTargets {
    pub file: PathBuf,
    pub tree: PathBuf,
}

impl UnreadTargets {
    pub fn plant(dir: &Path) -> Self {
        let file = dir.join("unread-file");
        std::fs::write(&file, vec![0xa5u8; UNREAD_FILE_BYTES]).unwrap();
        let tree = dir.join("unread-tree");
        std::fs::create_dir(&tree).unwrap();
        for n in 0..TREE_FILES {
            std::fs::write(tree.join(format!("{n:0>100}")), b"").unwrap();
        }
        Self { file, tree }
    }
}

/// The method and params of shape `kind`'s requests.
fn unread_request(kind: usize, targets: &UnreadTargets) -> (&'static str, serde_json::Value) {
    match kind {
        0 => ("fs/readFile", json!({"path": targets.file})),
        1 => ("capfs/walk", json!({"path": targets.tree})),
        _ => ("fs/readDirectory", json!({"path": targets.tree})),
    }
}

/// Shape `kind` (0: whole-file reads, 1: walks, 2: listings): `UNREAD_REQUESTS` requests on
/// one connection whose socket is never read again.
pub async fn unread_peer(
    url: String,
    kind: usize,
    targets: Arc<UnreadTargets>,
    ready: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) {
    let (mut sink, stream) = raw_ready(&url).await;
    let (method, params) = unread_request(kind, &targets);
    for id in 1..=UNREAD_REQUESTS {
        if sink
            .send(request(id, method, params.clone()))
            .await
            .is_err()
        {
            return;
        }
    }
    ready.fetch_add(1, Ordering::Relaxed);
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop((sink, stream));
}
