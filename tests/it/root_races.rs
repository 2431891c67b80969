//! Roots under a racing attacker: an attacker thread keeps exchanging a directory `ws/d` with a
//! sandbox root nested in `ws` (`renameat2(RENAME_EXCHANGE)`, which needs write access to `ws`
//! only) while capfs renames or removes `ws/d` again and again. No capfs operation may move,
//! remove or replace a root, and a read-only root's contents must stay byte-identical wherever
//! its directory is.
//!
//! Layout: `--root ws --root ws/inner --read-only ws/ro --read-only ws/e` (`ro` holds files, `e`
//! is empty), with `ws/innerlink -> inner` and `ws/sub/`.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::{Entry, assert_same_tree, snapshot};
use crate::serve::ServerProcess;
use capfs::{
    AbsolutePathBuf, Access, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem,
    LocalFileSystem, RemoteFileSystem, RemoteOptions, RemoveOptions, RenameOptions, Sandbox,
};
use rustix::fs::{CWD, RenameFlags};
use test_case::test_case;

/// How long each race runs, and the most rounds it runs (whichever ends first).
const RACE_TIME: Duration = Duration::from_millis(1500);
const MAX_ROUNDS: usize = 5_000;

/// The nested roots, the files of the read-only one, and the backend serving them.
struct Setup {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    fs: Arc<dyn ExecutorFileSystem>,
    _server: Option<ServerProcess>,
    /// Inode numbers of `inner`, `ro` and `e`, by name.
    roots: BTreeMap<&'static str, u64>,
    ro_before: BTreeMap<PathBuf, Entry>,
}

const NESTED: [(&str, Access); 3] = [
    ("inner", Access::ReadWrite),
    ("ro", Access::ReadOnly),
    ("e", Access::ReadOnly),
];

async fn setup(remote: bool) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap().join("ws");
    for sub in ["", "inner", "ro", "ro/dir", "e", "sub"] {
        std::fs::create_dir(ws.join(sub)).unwrap();
    }
    std::fs::write(ws.join("ro/file"), b"read-only content").unwrap();
    std::fs::write(ws.join("ro/dir/g"), b"read-only g").unwrap();
    std::os::unix::fs::symlink("inner", ws.join("innerlink")).unwrap();
    let roots = NESTED
        .iter()
        .map(|(name, _)| (*name, ino(&ws.join(name)).unwrap()))
        .collect();
    let ro_before = snapshot(&ws.join("ro"));
    let (fs, server): (Arc<dyn ExecutorFileSystem>, _) = if remote {
        let mut args: Vec<std::ffi::OsString> = vec!["--root".into(), ws.clone().into()];
        for (name, access) in NESTED {
            let flag = if access == Access::ReadOnly {
                "--read-only"
            } else {
                "--root"
            };
            args.push(flag.into());
            args.push(ws.join(name).into());
        }
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let server = ServerProcess::start_with(&args, &[]).await;
        let fs = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
            .await
            .expect("connect");
        (Arc::new(fs), Some(server))
    } else {
        let mut sandbox = Sandbox::new().with_root(&ws, Access::ReadWrite).unwrap();
        for (name, access) in NESTED {
            sandbox = sandbox.with_root(ws.join(name), access).unwrap();
        }
        (Arc::new(LocalFileSystem::new(sandbox)), None)
    };
    Setup {
        _dir: dir,
        ws,
        fs,
        _server: server,
        roots,
        ro_before,
    }
}

fn ino(path: &Path) -> std::io::Result<u64> {
    Ok(std::fs::symlink_metadata(path)?.ino())
}

impl Setup {
    fn p(&self, rel: &str) -> AbsolutePathBuf {
        AbsolutePathBuf::new(self.ws.join(rel)).unwrap()
    }

    /// With the attacker stopped: puts a root the attacker left at `ws/d` back, then asserts
    /// that every root is at its place with its inode and that `ro` is unchanged.
    fn assert_roots_intact(&self, victim: &str) {
        if ino(&self.ws.join(victim)).ok() != Some(self.roots[victim])
            && ino(&self.ws.join("d")).ok() == Some(self.roots[victim])
        {
            rustix::fs::renameat_with(
                CWD,
                self.ws.join("d"),
                CWD,
                self.ws.join(victim),
                RenameFlags::EXCHANGE,
            )
            .or_else(|_| {
                std::fs::rename(self.ws.join("d"), self.ws.join(victim))
                    .map_err(|_| rustix::io::Errno::IO)
            })
            .expect("put the attacker's exchange back");
        }
        for (name, expected) in &self.roots {
            assert_eq!(
                ino(&self.ws.join(name)).ok(),
                Some(*expected),
                "root ws/{name} was moved, removed or replaced"
            );
        }
        assert_same_tree(
            &self.ro_before,
            &snapshot(&self.ws.join("ro")),
            "read-only root",
        );
        assert_eq!(
            std::fs::read_dir(self.ws.join("e")).unwrap().count(),
            0,
            "the empty read-only root was written to"
        );
    }
}

/// Exchanges `ws/d` with `ws/{victim}` as fast as it can.
struct Attacker {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<u64>,
}

impl Attacker {
    fn start(ws: &Path, victim: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let (d, victim) = (ws.join("d"), ws.join(victim));
        let handle = std::thread::spawn(move || {
            let mut swaps = 0;
            while !flag.load(Ordering::Relaxed) {
                if rustix::fs::renameat_with(CWD, &d, CWD, &victim, RenameFlags::EXCHANGE).is_ok() {
                    swaps += 1;
                }
            }
            swaps
        });
        Self { stop, handle }
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("attacker thread")
    }
}

/// The repeated operation of each race.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// `rename ws/d -> ws/innerlink/x`: into the inner root through a link.
    RenameIntoInner,
    /// `rename ws/d -> ws/sub/m`.
    RenameIntoSub,
    /// `remove -r ws/d`.
    RemoveRecursive,
    /// `remove ws/d`.
    Remove,
    /// `rename ws/s -> ws/d` with `overwrite`.
    RenameOver,
}

impl Shape {
    /// Creates what the operation works on, if it is missing.
    fn prepare(self, ws: &Path) {
        let _ = std::fs::create_dir(ws.join("d"));
        if let Shape::RenameOver = self {
            let _ = std::fs::create_dir(ws.join("s"));
        }
    }

    async fn run(self, setup: &Setup) -> bool {
        let fs = &setup.fs;
        let d = setup.p("d");
        let result = match self {
            Shape::RenameIntoInner => {
                fs.rename(&d, &setup.p("innerlink/x"), RenameOptions::default())
                    .await
            }
            Shape::RenameIntoSub => {
                fs.rename(&d, &setup.p("sub/m"), RenameOptions::default())
                    .await
            }
            Shape::RemoveRecursive | Shape::Remove => {
                let options = RemoveOptions {
                    recursive: matches!(self, Shape::RemoveRecursive),
                    force: false,
                };
                fs.remove(&d, options).await
            }
            Shape::RenameOver => {
                fs.rename(&setup.p("s"), &d, RenameOptions { overwrite: true })
                    .await
            }
        };
        result.is_ok()
    }

    /// Clears the rename's destination for the next round; a root found there is a failure.
    fn clean(self, setup: &Setup) {
        let moved_to = match self {
            Shape::RenameIntoInner => "inner/x",
            Shape::RenameIntoSub => "sub/m",
            _ => return,
        };
        let path = setup.ws.join(moved_to);
        let Ok(found) = ino(&path) else { return };
        let root = setup.roots.iter().find(|(_, i)| **i == found);
        assert!(root.is_none(), "capfs moved root {root:?} to ws/{moved_to}");
        std::fs::remove_dir_all(&path).unwrap();
    }
}

#[test_case(Shape::RenameIntoInner, "ro", false ; "rename into inner root local")]
#[test_case(Shape::RenameIntoInner, "ro", true ; "rename into inner root remote")]
#[test_case(Shape::RenameIntoSub, "ro", false ; "rename into sub local")]
#[test_case(Shape::RenameIntoSub, "ro", true ; "rename into sub remote")]
#[test_case(Shape::RemoveRecursive, "e", false ; "recursive remove of empty root local")]
#[test_case(Shape::RemoveRecursive, "e", true ; "recursive remove of empty root remote")]
#[test_case(Shape::RemoveRecursive, "ro", false ; "recursive remove of read only root local")]
#[test_case(Shape::Remove, "e", false ; "remove of empty root local")]
#[test_case(Shape::Remove, "e", true ; "remove of empty root remote")]
#[test_case(Shape::RenameOver, "e", false ; "rename over empty root local")]
#[test_case(Shape::RenameOver, "e", true ; "rename over empty root remote")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_operation_moves_removes_or_replaces_a_root(shape: Shape, victim: &str, remote: bool) {
    let setup = setup(remote).await;
    let attacker = Attacker::start(&setup.ws, victim);
    let start = Instant::now();
    let (mut rounds, mut done) = (0, 0);
    while rounds < MAX_ROUNDS && start.elapsed() < RACE_TIME {
        shape.prepare(&setup.ws);
        done += usize::from(shape.run(&setup).await);
        shape.clean(&setup);
        rounds += 1;
    }
    let swaps = attacker.finish();
    eprintln!("{shape:?} against {victim}: rounds {rounds} succeeded {done} swaps {swaps}");
    setup.assert_roots_intact(victim);
    assert!(swaps > 0, "the attacker never managed an exchange");
    assert!(done > 0, "the operation never succeeded in {rounds} rounds");
}

/// A read-only root moved (by someone with more rights than capfs's client) below another root
/// stays read-only there: it is recognised by its identity, not its configured path.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_read_only_root_stays_read_only_under_every_root(remote: bool) {
    let setup = setup(remote).await;
    std::fs::rename(setup.ws.join("ro"), setup.ws.join("inner/x")).unwrap();
    let fs = &setup.fs;
    let denied = |r: std::io::Result<()>, what: &str| {
        let err = r.expect_err(what);
        assert_eq!(
            err.kind(),
            std::io::ErrorKind::PermissionDenied,
            "{what}: {err}"
        );
    };
    std::fs::write(setup.ws.join("inner/mine"), b"mine").unwrap();
    for base in ["inner", "innerlink"] {
        let prefix = format!("{base}/x");
        let at = |rel: &str| setup.p(&format!("{prefix}/{rel}"));
        let beside = |rel: &str| setup.p(&format!("{base}/{rel}"));
        denied(fs.write_file(&at("new"), b"x".to_vec()).await, "write");
        denied(fs.write_file(&at("file"), b"x".to_vec()).await, "overwrite");
        denied(
            fs.create_directory(&at("newdir"), CreateDirectoryOptions { recursive: true })
                .await,
            "mkdir -p",
        );
        denied(
            fs.remove(
                &at("dir"),
                RemoveOptions {
                    recursive: true,
                    force: false,
                },
            )
            .await,
            "remove -r",
        );
        denied(
            fs.remove(&at("file"), RemoveOptions::default()).await,
            "remove",
        );
        denied(
            fs.copy(&beside("mine"), &at("copied"), CopyOptions::default())
                .await,
            "copy into",
        );
        denied(
            fs.copy(
                &setup.p("inner"),
                &at("dir"),
                CopyOptions { recursive: true },
            )
            .await,
            "tree copy into",
        );
        denied(
            fs.rename(&at("file"), &beside("out"), RenameOptions::default())
                .await,
            "rename out",
        );
        denied(
            fs.rename(&beside("mine"), &at("in"), RenameOptions::default())
                .await,
            "rename in",
        );
    }
    denied(
        fs.rename(
            &setup.p("inner/x"),
            &setup.p("inner/y"),
            RenameOptions::default(),
        )
        .await,
        "rename the root itself",
    );
    denied(
        fs.remove(
            &setup.p("inner/x"),
            RemoveOptions {
                recursive: true,
                force: false,
            },
        )
        .await,
        "remove the root itself",
    );
    std::fs::rename(setup.ws.join("inner/x"), setup.ws.join("ro")).unwrap();
    std::fs::remove_file(setup.ws.join("inner/mine")).unwrap();
    setup.assert_roots_intact("ro");
}

/// The residual window, measured: an attacker that lists the parent directory and exchanges
/// every private name capfs uses (`.capfs-claim-*`) with an empty read-only root, while capfs
/// removes an empty `d` in it. Each round has its own parent and root; the test reports how many
/// rounds lost the root and asserts only what holds whatever the attacker does (the read-only
/// root's contents are never written).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn residual_window_against_an_attacker_that_reads_private_names() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let round = Arc::new(AtomicUsize::new(0));
    let hits = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = {
        let (ws, round, hits, stop) = (ws.clone(), round.clone(), hits.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let parent = ws.join(format!("r{}", round.load(Ordering::Relaxed)));
                let Ok(entries) = std::fs::read_dir(&parent) else {
                    continue;
                };
                for entry in entries.flatten() {
                    if entry
                        .file_name()
                        .to_string_lossy()
                        .starts_with(".capfs-claim-")
                        && rustix::fs::renameat_with(
                            CWD,
                            entry.path(),
                            CWD,
                            parent.join("e"),
                            RenameFlags::EXCHANGE,
                        )
                        .is_ok()
                    {
                        hits.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        })
    };
    let (start, mut rounds, mut lost, mut displaced) = (Instant::now(), 0usize, 0usize, 0usize);
    while rounds < MAX_ROUNDS && start.elapsed() < RACE_TIME * 2 {
        let parent = ws.join(format!("r{rounds}"));
        for sub in ["", "e", "d"] {
            std::fs::create_dir(parent.join(sub)).unwrap();
        }
        let e_ino = ino(&parent.join("e")).unwrap();
        let sandbox = Sandbox::new()
            .with_root(&parent, Access::ReadWrite)
            .and_then(|s| s.with_root(parent.join("e"), Access::ReadOnly))
            .unwrap();
        let fs = LocalFileSystem::new(sandbox);
        let d = AbsolutePathBuf::new(parent.join("d")).unwrap();
        let _ = fs.remove(&d, RemoveOptions::default()).await;
        round.store(rounds + 1, Ordering::Relaxed);
        let names: Vec<_> = std::fs::read_dir(&parent).unwrap().flatten().collect();
        match names
            .iter()
            .find(|n| n.metadata().is_ok_and(|m| m.ino() == e_ino))
        {
            None => lost += 1,
            Some(n) if n.file_name() != "e" && n.file_name() != "d" => displaced += 1,
            Some(n) => {
                let e = n.path();
                assert_eq!(
                    std::fs::read_dir(e).unwrap().count(),
                    0,
                    "root e was written"
                );
            }
        }
        rounds += 1;
    }
    stop.store(true, Ordering::Relaxed);
    attacker.join().unwrap();
    eprintln!(
        "residual window: {rounds} removes, {} private names exchanged by the attacker, \
         root removed in {lost} rounds, left under another name in {displaced}",
        hits.load(Ordering::Relaxed)
    );
    assert!(rounds > 0);
}

/// The exchange-and-check of an overwriting rename keeps rename(2)'s rules: a file over a
/// directory, a directory over a file or over a non-empty directory are refused with the kernel's
/// error and leave both entries as they were; the others replace the destination.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwriting_rename_keeps_the_rules_of_rename(remote: bool) {
    let setup = setup(remote).await;
    let plant = |top: &Path| {
        for dir in ["", "d1", "d2", "full", "full/x"] {
            std::fs::create_dir(top.join(dir)).unwrap();
        }
        for file in ["f1", "f2"] {
            std::fs::write(top.join(file), file).unwrap();
        }
    };
    let cases = [
        ("f1", "f2"),
        ("f1", "d1"),
        ("d1", "f2"),
        ("d1", "full"),
        ("d1", "d2"),
        ("f1", "missing"),
    ];
    for (i, (from, to)) in cases.iter().enumerate() {
        let (mine, theirs) = (format!("c{i}"), setup.ws.join(format!("k{i}")));
        plant(&setup.ws.join(&mine));
        plant(&theirs);
        let got = setup
            .fs
            .rename(
                &setup.p(&format!("{mine}/{from}")),
                &setup.p(&format!("{mine}/{to}")),
                RenameOptions { overwrite: true },
            )
            .await;
        let want = std::fs::rename(theirs.join(from), theirs.join(to));
        assert_eq!(
            got.as_ref().map_err(|e| e.kind()),
            want.as_ref().map_err(|e| e.kind()),
            "{from} over {to}: {got:?} vs {want:?}"
        );
        let ours = snapshot(&setup.ws.join(&mine));
        let kernel = snapshot(&theirs);
        let shape = |t: &BTreeMap<PathBuf, Entry>| -> Vec<(PathBuf, bool)> {
            t.iter()
                .map(|(p, e)| (p.clone(), matches!(e.kind, crate::common::Kind::Dir)))
                .collect()
        };
        assert_eq!(
            shape(&ours),
            shape(&kernel),
            "{from} over {to}: trees differ"
        );
    }
}
