//! Replies whose size the request does not bound, cut to the message limit: a walk and a
//! directory listing keep the entries that fit and say that they were cut (`truncated`).
//!
//! Sizes are counted exactly as `serde_json` writes the reply, without writing it: the cut is
//! made before the text is built.

use crate::protocol::{DirectoryEntry, ReadDirectoryResponse, WalkResponse};
use crate::{ReadDirectoryEntry, Walk};

/// Bytes of a reply outside its list of entries: the id's member (ids counted apart, as for
/// `fs/readFile`), the other members' names and punctuation, the counts.
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
pub(crate) fn walk_reply(mut walk: Walk, max_message_bytes: usize) -> WalkResponse {
    let mut room = max_message_bytes.saturating_sub(RESULT_ROOM);
    // {"path":…,"message":…}
    let error_len =
        |e: &crate::WalkError| 20 + json_string_len(&e.path) + json_string_len(&e.message);
    let mut cut = keep_fitting(&mut walk.errors, &mut room, error_len);
    // {"path":…,"isDirectory":…,"isFile":…,"isSymlink":…,"size":…}
    let entry_len = |e: &crate::WalkEntry| {
        55 + json_string_len(&e.path)
            + bool_len(e.is_directory)
            + bool_len(e.is_file)
            + bool_len(e.is_symlink)
            + digits(e.size)
    };
    cut |= keep_fitting(&mut walk.entries, &mut room, entry_len);
    walk.truncated |= cut;
    WalkResponse::from(walk)
}

/// The `fs/readDirectory` reply to `entries`, names that are not UTF-8 left out and counted
/// (a lossy name would lead the client to another entry, or none), cut to `max_message_bytes`.
pub(crate) fn listing_reply(
    entries: Vec<ReadDirectoryEntry>,
    max_message_bytes: usize,
) -> ReadDirectoryResponse {
    let (lossy, exact): (Vec<_>, Vec<_>) = entries.into_iter().partition(|entry| entry.lossy_name);
    let mut entries: Vec<DirectoryEntry> = exact.into_iter().map(Into::into).collect();
    let mut room = max_message_bytes.saturating_sub(RESULT_ROOM);
    // {"fileName":…,"isDirectory":…,"isFile":…,"isSymlink":…}
    let entry_len = |e: &DirectoryEntry| {
        51 + json_string_len(&e.file_name)
            + bool_len(e.is_directory)
            + bool_len(e.is_file)
            + bool_len(e.is_symlink)
    };
    let truncated = keep_fitting(&mut entries, &mut room, entry_len);
    ReadDirectoryResponse {
        entries,
        non_utf8_names_omitted: lossy.len() as u64,
        truncated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{WalkEntry, WalkError};

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
        let entry = WalkEntry {
            path: "a/\"b\"".into(),
            is_directory: true,
            is_file: false,
            is_symlink: false,
            size: 12_345,
        };
        let walk = Walk {
            entries: vec![entry.clone(); 3],
            errors: vec![WalkError {
                path: "x".into(),
                message: "Too many open files (os error 24)".into(),
            }],
            ..Walk::default()
        };
        let whole = serde_json::to_string(&walk_reply(walk.clone(), usize::MAX)).unwrap();
        let one_entry = serde_json::to_string(&crate::protocol::WalkEntryWire {
            path: entry.path.clone(),
            is_directory: true,
            is_file: false,
            is_symlink: false,
            size: 12_345,
        })
        .unwrap();
        assert_eq!(one_entry.len(), 55 + 9 + 4 + 5 + 5 + 5);
        // Room for the errors and exactly two entries: the third is cut, and the reply says so.
        let error_len = 20 + 3 + json_string_len(&walk.errors[0].message) + 1;
        let two = RESULT_ROOM + error_len + 2 * (one_entry.len() + 1);
        let cut = walk_reply(walk.clone(), two);
        assert_eq!(
            (cut.entries.len(), cut.errors.len(), cut.truncated),
            (2, 1, true)
        );
        assert!(serde_json::to_string(&cut).unwrap().len() < two);
        let all = walk_reply(walk, two + one_entry.len() + 1);
        assert_eq!((all.entries.len(), all.truncated), (3, false));
        assert_eq!(serde_json::to_string(&all).unwrap(), whole);
        let listing = vec![
            ReadDirectoryEntry {
                file_name: "n".repeat(100),
                is_directory: false,
                is_file: true,
                is_symlink: false,
                lossy_name: false,
            };
            10
        ];
        let reply = listing_reply(listing.clone(), RESULT_ROOM + 5 * 168);
        assert_eq!((reply.entries.len(), reply.truncated), (5, true));
        let reply = listing_reply(listing, usize::MAX);
        assert_eq!((reply.entries.len(), reply.truncated), (10, false));
    }
}
