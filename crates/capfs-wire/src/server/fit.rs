//! Replies whose size the request does not bound, cut to the message limit: a walk and a
//! directory listing keep the entries that fit and say that they were cut (`truncated`).
//!
//! Sizes are counted exactly as `serde_json` writes the reply, without writing it: the cut is
//! made, and the reply's bytes reserved in the outgoing budget, before the text is built. The
//! entries themselves are read before their size is known: one connection builds one such
//! reply at a time. When the budget cannot cover the reply at once, the listing is dropped
//! while the request waits, and made again once the bytes are reserved (cut to them), so that
//! a request waiting on the budget holds nothing.

use super::payload::{Outcome, Payload, serialized};
use crate::protocol::{
    DirectoryEntry, ErrorObject, ReadDirectoryResponse, WalkParams, WalkResponse,
};
use capfs::{AbsolutePathBuf, ExecutorFileSystem, ReadDirectoryEntry, Walk};

/// Bytes of a reply outside its list of entries: the id's member (ids counted apart, as for
/// `fs/readFile`), the other members' names and punctuation (`stopped` included), the counts.
const RESULT_ROOM: usize = 160;

/// Length of `text` as a JSON string, quotes included, escaped as `serde_json` escapes it.
fn json_string_len(text: &str) -> usize {
    let escaped: usize = text
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..0x20 => 6,
            _ => 1,
        })
        .sum();
    escaped + 2
}

fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

fn bool_len(b: bool) -> usize {
    if b { 4 } else { 5 }
}

fn signed_digits(n: i64) -> usize {
    digits(n.unsigned_abs()) + usize::from(n < 0)
}

/// Length of an entry of a walk's reply, as [`WalkEntryWire`](crate::protocol::WalkEntryWire)
/// writes it: `{"path":…,"isDirectory":…,"isFile":…,"isSymlink":…,"size":…}`, then each of
/// `,"mode":…`, `,"modifiedAtMs":…` and `,"linkTarget":…` that is present (a link text that is
/// not UTF-8 is left out).
fn walk_entry_len(e: &capfs::WalkEntry) -> usize {
    55 + json_string_len(&e.path)
        + bool_len(e.is_directory)
        + bool_len(e.is_file)
        + bool_len(e.is_symlink)
        + digits(e.size)
        + e.mode.map_or(0, |m| 8 + digits(u64::from(m)))
        + e.modified_at_ms.map_or(0, |t| 16 + signed_digits(t))
        + e.link_target
            .as_ref()
            .and_then(|t| t.to_str())
            .map_or(0, |t| 14 + json_string_len(t))
}

/// Keeps the longest prefix of `items` whose sizes (each plus a separating comma) fit in
/// `room`, which shrinks by what is kept; true when some were cut.
fn keep_fitting<T>(items: &mut Vec<T>, room: &mut usize, size: impl Fn(&T) -> usize) -> bool {
    let mut kept = 0;
    for item in items.iter() {
        let len = size(item) + 1;
        if len > *room {
            break;
        }
        *room -= len;
        kept += 1;
    }
    let cut = kept < items.len();
    items.truncate(kept);
    cut
}

/// The `capfs/walk` reply to `walk`, cut to `max_message_bytes`: the directories it could not
/// list come first (each one left out is a walk that looks more complete than it is), then the
/// entries, in order, as long as they fit.
pub(crate) fn walk_reply(mut walk: Walk, max_message_bytes: usize) -> (WalkResponse, usize) {
    let start = max_message_bytes.saturating_sub(RESULT_ROOM);
    let mut room = start;
    // {"path":…,"message":…}
    let error_len =
        |e: &capfs::WalkError| 20 + json_string_len(&e.path) + json_string_len(&e.message);
    let mut cut = keep_fitting(&mut walk.errors, &mut room, error_len);
    cut |= keep_fitting(&mut walk.entries, &mut room, walk_entry_len);
    walk.truncated |= cut;
    walk.stopped |= cut;
    let size = RESULT_ROOM + (start - room);
    (WalkResponse::from(walk), size)
}

/// The `fs/readDirectory` reply to `entries`, names that are not UTF-8 left out and counted
/// (a lossy name would lead the client to another entry, or none), cut to `max_message_bytes`.
pub(crate) fn listing_reply(
    entries: Vec<ReadDirectoryEntry>,
    max_message_bytes: usize,
) -> (ReadDirectoryResponse, usize) {
    let (lossy, exact): (Vec<_>, Vec<_>) = entries.into_iter().partition(|entry| entry.lossy_name);
    let mut entries: Vec<DirectoryEntry> = exact.into_iter().map(Into::into).collect();
    let start = max_message_bytes.saturating_sub(RESULT_ROOM);
    let mut room = start;
    // {"fileName":…,"isDirectory":…,"isFile":…,"isSymlink":…}
    let entry_len = |e: &DirectoryEntry| {
        51 + json_string_len(&e.file_name)
            + bool_len(e.is_directory)
            + bool_len(e.is_file)
            + bool_len(e.is_symlink)
    };
    let truncated = keep_fitting(&mut entries, &mut room, entry_len);
    let size = RESULT_ROOM + (start - room);
    let listing = ReadDirectoryResponse {
        entries,
        non_utf8_names_omitted: lossy.len() as u64,
        truncated,
    };
    (listing, size)
}

/// What a listing or walk whose reply is `size` bytes holds at most while it is built: its
/// entries as read, as they go on the wire, and the reply's text (each about the size of the
/// text). Once the text is built, the reservation shrinks to it (`reply.rs`).
pub(crate) fn held_while_built(size: usize) -> u64 {
    3 * size as u64
}

fn io(e: std::io::Error) -> ErrorObject {
    ErrorObject::from_io(&e)
}

/// `fs/readDirectory` of `path`: the listing cut to `max_message_bytes`, its bytes reserved.
pub(crate) async fn listing(
    fs: &dyn ExecutorFileSystem,
    path: &AbsolutePathBuf,
    type_links: bool,
    max_message_bytes: usize,
    outcome: &mut Outcome,
) -> Result<Payload, ErrorObject> {
    let turn = outcome.unsized_work().await;
    let entries = read_listing(fs, path, type_links).await.map_err(io)?;
    let (mut listing, size) = listing_reply(entries, max_message_bytes);
    if !outcome.try_cover(held_while_built(size)).map_err(io)? {
        drop((listing, turn));
        outcome.cover(held_while_built(size)).await.map_err(io)?;
        let entries = read_listing(fs, path, type_links).await.map_err(io)?;
        (listing, _) = listing_reply(entries, size);
    }
    serialized(listing)
}

/// The entries of `path`; with `type_links` (the current codex protocol), a link is typed by
/// what it leads to, as codex's own server does, here only where that is inside the roots.
async fn read_listing(
    fs: &dyn ExecutorFileSystem,
    path: &AbsolutePathBuf,
    type_links: bool,
) -> std::io::Result<Vec<ReadDirectoryEntry>> {
    let mut entries = fs.read_directory(path).await?;
    if type_links {
        for entry in entries.iter_mut().filter(|e| e.is_symlink && !e.lossy_name) {
            if let Ok(metadata) = fs.get_metadata(&path.join(&entry.file_name)?).await {
                entry.is_directory = metadata.is_directory;
                entry.is_file = metadata.is_file;
            }
        }
    }
    Ok(entries)
}

/// `capfs/walk` as `p` asks: the walk cut to `max_message_bytes`, its bytes reserved.
pub(crate) async fn walk(
    fs: &dyn ExecutorFileSystem,
    p: &WalkParams,
    max_message_bytes: usize,
    outcome: &mut Outcome,
) -> Result<Payload, ErrorObject> {
    let options = p.options();
    let turn = outcome.unsized_work().await;
    let walk = fs.walk(&p.path, &options).await.map_err(io)?;
    let (mut response, size) = walk_reply(walk, max_message_bytes);
    if !outcome.try_cover(held_while_built(size)).map_err(io)? {
        drop((response, turn));
        outcome.cover(held_while_built(size)).await.map_err(io)?;
        let walk = fs.walk(&p.path, &options).await.map_err(io)?;
        (response, _) = walk_reply(walk, size);
    }
    // `stopped` goes only to a client that asks for what an older server would not know: the
    // reply to any other request keeps the members it always had.
    if !(p.metadata || p.link_targets) {
        response.stopped = None;
    }
    outcome.bytes = response.entries.len() as u64;
    serialized(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use capfs::{WalkEntry, WalkError};
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn sizes_are_those_serde_json_writes() {
        for text in [
            "",
            "plain",
            "q\"b\\",
            "nl\n\t\r\u{8}\u{c}",
            "\u{1}\u{1f}",
            "é✓",
        ] {
            let written = serde_json::to_string(text).unwrap();
            assert_eq!(json_string_len(text), written.len(), "{text:?}");
        }
        let mut entry = WalkEntry::new("a/\"b\"");
        entry.is_directory = true;
        entry.size = 12_345;
        let mut walk = Walk::default();
        walk.entries = vec![entry.clone(); 3];
        walk.errors = vec![WalkError {
            path: "x".into(),
            message: "Too many open files (os error 24)".into(),
        }];
        let whole = serde_json::to_string(&walk_reply(walk.clone(), usize::MAX).0).unwrap();
        let one_entry =
            serde_json::to_string(&crate::protocol::WalkEntryWire::from(entry.clone())).unwrap();
        assert_eq!(one_entry.len(), 55 + 9 + 4 + 5 + 5 + 5);
        assert_eq!(walk_entry_len(&entry), one_entry.len());
        // Each optional member, present, is counted as written.
        for (mode, mtime, link) in [
            (
                Some(0o755),
                Some(1_700_000_000_123),
                Some("../out \"side\"\n"),
            ),
            (Some(0), Some(-5), None),
            (None, Some(0), Some("")),
        ] {
            let mut full = entry.clone();
            full.mode = mode;
            full.modified_at_ms = mtime;
            full.link_target = link.map(Into::into);
            let written =
                serde_json::to_string(&crate::protocol::WalkEntryWire::from(full.clone())).unwrap();
            assert_eq!(walk_entry_len(&full), written.len(), "{written}");
        }
        // A link text that is not UTF-8 is left out of the reply, and of its length.
        let mut bad = entry.clone();
        bad.link_target = Some(std::ffi::OsStr::from_bytes(b"x\xff").into());
        assert_eq!(walk_entry_len(&bad), one_entry.len());
        // Room for the errors and exactly two entries: the third is cut, and the reply says so.
        let error_len = 20 + 3 + json_string_len(&walk.errors[0].message) + 1;
        let two = RESULT_ROOM + error_len + 2 * (one_entry.len() + 1);
        let (cut, size) = walk_reply(walk.clone(), two);
        assert!(size <= two);
        assert_eq!(
            (cut.entries.len(), cut.errors.len(), cut.truncated),
            (2, 1, true)
        );
        assert_eq!(cut.stopped, Some(true), "a cut walk stopped");
        assert!(serde_json::to_string(&cut).unwrap().len() < two);
        let (all, _) = walk_reply(walk, two + one_entry.len() + 1);
        assert_eq!(
            (all.entries.len(), all.truncated, all.stopped),
            (3, false, None)
        );
        assert_eq!(serde_json::to_string(&all).unwrap(), whole);
        let listing = vec![
            ReadDirectoryEntry::new("n".repeat(100))
                .with_is_directory(false)
                .with_is_file(true)
                .with_is_symlink(false);
            10
        ];
        let (reply, _) = listing_reply(listing.clone(), RESULT_ROOM + 5 * 168);
        assert_eq!((reply.entries.len(), reply.truncated), (5, true));
        let (reply, _) = listing_reply(listing, usize::MAX);
        assert_eq!((reply.entries.len(), reply.truncated), (10, false));
    }
}
