//! Rows of the semantics table for `read_file`, `get_metadata` and `read_directory`.

use super::*;
use test_case::test_case;

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
            expected.push(
                ReadDirectoryEntry::new(name)
                    .with_is_directory(is_directory)
                    .with_is_file(is_file)
                    .with_is_symlink(is_symlink),
            );
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
    let entry = |name: &str, dir, file, link| {
        ReadDirectoryEntry::new(name.to_string())
            .with_is_directory(dir)
            .with_is_file(file)
            .with_is_symlink(link)
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
    let recursive = CreateDirectoryOptions::default().with_recursive(true);
    assert_eq!(
        err_kind(env.fs.create_directory(&env.ro, recursive).await),
        ErrorKind::PermissionDenied
    );
}
