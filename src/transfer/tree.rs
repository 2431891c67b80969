//! The trees `get -r` and `put -r` copy, planned before anything is written and in one way for
//! both: from walks of the source through the trait, carrying each entry's size, mode, time and
//! link text. `get -r` walks the sandbox through the command's file system; `put -r` walks the
//! local source through a `LocalFileSystem` whose one root, read-only, is the source directory,
//! so that the local side gets the library's confined walk and its bounds. Parents come before
//! children, special files are left out with a warning, and a tree past a bound (its depth, its
//! entries, the bytes of its names) fails the plan instead of being copied in part. So does a
//! walk that contradicts itself (an entry whose directory it did not list as one, a name listed
//! twice) or leaves entries out (names that are not UTF-8): a lying server's tree is refused,
//! never copied short of what it holds.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};

use capfs::defaults::walk_by_listing;
use capfs::{
    AbsolutePathBuf, Access, ExecutorFileSystem, FileMetadata, LocalFileSystem, Sandbox,
    WALK_BYTES_LIMIT, WALK_DEPTH_LIMIT, Walk, WalkEntry, WalkOptions,
};

use rustix::io::Errno;

use crate::fail::{EXIT_FAILURE, Failure, reason};
use crate::names::quote;

/// Linux's bound on a path given to a system call, its terminating NUL included.
const PATH_MAX: usize = 4_096;

/// How large a tree a plan takes.
#[derive(Clone, Copy)]
struct Limits {
    /// Deepest level copied.
    depth: usize,
    /// Most entries planned (the plan holds each one's name and metadata).
    entries: usize,
}

/// The limits of every tree `get -r` and `put -r` copy: deeper than anything a person copies
/// and far below the length at which local paths stop working; entries as many as one walk
/// returns at most.
const TREE_LIMITS: Limits = Limits {
    depth: 1_024,
    entries: 1_000_000,
};

/// An entry of a tree to copy, relative to the tree's top.
pub(super) enum Node {
    Directory {
        rel: PathBuf,
        mode: u32,
    },
    /// `metadata`: the file's, as the walk saw it (`put -r` stats each file again as it opens
    /// it, for the mode and time the copy gets).
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

/// Which side of a transfer a tree is on: what the messages about it call its entries.
#[derive(Clone, Copy)]
enum Side<'a> {
    /// In the sandbox (`get -r`): entries named by their sandbox paths.
    Sandbox,
    /// On the local disk (`put -r`): entries named under this path, the source as given.
    Local(&'a Path),
}

impl Side<'_> {
    fn command(self) -> &'static str {
        match self {
            Side::Sandbox => "get -r",
            Side::Local(_) => "put -r",
        }
    }

    /// The entry at `rel` below `top` as messages show it.
    fn show(self, top: &AbsolutePathBuf, rel: &Path) -> String {
        match self {
            Side::Sandbox => at(top, rel).to_string(),
            Side::Local(source) if rel.as_os_str().is_empty() => {
                source.to_string_lossy().into_owned()
            }
            Side::Local(source) => source.join(rel).to_string_lossy().into_owned(),
        }
    }

    /// A failure to read the entry at `rel`: in the sandbox `verb` and the path; on the local
    /// side as every failure to read a local tree reads, the reason without the path of the
    /// sandbox's root (which the person did not give).
    fn failure(self, verb: &str, top: &AbsolutePathBuf, rel: &Path, err: &io::Error) -> Failure {
        let path = at(top, rel);
        match self {
            Side::Sandbox => Failure::at_path(verb, &path, err),
            Side::Local(_) => {
                let err = io::Error::new(err.kind(), reason(err, &path.to_string()));
                Failure::at("cannot read local directory", &self.show(top, rel), &err)
            }
        }
    }

    /// On the local side, a file `put` could not open by its path though the walk reached it
    /// through handles (a path of `PATH_MAX` bytes or more): the plan fails on it, before
    /// anything is copied, instead of the copy midway.
    fn openable(self, top: &AbsolutePathBuf, rel: &Path) -> Result<(), Failure> {
        match self {
            Side::Local(source) if source.join(rel).as_os_str().len() >= PATH_MAX => {
                let err = io::Error::from_raw_os_error(Errno::NAMETOOLONG.raw_os_error());
                Err(self.failure("cannot open", top, rel, &err))
            }
            _ => Ok(()),
        }
    }

    /// A tree past one of the plan's bounds: `what` it is, and that it is not copied.
    fn too_large(self, top: &AbsolutePathBuf, rel: &Path, what: &str, copies: &str) -> Failure {
        Failure::plain(
            format!(
                "{}: {what}; {} copies {copies}",
                quote(&self.show(top, rel)),
                self.command()
            ),
            EXIT_FAILURE,
        )
    }
}

fn at(top: &AbsolutePathBuf, rel: &Path) -> AbsolutePathBuf {
    top.join(rel).expect("walked names hold no NUL")
}

/// The sandbox tree under `top`, a directory of mode `top_mode`, for `get -r`.
pub(super) async fn sandbox_tree(
    fs: &dyn ExecutorFileSystem,
    top: &AbsolutePathBuf,
    top_mode: u32,
    warnings: &mut Vec<String>,
) -> Result<Vec<Node>, Failure> {
    plan(fs, top, top_mode, Side::Sandbox, TREE_LIMITS, warnings).await
}

/// The local tree under `source`, a directory of mode `top_mode`, for `put -r`: planned as a
/// sandbox tree is, on a file system whose one root is `source`.
pub(super) async fn local_tree(
    source: &Path,
    top_mode: u32,
    warnings: &mut Vec<String>,
) -> Result<Vec<Node>, Failure> {
    let (fs, top) = open_local(source)?;
    plan(
        &fs,
        &top,
        top_mode,
        Side::Local(source),
        TREE_LIMITS,
        warnings,
    )
    .await
}

/// A file system whose one root, read-only, is the directory `source`, and that root's path.
/// The root is the directory `source` names, through any symlink in its path, as `cp -r`
/// copies a directory named through a link.
fn open_local(source: &Path) -> Result<(LocalFileSystem, AbsolutePathBuf), Failure> {
    let shown = source.to_string_lossy();
    let fail = |e: &io::Error| Failure::at("cannot read local directory", &shown, e);
    // Resolved here, so that the sandbox's errors, which name the resolved path, can name
    // the source as given instead.
    let resolved = std::fs::canonicalize(source).map_err(|e| fail(&e))?;
    let sandbox = Sandbox::new()
        .with_root(&resolved, Access::ReadOnly)
        .map_err(|e| {
            fail(&io::Error::new(
                e.kind(),
                reason(&e, &resolved.to_string_lossy()),
            ))
        })?;
    let fs = LocalFileSystem::new(sandbox);
    let top = fs.sandbox().roots()[0].path().clone();
    Ok((fs, top))
}

/// The tree under `top` on `fs`, parents before children; specials are warned about and left
/// out. It is planned from one walk of `top`: more only when the tree is deeper than one walk
/// goes (a walk from each directory left at its depth) or its walk was cut to a server's
/// message limit (walked again by listing).
async fn plan(
    fs: &dyn ExecutorFileSystem,
    top: &AbsolutePathBuf,
    top_mode: u32,
    side: Side<'_>,
    limits: Limits,
    warnings: &mut Vec<String>,
) -> Result<Vec<Node>, Failure> {
    // Each directory's entries as the walks found them, by the directory's relative path
    // (its bytes: a `Path` hashes component by component).
    let mut children: HashMap<OsString, Vec<WalkEntry>> = HashMap::new();
    // The directories listed (by their bytes too): those whose entries are copied.
    let mut directories: HashSet<OsString> = HashSet::new();
    let mut found = 1;
    let mut pending = vec![(PathBuf::new(), 0usize)];
    while let Some((base, depth)) = pending.pop() {
        // A server can list a tree without end: the plan is bounded before it is used.
        if depth >= limits.depth {
            let what = format!("the tree is more than {} levels deep", limits.depth);
            return Err(side.too_large(top, Path::new(""), &what, "no deeper"));
        }
        let levels = (limits.depth - depth).min(WALK_DEPTH_LIMIT);
        let room = limits.entries - found;
        let walk = walk_once(fs, top, &base, side, levels, room).await?;
        if walk.entries.len() > room {
            let what = format!("the tree holds more than {} entries", limits.entries);
            return Err(side.too_large(top, Path::new(""), &what, "at most that many"));
        }
        found += walk.entries.len();
        for entry in walk.entries {
            let below = checks::valid_rel(side, top, &base, &entry)?;
            let rel = base.join(below);
            if entry.is_directory && !entry.is_symlink {
                // At the walk's last level its entries are unlisted, whether or not the walk
                // says it was cut there: a walk from it lists them.
                if below.components().count() == levels {
                    pending.push((rel.clone(), depth + levels));
                }
                directories.insert(rel.as_os_str().to_os_string());
            }
            let parent = rel.parent().unwrap_or(Path::new("")).as_os_str();
            match children.get_mut(parent) {
                Some(siblings) => siblings.push(entry),
                None => {
                    children.insert(parent.to_os_string(), vec![entry]);
                }
            }
        }
    }
    checks::all_reached(side, top, &children, &directories)?;
    let mut nodes = vec![Node::Directory {
        rel: PathBuf::new(),
        mode: top_mode,
    }];
    // Directories in the order a copy by listing takes them: each one's entries sorted by name,
    // the last directory listed first.
    let mut next = vec![PathBuf::new()];
    while let Some(rel) = next.pop() {
        let mut entries = children.remove(rel.as_os_str()).unwrap_or_default();
        entries.sort_by(|a, b| name_of(a).cmp(name_of(b)));
        checks::none_twice(side, top, &rel, &entries)?;
        for entry in entries {
            let child_rel = rel.join(name_of(&entry));
            if entry.is_symlink {
                let target = match entry.link_target {
                    Some(target) => target,
                    None => fs
                        .read_link(&at(top, &child_rel))
                        .await
                        .map_err(|e| side.failure("cannot read link", top, &child_rel, &e))?,
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
                side.openable(top, &child_rel)?;
                let metadata = file_metadata(fs, top, &child_rel, &entry)
                    .await
                    .map_err(|e| side.failure("cannot stat", top, &child_rel, &e))?;
                nodes.push(Node::File {
                    rel: child_rel,
                    size: metadata.size,
                    metadata: Some(metadata),
                });
            } else {
                let shown = side.show(top, &child_rel);
                warnings.push(format!("skipping special file {}", quote(&shown)));
            }
        }
    }
    Ok(nodes)
}

/// One walk of the directory at `base` below `top`, `levels` deep, asking for one entry more
/// than `room` (to tell a tree over the bound). A walk of the sandbox that stopped short is
/// made again by listing; a directory the walk could not list fails the plan as its listing
/// fails.
async fn walk_once(
    fs: &dyn ExecutorFileSystem,
    top: &AbsolutePathBuf,
    base: &Path,
    side: Side<'_>,
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
    let dir = at(top, base);
    let open = |e: io::Error| side.failure("cannot open directory", top, base, &e);
    let mut walk = fs.walk(&dir, &options).await.map_err(open)?;
    let omitted = walk.non_utf8_names_omitted;
    // A walk cut at its depth alone holds a directory at its last level; one that says so
    // and holds none stopped short.
    walk.stopped |= walk.truncated && !checks::reaches_level(&walk, levels);
    // Short of the entries asked for, a walk stopped at the bytes of its names, or at a
    // server's message limit: then it is made again by listing, which that limit does not cut.
    // Never for a local tree, whose walk only the bytes stop and whose deepest directories a
    // listing by path may not reach.
    if walk.stopped && walk.entries.len() <= room && matches!(side, Side::Sandbox) {
        walk = walk_by_listing(fs, &dir, &options).await.map_err(open)?;
    }
    if walk.stopped && walk.entries.len() <= room {
        let what = format!("the tree's names hold more than {WALK_BYTES_LIMIT} bytes");
        return Err(side.too_large(top, base, &what, "at most that much"));
    }
    checks::none_left_out(side, top, base, omitted.max(walk.non_utf8_names_omitted))?;
    if let Some(error) = walk.errors.first() {
        let unlisted = base.join(&error.path);
        // The listing's own error, for its kind (and so the exit status) and its wording.
        let err = match fs.read_directory(&at(top, &unlisted)).await {
            Err(e) => e,
            Ok(_) => io::Error::other(error.message.clone()),
        };
        return Err(side.failure("cannot open directory", top, &unlisted, &err));
    }
    Ok(walk)
}

/// A file's metadata from its walk entry; from `get_metadata` when the walk could not tell
/// its mode. Built field by field: no literal, so that fields the library adds need no change.
#[allow(clippy::field_reassign_with_default)]
async fn file_metadata(
    fs: &dyn ExecutorFileSystem,
    top: &AbsolutePathBuf,
    rel: &Path,
    entry: &WalkEntry,
) -> io::Result<FileMetadata> {
    let (Some(mode), Some(modified_at_ms)) = (entry.mode, entry.modified_at_ms) else {
        return fs.get_metadata(&at(top, rel)).await;
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

pub(super) fn totals(nodes: &[Node]) -> (u64, u64) {
    nodes
        .iter()
        .fold((0, 0), |(files, bytes), node| match node {
            Node::File { size, .. } => (files + 1, bytes + size),
            _ => (files, bytes),
        })
}

mod checks;
#[cfg(test)]
mod tests;
