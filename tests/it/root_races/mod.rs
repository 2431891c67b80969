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

use crate::common::{Entry, InProcessServer, assert_same_tree, snapshot};
use capfs::{
    AbsolutePathBuf, Access, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem,
    LocalFileSystem, RemoveOptions, RenameOptions, Sandbox,
};
use capfs_wire::{RemoteFileSystem, RemoteOptions};
use rustix::fs::{CWD, RenameFlags};

mod moved_roots;
mod shapes;

/// How long each race runs, and the most rounds it runs (whichever ends first).
const RACE_TIME: Duration = Duration::from_millis(1500);

const MAX_ROUNDS: usize = 5_000;

/// The nested roots, the files of the read-only one, and the backend serving them.
struct Setup {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    fs: Arc<dyn ExecutorFileSystem>,
    _server: Option<InProcessServer>,
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
        let nested: Vec<_> = NESTED
            .iter()
            .map(|(name, access)| (ws.join(name), *access))
            .collect();
        let mut roots = vec![(ws.as_path(), Access::ReadWrite)];
        roots.extend(
            nested
                .iter()
                .map(|(path, access)| (path.as_path(), *access)),
        );
        let server = InProcessServer::serving_roots(&roots, Default::default()).await;
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
