//! What a walk reports beyond types when asked: permission bits, modification times and link
//! text, on both backends; link text read as stored, never followed; and a client filling in
//! what a server too old to send them left out.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, UNIX_EPOCH};

use capfs::{AbsolutePathBuf, ExecutorFileSystem, Walk, WalkEntry, WalkOptions};
use capfs_wire::{RemoteFileSystem, RemoteOptions};
use serde_json::json;
use test_case::test_case;

use crate::common::{CANARY, env};
use crate::hostile_server::{Answer, capfs_initialize, fake_server};

fn entry<'a>(walk: &'a Walk, path: &str) -> &'a WalkEntry {
    walk.entries
        .iter()
        .find(|e| e.path == path)
        .unwrap_or_else(|| panic!("{path} not walked: {walk:?}"))
}

fn detailed() -> WalkOptions {
    WalkOptions::default()
        .with_metadata(true)
        .with_link_targets(true)
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn walks_report_modes_times_and_link_text_only_when_asked(remote: bool) {
    let env = env(remote).await;
    let file = env.mkfile("t/tool", b"#!/bin/sh\n");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o751)).unwrap();
    let when = UNIX_EPOCH + Duration::from_millis(1_600_000_000_250);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(when)
        .unwrap();
    let dir = env.mkdir("t/sub");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o2750)).unwrap();
    env.symlink("t/sub/rel", "../tool");
    env.symlink("t/dangling", "no/such thing");

    let plain = env
        .fs
        .walk(&env.p("t"), &WalkOptions::default())
        .await
        .unwrap();
    assert_eq!(plain.entries.len(), 4, "{plain:?}");
    for e in &plain.entries {
        let unasked = (e.mode, e.modified_at_ms, e.link_target.as_ref());
        assert_eq!(unasked, (None, None, None), "{}", e.path);
    }

    let walk = env.fs.walk(&env.p("t"), &detailed()).await.unwrap();
    assert!(walk.is_complete(), "{walk:?}");
    let tool = entry(&walk, "tool");
    assert_eq!(tool.mode, Some(0o751));
    assert_eq!(tool.modified_at_ms, Some(1_600_000_000_250));
    assert_eq!(tool.link_target, None);
    let sub = entry(&walk, "sub");
    assert_eq!(sub.mode, Some(0o2750));
    assert!(sub.modified_at_ms.is_some_and(|t| t > 0));
    for (link, text) in [("sub/rel", "../tool"), ("dangling", "no/such thing")] {
        let e = entry(&walk, link);
        assert!(e.is_symlink);
        assert_eq!(e.link_target, Some(PathBuf::from(text)), "{link}");
        assert_eq!((e.mode, e.modified_at_ms), (None, None), "{link}");
    }
    // Asking for one part leaves the other out.
    let links = env
        .fs
        .walk(&env.p("t"), &WalkOptions::default().with_link_targets(true))
        .await
        .unwrap();
    assert_eq!(entry(&links, "tool").mode, None);
    assert!(entry(&links, "dangling").link_target.is_some());
}

/// A link leading out of the root is reported by its text; what it leads to is never opened
/// or listed, so nothing of the canary outside reaches the walk.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn a_link_out_of_the_root_is_reported_by_its_text_and_never_followed(remote: bool) {
    let env = env(remote).await;
    let secret = env.outside.join("secret");
    std::fs::write(&secret, CANARY).unwrap();
    std::fs::create_dir(env.outside.join("tree")).unwrap();
    std::fs::write(env.outside.join("tree/inner"), CANARY).unwrap();
    env.mkdir("t");
    env.symlink("t/absolute", &secret);
    env.symlink("t/relative", "../../outside/secret");
    env.symlink("t/dir", env.outside.join("tree"));
    let before = env.outside_snapshot();
    let walk = env
        .fs
        .walk(&env.p("t"), &detailed().with_sizes(true))
        .await
        .unwrap();
    assert!(walk.is_complete(), "{walk:?}");
    assert_eq!(
        walk.entries.len(),
        3,
        "the linked directory is not entered: {walk:?}"
    );
    assert_eq!(entry(&walk, "absolute").link_target, Some(secret.clone()));
    assert_eq!(
        entry(&walk, "relative").link_target,
        Some(PathBuf::from("../../outside/secret"))
    );
    assert_eq!(
        entry(&walk, "dir").link_target,
        Some(env.outside.join("tree"))
    );
    for e in &walk.entries {
        assert_eq!(
            (e.size, e.mode, e.is_file, e.is_directory),
            (0, None, false, false)
        );
    }
    assert!(!format!("{walk:?}").contains(CANARY));
    assert!(!format!("{walk:?}").contains("inner"));
    env.assert_outside_unchanged(&before);
}

/// A server whose walk predates modes and link text: the client fetches each of them as a
/// walk by listing does, and takes a truncated walk that does not say why as stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_fills_in_what_an_older_server_leaves_out_of_its_walk() {
    let mut init = capfs_initialize();
    init["capfs"]["walk"] = json!(true);
    let (url, server) = fake_server(move |method, params| match method {
        "initialize" => Answer::Result(init.clone()),
        "capfs/walk" => Answer::Result(json!({"entries": [
            {"path": "f", "isFile": true, "size": 3},
            {"path": "d", "isDirectory": true},
            {"path": "d/l", "isSymlink": true}], "truncated": true})),
        "fs/getMetadata" if params["path"] == "/ws/t/f" => Answer::Result(json!({
            "isDirectory": false, "isFile": true, "size": 3, "mode": 0o640,
            "modifiedAtMs": 77})),
        "fs/getMetadata" if params["path"] == "/ws/t/d" => Answer::Result(json!({
            "isDirectory": true, "isFile": false, "mode": 0o700})),
        "capfs/readLink" if params["path"] == "/ws/t/d/l" => {
            Answer::Result(json!({"target": "../f"}))
        }
        _ => Answer::Error("not expected".into()),
    })
    .await;
    let fs = RemoteFileSystem::connect(&url, RemoteOptions::default())
        .await
        .unwrap();
    let top = AbsolutePathBuf::try_from("/ws/t").unwrap();
    let walk = fs.walk(&top, &detailed()).await.unwrap();
    assert_eq!(
        (entry(&walk, "f").mode, entry(&walk, "f").modified_at_ms),
        (Some(0o640), Some(77))
    );
    assert_eq!(entry(&walk, "d").mode, Some(0o700));
    assert_eq!(entry(&walk, "d/l").link_target, Some(PathBuf::from("../f")));
    assert!(walk.truncated && walk.stopped, "{walk:?}");
    // Nothing asked, nothing fetched: the walk is the server's.
    let plain = fs.walk(&top, &WalkOptions::default()).await.unwrap();
    assert_eq!(entry(&plain, "f").mode, None);
    drop(fs);
    server.abort();
}

/// `stopped` tells a walk that ended early from one only `max_depth` cut, which a walk from
/// each directory at that depth continues.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn a_walk_says_whether_it_stopped_or_only_reached_its_depth(remote: bool) {
    let env = env(remote).await;
    env.mkfile("t/a/b/c", b"");
    env.mkfile("t/z", b"");
    let shallow = env
        .fs
        .walk(&env.p("t"), &detailed().with_max_depth(2))
        .await
        .unwrap();
    assert!(shallow.truncated && !shallow.stopped, "{shallow:?}");
    assert_eq!(shallow.entries.len(), 3, "{shallow:?}");
    let few = env
        .fs
        .walk(&env.p("t"), &detailed().with_max_entries(2))
        .await
        .unwrap();
    assert!(few.truncated && few.stopped, "{few:?}");
    let whole = env.fs.walk(&env.p("t"), &detailed()).await.unwrap();
    assert!(whole.is_complete() && !whole.stopped, "{whole:?}");
}

/// With exact names asked for, a local walk keeps a name that is not UTF-8 (and what is below
/// it) with its exact path beside the lossy text; over a server such names stay left out.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn exact_names_keep_names_that_are_not_utf8_on_local_walks_only(remote: bool) {
    use std::os::unix::ffi::OsStrExt;
    let env = env(remote).await;
    env.mkfile("t/plain", b"");
    let bad = std::ffi::OsStr::from_bytes(b"dir\xff");
    std::fs::create_dir(env.ws_host("t").join(bad)).unwrap();
    std::fs::write(env.ws_host("t").join(bad).join("inside"), b"").unwrap();
    let exact = WalkOptions::default().with_raw_names(true);
    let walk = env.fs.walk(&env.p("t"), &exact).await.unwrap();
    let default = crate::walk::default_walk(&env)
        .walk(&env.p("t"), &exact)
        .await
        .unwrap();
    if remote {
        assert_eq!(walk.entries.len(), 1, "{walk:?}");
        assert_eq!(walk.non_utf8_names_omitted, 1);
        assert_eq!(default.entries, walk.entries);
        return;
    }
    assert_eq!(walk.non_utf8_names_omitted, 0);
    let raw: Vec<(&str, Option<&std::path::Path>)> = walk
        .entries
        .iter()
        .map(|e| (e.path.as_str(), e.raw_path.as_deref()))
        .collect();
    let dir = std::path::Path::new(bad);
    let inside = dir.join("inside");
    let mut expected = vec![
        ("plain", None),
        ("dir\u{fffd}", Some(dir)),
        ("dir\u{fffd}/inside", Some(inside.as_path())),
    ];
    let mut got = raw.clone();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    assert_eq!(default, walk, "the default walk keeps them the same way");
}
