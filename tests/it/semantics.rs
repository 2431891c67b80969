//! Behaviour and error kinds of every operation (docs/DESIGN.md §2) on ordinary, non-hostile trees,
//! and the generated-image artifact helpers written through the trait.

use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::{SECRET, env, err_kind};
use capfs::artifact::{image_generation_artifact_path, save_image_generation_result};
use capfs::{
    AbsolutePathBuf, CopyOptions, CreateDirectoryOptions, ReadDirectoryEntry, RemoveOptions,
    RenameOptions,
};
use test_case::test_case;

const RECURSIVE: CopyOptions = CopyOptions { recursive: true };
const FLAT: CopyOptions = CopyOptions { recursive: false };
const NO_FORCE: RemoveOptions = RemoveOptions {
    recursive: false,
    force: false,
};

fn mode(path: &std::path::Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn is_link(path: &std::path::Path) -> bool {
    std::fs::symlink_metadata(path)
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(false)
}

fn exists(path: &std::path::Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

fn names(entries: &[ReadDirectoryEntry]) -> Vec<&str> {
    let mut names: Vec<&str> = entries.iter().map(|e| e.file_name.as_str()).collect();
    names.sort_unstable();
    names
}

// ---------------------------------------------------------------------------------------------
// read_file

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn read_file_returns_whole_contents_and_fails_by_kind(remote: bool) {
    let env = env(remote).await;
    let bytes: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    env.mkfile("bin", &bytes);
    env.mkfile("empty", b"");
    env.mkdir("dir");
    assert_eq!(env.fs.read_file(&env.p("bin")).await.unwrap(), bytes);
    assert!(env.fs.read_file(&env.p("empty")).await.unwrap().is_empty());
    assert_eq!(
        err_kind(env.fs.read_file(&env.p("missing")).await),
        ErrorKind::NotFound
    );
    assert_eq!(
        err_kind(env.fs.read_file(&env.p("dir")).await),
        ErrorKind::IsADirectory
    );
    assert_eq!(
        err_kind(env.fs.read_file(&env.ws).await),
        ErrorKind::IsADirectory
    );
}

// ---------------------------------------------------------------------------------------------
// write_file

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn write_file_creates_and_replaces_and_leaves_no_temporary(remote: bool) {
    let env = env(remote).await;
    env.mkdir("d");
    env.fs
        .write_file(&env.p("d/new"), b"first".to_vec())
        .await
        .unwrap();
    assert_eq!(std::fs::read(env.ws_host("d/new")).unwrap(), b"first");
    env.fs
        .write_file(&env.p("d/new"), b"second, longer".to_vec())
        .await
        .unwrap();
    assert_eq!(
        std::fs::read(env.ws_host("d/new")).unwrap(),
        b"second, longer"
    );
    env.fs
        .write_file(&env.p("d/new"), Vec::new())
        .await
        .unwrap();
    assert!(std::fs::read(env.ws_host("d/new")).unwrap().is_empty());
    let listing = env.fs.read_directory(&env.p("d")).await.unwrap();
    assert_eq!(names(&listing), ["new"], "a temporary file was left behind");
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn write_file_keeps_permission_bits(remote: bool) {
    let env = env(remote).await;
    for (name, bits) in [("private", 0o600), ("script", 0o755), ("odd", 0o640)] {
        let host = env.mkfile(name, b"old");
        std::fs::set_permissions(&host, std::fs::Permissions::from_mode(bits)).unwrap();
        env.fs
            .write_file(&env.p(name), b"new".to_vec())
            .await
            .unwrap();
        assert_eq!(mode(&host), bits, "{name}");
        assert_eq!(std::fs::read(&host).unwrap(), b"new");
    }
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn write_file_through_a_symlink_updates_the_target_and_keeps_the_link(remote: bool) {
    let env = env(remote).await;
    env.mkfile("sub/target", b"old");
    env.symlink("link", "sub/target");
    env.mkdir("other");
    env.symlink("other/rel", "../sub/target");
    env.symlink("sub/chain", "../link");

    for (link, text, content) in [
        ("link", "sub/target", &b"via link"[..]),
        ("other/rel", "../sub/target", b"via rel"),
        ("sub/chain", "../link", b"via chain"),
    ] {
        env.fs
            .write_file(&env.p(link), content.to_vec())
            .await
            .unwrap();
        assert!(is_link(&env.ws_host(link)), "{link} is no longer a link");
        assert_eq!(
            std::fs::read_link(env.ws_host(link)).unwrap(),
            std::path::Path::new(text)
        );
        assert_eq!(std::fs::read(env.ws_host("sub/target")).unwrap(), content);
    }
    // A dangling link inside the root: the target is created.
    env.symlink("dangling", "sub/created");
    env.fs
        .write_file(&env.p("dangling"), b"made".to_vec())
        .await
        .unwrap();
    assert!(is_link(&env.ws_host("dangling")));
    assert_eq!(std::fs::read(env.ws_host("sub/created")).unwrap(), b"made");
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn write_file_errors(remote: bool) {
    let env = env(remote).await;
    env.mkdir("dir");
    env.mkfile("file", b"file");
    env.symlink("to_dir", "dir");
    let write = async |p: &str| env.fs.write_file(&env.p(p), b"x".to_vec()).await;
    assert_eq!(err_kind(write("missing/f").await), ErrorKind::NotFound);
    assert_eq!(err_kind(write("dir").await), ErrorKind::IsADirectory);
    assert_eq!(err_kind(write("to_dir").await), ErrorKind::IsADirectory);
    assert_eq!(err_kind(write("").await), ErrorKind::IsADirectory);
    assert_eq!(err_kind(write("file/x").await), ErrorKind::NotADirectory);
    assert!(is_link(&env.ws_host("to_dir")));
    assert_eq!(std::fs::read(env.ws_host("file")).unwrap(), b"file");
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn write_file_replaces_a_hard_link_instead_of_writing_through_it(remote: bool) {
    let env = env(remote).await;
    let secret = env.outside.join("secret");
    std::fs::hard_link(&secret, env.ws_host("h")).unwrap();
    assert_eq!(std::fs::metadata(&secret).unwrap().nlink(), 2);
    env.fs
        .write_file(&env.p("h"), b"replaced".to_vec())
        .await
        .unwrap();
    assert_eq!(std::fs::read(&secret).unwrap(), SECRET);
    assert_eq!(std::fs::metadata(&secret).unwrap().nlink(), 1);
    assert_eq!(std::fs::read(env.ws_host("h")).unwrap(), b"replaced");
}

/// A reader never sees a mix of the old and the new content.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_file_is_atomic_for_concurrent_readers(remote: bool) {
    let env = env(remote).await;
    let size = 256 * 1024;
    let host = env.mkfile("atomic", &vec![b'a'; size]);
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) {
                let bytes = std::fs::read(&host).unwrap();
                assert_eq!(bytes.len(), size, "a reader saw a partial file");
                assert!(
                    bytes.iter().all(|&b| b == bytes[0]),
                    "a reader saw a mix of old and new content"
                );
                reads += 1;
            }
            reads
        })
    };
    let start = Instant::now();
    let mut fill = b'a';
    while start.elapsed() < Duration::from_millis(400) {
        fill = if fill == b'a' { b'b' } else { b'a' };
        env.fs
            .write_file(&env.p("atomic"), vec![fill; size])
            .await
            .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let reads = reader.join().expect("reader saw torn content");
    assert!(reads > 0);
}

// ---------------------------------------------------------------------------------------------
// create_directory

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn create_directory_recursive_and_not(remote: bool) {
    let env = env(remote).await;
    let rec = CreateDirectoryOptions { recursive: true };
    let flat = CreateDirectoryOptions { recursive: false };
    let mkdir = async |p: &str, o| env.fs.create_directory(&env.p(p), o).await;

    mkdir("a/b/c", rec).await.unwrap();
    assert!(std::fs::metadata(env.ws_host("a/b/c")).unwrap().is_dir());
    mkdir("a/b/c", rec).await.unwrap();
    mkdir("a/b/d", flat).await.unwrap();
    assert!(std::fs::metadata(env.ws_host("a/b/d")).unwrap().is_dir());
    assert_eq!(
        err_kind(mkdir("a/b/c", flat).await),
        ErrorKind::AlreadyExists
    );
    assert_eq!(err_kind(mkdir("x/y", flat).await), ErrorKind::NotFound);
    assert!(!exists(&env.ws_host("x")));
    assert_eq!(err_kind(mkdir("", flat).await), ErrorKind::AlreadyExists);
    mkdir("", rec).await.unwrap();
    env.mkfile("file", b"f");
    assert_eq!(
        err_kind(mkdir("file", flat).await),
        ErrorKind::AlreadyExists
    );
    assert!(mkdir("file", rec).await.is_err());
    assert_eq!(std::fs::read(env.ws_host("file")).unwrap(), b"f");
    // Through a symlink to a directory inside the root.
    env.symlink("to_a", "a");
    mkdir("to_a/e", flat).await.unwrap();
    assert!(std::fs::metadata(env.ws_host("a/e")).unwrap().is_dir());
}

// ---------------------------------------------------------------------------------------------
// get_metadata

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn get_metadata_reports_types_sizes_and_times(remote: bool) {
    let env = env(remote).await;
    env.mkfile("f", b"12345");
    env.mkdir("d");
    env.symlink("lf", "f");
    env.symlink("ld", "d");
    env.symlink("dangling", "missing");
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;

    let f = env.fs.get_metadata(&env.p("f")).await.unwrap();
    assert!(f.is_file && !f.is_directory && !f.is_symlink);
    assert_eq!(f.size, 5);
    assert!(f.modified_at_ms > 0);
    assert!(
        (f.modified_at_ms - now_ms).abs() < 60_000,
        "{} vs {now_ms}",
        f.modified_at_ms
    );
    assert!(f.created_at_ms >= 0);

    let d = env.fs.get_metadata(&env.p("d")).await.unwrap();
    assert!(d.is_directory && !d.is_file && !d.is_symlink);

    let lf = env.fs.get_metadata(&env.p("lf")).await.unwrap();
    assert!(lf.is_symlink && lf.is_file && !lf.is_directory);
    assert_eq!(lf.size, 5);

    let ld = env.fs.get_metadata(&env.p("ld")).await.unwrap();
    assert!(ld.is_symlink && ld.is_directory);

    let root = env.fs.get_metadata(&env.ws).await.unwrap();
    assert!(root.is_directory && !root.is_symlink);

    assert_eq!(
        err_kind(env.fs.get_metadata(&env.p("missing")).await),
        ErrorKind::NotFound
    );
    assert_eq!(
        err_kind(env.fs.get_metadata(&env.p("dangling")).await),
        ErrorKind::NotFound
    );
}

// ---------------------------------------------------------------------------------------------
// read_directory

/// The local backend lists the first entries of a directory on the calling task and the rest
/// in the blocking pool: listings around and far past that bound are whole and typed.
#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn read_directory_is_whole_on_either_side_of_the_inline_bound(remote: bool) {
    let env = env(remote).await;
    for count in [511usize, 512, 513, 1_300] {
        let dir = format!("d{count}");
        env.mkdir(&dir);
        let mut expected = Vec::new();
        for i in 0..count {
            let name = format!("entry-{i:05}");
            let rel = format!("{dir}/{name}");
            let (is_directory, is_file, is_symlink) = match i % 10 {
                0 => {
                    env.mkdir(&rel);
                    (true, false, false)
                }
                7 => {
                    env.symlink(&rel, "elsewhere");
                    (false, false, true)
                }
                _ => {
                    env.mkfile(&rel, b"x");
                    (false, true, false)
                }
            };
            expected.push(ReadDirectoryEntry {
                file_name: name,
                is_directory,
                is_file,
                is_symlink,
                lossy_name: false,
                raw_name: None,
            });
        }
        let mut entries = env.fs.read_directory(&env.p(&dir)).await.unwrap();
        entries.sort_by(|a, b| a.file_name.cmp(&b.file_name));
        assert_eq!(entries, expected, "{count} entries");
    }
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn read_directory_lists_every_entry_with_its_own_type(remote: bool) {
    let env = env(remote).await;
    env.mkfile("d/file", b"f");
    env.mkdir("d/sub");
    env.symlink("d/inside", "file");
    env.symlink("d/dangling", "nowhere");
    env.symlink("d/escaping", env.outside.join("secret"));
    env.symlink("d/escaping_dir", &env.outside);
    env.mkfifo("d/fifo");
    let mut entries = env.fs.read_directory(&env.p("d")).await.unwrap();
    entries.sort_by(|a, b| a.file_name.cmp(&b.file_name));
    let entry = |name: &str, dir, file, link| ReadDirectoryEntry {
        file_name: name.to_string(),
        is_directory: dir,
        is_file: file,
        is_symlink: link,
        lossy_name: false,
        raw_name: None,
    };
    assert_eq!(
        entries,
        vec![
            entry("dangling", false, false, true),
            entry("escaping", false, false, true),
            entry("escaping_dir", false, false, true),
            entry("fifo", false, false, false),
            entry("file", false, true, false),
            entry("inside", false, false, true),
            entry("sub", true, false, false),
        ]
    );
    assert!(
        env.fs
            .read_directory(&env.p("d/sub"))
            .await
            .unwrap()
            .is_empty()
    );
    // Through a link to a directory inside the root.
    env.symlink("to_d", "d");
    assert_eq!(
        env.fs.read_directory(&env.p("to_d")).await.unwrap().len(),
        7
    );
    assert_eq!(
        err_kind(env.fs.read_directory(&env.p("d/file")).await),
        ErrorKind::NotADirectory
    );
    assert_eq!(
        err_kind(env.fs.read_directory(&env.p("missing")).await),
        ErrorKind::NotFound
    );
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn read_directory_marks_lossy_names_and_remote_listings_leave_them_out(remote: bool) {
    use std::os::unix::ffi::OsStrExt;
    let env = env(remote).await;
    env.mkdir("d");
    let name = std::ffi::OsStr::from_bytes(b"bad\xff\xfe");
    std::fs::write(env.ws_host("d").join(name), b"x").unwrap();
    std::fs::write(env.ws_host("d").join("good"), b"x").unwrap();
    let mut entries = env.fs.read_directory(&env.p("d")).await.unwrap();
    entries.sort_by(|a, b| a.file_name.cmp(&b.file_name));
    if remote {
        // A lossy name would lead elsewhere once sent back: it is not listed at all.
        assert_eq!(names(&entries), ["good"]);
    } else {
        assert_eq!(names(&entries), ["bad\u{fffd}\u{fffd}", "good"]);
        assert!(entries[0].is_file && entries[0].lossy_name);
    }
    assert!(!entries.last().unwrap().lossy_name);
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn read_only_root_serves_reads(remote: bool) {
    let env = env(remote).await;
    let file = env.ro.join("file").unwrap();
    assert_eq!(env.fs.read_file(&file).await.unwrap(), b"read-only content");
    assert!(env.fs.get_metadata(&file).await.unwrap().is_file);
    assert_eq!(
        names(&env.fs.read_directory(&env.ro).await.unwrap()),
        ["dir", "file"]
    );
    env.fs
        .copy(&env.ro.join("dir").unwrap(), &env.p("copy"), RECURSIVE)
        .await
        .unwrap();
    assert_eq!(std::fs::read(env.ws_host("copy/inner")).unwrap(), b"inner");
    let recursive = CreateDirectoryOptions { recursive: true };
    assert_eq!(
        err_kind(env.fs.create_directory(&env.ro, recursive).await),
        ErrorKind::PermissionDenied
    );
}

// ---------------------------------------------------------------------------------------------
// remove

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn remove_files_directories_and_links(remote: bool) {
    let env = env(remote).await;
    env.mkfile("f", b"f");
    env.mkdir("empty");
    env.mkfile("full/a/b", b"b");
    env.mkfile("full/c", b"c");
    env.symlink("full/l", "../f");
    env.mkfile("target/keep", b"keep");
    env.symlink("to_target", "target");
    let remove = async |p: &str, recursive, force| {
        env.fs
            .remove(&env.p(p), RemoveOptions { recursive, force })
            .await
    };

    remove("f", false, false).await.unwrap();
    assert!(!exists(&env.ws_host("f")));
    remove("empty", false, false).await.unwrap();
    assert!(!exists(&env.ws_host("empty")));
    assert_eq!(
        err_kind(remove("full", false, false).await),
        ErrorKind::DirectoryNotEmpty
    );
    assert_eq!(
        err_kind(remove("full", false, true).await),
        ErrorKind::DirectoryNotEmpty
    );
    assert!(exists(&env.ws_host("full/a/b")));
    remove("full", true, false).await.unwrap();
    assert!(!exists(&env.ws_host("full")));

    remove("to_target", true, false).await.unwrap();
    assert!(!exists(&env.ws_host("to_target")));
    assert_eq!(std::fs::read(env.ws_host("target/keep")).unwrap(), b"keep");

    assert_eq!(
        err_kind(remove("missing", false, false).await),
        ErrorKind::NotFound
    );
    assert_eq!(
        err_kind(remove("missing/deeper", true, false).await),
        ErrorKind::NotFound
    );
    remove("missing", false, true).await.unwrap();
    remove("missing/deeper", true, true).await.unwrap();
    assert_eq!(
        err_kind(env.fs.remove(&env.ws, NO_FORCE).await),
        ErrorKind::PermissionDenied
    );
}

// ---------------------------------------------------------------------------------------------
// copy

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn copy_file_creates_overwrites_and_keeps_mode(remote: bool) {
    let env = env(remote).await;
    let src = env.mkfile("src", b"source bytes");
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o751)).unwrap();
    env.mkfile("existing", b"old content that is longer");
    env.fs
        .copy(&env.p("src"), &env.p("new"), FLAT)
        .await
        .unwrap();
    assert_eq!(std::fs::read(env.ws_host("new")).unwrap(), b"source bytes");
    assert_eq!(mode(&env.ws_host("new")), 0o751);
    env.fs
        .copy(&env.p("src"), &env.p("existing"), RECURSIVE)
        .await
        .unwrap();
    assert_eq!(
        std::fs::read(env.ws_host("existing")).unwrap(),
        b"source bytes"
    );
    // Across roots.
    env.fs
        .copy(&env.p("src"), &env.ws2.join("copied").unwrap(), FLAT)
        .await
        .unwrap();
    assert_eq!(
        std::fs::read(env.ws2.as_path().join("copied")).unwrap(),
        b"source bytes"
    );
    assert_eq!(std::fs::read(&src).unwrap(), b"source bytes");
    assert_eq!(
        err_kind(env.fs.copy(&env.p("missing"), &env.p("x"), FLAT).await),
        ErrorKind::NotFound
    );
    assert_eq!(
        err_kind(env.fs.copy(&env.p("src"), &env.p("no/parent"), FLAT).await),
        ErrorKind::NotFound
    );
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn copy_error_messages_are_exact(remote: bool) {
    let env = env(remote).await;
    env.mkfile("dir/file", b"f");
    env.mkfifo("fifo");
    assert_eq!(
        capfs::error::COPY_DIRECTORY_NEEDS_RECURSIVE,
        "fs/copy requires recursive: true when sourcePath is a directory"
    );
    assert_eq!(
        capfs::error::COPY_INTO_ITSELF,
        "fs/copy cannot copy a directory to itself or one of its descendants"
    );
    assert_eq!(
        capfs::error::COPY_UNSUPPORTED_TYPE,
        "fs/copy only supports regular files, directories, and symlinks"
    );

    let err = env
        .fs
        .copy(&env.p("dir"), &env.p("dir2"), FLAT)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(
        err.to_string(),
        "fs/copy requires recursive: true when sourcePath is a directory"
    );
    assert!(!exists(&env.ws_host("dir2")));

    let err = env
        .fs
        .copy(&env.p("dir"), &env.p("dir/inside"), RECURSIVE)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(
        err.to_string(),
        "fs/copy cannot copy a directory to itself or one of its descendants"
    );

    let err = env
        .fs
        .copy(&env.p("fifo"), &env.p("fifo2"), FLAT)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(
        err.to_string(),
        "fs/copy only supports regular files, directories, and symlinks"
    );
}

/// A directory copied into itself or a descendant is refused before anything is written,
/// whatever spelling or alias reaches it.
#[test_case(false, "a", "a" ; "local onto itself")]
#[test_case(false, "a", "a/new" ; "local into itself")]
#[test_case(false, "a", "a/b/new" ; "local into a descendant")]
#[test_case(false, "a", "a/b" ; "local onto an existing descendant")]
#[test_case(false, "a", "alias/new" ; "local through a symlink alias of the source")]
#[test_case(false, "a", "alias_b/new" ; "local through a symlink alias of a descendant")]
#[test_case(false, "here/a", "a/new" ; "local source reached through a directory link")]
#[test_case(false, "", "a/new" ; "local the root into a subdirectory")]
#[tokio::test]
async fn copy_directory_into_itself_is_refused(remote: bool, source: &str, destination: &str) {
    let env = env(remote).await;
    env.mkfile("a/file", b"f");
    env.mkfile("a/b/file", b"g");
    env.symlink("alias", "a");
    env.symlink("alias_b", "a/b");
    env.symlink("here", ".");
    let before = crate::common::snapshot(env.ws.as_path());
    let err = env
        .fs
        .copy(&env.p(source), &env.p(destination), RECURSIVE)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(err.to_string(), capfs::error::COPY_INTO_ITSELF);
    crate::common::assert_same_tree(&before, &crate::common::snapshot(env.ws.as_path()), "ws");
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn copy_tree_recreates_links_and_skips_special_files(remote: bool) {
    let env = env(remote).await;
    env.mkfile("t/file", b"file");
    let exe = env.mkfile("t/sub/exe", b"#!/bin/sh\n");
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o750)).unwrap();
    env.mkdir("t/empty");
    env.mkdir("b");
    env.symlink("t/rel", "../b");
    env.symlink("t/sub/up", "../file");
    env.symlink("t/abs", env.ws_host("t/file"));
    env.symlink("t/dangling", "nowhere");
    env.mkfifo("t/fifo");
    let _socket = env.mksocket("t/sub/sock");

    env.fs
        .copy(&env.p("t"), &env.p("c"), RECURSIVE)
        .await
        .unwrap();
    let c = |rel: &str| env.ws_host(&format!("c/{rel}"));
    assert_eq!(std::fs::read(c("file")).unwrap(), b"file");
    assert_eq!(std::fs::read(c("sub/exe")).unwrap(), b"#!/bin/sh\n");
    assert_eq!(mode(&c("sub/exe")), 0o750);
    assert!(std::fs::metadata(c("empty")).unwrap().is_dir());
    for (link, text) in [
        ("rel", std::path::PathBuf::from("../b")),
        ("sub/up", "../file".into()),
        ("abs", env.ws_host("t/file")),
        ("dangling", "nowhere".into()),
    ] {
        assert!(is_link(&c(link)), "{link}");
        assert_eq!(std::fs::read_link(c(link)).unwrap(), text, "{link}");
    }
    assert!(!exists(&c("fifo")), "a FIFO was copied");
    assert!(!exists(&c("sub/sock")), "a socket was copied");

    // A symlink as the source of a non-recursive copy is copied as a link.
    env.fs
        .copy(&env.p("t/rel"), &env.p("single"), FLAT)
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_link(env.ws_host("single")).unwrap(),
        std::path::Path::new("../b")
    );
    // Copying over an existing link replaces the link, never its target.
    env.mkfile("victim", b"victim");
    env.symlink("over", "victim");
    env.fs
        .copy(&env.p("t/rel"), &env.p("over"), FLAT)
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_link(env.ws_host("over")).unwrap(),
        std::path::Path::new("../b")
    );
    assert_eq!(std::fs::read(env.ws_host("victim")).unwrap(), b"victim");
}

// ---------------------------------------------------------------------------------------------
// rename

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn rename_overwrite_and_errors(remote: bool) {
    let env = env(remote).await;
    env.mkfile("a", b"a");
    env.mkfile("b", b"b");
    env.mkfile("dir/inner", b"inner");
    let keep = RenameOptions { overwrite: false };
    let replace = RenameOptions { overwrite: true };
    let rename = async |s: &str, d: &str, o| env.fs.rename(&env.p(s), &env.p(d), o).await;

    assert_eq!(
        err_kind(rename("a", "b", keep).await),
        ErrorKind::AlreadyExists
    );
    assert_eq!(std::fs::read(env.ws_host("a")).unwrap(), b"a");
    assert_eq!(std::fs::read(env.ws_host("b")).unwrap(), b"b");

    rename("a", "b", replace).await.unwrap();
    assert!(!exists(&env.ws_host("a")));
    assert_eq!(std::fs::read(env.ws_host("b")).unwrap(), b"a");

    rename("b", "c", keep).await.unwrap();
    assert_eq!(std::fs::read(env.ws_host("c")).unwrap(), b"a");
    rename("dir", "moved", keep).await.unwrap();
    assert_eq!(std::fs::read(env.ws_host("moved/inner")).unwrap(), b"inner");

    assert_eq!(
        err_kind(rename("missing", "x", keep).await),
        ErrorKind::NotFound
    );
    let across = env
        .fs
        .rename(&env.p("c"), &env.ws2.join("c").unwrap(), keep)
        .await;
    assert_eq!(err_kind(across), ErrorKind::CrossesDevices);
    assert!(exists(&env.ws_host("c")));
    assert_eq!(
        err_kind(env.fs.rename(&env.ws, &env.p("x"), replace).await),
        ErrorKind::PermissionDenied
    );
    assert_eq!(
        err_kind(env.fs.rename(&env.p("c"), &env.ws, replace).await),
        ErrorKind::PermissionDenied
    );
    assert_eq!(
        err_kind(
            env.fs
                .rename(&env.p("moved/.."), &env.p("y"), replace)
                .await
        ),
        ErrorKind::PermissionDenied
    );
    assert_eq!(std::fs::read(env.ws_host("c")).unwrap(), b"a");
}

// ---------------------------------------------------------------------------------------------
// artifacts

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn image_artifact_paths_and_saving(remote: bool) {
    let env = env(remote).await;
    let home = env.p("home");
    assert_eq!(
        image_generation_artifact_path(&home, "sess/1", "call.2"),
        env.p("home/generated_images/sess_1/call_2.png")
    );
    assert_eq!(
        image_generation_artifact_path(&home, "", "../.."),
        env.p("home/generated_images/generated_image/_____.png")
    );

    let png = b"\x89PNG\r\n\x1a\n fake image bytes";
    let encoded = "iVBORw0KGgogZmFrZSBpbWFnZSBieXRlcw==";
    let written = save_image_generation_result(
        env.fs.as_ref(),
        &home,
        "session",
        "call",
        &format!("  {encoded}\n"),
    )
    .await
    .unwrap();
    assert_eq!(written, env.p("home/generated_images/session/call.png"));
    assert_eq!(
        std::fs::read(env.ws_host("home/generated_images/session/call.png")).unwrap(),
        png
    );

    for (bad, why) in [
        (format!("data:image/png;base64,{encoded}"), "data URL"),
        ("-_-_".to_string(), "URL-safe alphabet"),
        ("iVBORw0KGgo-_w".to_string(), "URL-safe, unpadded"),
        ("not base64!".to_string(), "garbage"),
    ] {
        let result =
            save_image_generation_result(env.fs.as_ref(), &home, "other", "call", &bad).await;
        assert_eq!(err_kind(result), ErrorKind::InvalidInput, "{why}");
    }
    assert!(!exists(&env.ws_host("home/generated_images/other")));

    // Confined like every other write: a home outside the roots is refused.
    let outside_home = AbsolutePathBuf::new(&env.outside).unwrap();
    let result =
        save_image_generation_result(env.fs.as_ref(), &outside_home, "s", "c", encoded).await;
    assert_eq!(err_kind(result), ErrorKind::PermissionDenied);
    assert!(!exists(&env.outside.join("generated_images")));
}
