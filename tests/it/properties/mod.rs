//! Property tests (proptest): path normalisation, root matching, artifact names, and random
//! operation plans that must leave an outside canary untouched and give the same results on the
//! local and the remote backend.
//!
//! The plans run on twin trees, one served locally and one by a single `capfs serve` started for
//! the whole run: a read-write root with a read-only root nested in it, a second read-write root
//! beside it, and a canary beside both. Trees hold files, directories, FIFOs, hard links to an
//! outside file, and symlinks that point inside, out, into the other roots, at themselves and
//! nowhere.
//!
//! Case counts are kept small so the whole file runs in a few seconds in a debug build;
//! `CAPFS_PROPTEST_CASES=N` runs every property N times. The cargo-fuzz targets under `fuzz/`
//! explore the same oracles for longer.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use capfs::artifact::{image_generation_artifact_path, sanitize};
use capfs::{
    AbsolutePathBuf, Access, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem,
    LocalFileSystem, RemoveOptions, RenameOptions, Sandbox,
};
use capfs_wire::{RemoteFileSystem, RemoteOptions};

mod artifacts;
mod paths;
mod plans;

/// One path component, hostile ones included.
fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("A".to_string()),
        Just(".".to_string()),
        Just("..".to_string()),
        Just(String::new()),
        Just("link".to_string()),
        Just("\\".to_string()),
        Just("CON".to_string()),
        Just("\0".to_string()),
        Just("é".to_string()),
        Just("n".repeat(255)),
        Just("n".repeat(256)),
        "[a-z.]{1,4}",
    ]
}

/// A path string: components joined by `/`, maybe absolute, maybe with a trailing slash.
fn path_string() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        prop::collection::vec(component(), 0..8),
        any::<bool>(),
    )
        .prop_map(|(absolute, parts, trailing)| {
            let mut s = if absolute {
                "/".to_string()
            } else {
                String::new()
            };
            s.push_str(&parts.join("/"));
            if trailing {
                s.push('/');
            }
            s
        })
}

/// `/`-separated normalisation over the string, written without `std::path`.
fn reference_normalise(s: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in s.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    format!("/{}", parts.join("/"))
}

fn only_normal_components(path: &Path) -> bool {
    path.components()
        .all(|c| matches!(c, Component::Normal(n) if !n.is_empty()))
}

/// The case count: `default`, or `CAPFS_PROPTEST_CASES` when set (for long local runs).
fn cases(default: u32) -> u32 {
    std::env::var("CAPFS_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    })
}
