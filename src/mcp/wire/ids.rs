//! Reading a request's id from the ends of a line too long to keep, and repairing lone UTF-16
//! surrogate escapes, without parsing the whole line.

use serde_json::Value;

/// The top-level `id` of a JSON object line whose first bytes are `head` and last bytes
/// `tail`: found as a member of the top-level object in `head`, or as its last member
/// (`,"id":V}`) at the end of `tail`. `None` when neither shows it.
pub(super) fn request_id(head: &[u8], tail: &[u8]) -> Option<Value> {
    id_in_head(head).or_else(|| id_at_end(tail))
}

/// An id: a number or a string.
fn as_id(token: &[u8]) -> Option<Value> {
    match serde_json::from_slice::<Value>(token).ok()? {
        v @ (Value::Number(_) | Value::String(_)) => Some(v),
        _ => None,
    }
}

/// The end (exclusive) of the JSON string starting at `start` (a `"`), if it ends in `data`.
fn string_end(data: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < data.len() {
        match data[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

fn id_in_head(head: &[u8]) -> Option<Value> {
    let mut depth = 0usize;
    // At depth 1, whether the next string is a member name.
    let mut at_key = false;
    let mut i = 0;
    while i < head.len() {
        match head[i] {
            b'"' => {
                let end = string_end(head, i)?;
                if depth == 1 && at_key && &head[i..end] == b"\"id\"" {
                    let mut j = end;
                    while head.get(j).is_some_and(u8::is_ascii_whitespace) {
                        j += 1;
                    }
                    if head.get(j) != Some(&b':') {
                        return None;
                    }
                    j += 1;
                    while head.get(j).is_some_and(u8::is_ascii_whitespace) {
                        j += 1;
                    }
                    let value_end = match head.get(j)? {
                        b'"' => string_end(head, j)?,
                        _ => {
                            let len = head[j..]
                                .iter()
                                .take_while(|b| b.is_ascii_digit() || b"-+.eE".contains(b))
                                .count();
                            j + len
                        }
                    };
                    return as_id(&head[j..value_end]);
                }
                at_key = false;
                i = end;
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                at_key = depth == 1;
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' => at_key = depth == 1,
            _ => {}
        }
        i += 1;
    }
    None
}

fn id_at_end(tail: &[u8]) -> Option<Value> {
    let trimmed = tail.trim_ascii_end();
    let body = trimmed.strip_suffix(b"}")?.trim_ascii_end();
    // The value: a string (back to its unescaped opening quote) or a number.
    let start = if body.last() == Some(&b'"') {
        let mut k = body.len() - 1;
        loop {
            k = body[..k].iter().rposition(|b| *b == b'"')?;
            let backslashes = body[..k].iter().rev().take_while(|b| **b == b'\\').count();
            if backslashes % 2 == 0 {
                break k;
            }
        }
    } else {
        let len = body
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_digit() || b"-+.eE".contains(b))
            .count();
        body.len() - len
    };
    let value = &body[start..];
    let before = body[..start].trim_ascii_end().strip_suffix(b":")?;
    let before = before.trim_ascii_end().strip_suffix(b"\"id\"")?;
    match before.trim_ascii_end().last() {
        Some(b',' | b'{') => as_id(value),
        _ => None,
    }
}

/// `line` with every `\uD800`-`\uDFFF` escape that is not half of a pair replaced by
/// `\ufffd`; `None` when it has none. Escapes are only looked for after a backslash that is not
/// itself escaped, so `\\ud800` (a backslash, then text) is left alone.
pub(super) fn replace_lone_surrogates(line: &[u8]) -> Option<Vec<u8>> {
    let unit = |at: usize| -> Option<u16> {
        let hex = line.get(at..at + 4)?;
        u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
    };
    let escape_at = |at: usize| line.get(at) == Some(&b'\\') && line.get(at + 1) == Some(&b'u');
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < line.len() {
        if line[i] != b'\\' {
            i += 1;
            continue;
        }
        if line.get(i + 1) != Some(&b'u') {
            i += 2;
            continue;
        }
        let Some(u) = unit(i + 2) else {
            i += 2;
            continue;
        };
        let lone = match u {
            0xD800..=0xDBFF => {
                let pair =
                    escape_at(i + 6) && unit(i + 8).is_some_and(|l| (0xDC00..=0xDFFF).contains(&l));
                if pair {
                    i += 12;
                    continue;
                }
                true
            }
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            let buf = out.get_or_insert_with(|| Vec::with_capacity(line.len()));
            buf.extend_from_slice(&line[copied..i]);
            buf.extend_from_slice(b"\\ufffd");
            copied = i + 6;
        }
        i += 6;
    }
    out.map(|mut buf| {
        buf.extend_from_slice(&line[copied..]);
        buf
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_are_read_from_either_end() {
        let line = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"id":9}}"#;
        assert_eq!(request_id(&line[..30], b""), Some(json!(7)));
        let line = br#"{"method":"tools/call","params":{"arguments":{"content":"xx"}},"jsonrpc":"2.0","id":42}"#;
        assert_eq!(
            request_id(&line[..20], &line[line.len() - 30..]),
            Some(json!(42))
        );
        let line = br#"{"method":"m","params":{"a":"x"},"id":"abc"}"#;
        assert_eq!(request_id(&line[..12], line), Some(json!("abc")));
        // An id inside the params, or inside a string, is not the request's.
        let line = br#"{"method":"m","params":{"id":5}}"#;
        assert_eq!(request_id(&line[..10], line), None);
        let line = br#"{"method":"m","params":"q\",\"id\":5"}"#;
        assert_eq!(request_id(&line[..10], line), None);
        assert_eq!(request_id(b"not json", b"at all"), None);
    }

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let fix =
            |s: &str| replace_lone_surrogates(s.as_bytes()).map(|v| String::from_utf8(v).unwrap());
        assert_eq!(
            fix(r#"{"a":"x\ud800y"}"#).as_deref(),
            Some(r#"{"a":"x\ufffdy"}"#)
        );
        assert_eq!(
            fix(r#"{"a":"\udc00\ud83d"}"#).as_deref(),
            Some(r#"{"a":"\ufffd\ufffd"}"#)
        );
        assert_eq!(fix(r#"{"a":"\ud83d\ude00 ok"}"#), None);
        assert_eq!(fix(r#"{"a":"\\ud800"}"#), None);
        assert_eq!(fix(r#"{"a":"\u0041"}"#), None);
        let fixed = fix(r#"{"a":"\ud800\ud83d\ude00"}"#).unwrap();
        let v: serde_json::Value = serde_json::from_str(&fixed).unwrap();
        assert_eq!(v["a"], "\u{fffd}\u{1f600}");
    }
}
