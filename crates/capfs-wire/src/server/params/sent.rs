//! The paths of a request as its audit line lists them: as sent, each cut as the line cuts
//! it, so that a huge path is not copied whole to be cut later.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::value::RawValue;

use capfs::audit::{MAX_FIELD_CHARS, cut};

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

#[cfg(test)]
mod tests {

    use serde_json::{Value, json};

    use super::*;

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
}
