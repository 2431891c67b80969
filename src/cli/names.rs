//! Names as they are shown: quoted and escaped the way GNU `ls` shows them on a terminal
//! (`'a b'`, `'a'$'\n''b'`, `$'\033'[31m`), so that a name never writes control characters or
//! escape sequences to the terminal, and a shown name can be pasted back into a shell.

use std::fmt::Write;

/// Characters that make a shell read a name differently: the name is quoted when it has one.
const SHELL_SPECIAL: &[char] = &[
    ' ', '!', '"', '$', '&', '\'', '(', ')', '*', ';', '<', '>', '?', '[', '\\', ']', '^', '`',
    '{', '|', '}',
];

/// A name as shown in listings: as it is when it is plain, else quoted and escaped.
pub fn escape(name: &[u8]) -> String {
    let text = match std::str::from_utf8(name) {
        Ok(text) if !text.chars().any(char::is_control) => text,
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
    if path.chars().any(char::is_control) {
        return escape_with_controls(path.as_bytes());
    }
    single_quoted(path)
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
            if c.is_control() {
                flush_plain(&mut out, &mut plain);
                match c {
                    '\n' => special.push_str("\\n"),
                    '\t' => special.push_str("\\t"),
                    '\r' => special.push_str("\\r"),
                    c if (c as u32) < 0x100 => {
                        let _ = write!(special, "\\{:03o}", c as u32);
                    }
                    c => {
                        let _ = write!(special, "\\u{:04x}", c as u32);
                    }
                }
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
}
