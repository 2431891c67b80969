//! Local operations: capfs's confined backend against tokio::fs and std::fs, and copy against
//! cp.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use capfs::{AbsolutePathBuf, Access, ExecutorFileSystem, LocalFileSystem, Sandbox};

use crate::bulk::{BULK_BYTES, same_contents};
use crate::measure::{best_of, header, per_op, random_bytes, run};

pub(crate) struct LocalRow {
    pub(crate) name: &'static str,
    pub(crate) capfs: Duration,
    pub(crate) tokio: Duration,
    pub(crate) std: Duration,
    pub(crate) ops: usize,
}

pub(crate) async fn local_section(scratch: &Path) {
    let root = scratch.join("local-ws");
    std::fs::create_dir_all(root.join("many")).unwrap();
    let root = root.canonicalize().unwrap();
    let small = root.join("small.bin");
    std::fs::write(&small, random_bytes(4096)).unwrap();
    for i in 0..1000 {
        std::fs::write(root.join("many").join(format!("entry-{i:04}")), b"x").unwrap();
    }
    let big = root.join("big.bin");
    std::fs::write(&big, random_bytes(BULK_BYTES)).unwrap();
    let fs = Arc::new(LocalFileSystem::new(
        Sandbox::new().with_root(&root, Access::ReadWrite).unwrap(),
    ));
    let abs = |p: &Path| AbsolutePathBuf::new(p).unwrap();
    let (small_abs, many_abs, big_abs) = (abs(&small), abs(&root.join("many")), abs(&big));
    let four_k = random_bytes(4096);
    let rounds = 5;
    let n = 2000;
    let mut rows = Vec::new();

    macro_rules! row {
        ($name:expr, $ops:expr, capfs: $capfs:expr, tokio: $tokio:expr, std: $std:expr) => {{
            let ops = $ops;
            let capfs = best_of(rounds, || async {
                for _ in 0..ops {
                    $capfs;
                }
            })
            .await;
            let tokio = best_of(rounds, || async {
                for _ in 0..ops {
                    $tokio;
                }
            })
            .await;
            let std = best_of(rounds, || async {
                for _ in 0..ops {
                    $std;
                }
            })
            .await;
            rows.push(LocalRow {
                name: $name,
                capfs,
                tokio,
                std,
                ops,
            });
        }};
    }

    row!("stat", n,
        capfs: fs.get_metadata(&small_abs).await.unwrap(),
        tokio: tokio::fs::metadata(&small).await.unwrap(),
        std: std::fs::metadata(&small).unwrap());
    row!("read 4 KiB", n,
        capfs: fs.read_file(&small_abs).await.unwrap(),
        tokio: tokio::fs::read(&small).await.unwrap(),
        std: std::fs::read(&small).unwrap());
    row!("overwrite 4 KiB (capfs: atomic replace)", n,
        capfs: fs.write_file(&small_abs, four_k.clone()).await.unwrap(),
        tokio: tokio::fs::write(&small, &four_k).await.unwrap(),
        std: std::fs::write(&small, &four_k).unwrap());
    row!("list 1,000 entries", 50,
    capfs: assert_eq!(fs.read_directory(&many_abs).await.unwrap().len(), 1000),
    tokio: {
        let mut dir = tokio::fs::read_dir(root.join("many")).await.unwrap();
        let mut count = 0;
        while let Some(entry) = dir.next_entry().await.unwrap() {
            let _ = entry.file_type().await.unwrap();
            count += 1;
        }
        assert_eq!(count, 1000);
    },
    std: {
        let mut count = 0;
        for entry in std::fs::read_dir(root.join("many")).unwrap() {
            let _ = entry.unwrap().file_type().unwrap();
            count += 1;
        }
        assert_eq!(count, 1000);
    });
    row!("read 256 MiB", 1,
        capfs: assert_eq!(fs.read_file(&big_abs).await.unwrap().len(), BULK_BYTES),
        tokio: assert_eq!(tokio::fs::read(&big).await.unwrap().len(), BULK_BYTES),
        std: assert_eq!(std::fs::read(&big).unwrap().len(), BULK_BYTES));

    header(
        "Local operations (best of 5 rounds, microseconds per operation)",
        &[
            "operation",
            "capfs LocalFileSystem",
            "tokio::fs",
            "std::fs (blocking)",
            "capfs / tokio::fs",
            "capfs / std::fs",
        ],
    );
    for r in &rows {
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} |",
            r.name,
            per_op(r.capfs, r.ops),
            per_op(r.tokio, r.ops),
            per_op(r.std, r.ops),
            r.capfs.as_secs_f64() / r.tokio.as_secs_f64(),
            r.capfs.as_secs_f64() / r.std.as_secs_f64(),
        );
    }
    copy_rows(&root, &big);
}

/// `capfs --root R cp` (the binary, so both sides pay one process start) against `cp`, for a
/// 256 MiB file and a tree of 1,000 small files, alternated over 3 rounds.
pub(crate) fn copy_rows(root: &Path, big: &Path) {
    let tree = root.join("tree");
    for d in 0..10 {
        let dir = tree.join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            std::fs::write(
                dir.join(format!("f{f:03}.txt")),
                random_bytes(1000 + f * 10),
            )
            .unwrap();
        }
    }
    let capfs = env!("CARGO_BIN_EXE_capfs");
    let clear = |p: &PathBuf| {
        let _ = std::fs::remove_file(p);
        let _ = std::fs::remove_dir_all(p);
    };
    let mut results = Vec::new();
    for (name, source, recursive) in [
        ("copy a 256 MiB file", big.to_path_buf(), false),
        ("copy a tree of 1,000 files", tree.clone(), true),
    ] {
        let destination = root.join("copy-destination");
        let (mut ours, mut theirs) = (Duration::MAX, Duration::MAX);
        let (mut ours_worst, mut theirs_worst) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..3 {
            clear(&destination);
            let mut command = Command::new(capfs);
            command.arg("--root").arg(root).arg("cp");
            if recursive {
                command.arg("-r");
            }
            let t = run(command.arg(&source).arg(&destination));
            (ours, ours_worst) = (ours.min(t), ours_worst.max(t));
            if !recursive {
                assert!(same_contents(&source, &destination), "capfs cp corrupted");
            }
            clear(&destination);
            let mut command = Command::new("cp");
            if recursive {
                command.arg("-r");
            }
            let t = run(command.arg(&source).arg(&destination));
            (theirs, theirs_worst) = (theirs.min(t), theirs_worst.max(t));
        }
        clear(&destination);
        results.push((name, ours, ours_worst, theirs, theirs_worst));
    }
    header(
        "Local copy: `capfs --root R cp` against `cp` (best of 3, alternated; range over the 3)",
        &["copy", "capfs ms", "cp ms", "capfs speed / cp"],
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for (name, ours, ours_worst, theirs, theirs_worst) in results {
        println!(
            "| {name} | {:.1} ({:.1}-{:.1}) | {:.1} ({:.1}-{:.1}) | {:.2}x |",
            ms(ours),
            ms(ours),
            ms(ours_worst),
            ms(theirs),
            ms(theirs),
            ms(theirs_worst),
            theirs.as_secs_f64() / ours.as_secs_f64(),
        );
    }
}
