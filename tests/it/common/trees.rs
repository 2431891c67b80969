//! Snapshots of a tree, to show that an operation changed nothing in it, byte for byte.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{CANARY, SECRET};

/// What a snapshot records for one entry. Special files record only their type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    pub mode: u32,
    pub mtime_ns: i128,
    pub ino: u64,
}

/// The type of an entry and, for files and links, its contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    File(Vec<u8>),
    Dir,
    Symlink(PathBuf),
    Other,
}

/// Records every entry below `dir` (relative names, `dir` itself as the empty path) without
/// following symlinks and without opening anything but regular files and directories.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Entry> {
    let mut out = BTreeMap::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let path = dir.join(&rel);
        let meta = fs::symlink_metadata(&path).unwrap();
        let kind = if meta.file_type().is_symlink() {
            Kind::Symlink(fs::read_link(&path).unwrap())
        } else if meta.is_dir() {
            for entry in fs::read_dir(&path).unwrap() {
                todo.push(rel.join(entry.unwrap().file_name()));
            }
            Kind::Dir
        } else if meta.is_file() {
            Kind::File(fs::read(&path).unwrap())
        } else {
            Kind::Other
        };
        let mtime_ns = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
        out.insert(
            rel,
            Entry {
                kind,
                mode: meta.mode(),
                mtime_ns,
                ino: meta.ino(),
            },
        );
    }
    out
}

/// Asserts two snapshots are equal, naming the first difference.
pub fn assert_same_tree(
    before: &BTreeMap<PathBuf, Entry>,
    after: &BTreeMap<PathBuf, Entry>,
    what: &str,
) {
    for (path, entry) in before {
        match after.get(path) {
            None => panic!("{what}: {} disappeared", path.display()),
            Some(now) => assert_eq!(entry, now, "{what}: {} changed", path.display()),
        }
    }
    for path in after.keys() {
        assert!(
            before.contains_key(path),
            "{what}: {} appeared",
            path.display()
        );
    }
}

/// Asserts that no regular file below `dir` contains the outside canary token or the secret
/// (symlinks are not followed: a copied link's text is not content).
pub fn assert_no_outside_content(dir: &Path) {
    for (path, entry) in snapshot(dir) {
        if let Kind::File(bytes) = entry.kind {
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                !text.contains(CANARY) && bytes != SECRET,
                "{}: outside content leaked into the sandbox",
                dir.join(path).display()
            );
        }
    }
}
