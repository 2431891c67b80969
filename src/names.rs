//! Everything the client prints that it did not write itself (names, link texts, a server's
//! error messages and HTTP bodies) goes through this file, which decides in one place
//! (`capfs::terminal::is_unsafe`, shared with the audit log) which characters never reach the
//! terminal raw: control characters (C0, DEL, C1 such as U+009B, the 8-bit CSI), the
//! bidirectional controls (U+202E and the rest, which make a name read backwards) and the line
//! and paragraph separators.
//!
//! - Names are quoted and escaped the way GNU `ls` shows them (`'a b'`, `'a'$'\n''b'`,
//!   `$'\033'[31m`), so a shown name can be pasted back into a shell ([`escape`], [`quote`]).
//! - Free text (an error's reason, which may name a path or carry a server's message) keeps
//!   its words and gets each unsafe character as a backslash escape ([`sanitize`]).
//! - JSON output escapes them as `\uXXXX`, which JSON readers decode back ([`to_json`]).

use std::fmt::Write;
use std::io;

use capfs::terminal::TerminalSafe;
use capfs::terminal::is_unsafe;

/// Characters that make a shell read a name differently: the name is quoted when it has one.
const SHELL_SPECIAL: &[char] = &[
    ' ', '!', '"', '$', '&', '\'', '(', ')', '*', ';', '<', '>', '?', '[', '\\', ']', '^', '`',
    '{', '|', '}',
];

/// The escape an unsafe character is shown as: `\n`, `\t`, `\r`, `\NNN` (octal) for the
/// other ASCII controls and DEL, `\uXXXX` beyond ASCII (as bash reads them in `$'...'`: `\233`
/// would be the byte 0x9B, not U+009B).
fn push_escape(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        c if c.is_ascii() => {
            let _ = write!(out, "\\{:03o}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
    }
}

/// Free text as it may be printed: each unsafe character replaced by its escape, the rest as
/// it is.
pub fn sanitize(text: &str) -> String {
    if !text.chars().any(is_unsafe) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unsafe(c) {
            push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// Writes `value` as pretty JSON with every unsafe character escaped as `\uXXXX` (JSON itself
/// escapes only C0 controls), so the document is safe on a terminal and decodes to the same
/// values.
pub fn to_json(out: &mut impl io::Write, value: &impl serde::Serialize) -> io::Result<()> {
    let mut serializer = serde_json::Serializer::with_formatter(out, TerminalSafe::pretty());
    value.serialize(&mut serializer).map_err(io::Error::other)
}

/// A name as shown in listings: as it is when it is plain, else quoted and escaped.
pub fn escape(name: &[u8]) -> String {
    let text = match std::str::from_utf8(name) {
        Ok(text) if !text.chars().any(is_unsafe) => text,
        _ => return escape_with_controls(name),
    };
    let needs_quotes = text.is_empty()
        || text.starts_with(['#', '~'])
        || text.contains(SHELL_SPECIAL)
        || text.contains('=') && !text.contains('/');
    if !needs_quotes {
        return text.to_string();
    }
    single_quoted(text)
}

/// A path as quoted in messages (`cannot stat '/ws/x'`): always in quotes, escaped as in
/// listings when it holds control characters.
pub fn quote(path: &str) -> String {
    if path.chars().any(is_unsafe) {
        return escape_with_controls(path.as_bytes());
    }
    single_quoted(path)
}

/// A path's bytes as quoted in messages: as [`quote`] quotes text, and escaped as in listings
/// when they are not UTF-8 (a lossy rendering would name another entry).
pub fn quote_bytes(path: &[u8]) -> String {
    match std::str::from_utf8(path) {
        Ok(text) => quote(text),
        Err(_) => escape_with_controls(path),
    }
}

fn single_quoted(text: &str) -> String {
    if text.contains('\'') {
        // 'it'\''s': close the quotes, an escaped quote, reopen.
        let mut out = String::from("'");
        out.push_str(&text.replace('\'', "'\\''"));
        out.push('\'');
        // GNU prints a name holding only single quotes in double quotes; either form pastes
        // back, and this one stays uniform.
        return out;
    }
    format!("'{text}'")
}

/// Quoted runs of printable text, and `$'...'` runs for control characters and bytes that are
/// not UTF-8.
fn escape_with_controls(name: &[u8]) -> String {
    let mut out = String::new();
    let mut plain = String::new();
    let mut special = String::new();
    let flush_plain = |out: &mut String, plain: &mut String| {
        if !plain.is_empty() {
            out.push_str(&single_quoted(plain));
            plain.clear();
        }
    };
    let flush_special = |out: &mut String, special: &mut String| {
        if !special.is_empty() {
            let _ = write!(out, "$'{special}'");
            special.clear();
        }
    };
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            if is_unsafe(c) {
                flush_plain(&mut out, &mut plain);
                push_escape(&mut special, c);
            } else {
                flush_special(&mut out, &mut special);
                plain.push(c);
            }
        }
        if !chunk.invalid().is_empty() {
            flush_plain(&mut out, &mut plain);
            for byte in chunk.invalid() {
                let _ = write!(special, "\\{byte:03o}");
            }
        }
    }
    flush_plain(&mut out, &mut plain);
    flush_special(&mut out, &mut special);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_stay_as_they_are() {
        assert_eq!(escape(b"a.txt"), "a.txt");
        assert_eq!(escape("ünï".as_bytes()), "ünï");
    }

    #[test]
    fn names_a_shell_would_split_are_quoted() {
        assert_eq!(escape(b"a b"), "'a b'");
        assert_eq!(escape(b"it's"), "'it'\\''s'");
    }

    #[test]
    fn control_characters_and_bad_bytes_are_escaped() {
        assert_eq!(escape(b"a\nb"), "'a'$'\\n''b'");
        assert_eq!(escape(b"\x1b[31mred"), "$'\\033''[31mred'");
        assert_eq!(escape(b"x\xffy"), "'x'$'\\377''y'");
        for shown in [escape(b"\x1b]0;title\x07"), quote("/ws/\x1b")] {
            assert!(!shown.chars().any(char::is_control), "{shown:?}");
        }
    }

    #[test]
    fn c1_del_and_bidi_controls_are_escaped_everywhere() {
        assert_eq!(escape("a\u{9b}b".as_bytes()), "'a'$'\\u009b''b'");
        assert_eq!(escape(b"del\x7f"), "'del'$'\\177'");
        assert_eq!(escape("x\u{202e}txt".as_bytes()), "'x'$'\\u202e''txt'");
        assert_eq!(quote("/ws/\u{2066}"), "'/ws/'$'\\u2066'");
        assert_eq!(
            sanitize("/ws/\u{1b}]0;t\u{7}: \u{202e}denied"),
            "/ws/\\033]0;t\\007: \\u202edenied"
        );
        assert_eq!(sanitize("plain ünï"), "plain ünï");
        assert_eq!(quote_bytes(b"/ws/bad\xff"), "'/ws/bad'$'\\377'");
        assert_eq!(
            quote_bytes("/ws/bad\u{fffd}".as_bytes()),
            "'/ws/bad\u{fffd}'"
        );
    }
}
