//! Listings cut to the reply: `list_directory`, `list_directory_with_sizes`, `search_files`
//! and `directory_tree` answer as many of their entries as one reply carries, in order, and say
//! in a second content block how many were left out and how to see them, instead of refusing
//! the whole answer. The walk's own bounds are said in the same note.

use rmcp::model::ContentBlock;
use serde_json::json;

use super::call::Output;
use super::reads::{REPLY_LIMIT, TEXT_BUDGET, json_len};
use capfs::WalkOptions;

/// Bytes of a JSON string a listing's text may take: it is sent twice (`content` and
/// `structuredContent`), beside the envelope and the note the read budget leaves room for.
pub(crate) const LISTING_BUDGET: usize = TEXT_BUDGET;

/// How many of the first items fit in `room` bytes when each costs what `costs` says, in
/// order.
pub(crate) fn fitting(costs: impl IntoIterator<Item = usize>, room: usize) -> usize {
    let mut used = 0usize;
    let mut n = 0;
    for cost in costs {
        used = used.saturating_add(cost);
        if used > room {
            break;
        }
        n += 1;
    }
    n
}

/// How many of the first `lines`, joined by `\n`, fit in `room` bytes as one JSON string
/// (quotes and escapes included).
pub(crate) fn lines_fitting(lines: &[String], room: usize) -> usize {
    // The quotes once; each line escaped, after an escaped `\n` but the first.
    let costs = lines
        .iter()
        .enumerate()
        .map(|(i, line)| json_len(line) - 2 + if i == 0 { 0 } else { 2 });
    fitting(costs, room.saturating_sub(2))
}

/// What a listing left out: the walk's bounds when they cut it, and the entries found beyond
/// those the reply carries.
pub(crate) struct Cut<'a> {
    /// The walk's options, when its bounds cut it short.
    pub walk: Option<&'a WalkOptions>,
    /// Entries found (after every filter), and how many of them the reply carries.
    pub found: usize,
    pub shown: usize,
    /// How to see the rest, in a few words for the note.
    pub narrow: &'a str,
}

impl Cut<'_> {
    /// The note of a cut listing, `None` when nothing was left out.
    pub(crate) fn note(&self) -> Option<String> {
        let bounds = self.walk.map(|o| {
            format!(
                "at most {} entries and {} directory levels are listed",
                o.max_entries, o.max_depth
            )
        });
        let left = self.found.saturating_sub(self.shown);
        let cut = (left > 0).then(|| {
            format!(
                "{left} of the {} entries found are left out to keep the reply within \
                 {REPLY_LIMIT} bytes; {}",
                self.found, self.narrow
            )
        });
        match (bounds, cut) {
            (None, None) => None,
            (Some(bounds), None) => Some(format!("(results truncated: {bounds})")),
            (None, Some(cut)) => Some(format!("(results truncated: {cut})")),
            (Some(bounds), Some(cut)) => Some(format!("(results truncated: {bounds}, and {cut})")),
        }
    }

    /// `text` as the tool's result, with the note as a block of its own when something was
    /// left out: the first block stays what the tool answers (one path a line, or JSON that
    /// parses), mirrored in `structuredContent.content`.
    pub(crate) fn output(&self, text: String) -> Output {
        let Some(note) = self.note() else {
            return Output::Text(text);
        };
        let structured = json!({ "content": text });
        Output::Blocks {
            blocks: vec![ContentBlock::text(text), ContentBlock::text(note)],
            structured,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_fit_as_their_json_string_does() {
        let lines: Vec<String> = ["a", "b\"c", "\u{1}", "dd"]
            .into_iter()
            .map(String::from)
            .collect();
        for room in 0..30 {
            let n = lines_fitting(&lines, room);
            if n > 0 {
                assert!(json_len(&lines[..n].join("\n")) <= room, "{room}");
            }
            if n < lines.len() {
                assert!(json_len(&lines[..=n].join("\n")) > room, "{room}");
            }
        }
    }

    #[test]
    fn notes_say_what_was_left_out_and_why() {
        let options = WalkOptions::default()
            .with_max_entries(10)
            .with_max_depth(3);
        let cut = |walk, found, shown| Cut {
            walk,
            found,
            shown,
            narrow: "ask for less",
        };
        assert_eq!(cut(None, 5, 5).note(), None);
        assert_eq!(
            cut(Some(&options), 5, 5).note().unwrap(),
            "(results truncated: at most 10 entries and 3 directory levels are listed)"
        );
        assert_eq!(
            cut(None, 5, 2).note().unwrap(),
            format!(
                "(results truncated: 3 of the 5 entries found are left out to keep the reply \
                 within {REPLY_LIMIT} bytes; ask for less)"
            )
        );
        let both = cut(Some(&options), 10, 4).note().unwrap();
        assert!(
            both.contains("levels are listed, and 6 of the 10"),
            "{both}"
        );
    }
}
