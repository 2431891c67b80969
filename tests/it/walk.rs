//! The confined walk (`ExecutorFileSystem::walk`, `capfs/walk` on the wire): order, globs,
//! bounds, symlinks and special files, escapes, a racing attacker, one request through a server,
//! and the trait's default implementation giving the same answer as the local walk.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use capfs::{
    AbsolutePathBuf, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, FileMetadata,
    FileSystemResult, ReadDirectoryEntry, RemoveOptions, RenameOptions, Walk, WalkOptions,
};
use capfs_wire::{RemoteFileSystem, RemoteOptions};
use rustix::fs::{CWD, RenameFlags};
use serde_json::Value;
use test_case::test_case;

use crate::common::{CANARY, NO_HANG, TestEnv, env, within};
use crate::serve::{ServerProcess, workspace};

fn paths(walk: &Walk) -> Vec<&str> {
    walk.entries.iter().map(|e| e.path.as_str()).collect()
}

fn plant_tree(env: &TestEnv) {
    env.mkfile("t/a.rs", b"fn a() {}\n");
    env.mkfile("t/b.txt", b"bee");
    env.mkfile("t/src/c.rs", b"");
    env.mkfile("t/src/deep/d.rs", b"");
    env.mkfile("t/target/e.rs", b"");
    env.mkfile("t/.hidden/f.rs", b"");
}

fn all() -> WalkOptions {
    WalkOptions::default()
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn walks_in_preorder_with_types_sizes_and_globs(remote: bool) {
    let env = env(remote).await;
    plant_tree(&env);
    let options = all().with_sizes(true);
    let walk = env.fs.walk(&env.p("t"), &options).await.unwrap();
    assert!(!walk.truncated);
    let listed: BTreeSet<&str> = paths(&walk).into_iter().collect();
    let expected: BTreeSet<&str> = [
        "a.rs",
        "b.txt",
        "src",
        "src/c.rs",
        "src/deep",
        "src/deep/d.rs",
        "target",
        "target/e.rs",
        ".hidden",
        ".hidden/f.rs",
    ]
    .into();
    assert_eq!(listed, expected);
    // Pre-order: every directory comes before what it holds.
    let position = |p: &str| paths(&walk).iter().position(|x| *x == p).unwrap();
    assert!(
        position("src") < position("src/deep") && position("src/deep") < position("src/deep/d.rs")
    );
    let b = walk.entries.iter().find(|e| e.path == "b.txt").unwrap();
    assert!(b.is_file && !b.is_directory && b.size == 3);
    assert!(
        walk.entries
            .iter()
            .find(|e| e.path == "src")
            .unwrap()
            .is_directory
    );

    let rust = all()
        .with_pattern(Some("**/*.rs".into()))
        .with_exclude(vec!["target".into()]);
    let walk = env.fs.walk(&env.p("t"), &rust).await.unwrap();
    let listed: BTreeSet<&str> = paths(&walk).into_iter().collect();
    assert_eq!(
        listed,
        ["a.rs", "src/c.rs", "src/deep/d.rs", ".hidden/f.rs"].into()
    );
    let top = all().with_pattern(Some("*.{rs,txt}".into()));
    let walk = env.fs.walk(&env.p("t"), &top).await.unwrap();
    let listed: BTreeSet<&str> = paths(&walk).into_iter().collect();
    assert_eq!(listed, ["a.rs", "b.txt"].into());

    let bad = all().with_pattern(Some("[unclosed".into()));
    let err = env.fs.walk(&env.p("t"), &bad).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("[unclosed: invalid glob"), "{err}");
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn walks_are_bounded_in_entries_and_depth(remote: bool) {
    let env = env(remote).await;
    plant_tree(&env);
    let few = all().with_max_entries(3);
    let walk = env.fs.walk(&env.p("t"), &few).await.unwrap();
    assert_eq!(walk.entries.len(), 3);
    assert!(walk.truncated);
    let shallow = all().with_max_depth(1);
    let walk = env.fs.walk(&env.p("t"), &shallow).await.unwrap();
    assert!(walk.truncated, "directories were left unlisted");
    assert!(
        paths(&walk).iter().all(|p| !p.contains('/')),
        "{:?}",
        paths(&walk)
    );
    let flat = all().with_max_depth(1);
    let walk = env.fs.walk(&env.p("t/src/deep"), &flat).await.unwrap();
    assert!(!walk.truncated, "a level without directories is complete");
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn walks_list_links_and_specials_without_following_or_opening_them(remote: bool) {
    let env = env(remote).await;
    let before = env.outside_snapshot();
    env.mkdir("t");
    env.symlink("t/out-dir", &env.outside);
    env.symlink("t/out-file", env.outside.join("secret"));
    env.symlink("t/in-dir", env.ws_host("t"));
    env.mkfifo("t/fifo");
    let _socket = env.mksocket("t/sock");
    let walk = within("walk over a FIFO", env.fs.walk(&env.p("t"), &all()))
        .await
        .unwrap();
    let listed: BTreeSet<&str> = paths(&walk).into_iter().collect();
    assert_eq!(
        listed,
        ["out-dir", "out-file", "in-dir", "fifo", "sock"].into()
    );
    for e in &walk.entries {
        assert!(!e.is_directory, "{} is not entered", e.path);
        assert_eq!(e.is_symlink, e.path.contains("dir") || e.path == "out-file");
        assert!(!e.is_file || e.is_symlink);
    }
    // A walk that starts outside, or through a link that leads out, is refused.
    let outside = AbsolutePathBuf::new(&env.outside).unwrap();
    for start in [outside, env.p("t/out-dir"), env.p("t/../../outside")] {
        let err = env.fs.walk(&start, &all()).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied, "{start}");
    }
    env.assert_outside_unchanged(&before);
}

/// An attacker thread exchanges `ws/t/sub` with a symlink to an outside tree of the same shape
/// while walks loop: no walk may list a name that exists only outside.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walks_stay_inside_while_an_attacker_swaps_a_directory_for_a_link(remote: bool) {
    let env = env(remote).await;
    env.mkfile("t/sub/inside-a", b"a");
    env.mkfile("t/sub/nested/inside-b", b"b");
    let victim = env.outside.join("victim");
    std::fs::create_dir_all(victim.join("nested")).unwrap();
    std::fs::write(victim.join(format!("{CANARY}-a")), CANARY).unwrap();
    std::fs::write(victim.join("nested").join(format!("{CANARY}-b")), CANARY).unwrap();
    env.symlink("t/swap", &victim);
    let before = env.outside_snapshot();
    let stop = Arc::new(AtomicBool::new(false));
    let (sub, swap) = (env.ws_host("t/sub"), env.ws_host("t/swap"));
    let flag = Arc::clone(&stop);
    let attacker = std::thread::spawn(move || {
        let mut swaps = 0u64;
        while !flag.load(Ordering::Relaxed) {
            if rustix::fs::renameat_with(CWD, &sub, CWD, &swap, RenameFlags::EXCHANGE).is_ok() {
                swaps += 1;
            }
        }
        swaps
    });
    let started = Instant::now();
    let mut walks = 0;
    while started.elapsed() < Duration::from_millis(1500) && walks < 20_000 {
        if let Ok(walk) = env.fs.walk(&env.p("t"), &all()).await {
            for e in &walk.entries {
                assert!(
                    !e.path.contains(CANARY),
                    "the walk listed {} from outside",
                    e.path
                );
            }
        }
        walks += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = attacker.join().unwrap();
    assert!(swaps > 0, "the attacker never swapped");
    env.assert_outside_unchanged(&before);
    eprintln!("walks {walks} swaps {swaps}");
}

/// Through a server, a walk of a tree of many directories is one request: the server's audit
/// log has one `capfs/walk` line and no directory listings.
#[tokio::test]
async fn a_remote_walk_is_one_request() {
    let (dir, ws) = workspace();
    for d in 0..50 {
        let sub = ws.join(format!("d{d}/e"));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join("f.rs"), b"").unwrap();
    }
    let audit = dir.path().join("audit.jsonl");
    let server = ServerProcess::start_audited(&ws, &audit).await;
    let fs = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap();
    let options = all().with_pattern(Some("**/*.rs".into()));
    let walk = fs
        .walk(&AbsolutePathBuf::new(&ws).unwrap(), &options)
        .await
        .unwrap();
    assert_eq!(walk.entries.len(), 50);
    drop(fs);
    server.stop().await;
    let methods: Vec<String> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["method"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let fs_calls: Vec<&String> = methods
        .iter()
        .filter(|m| m.starts_with("fs/") || m.starts_with("capfs/"))
        .collect();
    assert_eq!(fs_calls, ["capfs/walk"], "all audited: {methods:?}");
}

/// A backend that keeps the trait's default walk: every other method goes to the inner one.
pub(crate) struct DefaultWalk(Arc<dyn ExecutorFileSystem>);

/// The trait's default walk over the backend of `env`.
pub(crate) fn default_walk(env: &TestEnv) -> DefaultWalk {
    DefaultWalk(Arc::clone(&env.fs))
}

#[async_trait]
impl ExecutorFileSystem for DefaultWalk {
    async fn read_file(&self, path: &AbsolutePathBuf) -> FileSystemResult<Vec<u8>> {
        self.0.read_file(path).await
    }
    async fn write_file(&self, path: &AbsolutePathBuf, contents: Vec<u8>) -> FileSystemResult<()> {
        self.0.write_file(path, contents).await
    }
    async fn create_directory(
        &self,
        path: &AbsolutePathBuf,
        options: CreateDirectoryOptions,
    ) -> FileSystemResult<()> {
        self.0.create_directory(path, options).await
    }
    async fn get_metadata(&self, path: &AbsolutePathBuf) -> FileSystemResult<FileMetadata> {
        self.0.get_metadata(path).await
    }
    async fn read_directory(
        &self,
        path: &AbsolutePathBuf,
    ) -> FileSystemResult<Vec<ReadDirectoryEntry>> {
        self.0.read_directory(path).await
    }
    async fn remove(&self, path: &AbsolutePathBuf, options: RemoveOptions) -> FileSystemResult<()> {
        self.0.remove(path, options).await
    }
    async fn copy(
        &self,
        source: &AbsolutePathBuf,
        destination: &AbsolutePathBuf,
        options: CopyOptions,
    ) -> FileSystemResult<()> {
        self.0.copy(source, destination, options).await
    }
    async fn rename(
        &self,
        source: &AbsolutePathBuf,
        destination: &AbsolutePathBuf,
        options: RenameOptions,
    ) -> FileSystemResult<()> {
        self.0.rename(source, destination, options).await
    }
    async fn read_link(&self, path: &AbsolutePathBuf) -> FileSystemResult<std::path::PathBuf> {
        self.0.read_link(path).await
    }
}

#[tokio::test]
async fn the_default_walk_answers_like_the_local_walk() {
    let env = env(false).await;
    plant_tree(&env);
    env.symlink("t/link", &env.outside);
    let fallback = DefaultWalk(Arc::clone(&env.fs));
    for options in [
        all().with_sizes(true),
        all()
            .with_pattern(Some("**/*.rs".into()))
            .with_exclude(vec![".hidden".into()]),
        all().with_max_depth(2),
        all().with_max_entries(4),
        all()
            .with_sizes(true)
            .with_metadata(true)
            .with_link_targets(true),
    ] {
        let local = within("local walk", env.fs.walk(&env.p("t"), &options))
            .await
            .unwrap();
        let default = tokio::time::timeout(NO_HANG, fallback.walk(&env.p("t"), &options))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(default, local, "{options:?}");
    }
}

/// Names that are not UTF-8 have no faithful text form: walks leave them out, with what is
/// below them, and count them, on both backends and in the default walk.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn walks_leave_out_names_that_are_not_utf8(remote: bool) {
    use std::os::unix::ffi::OsStrExt;
    let env = env(remote).await;
    env.mkfile("t/plain.txt", b"");
    let t = env.ws_host("t");
    std::fs::write(t.join(std::ffi::OsStr::from_bytes(b"bad\xff.txt")), b"").unwrap();
    let bad_dir = t.join(std::ffi::OsStr::from_bytes(b"dir\xff"));
    std::fs::create_dir(&bad_dir).unwrap();
    std::fs::write(bad_dir.join("inside.txt"), b"").unwrap();
    let walk = env.fs.walk(&env.p("t"), &all()).await.unwrap();
    assert_eq!(paths(&walk), ["plain.txt"]);
    assert_eq!(
        walk.non_utf8_names_omitted, 2,
        "counted, not what is below them"
    );
    assert!(walk.is_complete());
    let default = DefaultWalk(Arc::clone(&env.fs))
        .walk(&env.p("t"), &all())
        .await
        .unwrap();
    assert_eq!(default.entries, walk.entries);
    // Over a remote backend the default walk sees listings the server already left those names
    // out of (`read_directory` returns entries, not the count); locally it counts them too.
    let counted = if remote { 0 } else { 2 };
    assert_eq!(default.non_utf8_names_omitted, counted);
}
