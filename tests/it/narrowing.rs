//! `Sandbox::narrowed` and `capfs/narrowRoots`: directories inside a root opened as roots of
//! their own, so that a link leading out of one of them is an escape even where it stays inside
//! the wider root; read-only roots stay read-only and narrowing never widens.

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use capfs::{AbsolutePathBuf, Access, ExecutorFileSystem, LocalFileSystem, Sandbox};
use capfs_wire::protocol::{RootAccess, RootDescription};
use capfs_wire::{RemoteFileSystem, RemoteOptions};

use crate::common::{InProcessServer, snapshot};

/// base/{ws/{sub, ro/keep.txt, link -> ../private}, private/key.txt}; the sandbox has base
/// (read-write) and base/ws/ro (read-only).
fn tree() -> (tempfile::TempDir, std::path::PathBuf, Sandbox) {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    for d in ["ws/sub", "ws/ro", "private"] {
        std::fs::create_dir_all(base.join(d)).unwrap();
    }
    std::fs::write(base.join("private/key.txt"), b"KEY").unwrap();
    std::fs::write(base.join("ws/ro/keep.txt"), b"keep").unwrap();
    std::fs::write(base.join("ws/sub/f.txt"), b"f").unwrap();
    std::os::unix::fs::symlink("../private", base.join("ws/link")).unwrap();
    std::os::unix::fs::symlink("..", base.join("ws/sub/up")).unwrap();
    let sandbox = Sandbox::new()
        .with_root(&base, Access::ReadWrite)
        .unwrap()
        .with_root(base.join("ws/ro"), Access::ReadOnly)
        .unwrap();
    (dir, base, sandbox)
}

fn at(base: &Path, rel: &str) -> AbsolutePathBuf {
    AbsolutePathBuf::new(base.join(rel)).unwrap()
}

fn rw(path: AbsolutePathBuf) -> RootDescription {
    RootDescription::new(path, RootAccess::ReadWrite)
}

#[tokio::test]
async fn a_narrowed_sandbox_refuses_links_out_and_keeps_read_only_roots() {
    let (_dir, base, sandbox) = tree();
    let before = snapshot(&base.join("private"));
    let fs = LocalFileSystem::new(sandbox);
    // The wide sandbox follows the link: it stays inside base.
    assert_eq!(
        fs.read_file(&at(&base, "ws/link/key.txt")).await.unwrap(),
        b"KEY"
    );
    let narrowed = fs.narrowed(&[rw(at(&base, "ws"))]).await.unwrap();
    assert_eq!(narrowed.roots[0].as_ref().unwrap().path, at(&base, "ws"));
    let n = narrowed.fs;
    for rel in ["ws/link/key.txt", "private/key.txt"] {
        let err = n.read_file(&at(&base, rel)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{rel}");
    }
    let err = n
        .write_file(&at(&base, "ws/link/planted.txt"), b"x".to_vec())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    // The read-only root inside stays read-only, by identity.
    let err = n
        .write_file(&at(&base, "ws/ro/keep.txt"), b"changed".to_vec())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    let err = n
        .remove(&at(&base, "ws/ro"), capfs::RemoveOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    n.write_file(&at(&base, "ws/sub/new.txt"), b"ok".to_vec())
        .await
        .unwrap();
    assert_eq!(std::fs::read(base.join("ws/ro/keep.txt")).unwrap(), b"keep");
    assert_eq!(snapshot(&base.join("private")), before);
}

#[tokio::test]
async fn narrowing_names_roots_by_their_real_path_and_never_widens() {
    let (_dir, base, sandbox) = tree();
    std::os::unix::fs::symlink("ws/sub", base.join("alias")).unwrap();
    std::os::unix::fs::symlink("../..", base.join("ws/out")).unwrap();
    let fs = LocalFileSystem::new(sandbox);
    let narrowed = fs
        .narrowed(&[
            rw(at(&base, "alias")),
            rw(at(&base, "ws/sub")),
            RootDescription::new(at(&base, "ws/ro"), RootAccess::ReadWrite),
            rw(at(&base, "ws/out")),
            rw(at(&base, "nowhere")),
        ])
        .await
        .unwrap();
    let roots: Vec<_> = narrowed
        .roots
        .iter()
        .map(|r| r.as_ref().ok().cloned())
        .collect();
    // Through a link inside the root: the real path; the same directory twice is one root.
    assert_eq!(roots[0].as_ref().unwrap().path, at(&base, "ws/sub"));
    assert_eq!(roots[1].as_ref().unwrap().path, at(&base, "ws/sub"));
    // A read-only root stays read-only whatever is asked.
    assert_eq!(roots[2].as_ref().unwrap().access, RootAccess::ReadOnly);
    assert_eq!(
        roots[3], None,
        "a link out of the root it lies in is refused"
    );
    assert_eq!(roots[4], None);
    assert_eq!(narrowed.fs.served_roots().len(), 2);
    // Narrowing the narrowed: ws is outside ws/sub, so nothing is left.
    let again = narrowed.fs.narrowed(&[rw(at(&base, "ws"))]).await.unwrap();
    let err = again.roots[0].as_ref().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    assert!(again.fs.served_roots().is_empty());
    let err = again
        .fs
        .read_file(&at(&base, "ws/sub/f.txt"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
}

#[tokio::test]
async fn a_narrowed_connection_is_confined_and_the_others_are_not() {
    let (_dir, base, sandbox) = tree();
    let fs: Arc<dyn ExecutorFileSystem> = Arc::new(LocalFileSystem::new(sandbox));
    let server = InProcessServer::start(fs, capfs_wire::server::ServerConfig::default()).await;
    let narrow = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap();
    let wide = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap();
    assert!(narrow.supports_narrowing());
    let results = narrow
        .narrow_connection(&[rw(at(&base, "ws/sub"))])
        .await
        .unwrap();
    assert_eq!(results[0].as_ref().unwrap().path, at(&base, "ws/sub"));
    assert_eq!(
        narrow.read_file(&at(&base, "ws/sub/f.txt")).await.unwrap(),
        b"f"
    );
    for rel in [
        "ws/sub/up/link/key.txt",
        "ws/link/key.txt",
        "ws/sub/up/ro/keep.txt",
    ] {
        let err = narrow.read_file(&at(&base, rel)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{rel}");
    }
    // Streamed and walked calls go through the narrowed roots too.
    let mut sink = Vec::new();
    let err = narrow
        .read_file_to(&at(&base, "ws/sub/up/link/key.txt"), &mut sink, &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    let err = narrow
        .walk(&at(&base, "ws"), &capfs::WalkOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    // A second narrowing applies to what the connection serves: ws/sub/up leads out of it, so
    // it is refused and the connection is left with nothing.
    let results = narrow
        .narrow_connection(&[rw(at(&base, "ws/sub/up"))])
        .await
        .unwrap();
    assert_eq!(
        results[0].as_ref().unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
    let err = narrow
        .read_file(&at(&base, "ws/sub/f.txt"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    // Another connection keeps the server's roots.
    assert_eq!(
        wide.read_file(&at(&base, "ws/link/key.txt")).await.unwrap(),
        b"KEY"
    );
}
