//! Rows of the semantics table for `write_file`, `create_directory` and saved artifacts.

use super::*;
use test_case::test_case;

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

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn create_directory_recursive_and_not(remote: bool) {
    let env = env(remote).await;
    let rec = CreateDirectoryOptions::default().with_recursive(true);
    let flat = CreateDirectoryOptions::default().with_recursive(false);
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
