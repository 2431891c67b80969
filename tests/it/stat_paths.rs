//! Looking at paths: special files are never opened just to be looked at, absolute links inside
//! the root are followed by `mkdir -p` as by `get_metadata`, escapes are reported by capfs's own
//! error, and roots know whether they are on a local disk.

use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use crate::common::env;
use capfs::{
    Access, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, LocalFileSystem, Sandbox,
};
use rustix::fs::{FileType, Mode, inotify};
use test_case::test_case;

/// Watches `path` for opens (inotify's `IN_OPEN`; a stat or an `O_PATH` handle makes none).
fn watch_opens(path: &Path) -> OwnedFd {
    let fd = inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
    inotify::add_watch(&fd, path, inotify::WatchFlags::OPEN).unwrap();
    fd
}

/// True when an open of the watched file was queued since the last call.
fn was_opened(watch: &OwnedFd) -> bool {
    let mut buffer = [0u8; 4096];
    match rustix::io::read(watch, &mut buffer) {
        Ok(n) => n > 0,
        Err(rustix::io::Errno::AGAIN) => false,
        Err(e) => panic!("inotify read: {e}"),
    }
}

/// Creates a special file of `kind` at `path`: a FIFO, or a character device with the numbers
/// of `/dev/null`. `false` when the process may not create device nodes.
fn make_node(path: &Path, kind: FileType) -> bool {
    let dev = if kind == FileType::CharacterDevice {
        rustix::fs::makedev(1, 3)
    } else {
        0
    };
    match rustix::fs::mknodat(rustix::fs::CWD, path, kind, Mode::from_raw_mode(0o644), dev) {
        Ok(()) => true,
        Err(rustix::io::Errno::PERM) if kind == FileType::CharacterDevice => false,
        Err(e) => panic!("mknod {}: {e}", path.display()),
    }
}

#[test_case(FileType::Fifo, false ; "fifo local")]
#[test_case(FileType::Fifo, true ; "fifo remote")]
#[test_case(FileType::CharacterDevice, false ; "device local")]
#[test_case(FileType::CharacterDevice, true ; "device remote")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_special_file_is_looked_at_without_being_opened(kind: FileType, remote: bool) {
    let env = env(remote).await;
    let node = env.ws_host("node");
    if !make_node(&node, kind) {
        eprintln!("skipped: this process may not create device nodes");
        return;
    }
    env.symlink("link", "node");
    let watch = watch_opens(&node);

    let metadata = env.fs.get_metadata(&env.p("node")).await.unwrap();
    assert!(!metadata.is_file && !metadata.is_directory);
    env.fs.get_metadata(&env.p("link")).await.unwrap();
    env.symlink("absolute", &node);
    for name in ["node", "link", "absolute"] {
        env.fs.read_file(&env.p(name)).await.unwrap_err();
        let range = env.fs.read_file_range(&env.p(name), 0, 16).await;
        assert!(range.is_err(), "a range of {name} was read");
    }
    env.fs
        .copy(&env.p("node"), &env.p("copy"), CopyOptions::default())
        .await
        .unwrap_err();
    env.mkdir("tree");
    assert!(make_node(&env.ws_host("tree/node"), kind));
    let tree_watch = watch_opens(&env.ws_host("tree/node"));
    env.fs
        .copy(
            &env.p("tree"),
            &env.p("tree2"),
            CopyOptions::default().with_recursive(true),
        )
        .await
        .unwrap();
    env.fs.read_directory(&env.p("tree")).await.unwrap();
    assert!(!was_opened(&watch), "a capfs call opened the special file");
    assert!(
        !was_opened(&tree_watch),
        "a tree copy opened the special file"
    );

    // The watch does see an open (a non-blocking one, which returns at once).
    drop(
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(&node)
            .unwrap(),
    );
    assert!(was_opened(&watch), "the inotify watch misses opens");
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mkdir_p_follows_an_absolute_link_to_a_directory_inside_the_root(remote: bool) {
    let env = env(remote).await;
    env.mkdir("target");
    env.symlink("abs", env.ws_host("target"));
    let recursive = CreateDirectoryOptions::default().with_recursive(true);

    assert!(
        env.fs
            .get_metadata(&env.p("abs"))
            .await
            .unwrap()
            .is_directory
    );
    env.fs
        .create_directory(&env.p("abs"), recursive)
        .await
        .unwrap();
    env.fs
        .create_directory(&env.p("abs/new/deeper"), recursive)
        .await
        .unwrap();
    assert!(env.ws_host("target/new/deeper").is_dir());

    // A link to a file is still no directory.
    env.mkfile("file", b"x");
    env.symlink("absfile", env.ws_host("file"));
    let err = env
        .fs
        .create_directory(&env.p("absfile"), recursive)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
}

/// An escape is reported with capfs's own message whichever way it is spelled, whatever text
/// cap-std gives its own escape errors.
#[tokio::test]
async fn escapes_get_capfs_message() {
    let env = env(false).await;
    env.symlink("abs_out", &env.outside);
    env.symlink("rel_out", "../outside");
    env.symlink("chain", "rel_out");
    for rel in [
        "abs_out/secret",
        "rel_out/secret",
        "chain/secret",
        "abs_out",
    ] {
        let path = env.p(rel);
        for err in [
            env.fs.read_file(&path).await.unwrap_err(),
            env.fs
                .get_metadata(&env.p(&format!("{rel}/x")))
                .await
                .unwrap_err(),
            env.fs.write_file(&path, b"x".to_vec()).await.unwrap_err(),
        ] {
            assert_eq!(
                err.kind(),
                std::io::ErrorKind::PermissionDenied,
                "{rel}: {err}"
            );
            assert!(
                err.to_string()
                    .ends_with(": path leads outside the sandbox root"),
                "{rel}: {err}"
            );
        }
    }
}

/// A directory the process may not search is refused with the OS's error, not as an escape.
#[tokio::test]
async fn permission_errors_are_not_escapes() {
    if rustix::process::geteuid().is_root() {
        // Root searches every directory whatever its bits: nothing to refuse.
        return;
    }
    let env = env(false).await;
    let locked = env.mkdir("locked");
    env.mkfile("locked/f", b"x");
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    let err = env.fs.read_file(&env.p("locked/f")).await.unwrap_err();
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
    assert!(!err.to_string().contains("outside"), "{err}");
}

#[tokio::test]
async fn roots_know_whether_they_are_on_a_local_disk() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new()
        .with_root(dir.path(), Access::ReadWrite)
        .unwrap()
        .with_root("/proc/self", Access::ReadOnly)
        .unwrap();
    assert!(sandbox.roots()[0].is_local_disk(), "a temporary directory");
    assert!(!sandbox.roots()[1].is_local_disk(), "procfs");
    let fs = LocalFileSystem::new(sandbox);
    let ws = fs.sandbox().roots()[0].path().clone();
    assert!(fs.runs_inline(&ws.join("a").unwrap()));
    assert!(!fs.runs_inline(&fs.sandbox().roots()[1].path().join("status").unwrap()));
}

/// Both ways of running the cheap operations give the same answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_and_blocking_pool_modes_agree() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("small"), b"small file").unwrap();
    std::fs::write(dir.path().join("large"), vec![7u8; 300 * 1024]).unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    let open = || {
        Sandbox::new()
            .with_root(dir.path(), Access::ReadWrite)
            .unwrap()
    };
    let inline = LocalFileSystem::new(open());
    let pooled = LocalFileSystem::new(open().treat_roots_as_remote_disks());
    let ws = inline.sandbox().roots()[0].path().clone();
    assert!(inline.runs_inline(&ws) && !pooled.runs_inline(&ws));
    for name in ["small", "large", "d", "missing"] {
        let path = ws.join(name).unwrap();
        let (a, b) = (
            inline.get_metadata(&path).await,
            pooled.get_metadata(&path).await,
        );
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "{name}: get_metadata");
        let (a, b) = (inline.read_file(&path).await, pooled.read_file(&path).await);
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "{name}: read_file");
    }
}
