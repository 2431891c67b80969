//! Rows of the semantics table for `remove`, `copy` and `rename`.

use super::*;
use test_case::test_case;

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
            .remove(
                &env.p(p),
                RemoveOptions::default()
                    .with_recursive(recursive)
                    .with_force(force),
            )
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

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn rename_overwrite_and_errors(remote: bool) {
    let env = env(remote).await;
    env.mkfile("a", b"a");
    env.mkfile("b", b"b");
    env.mkfile("dir/inner", b"inner");
    let keep = RenameOptions::default().with_overwrite(false);
    let replace = RenameOptions::default().with_overwrite(true);
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
