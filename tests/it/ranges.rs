//! `read_file_range` on both backends (`capfs/readFileRange` through a server): the bytes of
//! the range and no more, past the read limit too, with the errors of a streamed read.

use std::io::ErrorKind;

use capfs::ExecutorFileSystem;
use test_case::test_case;

use crate::common::{env_with_read_limit, err_kind};

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn ranges_are_the_bytes_asked_for_even_past_the_read_limit(remote: bool) {
    let t = env_with_read_limit(remote, 16).await;
    let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    t.mkfile("big.bin", &body);
    let path = t.p("big.bin");
    // Whole-file reads are refused past the limit; ranges are not bound by it.
    assert_eq!(
        err_kind(t.fs.read_file(&path).await),
        ErrorKind::InvalidInput
    );
    for (offset, length) in [
        (0, 10),
        (99_990, 10),
        (99_995, 10),
        (50_000, 40_000),
        (100_000, 5),
        (200_000, 1),
    ] {
        let got = t.fs.read_file_range(&path, offset, length).await.unwrap();
        let start = (offset as usize).min(body.len());
        let end = (offset + length).min(body.len() as u64) as usize;
        assert_eq!(got, &body[start..end], "{offset}+{length}");
    }
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test]
async fn ranges_are_confined_and_refuse_what_is_not_a_regular_file(remote: bool) {
    let t = env_with_read_limit(remote, capfs::DEFAULT_READ_LIMIT).await;
    let before = t.outside_snapshot();
    t.symlink("out", t.outside.join("secret"));
    let out = t.fs.read_file_range(&t.p("out"), 0, 10).await;
    assert_eq!(err_kind(out), ErrorKind::PermissionDenied);
    let dir = t.fs.read_file_range(&t.p("outer"), 0, 10).await;
    assert_eq!(err_kind(dir), ErrorKind::IsADirectory);
    let missing = t.fs.read_file_range(&t.p("missing"), 0, 10).await;
    assert_eq!(err_kind(missing), ErrorKind::NotFound);
    t.assert_outside_unchanged(&before);
}

#[tokio::test]
async fn a_range_whose_reply_passes_the_message_limit_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), vec![b'x'; 20_000]).unwrap();
    let sandbox = capfs::Sandbox::new()
        .with_root(dir.path(), capfs::Access::ReadWrite)
        .unwrap();
    let path = sandbox.roots()[0].path().join("f").unwrap();
    let fs: std::sync::Arc<dyn capfs::ExecutorFileSystem> =
        std::sync::Arc::new(capfs::LocalFileSystem::new(sandbox));
    let config = capfs_wire::server::ServerConfig::default().with_max_message_bytes(4096);
    let server = crate::common::InProcessServer::start(fs, config).await;
    let remote =
        capfs_wire::RemoteFileSystem::connect(&server.url, capfs_wire::RemoteOptions::default())
            .await
            .unwrap();
    let err = remote.read_file_range(&path, 0, 10_000).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(
        err.to_string().contains("limit is 4096 bytes of message"),
        "{err}"
    );
    assert_eq!(
        remote
            .read_file_range(&path, 19_000, 2_000)
            .await
            .unwrap()
            .len(),
        1_000
    );
    // Whole-file reads from this server, whose messages cannot hold a small file's range, are
    // streamed: the same bytes, below and above the size a range would have carried.
    for len in [0, 3_000, 20_000] {
        std::fs::write(dir.path().join("f"), vec![b'y'; len]).unwrap();
        assert_eq!(remote.read_file(&path).await.unwrap(), vec![b'y'; len]);
    }
}

/// Whole-file reads through a server try one range of 16 KiB and a byte first, and stream
/// whatever is larger: each size around that bound reads back whole on both backends, and the
/// read limit refuses a file past it whichever way the file was read.
#[test_case(false, 1_000_000 ; "local")]
#[test_case(true, 1_000_000 ; "remote")]
#[test_case(false, 5_000 ; "local under a read limit below the bound")]
#[test_case(true, 5_000 ; "remote under a read limit below the bound")]
#[tokio::test]
async fn whole_files_read_back_whole_on_each_side_of_the_small_read_bound(
    remote: bool,
    limit: u64,
) {
    let t = env_with_read_limit(remote, limit).await;
    for len in [
        0u64, 1, 4_999, 5_000, 5_001, 16_383, 16_384, 16_385, 16_386, 100_000,
    ] {
        let body: Vec<u8> = (0..len).map(|i| (i * 7 % 253) as u8).collect();
        let name = format!("f{len}");
        t.mkfile(&name, &body);
        let read = t.fs.read_file(&t.p(&name)).await;
        if len <= limit {
            assert_eq!(read.unwrap(), body, "{len} bytes");
        } else {
            assert_eq!(err_kind(read), ErrorKind::InvalidInput, "{len} bytes");
        }
    }
    let dir = t.fs.read_file(&t.p("outer")).await;
    assert_eq!(err_kind(dir), ErrorKind::IsADirectory);
    let missing = t.fs.read_file(&t.p("missing")).await;
    assert_eq!(err_kind(missing), ErrorKind::NotFound);
}
