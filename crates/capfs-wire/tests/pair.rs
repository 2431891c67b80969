//! The in-memory pair: a server and its client in the test process, over the real protocol.

use std::io::{self, ErrorKind};
use std::sync::Arc;
use std::time::Duration;

use capfs::process::{
    ExecutorProcesses, LocalProcesses, ProcessEvent, ProcessPolicy, ProcessRequest,
};
use capfs::{AbsolutePathBuf, Access, ExecutorFileSystem, LocalFileSystem, Sandbox, WriteOptions};
use capfs_wire::RemoteFileSystem;
use capfs_wire::server::{ServedProcesses, ServerConfig, ServingHandle, pair};

/// Longest wait for anything the pair must do by itself; only a hang comes near it.
const BOUND: Duration = Duration::from_secs(20);

/// A read-write root in a temporary directory, with `outside/secret` next to it.
struct Tree {
    _dir: tempfile::TempDir,
    root: AbsolutePathBuf,
    outside: std::path::PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(base.join("ws")).unwrap();
    std::fs::create_dir(base.join("outside")).unwrap();
    std::fs::write(base.join("outside/secret"), b"secret").unwrap();
    let root = AbsolutePathBuf::try_from(base.join("ws")).unwrap();
    Tree {
        _dir: dir,
        root,
        outside: base.join("outside"),
    }
}

fn sandbox(tree: &Tree) -> Sandbox {
    Sandbox::new()
        .with_root(tree.root.as_path(), Access::ReadWrite)
        .unwrap()
}

async fn paired(tree: &Tree, config: ServerConfig) -> (RemoteFileSystem, ServingHandle) {
    let local = LocalFileSystem::new(sandbox(tree));
    tokio::time::timeout(BOUND, pair(Arc::new(local), config))
        .await
        .expect("the pair connects in time")
        .expect("pair")
}

async fn ended(handle: ServingHandle) -> io::Result<()> {
    tokio::time::timeout(BOUND, handle.finished())
        .await
        .expect("the paired server ends in time")
}

#[tokio::test]
async fn a_write_reads_back_and_an_escape_is_refused() {
    let tree = tree();
    let (fs, server) = paired(&tree, ServerConfig::default()).await;
    assert_eq!(fs.roots().len(), 1, "initialize announced the root");
    let file = tree.root.join("a.txt").unwrap();
    fs.write_file(&file, b"over the pair".to_vec())
        .await
        .unwrap();
    assert_eq!(fs.read_file(&file).await.unwrap(), b"over the pair");
    assert_eq!(
        std::fs::read(tree.root.as_path().join("a.txt")).unwrap(),
        b"over the pair"
    );

    let escape = tree.root.join("../outside/secret").unwrap();
    let err = fs.read_file(&escape).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    let err = fs
        .write_file(&tree.root.join("../outside/new").unwrap(), b"x".to_vec())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(!tree.outside.join("new").exists());

    drop(fs);
    ended(server).await.unwrap();
}

#[tokio::test]
async fn streams_of_several_mebibytes_cross_in_data_frames() {
    let tree = tree();
    let (fs, server) = paired(&tree, ServerConfig::default()).await;
    assert!(fs.supports_data_frames(), "the pair carries data frames");
    // Not a multiple of a frame, and not the same byte throughout.
    let data: Vec<u8> = (0..5 * 1024 * 1024 + 12_345u32)
        .map(|i| (i % 251) as u8)
        .collect();
    let file = tree.root.join("big").unwrap();
    let mut sent = 0;
    let written = fs
        .write_file_from(
            &file,
            &mut data.as_slice(),
            Some(data.len() as u64),
            WriteOptions::default(),
            &mut |n| sent = n,
        )
        .await
        .unwrap();
    assert_eq!(written, data.len() as u64);
    assert_eq!(sent, data.len() as u64, "progress reached the whole size");
    assert!(std::fs::read(tree.root.as_path().join("big")).unwrap() == data);

    let mut back = Vec::new();
    let read = fs
        .read_file_to(&file, &mut back, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(read, data.len() as u64);
    assert!(back == data, "the streamed read returned other bytes");

    drop(fs);
    ended(server).await.unwrap();
}

#[tokio::test]
async fn dropping_the_client_ends_the_server_and_a_clone_keeps_it() {
    let tree = tree();
    let (fs, server) = paired(&tree, ServerConfig::default()).await;
    let clone = fs.clone();
    drop(fs);
    // The clone holds the connection: the server still answers it.
    clone.get_metadata(&tree.root).await.unwrap();
    assert!(!server.is_finished());
    drop(clone);
    ended(server).await.unwrap();
}

#[tokio::test]
async fn a_dropped_handle_leaves_the_server_serving_its_client() {
    let tree = tree();
    let (fs, server) = paired(&tree, ServerConfig::default()).await;
    drop(server);
    let file = tree.root.join("kept").unwrap();
    fs.write_file(&file, b"still served".to_vec())
        .await
        .unwrap();
    assert_eq!(fs.read_file(&file).await.unwrap(), b"still served");
    assert!(!fs.is_closed());
}

#[tokio::test]
async fn stopping_the_server_fails_the_client_with_broken_pipe() {
    let tree = tree();
    let (fs, server) = paired(&tree, ServerConfig::default()).await;
    fs.get_metadata(&tree.root).await.unwrap();
    tokio::time::timeout(BOUND, server.stop())
        .await
        .expect("the server stops in time")
        .unwrap();
    let deadline = tokio::time::Instant::now() + BOUND;
    while !fs.is_closed() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the client never saw the connection end"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let err = fs.get_metadata(&tree.root).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BrokenPipe, "{err}");
}

#[tokio::test]
async fn a_limit_out_of_range_is_refused_before_anything_runs() {
    let tree = tree();
    let config = ServerConfig::default().with_max_in_flight(0);
    let local = LocalFileSystem::new(sandbox(&tree));
    let err = pair(Arc::new(local), config).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
}

#[tokio::test]
async fn processes_are_served_over_the_pair_and_end_with_it() {
    let tree = tree();
    let policy = ProcessPolicy::default().unconfined();
    let processes = LocalProcesses::new(sandbox(&tree), policy).unwrap();
    let config = ServerConfig::default().with_processes(Some(ServedProcesses(Arc::new(processes))));
    let (fs, server) = paired(&tree, config).await;
    let remote = fs.processes().expect("the server serves processes");
    let mut request = ProcessRequest::new(
        vec!["/bin/sh".into(), "-c".into(), "echo paired".into()],
        tree.root.clone(),
    );
    request.env.push(("PATH".into(), "/usr/bin:/bin".into()));
    let mut started = remote.start(request).await.unwrap();
    let mut output = Vec::new();
    let mut exited = None;
    let collect = async {
        while let Some(event) = started.events.recv().await {
            match event {
                ProcessEvent::Output { bytes, .. } => output.extend(bytes),
                ProcessEvent::Exited(exit) => exited = Some(exit),
                ProcessEvent::Closed => break,
                other => panic!("an event this test does not know: {other:?}"),
            }
        }
    };
    tokio::time::timeout(BOUND, collect)
        .await
        .expect("the process's events end in time");
    assert_eq!(output, b"paired\n");
    assert_eq!(exited, Some(capfs::process::ProcessExit::code(0)));
    drop(started);
    drop(remote);
    drop(fs);
    ended(server).await.unwrap();
}
