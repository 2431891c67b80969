//! Arbitrary bytes as a path: `AbsolutePathBuf` parsing and the sandbox's root matching.
//!
//! Input: the first byte picks a prefix (one of the roots' paths, or none), the rest is appended
//! as raw bytes, so the fuzzer reaches paths under, beside and above the roots.
//!
//! Oracle: parsing fails exactly for relative input or a NUL byte (`InvalidInput`); a parsed path
//! equals an independent byte-level normalisation, is absolute, has no `.`/`..`/empty component
//! and no NUL, and parses to itself again. `Sandbox::root_for` picks the root whose components
//! are the longest prefix of the path's components, with a relative part free of `..`; a path
//! under no root is `PermissionDenied` from the local backend.

#![no_main]

use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};
use std::sync::OnceLock;

use capfs::{AbsolutePathBuf, Access, ExecutorFileSystem, LocalFileSystem, Sandbox};
use libfuzzer_sys::fuzz_target;

struct Fixture {
    _dir: tempfile::TempDir,
    fs: LocalFileSystem,
    runtime: tokio::runtime::Runtime,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        // Nested roots, a sibling that shares a string prefix, and an unrelated one.
        let names = ["r", "r/sub", "r/sub/deep", "rx", "other/x"];
        let mut sandbox = Sandbox::new();
        for name in names {
            let path = dir.path().join(name);
            std::fs::create_dir_all(&path).expect("create root");
            sandbox = sandbox
                .with_root(&path, Access::ReadWrite)
                .expect("add root");
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        Fixture {
            _dir: dir,
            fs: LocalFileSystem::new(sandbox),
            runtime,
        }
    })
}

/// `/`-separated normalisation written over bytes, independent of `std::path`.
fn reference_normalise(bytes: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    for part in bytes.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    let mut out = Vec::new();
    for part in &parts {
        out.push(b'/');
        out.extend_from_slice(part);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

fn components(path: &Path) -> Vec<Component<'_>> {
    path.components().collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    let fixture = fixture();
    let roots = fixture.fs.sandbox().roots();
    let mut bytes = Vec::new();
    if let Some(root) = roots.get(usize::from(choice)) {
        bytes.extend_from_slice(root.path().as_path().as_os_str().as_bytes());
    }
    bytes.extend_from_slice(rest);

    let parsed = AbsolutePathBuf::new(OsStr::from_bytes(&bytes));
    let valid = bytes.first() == Some(&b'/') && !bytes.contains(&0);
    let path = match parsed {
        Err(e) => {
            assert!(!valid, "valid path {bytes:?} refused: {e}");
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            return;
        }
        Ok(path) => {
            assert!(valid, "invalid path {bytes:?} accepted as {path:?}");
            path
        }
    };
    let normal = path.as_path().as_os_str().as_bytes();
    assert_eq!(normal, reference_normalise(&bytes).as_slice(), "{bytes:?}");
    assert!(path.as_path().is_absolute());
    assert!(!normal.contains(&0));
    assert!(
        path.as_path()
            .components()
            .skip(1)
            .all(|c| matches!(c, Component::Normal(n) if !n.is_empty())),
        "{path:?}"
    );
    assert_eq!(
        AbsolutePathBuf::new(path.as_path()).ok().as_ref(),
        Some(&path)
    );

    let wanted = components(path.as_path());
    let expected = roots
        .iter()
        .filter(|root| wanted.starts_with(&components(root.path().as_path())))
        .max_by_key(|root| root.path().as_path().components().count());
    match (fixture.fs.sandbox().root_for(&path), expected) {
        (None, None) => {
            let err = fixture
                .runtime
                .block_on(fixture.fs.get_metadata(&path))
                .expect_err("a path under no root must be refused");
            assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{path:?}: {err}");
        }
        (Some((root, rel)), Some(expected)) => {
            assert!(std::ptr::eq(root, expected), "{path:?}: {root:?} chosen");
            assert!(
                rel.components().all(|c| matches!(c, Component::Normal(_))),
                "{path:?}: relative part {rel:?}"
            );
            let rejoined = AbsolutePathBuf::new(root.path().as_path().join(rel)).expect("rejoin");
            assert_eq!(rejoined, path);
        }
        (got, expected) => panic!("{path:?}: root_for gave {got:?}, expected {expected:?}"),
    }
});
