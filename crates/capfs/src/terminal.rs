//! Which characters may reach a terminal raw, decided in one place for everything capfs prints
//! or logs that it did not write itself (names, link texts, a server's messages, audit lines).
//!
//! Unsafe are the control characters (C0, DEL, and C1 such as U+009B, the 8-bit CSI), the
//! bidirectional controls (U+202E and the rest, which make a name read backwards) and the line
//! and paragraph separators. The `capfs` client shows them escaped; JSON that capfs writes
//! (`ls --json`, the audit log) carries them as `\uXXXX`, which every JSON reader decodes back.
//!
//! # Examples
//!
//! ```
//! use capfs::terminal::{TerminalSafe, is_unsafe};
//!
//! assert!(is_unsafe('\u{202e}') && is_unsafe('\u{9b}') && !is_unsafe('é'));
//! let mut out = Vec::new();
//! let mut json = serde_json::Serializer::with_formatter(&mut out, TerminalSafe::compact());
//! serde::Serialize::serialize("a\u{9b}b", &mut json).unwrap();
//! assert_eq!(out, br#""a\u009bb""#);
//! ```

use std::io;

use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};

/// True for a character that must not reach a terminal raw: a control character (C0, DEL,
/// C1), a bidirectional control, or a line or paragraph separator. All of them are in the
/// Basic Multilingual Plane.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// A serde_json formatter that writes every [`is_unsafe`] character of a string as `\uXXXX`
/// (serde_json escapes only C0 controls), around a compact or pretty formatter.
#[derive(Clone, Debug)]
pub struct TerminalSafe<F>(F);

impl TerminalSafe<CompactFormatter> {
    /// Compact output, as `serde_json::to_writer` writes it.
    pub fn compact() -> Self {
        Self(CompactFormatter)
    }
}

impl TerminalSafe<PrettyFormatter<'static>> {
    /// Indented output, as `serde_json::to_writer_pretty` writes it.
    pub fn pretty() -> Self {
        Self(PrettyFormatter::new())
    }
}

impl<F: Formatter> Formatter for TerminalSafe<F> {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (at, c) in fragment.char_indices() {
            if is_unsafe(c) {
                writer.write_all(&fragment.as_bytes()[start..at])?;
                write!(writer, "\\u{:04x}", c as u32)?;
                start = at + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_what_it_would_leave_raw_and_decodes_back() {
        let names = [
            "a\u{9b}b",
            "del\u{7f}",
            "rtl\u{202e}",
            "nl\n",
            "ünï",
            "\u{2029}",
        ];
        for pretty in [false, true] {
            let mut out = Vec::new();
            if pretty {
                let mut json =
                    serde_json::Serializer::with_formatter(&mut out, TerminalSafe::pretty());
                serde::Serialize::serialize(&names, &mut json).unwrap();
            } else {
                let mut json =
                    serde_json::Serializer::with_formatter(&mut out, TerminalSafe::compact());
                serde::Serialize::serialize(&names, &mut json).unwrap();
            }
            let text = String::from_utf8(out).unwrap();
            assert!(!text.chars().any(|c| is_unsafe(c) && c != '\n'), "{text:?}");
            assert!(
                text.contains(r"a\u009bb") && text.contains(r"rtl\u202e"),
                "{text}"
            );
            assert_eq!(pretty, text.contains('\n'));
            let back: Vec<String> = serde_json::from_str(&text).unwrap();
            assert_eq!(back, names);
        }
    }
}
