//! The known gaps of cap-std that capfs covers itself (docs/DESIGN.md §8), one test each:
//! root-equivalent removal, copy onto the same inode, huge sparse files, FIFOs, self-referencing links,
//! deep trees, and the read limit.

use std::io::ErrorKind;
use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::{
    DEEP_TREE_BOUND, assert_same_tree, build_deep_tree, deep_tree_depth, env, env_with_read_limit,
    err_kind, fs_over, snapshot, within, within_for,
};
use capfs::{Access, CopyOptions, RemoveOptions};
use test_case::test_case;

const RECURSIVE_FORCE: RemoveOptions = RemoveOptions::new().with_recursive(true).with_force(true);

/// cap-std's `remove_dir_all` on a root-equivalent path wipes the root. capfs refuses every
/// spelling, with every option, and touches nothing inside.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn root_removal_is_refused_in_every_spelling(remote: bool) {
    let env = env(remote).await;
    env.mkfile("keep.txt", b"keep");
    env.mkfile("sub/deep/file", b"deep");
    env.symlink("sub/link", "../keep.txt");
    let before = snapshot(env.ws.as_path());
    for spelling in [".", "sub/..", "sub/deep/../../.", "./sub/../"] {
        let path = env.p(spelling);
        assert_eq!(path, env.ws, "{spelling} is the root");
        for (recursive, force) in [(true, true), (true, false), (false, true), (false, false)] {
            let options = RemoveOptions::default()
                .with_recursive(recursive)
                .with_force(force);
            let err = env.fs.remove(&path, options).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{spelling}: {err}");
        }
    }
    let plain = env.ws.clone();
    assert_eq!(
        err_kind(env.fs.remove(&plain, RECURSIVE_FORCE).await),
        ErrorKind::PermissionDenied
    );
    assert_same_tree(&before, &snapshot(env.ws.as_path()), "root");
}

/// cap-std's `Dir::copy` onto the same inode truncates the file and spins forever. capfs refuses
/// a copy onto itself by the same path, through a symlink alias and through a hard link, and
/// leaves the file intact.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn copy_onto_itself_is_refused_and_the_file_kept(remote: bool) {
    let env = env(remote).await;
    let content = b"precious content that must survive".repeat(100);
    env.mkfile("f", &content);
    env.symlink("alias", "f");
    env.mkdir("d");
    env.symlink("d/alias", "../f");
    std::fs::hard_link(env.ws_host("f"), env.ws_host("hard")).unwrap();
    for destination in ["f", "alias", "d/alias", "hard", "d/../f"] {
        let result = within(
            destination,
            env.fs
                .copy(&env.p("f"), &env.p(destination), CopyOptions::default()),
        )
        .await;
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{destination}: {err}");
        assert_eq!(
            err.to_string(),
            capfs::error::COPY_ONTO_ITSELF,
            "{destination}"
        );
        assert_eq!(std::fs::read(env.ws_host("f")).unwrap(), content);
    }
    // The other direction: the hard link as the source, the original as the destination.
    let err = within(
        "hard -> f",
        env.fs.copy(
            &env.p("hard"),
            &env.p("f"),
            CopyOptions::default().with_recursive(true),
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(std::fs::read(env.ws_host("f")).unwrap(), content);
    assert!(
        std::fs::symlink_metadata(env.ws_host("alias"))
            .unwrap()
            .is_symlink()
    );
}

/// cap-std's `Dir::read` allocates the reported size up front: a sparse 1 TiB file aborts the
/// process. capfs checks the size on the handle first.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn sparse_terabyte_file_is_refused_without_allocating(remote: bool) {
    let env = env(remote).await;
    let path = env.mkfile("sparse", b"");
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    let err = env.fs.read_file(&env.p("sparse")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(
        err.to_string()
            .ends_with("file is too large to read: limit is 536870912 bytes"),
        "{err}"
    );
    // Metadata still reports the apparent size.
    let metadata = env.fs.get_metadata(&env.p("sparse")).await.unwrap();
    assert_eq!(metadata.size, 1 << 40);
}

/// cap-std's `Dir::read` and `Dir::copy` block forever on a FIFO with no writer. capfs opens
/// without blocking and refuses anything but a regular file, at once.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn fifo_read_and_copy_fail_at_once(remote: bool) {
    let env = env(remote).await;
    env.mkfifo("p");
    env.symlink("to_p", "p");
    env.mkfile("tree/file", b"file");
    env.mkfifo("tree/p");

    for name in ["p", "to_p"] {
        let err = within(name, env.fs.read_file(&env.p(name)))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "read {name}: {err}");
    }
    let err = within(
        "copy p",
        env.fs
            .copy(&env.p("p"), &env.p("copy"), CopyOptions::default()),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(err.to_string(), capfs::error::COPY_UNSUPPORTED_TYPE);
    assert!(std::fs::symlink_metadata(env.ws_host("copy")).is_err());

    // Writing to a FIFO's name must not open it for writing (that would block or feed a reader).
    let write = within("write p", env.fs.write_file(&env.p("p"), b"x".to_vec())).await;
    assert!(write.is_err(), "write to a FIFO succeeded");
    assert!(
        std::fs::symlink_metadata(env.ws_host("p"))
            .unwrap()
            .file_type()
            .is_fifo(),
        "the FIFO was replaced"
    );

    // A FIFO inside a tree is skipped by a recursive copy.
    within(
        "copy tree",
        env.fs.copy(
            &env.p("tree"),
            &env.p("tree2"),
            CopyOptions::default().with_recursive(true),
        ),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read(env.ws_host("tree2/file")).unwrap(), b"file");
    assert!(std::fs::symlink_metadata(env.ws_host("tree2/p")).is_err());
}

/// `DirEntry::open_dir` follows symlinks: a walker built on it recurses through `self -> .` and
/// climbs out through `up -> ..`. capfs removes and copies such links as links.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn self_and_parent_links_are_not_followed_by_recursive_ops(remote: bool) {
    let env = env(remote).await;
    env.mkfile("neighbour.txt", b"neighbour");
    env.mkfile("t/file", b"file");
    env.mkfile("t/inner/file", b"inner");
    env.symlink("t/self", ".");
    env.symlink("t/up", "..");
    env.symlink("t/inner/self", ".");
    env.symlink("t/inner/up", "..");
    env.symlink("t/inner/root", "../..");
    let outside = env.outside_snapshot();

    within(
        "copy",
        env.fs.copy(
            &env.p("t"),
            &env.p("t2"),
            CopyOptions::default().with_recursive(true),
        ),
    )
    .await
    .unwrap();
    assert_same_tree(
        &snapshot(&env.ws_host("t"))
            .into_iter()
            .map(|(p, mut e)| {
                e.ino = 0;
                e.mtime_ns = 0;
                (p, e)
            })
            .collect(),
        &snapshot(&env.ws_host("t2"))
            .into_iter()
            .map(|(p, mut e)| {
                e.ino = 0;
                e.mtime_ns = 0;
                (p, e)
            })
            .collect(),
        "copy of t",
    );

    within("remove", env.fs.remove(&env.p("t"), RECURSIVE_FORCE))
        .await
        .unwrap();
    assert!(std::fs::symlink_metadata(env.ws_host("t")).is_err());
    assert_eq!(
        std::fs::read(env.ws_host("neighbour.txt")).unwrap(),
        b"neighbour"
    );
    assert_eq!(
        std::fs::read(env.ws_host("t2/inner/file")).unwrap(),
        b"inner"
    );
    env.assert_outside_unchanged(&outside);
}

/// cap-std's recursive removal holds one handle and one stack frame per level. capfs removes a
/// 10,000-level tree (the bound of docs/DESIGN.md §4.3), and refuses to copy it past its
/// documented depth with a clear error.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn very_deep_tree_is_removed_and_copy_stops_at_its_limit(remote: bool) {
    let env = env(remote).await;
    let depth = 10_000;
    build_deep_tree(&env.ws_host("deep"), depth);
    assert_eq!(deep_tree_depth(&env.ws_host("deep")), (depth, true));

    let err = within_for(
        DEEP_TREE_BOUND,
        "copy",
        env.fs.copy(
            &env.p("deep"),
            &env.p("copy"),
            CopyOptions::default().with_recursive(true),
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(
        err.to_string().ends_with(&format!(
            "directory tree is deeper than {} levels",
            capfs::COPY_DEPTH_LIMIT
        )),
        "{err}"
    );

    for top in ["deep", "copy"] {
        within_for(
            DEEP_TREE_BOUND,
            top,
            env.fs.remove(&env.p(top), RECURSIVE_FORCE),
        )
        .await
        .unwrap();
        assert!(
            std::fs::symlink_metadata(env.ws_host(top)).is_err(),
            "{top}"
        );
    }
}

/// A 1,000-level tree (beyond what a recursive walker with one handle per level can be trusted
/// with) is copied whole.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn thousand_level_tree_is_copied_whole(remote: bool) {
    let env = env(remote).await;
    let depth = 1_000;
    build_deep_tree(&env.ws_host("deep"), depth);
    within_for(
        DEEP_TREE_BOUND,
        "copy",
        env.fs.copy(
            &env.p("deep"),
            &env.p("copy"),
            CopyOptions::default().with_recursive(true),
        ),
    )
    .await
    .unwrap();
    assert_eq!(deep_tree_depth(&env.ws_host("copy")), (depth, true));
    assert_eq!(deep_tree_depth(&env.ws_host("deep")), (depth, true));
}

/// A smaller read limit is honoured: at the limit is fine, one byte over is refused with the
/// limit in the message.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn smaller_read_limit_is_honoured(remote: bool) {
    let env = env_with_read_limit(remote, 100).await;
    env.mkfile("at", &[7; 100]);
    env.mkfile("over", &[7; 101]);
    assert_eq!(env.fs.read_file(&env.p("at")).await.unwrap(), vec![7; 100]);
    let err = env.fs.read_file(&env.p("over")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(
        err.to_string()
            .ends_with("file is too large to read: limit is 100 bytes"),
        "{err}"
    );
}

/// A file whose reported size is under the limit but whose content is not (procfs reports 0) is
/// still refused: the read itself is capped.
// Local only: `/proc/self` is a different process on the server's side.
#[test_case(false ; "local")]
#[tokio::test]
async fn read_limit_caps_files_that_report_a_small_size(remote: bool) {
    let (fs, root) = fs_over(remote, "/proc/self", Access::ReadOnly, 64).await;
    let status = root.join("status").unwrap();
    let metadata = fs.get_metadata(&status).await.unwrap();
    assert_eq!(metadata.size, 0, "procfs reports a size of 0");
    let err = fs.read_file(&status).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("limit is 64 bytes"), "{err}");
}

/// A file that grows while it is read never yields more than the limit.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn read_limit_holds_for_a_growing_file(remote: bool) {
    let limit = 64 * 1024;
    let env = env_with_read_limit(remote, limit).await;
    let host = env.mkfile("grow", b"");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let chunk = [b'g'; 4096];
            let mut file = std::fs::File::options().append(true).open(&host).unwrap();
            while !stop.load(Ordering::Relaxed) {
                file.write_all(&chunk).unwrap();
                if file.metadata().unwrap().len() > 3 * limit {
                    file.set_len(0).unwrap();
                }
            }
        })
    };
    let start = Instant::now();
    let (mut ok, mut refused) = (0, 0);
    while start.elapsed() < Duration::from_millis(500) {
        match env.fs.read_file(&env.p("grow")).await {
            Ok(bytes) => {
                assert!(bytes.len() as u64 <= limit, "read {} bytes", bytes.len());
                ok += 1;
            }
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
                refused += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(ok + refused > 0);
}
