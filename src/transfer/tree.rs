//! The trees `get -r` and `put -r` copy, planned before anything is written: parents before
//! children, special files left out with a warning, a remote tree bounded in depth and size.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use capfs::defaults::walk_by_listing;
use capfs::{
    AbsolutePathBuf, ExecutorFileSystem, FileMetadata, WALK_BYTES_LIMIT, WALK_DEPTH_LIMIT, Walk,
    WalkEntry, WalkOptions,
};

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
/// out. It is planned from one walk of `top` carrying each entry's size, mode, time and link
/// text: more only when the tree is deeper than one walk goes (a walk from each directory left
/// at its depth) or its walk was cut to a server's message limit (walked again by listing).
pub(super) async fn remote_tree(
    fs: &dyn ExecutorFileSystem,
    top: &AbsolutePathBuf,
    top_mode: u32,
    warnings: &mut Vec<String>,
) -> Result<Vec<Node>, Failure> {
    // Each directory's entries as the walks found them, by the directory's relative path.
    let mut children: HashMap<PathBuf, Vec<WalkEntry>> = HashMap::new();
    let mut found = 1;
    let mut pending = vec![(PathBuf::new(), 0usize)];
    while let Some((base, depth)) = pending.pop() {
        let dir = top.join(&base).expect("relative names hold no NUL");
        // A server can list a tree without end: the plan is bounded before it is used.
        if depth >= MAX_TREE_DEPTH {
            return Err(too_deep(top));
        }
        let levels = (MAX_TREE_DEPTH - depth).min(WALK_DEPTH_LIMIT);
        let room = MAX_TREE_ENTRIES - found;
        let walk = walk_once(fs, &dir, levels, room).await?;
        if walk.entries.len() > room {
            return Err(too_many(top));
        }
        found += walk.entries.len();
        for entry in walk.entries {
            let rel = base.join(valid_rel(&dir, &entry)?);
            let at = rel.components().count() - base.components().count();
            if entry.is_directory && at == levels && walk.truncated {
                pending.push((rel.clone(), depth + levels));
            }
            let parent = rel.parent().map(Path::to_path_buf).unwrap_or_default();
            children.entry(parent).or_default().push(entry);
        }
    }
    let mut nodes = vec![Node::Directory {
        rel: PathBuf::new(),
        mode: top_mode,
    }];
    // Directories in the order a copy by listing takes them: each one's entries sorted by name,
    // the last directory listed first.
    let mut next = vec![PathBuf::new()];
    while let Some(rel) = next.pop() {
        let mut entries = children.remove(&rel).unwrap_or_default();
        entries.sort_by(|a, b| name_of(a).cmp(name_of(b)));
        for entry in entries {
            let child_rel = rel.join(name_of(&entry));
            let child = top.join(&child_rel).expect("listed names hold no NUL");
            if entry.is_symlink {
                let target = match entry.link_target {
                    Some(target) => target,
                    None => fs
                        .read_link(&child)
                        .await
                        .map_err(|e| Failure::at_path("cannot read link", &child, &e))?,
                };
                nodes.push(Node::Symlink {
                    rel: child_rel,
                    target,
                });
            } else if entry.is_directory {
                nodes.push(Node::Directory {
                    rel: child_rel.clone(),
                    mode: entry.mode.unwrap_or(0),
                });
                next.push(child_rel);
            } else if entry.is_file {
                let metadata = file_metadata(fs, &child, &entry).await?;
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

/// One walk of `dir`, `levels` deep, asking for one entry more than `room` (to tell a tree
/// over the bound). A walk a server cut to its message limit is made again by listing; a
/// directory the walk could not list fails the plan as its listing fails.
async fn walk_once(
    fs: &dyn ExecutorFileSystem,
    dir: &AbsolutePathBuf,
    levels: usize,
    room: usize,
) -> Result<Walk, Failure> {
    let options = WalkOptions::default()
        .with_max_depth(levels)
        .with_max_entries(room + 1)
        .with_sizes(true)
        .with_metadata(true)
        .with_link_targets(true)
        .with_raw_names(true);
    let open = |e: io::Error| Failure::at_path("cannot open directory", dir, &e);
    let mut walk = fs.walk(dir, &options).await.map_err(open)?;
    if walk.stopped && walk.entries.len() <= room {
        walk = walk_by_listing(fs, dir, &options).await.map_err(open)?;
        if walk.stopped && walk.entries.len() <= room {
            return Err(Failure::plain(
                format!(
                    "{}: the tree's names hold more than {WALK_BYTES_LIMIT} bytes; get -r \
                     copies at most that much",
                    quote(&dir.to_string())
                ),
                EXIT_FAILURE,
            ));
        }
    }
    if let Some(error) = walk.errors.first() {
        let unlisted = dir.join(&error.path).expect("walked names hold no NUL");
        // The listing's own error, for its kind (and so the exit status) and its wording.
        let err = match fs.read_directory(&unlisted).await {
            Err(e) => e,
            Ok(_) => io::Error::other(error.message.clone()),
        };
        return Err(Failure::at_path("cannot open directory", &unlisted, &err));
    }
    Ok(walk)
}

/// A file's metadata from its walk entry; from `get_metadata` when the walk could not tell
/// its mode. Built field by field: no literal, so that fields the library adds need no change.
#[allow(clippy::field_reassign_with_default)]
async fn file_metadata(
    fs: &dyn ExecutorFileSystem,
    path: &AbsolutePathBuf,
    entry: &WalkEntry,
) -> Result<FileMetadata, Failure> {
    let (Some(mode), Some(modified_at_ms)) = (entry.mode, entry.modified_at_ms) else {
        return fs
            .get_metadata(path)
            .await
            .map_err(|e| Failure::at_path("cannot stat", path, &e));
    };
    let mut metadata = FileMetadata::default();
    metadata.is_file = true;
    metadata.size = entry.size;
    metadata.mode = mode;
    metadata.modified_at_ms = modified_at_ms;
    Ok(metadata)
}

/// The exact last name of a walk entry's path (a local name that is not UTF-8 included), so
/// that the copy reaches this entry and no other.
fn name_of(entry: &WalkEntry) -> &OsStr {
    match &entry.raw_path {
        Some(raw) => raw.file_name().unwrap_or_default(),
        None => OsStr::new(entry.path.rsplit('/').next().unwrap_or_default()),
    }
}

/// A walk entry's exact path below `dir`, when each of its names is one plain component:
/// anything else (a broken or hostile server's `..`) would land outside the destination.
fn valid_rel<'a>(dir: &AbsolutePathBuf, entry: &'a WalkEntry) -> Result<&'a Path, Failure> {
    let (rel, valid) = match &entry.raw_path {
        Some(raw) => (raw.as_path(), raw.iter().all(is_plain_name)),
        None => {
            let valid = entry.path.split('/').all(|n| is_plain_name(OsStr::new(n)));
            (Path::new(&entry.path), valid)
        }
    };
    if valid {
        return Ok(rel);
    }
    Err(Failure::plain(
        format!(
            "{}: the server listed an invalid name {}",
            quote(&dir.to_string()),
            escape(rel.as_os_str().as_bytes())
        ),
        EXIT_FAILURE,
    ))
}

fn too_deep(top: &AbsolutePathBuf) -> Failure {
    Failure::plain(
        format!(
            "{}: the tree is more than {MAX_TREE_DEPTH} levels deep; get -r copies no deeper",
            quote(&top.to_string())
        ),
        EXIT_FAILURE,
    )
}

fn too_many(top: &AbsolutePathBuf) -> Failure {
    Failure::plain(
        format!(
            "{}: the tree holds more than {MAX_TREE_ENTRIES} entries; get -r copies at most \
             that many",
            quote(&top.to_string())
        ),
        EXIT_FAILURE,
    )
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
