//! How an audit line is bounded: the limits on each field, the cut with its marker, and the
//! paths of a request as sent.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Serialize;
use serde_json::value::RawValue;

use super::AuditRecord;

/// Longest error message in a line, in characters; the rest is cut (with a marker), so a
/// hostile request cannot make the log carry large attacker-chosen text.
const MAX_ERROR_CHARS: usize = 200;
/// Longest text of any other field in a line (a method name, each path), in characters.
const MAX_FIELD_CHARS: usize = 1_000;
/// Most paths in a line; a last entry says how many more were left out.
const MAX_PATHS: usize = 8;

/// An [`AuditRecord`] as it is written, every text bounded.
#[derive(Serialize)]
struct Line<'a> {
    time: Cow<'a, str>,
    connection: u64,
    peer: Cow<'a, str>,
    method: Cow<'a, str>,
    paths: Vec<Cow<'a, str>>,
    outcome: Cow<'a, str>,
    denied: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Cow<'a, str>>,
    bytes: u64,
    micros: u64,
}

impl Serialize for AuditRecord<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut paths: Vec<Cow<'_, str>> = self
            .paths
            .iter()
            .take(MAX_PATHS)
            .map(|p| cut(p, MAX_FIELD_CHARS))
            .collect();
        if self.paths.len() > MAX_PATHS {
            paths.push(Cow::Owned(format!(
                "…[cut {} paths]",
                self.paths.len() - MAX_PATHS
            )));
        }
        Line {
            time: cut(&self.time, MAX_FIELD_CHARS),
            connection: self.connection,
            peer: cut(self.peer, MAX_FIELD_CHARS),
            method: cut(self.method, MAX_FIELD_CHARS),
            paths,
            outcome: cut(self.outcome, MAX_FIELD_CHARS),
            denied: self.denied,
            code: self.code,
            error: self.error.as_deref().map(|e| cut(e, MAX_ERROR_CHARS)),
            bytes: self.bytes,
            micros: self.micros,
        }
        .serialize(serializer)
    }
}

/// `text` cut as a path of a line is, to be kept until the line is written: a huge path is not
/// copied whole.
pub(crate) fn cut_path(text: &str) -> String {
    cut(text, MAX_FIELD_CHARS).into_owned()
}

/// The paths a request names as sent, each cut as a line cuts it, then `link_target` (where a
/// new link points: a link to `/etc/shadow` shows where it points).
pub(crate) fn note_paths<'a>(
    paths: impl Iterator<Item = Cow<'a, str>>,
    link_target: Option<&str>,
) -> Vec<String> {
    paths
        .map(|path| cut_path(&path))
        .chain(link_target.map(cut_path))
        .collect()
}

/// The members of params that name a path, in the order an audit line lists them: a link's
/// `target` is one, so that a link to `/etc/shadow` shows where it points.
const PATH_MEMBERS: [&str; 4] = ["path", "sourcePath", "destinationPath", "target"];

/// The paths params name as sent, whether or not they decode (the audit line of a request
/// refused before its params were read, or whose params did not parse): each path member that
/// is a string, as it is, and any other as its JSON text.
pub(crate) fn sent_paths(raw: Option<&RawValue>) -> Vec<String> {
    let members = raw.map(|r| serde_json::from_str::<HashMap<String, &RawValue>>(r.get()));
    let Some(Ok(members)) = members else {
        return Vec::new();
    };
    PATH_MEMBERS
        .iter()
        .filter_map(|key| members.get(*key))
        .map(|value| match serde_json::from_str::<String>(value.get()) {
            Ok(text) => cut_path(&text),
            Err(_) => cut_path(value.get()),
        })
        .collect()
}

/// `text` cut to `max` characters, with `…[cut N bytes]` for the N bytes left out; `text`
/// itself when it is short enough, or when it is what a cut to `max` gave already (the paths
/// [`cut_path`] keeps are cut once more when their line is written).
pub(crate) fn cut(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        Some((end, _)) if !is_cut_marker(&text[end..]) => {
            Cow::Owned(format!("{}…[cut {} bytes]", &text[..end], text.len() - end))
        }
        _ => Cow::Borrowed(text),
    }
}

/// True for the end of a cut text: `…[cut N bytes]` and nothing else.
fn is_cut_marker(rest: &str) -> bool {
    rest.strip_prefix("…[cut ")
        .and_then(|r| r.strip_suffix(" bytes]"))
        .is_some_and(|n| !n.is_empty() && n.len() <= 20 && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::*;
    use crate::protocol::ErrorObject;

    #[test]
    fn paths_are_kept_as_sent_and_cut_once() {
        let long = "x".repeat(5_000);
        let expected = format!("{}…[cut 4000 bytes]", "x".repeat(MAX_FIELD_CHARS));
        let noted = note_paths(
            [Cow::Borrowed(long.as_str())].into_iter(),
            Some("/etc/shadow"),
        );
        assert_eq!(noted, [expected.clone(), "/etc/shadow".to_string()]);
        // Cut once: writing the line keeps the cut path as it is.
        assert_eq!(cut(&expected, MAX_FIELD_CHARS), expected);
    }

    fn raw_params(value: &Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(value).unwrap()
    }

    #[test]
    fn sent_paths_are_listed_as_sent_whether_or_not_they_parse() {
        let params = json!({
            "path": "relative/x",
            "sourcePath": 7,
            "destinationPath": {"a": ["/b"]},
            "other": "/not-a-path",
        });
        assert_eq!(
            sent_paths(Some(&raw_params(&params))),
            ["relative/x", "7", r#"{"a":["/b"]}"#]
        );
        let link = json!({"path": "/ws/link", "target": "/etc/shadow"});
        assert_eq!(
            sent_paths(Some(&raw_params(&link))),
            ["/ws/link", "/etc/shadow"]
        );
        assert!(sent_paths(None).is_empty());
        assert!(sent_paths(Some(&raw_params(&json!(["/x"])))).is_empty());
    }

    #[test]
    fn every_field_of_a_line_is_bounded_and_a_link_target_is_a_path() {
        let huge = "é".repeat(1 << 20);
        let paths: Vec<String> = (0..20).map(|_| huge.clone()).collect();
        let err = ErrorObject::from_io(&io::Error::new(io::ErrorKind::NotFound, huge.clone()));
        let mut record = AuditRecord::new(1, &huge, &huge, &paths, &Err(err), 0, Duration::ZERO);
        record.outcome = &huge;
        let line = serde_json::to_string(&record).unwrap();
        assert!(line.len() < 24 * 1024, "{} bytes", line.len());
        let value: Value = serde_json::from_str(&line).unwrap();
        let cut_at = |chars: usize| {
            format!(
                "{}…[cut {} bytes]",
                "é".repeat(chars),
                huge.len() - chars * 2
            )
        };
        for field in ["method", "peer", "outcome"] {
            assert_eq!(value[field], cut_at(MAX_FIELD_CHARS), "{field}");
        }
        assert_eq!(value["error"], cut_at(MAX_ERROR_CHARS));
        let listed = value["paths"].as_array().unwrap();
        assert_eq!(listed.len(), MAX_PATHS + 1);
        assert_eq!(listed[0], cut_at(MAX_FIELD_CHARS));
        assert_eq!(listed[MAX_PATHS], "…[cut 12 paths]");
    }
}
