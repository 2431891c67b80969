//! `fs/walk` in codex's shape: breadth first, each directory's entries in byte order, bounded in
//! depth, directories read, entries and reply size. Every directory is read through the trait,
//! so the walk is confined exactly as `fs/readDirectory` is; a directory that cannot be read is
//! reported in `errors`, never silently left out.

use std::collections::{HashSet, VecDeque};

use crate::protocol::codex::{CodexWalkEntry, CodexWalkError, CodexWalkOptions, CodexWalkResponse};
use crate::protocol::uri::{PathForm, spell};
use capfs::{AbsolutePathBuf, ExecutorFileSystem};

/// The most entries and directories one walk handles, whatever the request asks.
pub(crate) const MAX_WALK_ITEMS: u64 = 65_536;
/// Room kept in a reply for its envelope.
const REPLY_ENVELOPE_BYTES: usize = 1024;

/// What a walk found, and what it left out because names were not UTF-8.
pub(crate) struct CodexWalk {
    pub(crate) response: CodexWalkResponse,
    pub(crate) non_utf8_names_omitted: u64,
}

/// The JSON length of one entry at most: every byte of its path escaped as `%XX`, the kind and
/// the punctuation.
fn entry_bytes(path: &AbsolutePathBuf) -> usize {
    path.as_path().as_os_str().len() * 3 + 48
}

/// Walks `start` with `options`, answering paths in `form`, in a reply of at most
/// `max_message_bytes`.
pub(crate) async fn walk(
    fs: &dyn ExecutorFileSystem,
    start: &AbsolutePathBuf,
    options: &CodexWalkOptions,
    form: PathForm,
    max_message_bytes: usize,
) -> std::io::Result<CodexWalk> {
    let mut found = CodexWalk {
        response: CodexWalkResponse::default(),
        non_utf8_names_omitted: 0,
    };
    if !fs.get_metadata(start).await?.is_directory {
        return Ok(found);
    }
    let max_depth = options.max_depth.max(1);
    let max_directories = options.max_directories.min(MAX_WALK_ITEMS);
    let max_entries = options.max_entries.min(MAX_WALK_ITEMS) as usize;
    let budget = max_message_bytes.saturating_sub(REPLY_ENVELOPE_BYTES);
    let mut used = 0usize;
    let mut queue = VecDeque::from([(start.clone(), 1u64)]);
    // Where links are followed, a directory is entered once however many ways lead to it.
    let mut entered: HashSet<AbsolutePathBuf> = HashSet::new();
    if options.follow_directory_symlinks {
        entered.insert(super::canonical::canonicalize(fs, start).await?);
    }
    let mut read = 0u64;
    let out = &mut found.response;
    'walk: while let Some((dir, depth)) = queue.pop_front() {
        if read >= max_directories {
            out.truncated = true;
            break;
        }
        read += 1;
        let mut entries = match fs.read_directory(&dir).await {
            Ok(entries) => entries,
            Err(error) => {
                out.errors.push(CodexWalkError {
                    path: spell(&dir, form),
                    message: error.to_string(),
                });
                continue;
            }
        };
        entries.sort_by(|a, b| a.file_name.as_bytes().cmp(b.file_name.as_bytes()));
        for entry in entries {
            if entry.lossy_name {
                found.non_utf8_names_omitted += 1;
                continue;
            }
            let path = dir.join(&entry.file_name)?;
            let is_directory = if entry.is_symlink {
                // A link is listed only as the directory it leads to, and only when asked to
                // follow; one that leads out of every root fails its lookup and is left out.
                if !options.follow_directory_symlinks {
                    continue;
                }
                match fs.get_metadata(&path).await {
                    Ok(metadata) if metadata.is_directory => true,
                    _ => continue,
                }
            } else {
                entry.is_directory
            };
            let kind = if is_directory {
                "directory"
            } else if entry.is_file {
                "file"
            } else {
                "other"
            };
            let bytes = entry_bytes(&path);
            if out.entries.len() >= max_entries || used + bytes > budget {
                out.truncated = true;
                break 'walk;
            }
            used += bytes;
            out.entries.push(CodexWalkEntry {
                path: spell(&path, form),
                kind: kind.to_string(),
            });
            let hidden = entry.file_name.starts_with('.');
            if is_directory && depth < max_depth && !(options.prune_hidden_directories && hidden) {
                if options.follow_directory_symlinks {
                    let canonical = super::canonical::canonicalize(fs, &path).await;
                    if !canonical.is_ok_and(|canonical| entered.insert(canonical)) {
                        continue;
                    }
                }
                queue.push_back((path, depth + 1));
            }
        }
    }
    Ok(found)
}
