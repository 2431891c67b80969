//! Regression tests for findings of the property tests and fuzz targets, one per finding, each
//! on both backends.

use std::io::ErrorKind;
use std::path::Path;

use crate::common::InProcessServer;
use capfs::{
    AbsolutePathBuf, Access, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem,
    LocalFileSystem, RemoveOptions, RenameOptions, Sandbox,
};
use capfs_wire::{RemoteFileSystem, RemoteOptions};

/// `ws/` read-write with `ws/ro/` a read-only root nested in it, and `ws/link -> ro`.
fn nested_read_only_tree() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir_all(ws.join("ro/sub")).unwrap();
    std::fs::write(ws.join("ro/keep.txt"), b"read-only").unwrap();
    std::fs::write(ws.join("a.txt"), b"a").unwrap();
    std::os::unix::fs::symlink("ro", ws.join("link")).unwrap();
    std::os::unix::fs::symlink(ws.join("ro/keep.txt"), ws.join("abs_link")).unwrap();
    (dir, ws)
}

fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(path) = todo.pop() {
        for entry in std::fs::read_dir(&path).unwrap() {
            let entry = entry.unwrap();
            let name = entry
                .path()
                .strip_prefix(dir)
                .unwrap()
                .display()
                .to_string();
            if entry.file_type().unwrap().is_dir() {
                todo.push(entry.path());
                out.push((name, Vec::new()));
            } else {
                out.push((name, std::fs::read(entry.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Found by `operation_plans_stay_confined_and_backends_agree`: `create_directory` of
/// `/ws/link/a` with `/ws/link -> ro` created `/ws/ro/a` inside the read-only root, because only
/// the lexical path's root was checked for write access. Every mutation that can land in a
/// nested read-only root through a symlink must be `PermissionDenied` and change nothing.
async fn mutations_through_a_link_into_a_read_only_root(fs: &dyn ExecutorFileSystem, ws: &Path) {
    let p = |rel: &str| AbsolutePathBuf::new(ws.join(rel)).unwrap();
    let before = listing(&ws.join("ro"));
    let results = [
        (
            "create_directory",
            fs.create_directory(
                &p("link/a"),
                CreateDirectoryOptions::default().with_recursive(false),
            )
            .await,
        ),
        (
            "create_directory recursive",
            fs.create_directory(
                &p("link/b/c"),
                CreateDirectoryOptions::default().with_recursive(true),
            )
            .await,
        ),
        (
            "write_file",
            fs.write_file(&p("link/new.txt"), b"x".to_vec()).await,
        ),
        (
            "write_file through a final absolute link",
            fs.write_file(&p("abs_link"), b"x".to_vec()).await,
        ),
        (
            "remove",
            fs.remove(&p("link/keep.txt"), RemoveOptions::default())
                .await,
        ),
        (
            "remove a directory",
            fs.remove(&p("link/sub"), RemoveOptions::default()).await,
        ),
        (
            "rename out",
            fs.rename(
                &p("link/keep.txt"),
                &p("moved.txt"),
                RenameOptions::default(),
            )
            .await,
        ),
        (
            "rename in",
            fs.rename(&p("a.txt"), &p("link/a.txt"), RenameOptions::default())
                .await,
        ),
        (
            "copy in",
            fs.copy(&p("a.txt"), &p("link/a.txt"), CopyOptions::default())
                .await,
        ),
    ];
    for (what, result) in results {
        assert_eq!(
            result.map_err(|e| e.kind()),
            Err(ErrorKind::PermissionDenied),
            "{what}"
        );
    }
    assert_eq!(listing(&ws.join("ro")), before);
    // Reads through the link and mutations beside it still work.
    assert_eq!(
        fs.read_file(&p("link/keep.txt")).await.unwrap(),
        b"read-only"
    );
    fs.remove(&p("link"), RemoveOptions::default())
        .await
        .unwrap();
    assert!(ws.join("ro/keep.txt").exists());
}

fn nested_sandbox(ws: &Path) -> Sandbox {
    Sandbox::new()
        .with_root(ws, Access::ReadWrite)
        .unwrap()
        .with_root(ws.join("ro"), Access::ReadOnly)
        .unwrap()
}

#[tokio::test]
async fn local_mutations_through_a_link_into_a_read_only_root_are_denied() {
    let (_dir, ws) = nested_read_only_tree();
    let fs = LocalFileSystem::new(nested_sandbox(&ws));
    mutations_through_a_link_into_a_read_only_root(&fs, &ws).await;
}

#[tokio::test]
async fn remote_mutations_through_a_link_into_a_read_only_root_are_denied() {
    let (_dir, ws) = nested_read_only_tree();
    let ro = ws.join("ro");
    let roots = [
        (ws.as_path(), Access::ReadWrite),
        (ro.as_path(), Access::ReadOnly),
    ];
    let server = InProcessServer::serving_roots(&roots, Default::default()).await;
    let fs = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap();
    mutations_through_a_link_into_a_read_only_root(&fs, &ws).await;
}

/// Found while reviewing what the local/remote property cannot generate (its paths are strings):
/// `AbsolutePathBuf` serialised lossily, so the remote backend sent `/ws/\xff` as `/ws/\u{FFFD}`
/// and read, wrote or removed a different file than the one named. A path that is not UTF-8
/// cannot cross the wire; the remote backend must refuse it with `InvalidInput` and touch
/// nothing.
#[tokio::test]
async fn remote_refuses_a_non_utf8_path_instead_of_touching_another_file() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("\u{FFFD}"), b"another file").unwrap();
    let server = InProcessServer::serving(&ws).await;
    let fs = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap();
    let mut bytes = ws.as_os_str().as_bytes().to_vec();
    bytes.extend_from_slice(b"/\xff");
    let path = AbsolutePathBuf::new(OsStr::from_bytes(&bytes)).unwrap();
    let other = AbsolutePathBuf::new(ws.join("ok.txt")).unwrap();
    let kinds = [
        fs.read_file(&path).await.map(drop),
        fs.write_file(&path, b"new".to_vec()).await,
        fs.get_metadata(&path).await.map(drop),
        fs.remove(&path, RemoveOptions::default()).await,
        fs.copy(&path, &other, CopyOptions::default()).await,
        fs.rename(&path, &other, RenameOptions::default()).await,
    ]
    .map(|r| r.map_err(|e| e.kind()));
    assert_eq!(kinds, [const { Err(ErrorKind::InvalidInput) }; 6]);
    assert_eq!(std::fs::read(ws.join("\u{FFFD}")).unwrap(), b"another file");
    assert!(!ws.join("ok.txt").exists());
    // The same path works on the local backend, where it names the right file.
    let local = LocalFileSystem::new(Sandbox::new().with_root(&ws, Access::ReadWrite).unwrap());
    local.write_file(&path, b"new".to_vec()).await.unwrap();
    assert_eq!(
        std::fs::read(ws.join(OsStr::from_bytes(b"\xff"))).unwrap(),
        b"new"
    );
    assert_eq!(std::fs::read(ws.join("\u{FFFD}")).unwrap(), b"another file");
}

/// Found by the `protocol_decode` fuzz target (crash-8f271e59…): serde_json's default float
/// parser is not correctly rounded, so `123228394.123456789e200` decoded to one `f64`, was
/// written back as `1.232283941234568e+208`, and that text decoded to another: a message did not
/// survive decode → encode → decode. A decoded message must re-encode to text that decodes to
/// the same message.
#[test]
fn a_decoded_message_with_floats_round_trips() {
    use capfs_wire::protocol::Message;

    let texts: [&[u8]; 3] = [
        br#"{"id":1,"method":"initialized","params":[0.1,1e-7,2.2250738585072014e-308,123228394.123456789e200,-0,-0.0,1.7976931348623157e308,5e-324]}"#,
        br#"{"id":"x","result":{"v":123228394.123456789e200}}"#,
        br#"{"method":"n","params":{"a":0.30000000000000004,"b":9007199254740993.5}}"#,
    ];
    for text in texts {
        let message = Message::from_slice(text).unwrap();
        let again = Message::from_slice(message.to_text().as_bytes()).unwrap();
        assert_eq!(again, message, "{}", String::from_utf8_lossy(text));
    }
}
