//! What writes and copies hand out: never a setuid or setgid file, holes kept as holes, contents
//! identical.

use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use crate::common::env;
use capfs::CopyOptions;
use test_case::test_case;

const SETUID: u32 = 0o4000;
const SETGID: u32 = 0o2000;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

fn make_privileged(path: &std::path::Path) {
    std::fs::set_permissions(
        path,
        std::fs::Permissions::from_mode(0o755 | SETUID | SETGID),
    )
    .unwrap();
    assert_eq!(
        mode(path) & (SETUID | SETGID),
        SETUID | SETGID,
        "setup: bits set"
    );
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_and_copies_clear_setuid_and_setgid(remote: bool) {
    let env = env(remote).await;
    let program = env.mkfile("prog", b"#!/bin/sh\n");
    make_privileged(&program);
    env.mkfile("tree/sub/prog", b"#!/bin/sh\n");
    make_privileged(&env.ws_host("tree/sub/prog"));

    env.fs
        .copy(&env.p("prog"), &env.p("copy"), CopyOptions::default())
        .await
        .unwrap();
    assert_eq!(mode(&env.ws_host("copy")), 0o755, "file copy");

    env.fs
        .copy(
            &env.p("tree"),
            &env.p("tree2"),
            CopyOptions::default().with_recursive(true),
        )
        .await
        .unwrap();
    assert_eq!(mode(&env.ws_host("tree2/sub/prog")), 0o755, "tree copy");

    env.mkfile("over", b"old");
    env.fs
        .copy(&env.p("prog"), &env.p("over"), CopyOptions::default())
        .await
        .unwrap();
    assert_eq!(mode(&env.ws_host("over")), 0o755, "copy over a file");

    env.fs
        .write_file(&env.p("prog"), b"#!/bin/sh\necho new\n".to_vec())
        .await
        .unwrap();
    assert_eq!(
        mode(&program),
        0o755,
        "write over a setuid file keeps only 0o777 bits"
    );
    assert_eq!(std::fs::read(&program).unwrap(), b"#!/bin/sh\necho new\n");
}

/// An 8 MiB file with 4 KiB of data at its start and at 4 MiB, the rest holes.
fn write_sparse(path: &std::path::Path) -> Vec<u8> {
    let mut file = std::fs::File::create(path).unwrap();
    file.write_all(&[b'a'; 4096]).unwrap();
    file.seek(SeekFrom::Start(4 << 20)).unwrap();
    file.write_all(&[b'b'; 4096]).unwrap();
    file.set_len(8 << 20).unwrap();
    drop(file);
    std::fs::read(path).unwrap()
}

/// Bytes actually allocated to a file.
fn allocated(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sparse_file_copied_stays_sparse(remote: bool) {
    let env = env(remote).await;
    let source = env.ws_host("sparse");
    let contents = write_sparse(&source);
    let budget = allocated(&source) + (256 << 10);
    assert!(budget < 2 << 20, "setup: the file system keeps holes");

    env.fs
        .copy(&env.p("sparse"), &env.p("copy"), CopyOptions::default())
        .await
        .unwrap();
    let copy = env.ws_host("copy");
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        contents,
        "contents identical"
    );
    assert!(
        allocated(&copy) <= budget,
        "copy allocates {} bytes, the source {}",
        allocated(&copy),
        allocated(&source)
    );

    env.mkdir("dir");
    std::fs::rename(&copy, env.ws_host("dir/sparse")).unwrap();
    env.fs
        .copy(
            &env.p("dir"),
            &env.p("dir2"),
            CopyOptions::default().with_recursive(true),
        )
        .await
        .unwrap();
    let in_tree = env.ws_host("dir2/sparse");
    assert_eq!(
        std::fs::read(&in_tree).unwrap(),
        contents,
        "tree copy identical"
    );
    assert!(allocated(&in_tree) <= budget, "tree copy stays sparse");
}

#[test_case(false ; "local")]
#[test_case(true ; "remote")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_of_odd_sizes_are_identical(remote: bool) {
    let env = env(remote).await;
    for size in [0usize, 1, 4095, 4097, (1 << 20) + 3] {
        let data: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
        env.mkfile(&format!("f{size}"), &data);
        env.fs
            .copy(
                &env.p(&format!("f{size}")),
                &env.p(&format!("c{size}")),
                CopyOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(
            std::fs::read(env.ws_host(&format!("c{size}"))).unwrap(),
            data
        );
    }
}
