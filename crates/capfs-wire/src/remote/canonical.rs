//! Replies to `fs/readDirectory` and `fs/getMetadata` in the one form a capfs server writes
//! them, read without serde.
//!
//! serde_json spends some 1,500 instructions on each entry of a listing (five strings, three
//! booleans, the map machinery around them): for 100 entries, more than the whole round trip
//! costs the client otherwise; and some 9,000 on a `getMetadata` reply, half of what the client
//! spends on the call. A capfs server writes these replies the same way every time, their
//! members in one order and without spaces, so the client reads that form directly: a few
//! comparisons a member and one allocation an entry. Anything else, an escape in a name,
//! another member, another order, another server's spacing, is left to serde
//! ([`super::reply::finish_with`]), which decodes it as before: for any reply read here, serde
//! would give the same value.

use crate::protocol::{DirectoryEntry, GetMetadataResponse, ReadDirectoryResponse};

/// The listing `reply` holds, when it is a result in the form a capfs server writes; `None`
/// for anything else (an error, another form), which the caller then decodes with serde.
pub(super) fn canonical_listing(reply: &str) -> Option<ReadDirectoryResponse> {
    let mut at = result(reply)?;
    at.eat(br#"{"entries":["#)?;
    let mut entries = Vec::new();
    if !at.eat_if(b"]") {
        loop {
            entries.push(entry(&mut at)?);
            if at.eat_if(b"]") {
                break;
            }
            at.eat(b",")?;
        }
    }
    let mut listing = ReadDirectoryResponse {
        entries,
        non_utf8_names_omitted: 0,
        truncated: false,
    };
    // The optional members, each present only when it says something (as the server skips
    // them), in the order the server writes them.
    if at.eat_if(br#","nonUtf8NamesOmitted":"#) {
        listing.non_utf8_names_omitted = at.integer()?;
        if listing.non_utf8_names_omitted == 0 {
            return None;
        }
    }
    if at.eat_if(br#","truncated":true"#) {
        listing.truncated = true;
    }
    at.eat(b"}}")?;
    at.0.is_empty().then_some(listing)
}

/// The metadata `reply` holds, when it is a result in the form a capfs server writes; `None`
/// for anything else, which the caller then decodes with serde.
pub(super) fn canonical_metadata(reply: &str) -> Option<GetMetadataResponse> {
    let mut at = result(reply)?;
    at.eat(br#"{"isDirectory":"#)?;
    let is_directory = at.boolean()?;
    at.eat(br#","isFile":"#)?;
    let is_file = at.boolean()?;
    at.eat(br#","isSymlink":"#)?;
    let is_symlink = at.boolean()?;
    at.eat(br#","size":"#)?;
    let size = at.integer()?;
    at.eat(br#","createdAtMs":"#)?;
    let created_at_ms = at.integer()?;
    at.eat(br#","modifiedAtMs":"#)?;
    let modified_at_ms = at.integer()?;
    at.eat(br#","accessedAtMs":"#)?;
    let accessed_at_ms = Some(at.integer()?);
    at.eat(br#","mode":"#)?;
    let mode = Some(at.integer()?);
    at.eat(b"}}")?;
    at.0.is_empty().then_some(GetMetadataResponse {
        is_directory,
        is_file,
        is_symlink,
        size,
        created_at_ms,
        modified_at_ms,
        accessed_at_ms,
        mode,
    })
}

/// What follows `{"id":N,"result":` in `reply`, a result to one of the client's calls as a
/// capfs server writes it.
fn result(reply: &str) -> Option<Cursor<'_>> {
    let mut at = Cursor(reply.as_bytes(), reply);
    at.eat(br#"{"id":"#)?;
    let digits = super::reply::id_digits(at.0)?;
    at.0 = &at.0[digits..];
    at.eat(br#","result":"#)?;
    Some(at)
}

/// `{"fileName":"NAME","isDirectory":B,"isFile":B,"isSymlink":B}`, the name without escapes.
fn entry(at: &mut Cursor<'_>) -> Option<DirectoryEntry> {
    at.eat(br#"{"fileName":""#)?;
    let len = at.0.iter().position(|&b| b == b'"')?;
    let name = &at.0[..len];
    // An escape or a control character (which JSON forbids raw in a string): serde's to judge.
    if name.iter().any(|&b| b == b'\\' || b < 0x20) {
        return None;
    }
    // The reply is UTF-8 and the name ends before an ASCII quote, so it is UTF-8 too.
    let file_name = at.text(len)?.to_string();
    at.0 = &at.0[len + 1..];
    at.eat(br#","isDirectory":"#)?;
    let is_directory = at.boolean()?;
    at.eat(br#","isFile":"#)?;
    let is_file = at.boolean()?;
    at.eat(br#","isSymlink":"#)?;
    let is_symlink = at.boolean()?;
    at.eat(b"}")?;
    Some(DirectoryEntry {
        file_name,
        is_directory,
        is_file,
        is_symlink,
    })
}

/// What is left of the reply, and the reply itself.
struct Cursor<'a>(&'a [u8], &'a str);

impl<'a> Cursor<'a> {
    /// The next `len` bytes as text: a slice of the reply, which is UTF-8 already (`None` if
    /// they do not end on a character's boundary).
    fn text(&self, len: usize) -> Option<&'a str> {
        let start = self.1.len() - self.0.len();
        self.1.get(start..start + len)
    }

    /// Skips `expected`, which must come next.
    fn eat(&mut self, expected: &[u8]) -> Option<()> {
        self.0 = self.0.strip_prefix(expected)?;
        Some(())
    }

    /// Skips `expected` if it comes next.
    fn eat_if(&mut self, expected: &[u8]) -> bool {
        self.eat(expected).is_some()
    }

    fn boolean(&mut self) -> Option<bool> {
        if self.eat_if(b"true") {
            Some(true)
        } else if self.eat_if(b"false") {
            Some(false)
        } else {
            None
        }
    }

    /// An integer as the server writes it: an optional minus, then digits without a leading
    /// zero (but `0` itself), at most 20 of them; `None` for any other form, and for a value
    /// `T` cannot hold.
    fn integer<T: TryFrom<i128>>(&mut self) -> Option<T> {
        let negative = self.0.first() == Some(&b'-');
        let digits = &self.0[usize::from(negative)..];
        let len = digits.iter().take_while(|b| b.is_ascii_digit()).count();
        if !(1..=20).contains(&len) || (digits[0] == b'0' && (len > 1 || negative)) {
            return None;
        }
        // Twenty digits fit an i128 whatever they are.
        let magnitude = digits[..len]
            .iter()
            .fold(0i128, |n, d| n * 10 + i128::from(d - b'0'));
        self.0 = &digits[len..];
        T::try_from(if negative { -magnitude } else { magnitude }).ok()
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::remote::reply::finish;

    fn by_serde(reply: &str) -> Option<ReadDirectoryResponse> {
        finish(
            "fs/readDirectory",
            Ok(Bytes::copy_from_slice(reply.as_bytes())),
        )
        .ok()
    }

    /// What a capfs server writes is read without serde, into what serde reads from it.
    #[test]
    fn canonical_listings_are_read_as_serde_reads_them() {
        let entry = |name: &str, kind: &str| {
            let (d, f, l) = match kind {
                "d" => (true, false, false),
                "f" => (false, true, false),
                _ => (false, false, true),
            };
            format!(r#"{{"fileName":"{name}","isDirectory":{d},"isFile":{f},"isSymlink":{l}}}"#)
        };
        let many: Vec<String> = (0..100)
            .map(|i| entry(&format!("entry-{i:03}.txt"), "f"))
            .collect();
        for reply in [
            r#"{"id":1,"result":{"entries":[]}}"#.to_string(),
            format!(
                r#"{{"id":7,"result":{{"entries":[{},{},{}]}}}}"#,
                entry("a.txt", "f"),
                entry("sub", "d"),
                entry("link", "l")
            ),
            format!(
                r#"{{"id":123456789012345678,"result":{{"entries":[{}]}}}}"#,
                entry("é ü 名前 🙂", "f")
            ),
            format!(r#"{{"id":2,"result":{{"entries":[{}]}}}}"#, many.join(",")),
            format!(
                r#"{{"id":3,"result":{{"entries":[{}],"nonUtf8NamesOmitted":2}}}}"#,
                entry(".hidden", "f")
            ),
            format!(
                r#"{{"id":4,"result":{{"entries":[{}],"truncated":true}}}}"#,
                entry("x", "d")
            ),
            format!(
                r#"{{"id":5,"result":{{"entries":[{}],"nonUtf8NamesOmitted":10,"truncated":true}}}}"#,
                entry("..", "d")
            ),
        ] {
            let fast = canonical_listing(&reply);
            assert!(fast.is_some(), "{reply}");
            assert_eq!(fast, by_serde(&reply), "{reply}");
        }
    }

    fn metadata_by_serde(reply: &str) -> Option<GetMetadataResponse> {
        finish(
            "fs/getMetadata",
            Ok(Bytes::copy_from_slice(reply.as_bytes())),
        )
        .ok()
    }

    /// Metadata as a capfs server writes it is read as serde reads it; any other form is left
    /// to serde.
    #[test]
    fn canonical_metadata_is_read_as_serde_reads_it() {
        let reply = |fields: &str| format!(r#"{{"id":2,"result":{{{fields}}}}}"#);
        for fields in [
            r#""isDirectory":false,"isFile":true,"isSymlink":false,"size":2,"createdAtMs":1796371857897,"modifiedAtMs":1796371857897,"accessedAtMs":1796371857897,"mode":420"#,
            r#""isDirectory":true,"isFile":false,"isSymlink":true,"size":0,"createdAtMs":0,"modifiedAtMs":-1,"accessedAtMs":-9223372036854775808,"mode":4294967295"#,
            r#""isDirectory":false,"isFile":false,"isSymlink":false,"size":18446744073709551615,"createdAtMs":9223372036854775807,"modifiedAtMs":5,"accessedAtMs":0,"mode":0"#,
        ] {
            let reply = reply(fields);
            let fast = canonical_metadata(&reply);
            assert!(fast.is_some(), "{reply}");
            assert_eq!(fast, metadata_by_serde(&reply), "{reply}");
        }
        for fields in [
            // Out of range, another form of number, a float.
            r#""isDirectory":false,"isFile":true,"isSymlink":false,"size":-1,"createdAtMs":0,"modifiedAtMs":0,"accessedAtMs":0,"mode":0"#,
            r#""isDirectory":false,"isFile":true,"isSymlink":false,"size":1,"createdAtMs":0,"modifiedAtMs":0,"accessedAtMs":0,"mode":4294967296"#,
            r#""isDirectory":false,"isFile":true,"isSymlink":false,"size":1,"createdAtMs":9223372036854775808,"modifiedAtMs":0,"accessedAtMs":0,"mode":0"#,
            r#""isDirectory":false,"isFile":true,"isSymlink":false,"size":01,"createdAtMs":0,"modifiedAtMs":0,"accessedAtMs":0,"mode":0"#,
            r#""isDirectory":false,"isFile":true,"isSymlink":false,"size":1,"createdAtMs":-0,"modifiedAtMs":0,"accessedAtMs":0,"mode":0"#,
            r#""isDirectory":false,"isFile":true,"isSymlink":false,"size":1.5,"createdAtMs":0,"modifiedAtMs":0,"accessedAtMs":0,"mode":0"#,
            r#""isDirectory":false,"isFile":true,"isSymlink":false,"size":1e3,"createdAtMs":0,"modifiedAtMs":0,"accessedAtMs":0,"mode":0"#,
            // Another server's: without capfs's members, or with null for them.
            r#""isDirectory":false,"isFile":true,"isSymlink":false,"size":1,"createdAtMs":0,"modifiedAtMs":0"#,
            r#""isDirectory":false,"isFile":true,"isSymlink":false,"size":1,"createdAtMs":0,"modifiedAtMs":0,"accessedAtMs":null,"mode":null"#,
            r#""isDirectory":false,"isFile":true"#,
            // Another order, an extra member.
            r#""isFile":true,"isDirectory":false,"isSymlink":false,"size":1,"createdAtMs":0,"modifiedAtMs":0,"accessedAtMs":0,"mode":0"#,
            r#""isDirectory":false,"isFile":true,"isSymlink":false,"size":1,"createdAtMs":0,"modifiedAtMs":0,"accessedAtMs":0,"mode":0,"x":1"#,
        ] {
            assert_eq!(canonical_metadata(&reply(fields)), None, "{fields}");
        }
    }

    /// Anything else is left to serde, whatever serde then makes of it.
    #[test]
    fn other_forms_are_left_to_serde() {
        let entry = r#"{"fileName":"a","isDirectory":false,"isFile":true,"isSymlink":false}"#;
        for reply in [
            // An escape in a name, a raw control character, a raw quote cutting it short.
            r#"{"id":1,"result":{"entries":[{"fileName":"a\"b","isDirectory":false,"isFile":true,"isSymlink":false}]}}"#.to_string(),
            r#"{"id":1,"result":{"entries":[{"fileName":"a\u0041","isDirectory":false,"isFile":true,"isSymlink":false}]}}"#.to_string(),
            "{\"id\":1,\"result\":{\"entries\":[{\"fileName\":\"a\tb\",\"isDirectory\":false,\"isFile\":true,\"isSymlink\":false}]}}".to_string(),
            // Spaces, another order, a missing or an extra member, a null.
            format!(r#"{{"id":1, "result":{{"entries":[{entry}]}}}}"#),
            format!(r#"{{"result":{{"entries":[{entry}]}},"id":1}}"#),
            r#"{"id":1,"result":{"entries":[{"isDirectory":false,"fileName":"a","isFile":true,"isSymlink":false}]}}"#.to_string(),
            r#"{"id":1,"result":{"entries":[{"fileName":"a","isDirectory":false,"isFile":true}]}}"#.to_string(),
            r#"{"id":1,"result":{"entries":[{"fileName":"a","isDirectory":false,"isFile":true,"isSymlink":false,"size":1}]}}"#.to_string(),
            r#"{"id":1,"result":{"entries":[{"fileName":null,"isDirectory":false,"isFile":true,"isSymlink":false}]}}"#.to_string(),
            format!(r#"{{"id":1,"result":{{"entries":[{entry}],"truncated":false}}}}"#),
            format!(r#"{{"id":1,"result":{{"entries":[{entry}],"nonUtf8NamesOmitted":0}}}}"#),
            format!(r#"{{"id":1,"result":{{"entries":[{entry}],"nonUtf8NamesOmitted":01}}}}"#),
            format!(r#"{{"id":1,"result":{{"entries":[{entry}],"truncated":true,"nonUtf8NamesOmitted":1}}}}"#),
            format!(r#"{{"id":1,"result":{{"entries":[{entry},]}}}}"#),
            format!(r#"{{"id":1,"result":{{"entries":[{entry}]}}}} "#),
            format!(r#"{{"id":1,"result":{{"entries":[{entry}]}},"jsonrpc":"2.0"}}"#),
            // Errors, strings for ids, ids too long to be ours.
            r#"{"id":1,"error":{"code":-32600,"message":"nope"}}"#.to_string(),
            format!(r#"{{"id":"1","result":{{"entries":[{entry}]}}}}"#),
            format!(r#"{{"id":1234567890123456789,"result":{{"entries":[{entry}]}}}}"#),
            format!(r#"{{"id":09,"result":{{"entries":[{entry}]}}}}"#),
            format!(r#"{{"id":00,"result":{{"entries":[{entry}]}}}}"#),
            format!(r#"{{"id":1,"result":{{"entries":[{entry}]}}"#),
        ] {
            assert_eq!(canonical_listing(&reply), None, "{reply}");
        }
    }

    /// Whatever a hostile server sends, the fast path reads a reply as serde reads it or leaves
    /// it to serde: canonical replies edited at random (characters JSON cares about inserted,
    /// spans cut) are never read into anything serde would not make of them.
    mod edited {
        use proptest::prelude::*;

        use super::*;

        const LISTING: &str = r#"{"id":9,"result":{"entries":[{"fileName":"a.txt","isDirectory":false,"isFile":true,"isSymlink":false},{"fileName":"dé","isDirectory":true,"isFile":false,"isSymlink":false}],"nonUtf8NamesOmitted":3,"truncated":true}}"#;
        const METADATA: &str = r#"{"id":9,"result":{"isDirectory":false,"isFile":true,"isSymlink":false,"size":42,"createdAtMs":17,"modifiedAtMs":-5,"accessedAtMs":0,"mode":420}}"#;

        /// `text` with each edit applied: insert a piece at a character position, or cut the
        /// characters between two positions.
        fn edit(text: &str, edits: &[(bool, usize, usize, &str)]) -> String {
            let mut chars: Vec<char> = text.chars().collect();
            for &(insert, at, len, piece) in edits {
                let at = at % (chars.len() + 1);
                if insert {
                    chars.splice(at..at, piece.chars());
                } else {
                    let end = (at + len % 8).min(chars.len());
                    chars.drain(at..end);
                }
            }
            chars.into_iter().collect()
        }

        fn edits() -> impl Strategy<Value = Vec<(bool, usize, usize, &'static str)>> {
            let piece = prop::sample::select(vec![
                "\"",
                "\\",
                ",",
                ":",
                "{",
                "}",
                "[",
                "]",
                " ",
                "0",
                "1",
                "9",
                "-",
                ".",
                "e",
                "true",
                "false",
                "null",
                "\t",
                "\u{1}",
                "é",
                "🙂",
                "\\u0041",
                "00",
                "99999999999999999999",
                r#""x":1"#,
            ]);
            prop::collection::vec((any::<bool>(), any::<usize>(), any::<usize>(), piece), 1..4)
        }

        proptest! {
            #[test]
            fn an_edited_listing_is_read_as_serde_reads_it_or_left_to_serde(e in edits()) {
                let reply = edit(LISTING, &e);
                if let Some(fast) = canonical_listing(&reply) {
                    prop_assert_eq!(Some(fast), by_serde(&reply), "{}", reply);
                }
            }

            #[test]
            fn edited_metadata_is_read_as_serde_reads_it_or_left_to_serde(e in edits()) {
                let reply = edit(METADATA, &e);
                if let Some(fast) = canonical_metadata(&reply) {
                    prop_assert_eq!(Some(fast), metadata_by_serde(&reply), "{}", reply);
                }
            }
        }
    }
}
