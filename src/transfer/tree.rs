//! The trees `get -r` and `put -r` copy, planned before anything is written: parents before
//! children, special files left out with a warning, a remote tree bounded in depth and size.

use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use capfs::{AbsolutePathBuf, ExecutorFileSystem, FileMetadata};

use crate::fail::{EXIT_FAILURE, Failure};
use crate::names::{escape, quote};

/// Deepest tree `get -r` copies: deeper than anything a person copies, and far below the
/// length at which local paths stop working.
pub(super) const MAX_TREE_DEPTH: usize = 1_024;
/// Most entries of a tree `get -r` plans (the plan holds each one's name and metadata).
pub(super) const MAX_TREE_ENTRIES: usize = 1_000_000;

/// An entry of a tree to copy, relative to the tree's top.
pub(super) enum Node {
    Directory {
        rel: PathBuf,
        mode: u32,
    },
    /// `metadata`: the remote file's, as the plan saw it (local files are stat'ed when sent).
    File {
        rel: PathBuf,
        size: u64,
        metadata: Option<FileMetadata>,
    },
    Symlink {
        rel: PathBuf,
        target: PathBuf,
    },
}

/// The sandbox tree under `top`, parents before children; specials are warned about and left
/// out.
pub(super) async fn remote_tree(
    fs: &dyn ExecutorFileSystem,
    top: &AbsolutePathBuf,
    top_mode: u32,
    warnings: &mut Vec<String>,
) -> Result<Vec<Node>, Failure> {
    let mut nodes = vec![Node::Directory {
        rel: PathBuf::new(),
        mode: top_mode,
    }];
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let dir = top.join(&rel).expect("relative names hold no NUL");
        // A server can list a tree without end: the plan is bounded before it is used.
        if rel.components().count() >= MAX_TREE_DEPTH {
            return Err(Failure::plain(
                format!(
                    "{}: the tree is more than {MAX_TREE_DEPTH} levels deep; get -r copies no \
                     deeper",
                    quote(&top.to_string())
                ),
                EXIT_FAILURE,
            ));
        }
        let mut entries = fs
            .read_directory(&dir)
            .await
            .map_err(|e| Failure::at_path("cannot open directory", &dir, &e))?;
        entries.sort_by(|a, b| a.name().cmp(b.name()));
        if nodes.len() + entries.len() > MAX_TREE_ENTRIES {
            return Err(Failure::plain(
                format!(
                    "{}: the tree holds more than {MAX_TREE_ENTRIES} entries; get -r copies \
                     at most that many",
                    quote(&top.to_string())
                ),
                EXIT_FAILURE,
            ));
        }
        for entry in entries {
            // Names become local paths: one that is not a single plain component (a broken
            // or hostile server's `..` or `a/b`) would land outside the destination.
            // The exact name (a local listing's name that is not UTF-8 included), so that the
            // copy reaches this entry and no other.
            let name = entry.name();
            if !is_plain_name(name) {
                return Err(Failure::plain(
                    format!(
                        "{}: the server listed an invalid name {}",
                        quote(&dir.to_string()),
                        escape(name.as_bytes())
                    ),
                    EXIT_FAILURE,
                ));
            }
            let child_rel = rel.join(name);
            let child = top.join(&child_rel).expect("listed names hold no NUL");
            if entry.is_symlink {
                let target = fs
                    .read_link(&child)
                    .await
                    .map_err(|e| Failure::at_path("cannot read link", &child, &e))?;
                nodes.push(Node::Symlink {
                    rel: child_rel,
                    target,
                });
            } else if entry.is_directory {
                let mode = fs.get_metadata(&child).await.map_or(0, |m| m.mode);
                nodes.push(Node::Directory {
                    rel: child_rel.clone(),
                    mode,
                });
                pending.push(child_rel);
            } else if entry.is_file {
                let metadata = fs
                    .get_metadata(&child)
                    .await
                    .map_err(|e| Failure::at_path("cannot stat", &child, &e))?;
                nodes.push(Node::File {
                    rel: child_rel,
                    size: metadata.size,
                    metadata: Some(metadata),
                });
            } else {
                warnings.push(format!(
                    "skipping special file {}",
                    quote(&child.to_string())
                ));
            }
        }
    }
    Ok(nodes)
}

/// The local tree under `top`, parents before children; specials are warned about and left out.
pub(super) fn local_tree(top: &Path, warnings: &mut Vec<String>) -> Result<Vec<Node>, Failure> {
    let shown = |p: &Path| p.to_string_lossy().into_owned();
    let fail = |p: &Path, e: io::Error| Failure::at("cannot read local directory", &shown(p), &e);
    let top_mode = fs::metadata(top)
        .map_err(|e| fail(top, e))?
        .permissions()
        .mode();
    let mut nodes = vec![Node::Directory {
        rel: PathBuf::new(),
        mode: top_mode,
    }];
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let dir = top.join(&rel);
        let mut entries: Vec<fs::DirEntry> = fs::read_dir(&dir)
            .and_then(|it| it.collect::<io::Result<_>>())
            .map_err(|e| fail(&dir, e))?;
        entries.sort_by_key(fs::DirEntry::file_name);
        for entry in entries {
            let child_rel = rel.join(entry.file_name());
            let path = entry.path();
            let metadata = fs::symlink_metadata(&path).map_err(|e| fail(&path, e))?;
            let t = metadata.file_type();
            if t.is_symlink() {
                let target = fs::read_link(&path).map_err(|e| fail(&path, e))?;
                nodes.push(Node::Symlink {
                    rel: child_rel,
                    target,
                });
            } else if t.is_dir() {
                nodes.push(Node::Directory {
                    rel: child_rel.clone(),
                    mode: metadata.permissions().mode(),
                });
                pending.push(child_rel);
            } else if t.is_file() {
                nodes.push(Node::File {
                    rel: child_rel,
                    size: metadata.len(),
                    metadata: None,
                });
            } else {
                warnings.push(format!("skipping special file {}", quote(&shown(&path))));
            }
        }
    }
    Ok(nodes)
}

/// A name that is exactly one normal path component.
pub(super) fn is_plain_name(name: &std::ffi::OsStr) -> bool {
    let mut components = Path::new(name).components();
    matches!(components.next(), Some(std::path::Component::Normal(_)))
        && components.next().is_none()
        && !name.as_bytes().contains(&b'/')
}

pub(super) fn totals(nodes: &[Node]) -> (u64, u64) {
    nodes
        .iter()
        .fold((0, 0), |(files, bytes), node| match node {
            Node::File { size, .. } => (files + 1, bytes + size),
            _ => (files, bytes),
        })
}
