//! `file:` URIs, the form the current codex exec-server protocol gives every path in, beside the
//! plain absolute paths of the earlier protocol generation.
//!
//! A request may name its paths either way (each read as a [`WirePath`](super::WirePath)); the
//! server answers in the form the request used ([`PathForm`]). Only the `file` scheme is
//! accepted, with an empty authority or `localhost`; the path is percent-decoded byte for byte
//! (a name need not be UTF-8) and then parsed like any plain path, through [`AbsolutePathBuf`]:
//! absolute, normalised, no NUL.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, percent_encode};

use super::{ErrorObject, INVALID_PARAMS};
use capfs::AbsolutePathBuf;

/// How a request spelled its paths, and so how its answer spells them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PathForm {
    /// Plain absolute paths (`/ws/a.txt`): the March 2026 protocol and capfs's own client.
    #[default]
    Plain,
    /// `file:` URIs (`file:///ws/a.txt`): the codex exec-server protocol since June 2026.
    Uri,
}

/// Bytes a path keeps as they are in a URI: unreserved characters, `/` and the sub-delimiters
/// that need no escaping in a path; everything else (controls, space, `%`, `?`, `#`, non-ASCII
/// bytes) is percent-encoded.
const PATH_ESCAPES: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

fn invalid(message: String) -> ErrorObject {
    ErrorObject {
        code: INVALID_PARAMS,
        message,
        data: Some(serde_json::json!({ "kind": "InvalidInput" })),
    }
}

/// The plain path a `file:` URI names.
///
/// # Errors
///
/// `-32602` for another scheme, a host other than `localhost`, a query or fragment, or a path
/// that [`AbsolutePathBuf`] refuses (relative, NUL).
pub fn path_of_uri(uri: &str) -> Result<AbsolutePathBuf, ErrorObject> {
    let Some((scheme, rest)) = uri.split_once(':') else {
        return Err(invalid(format!("invalid path URI: {uri:?} has no scheme")));
    };
    if !scheme.eq_ignore_ascii_case("file") {
        return Err(invalid(format!(
            "unsupported path URI scheme `{scheme}`: only file: URIs and absolute paths are served"
        )));
    }
    if rest.contains(['?', '#']) {
        return Err(invalid(format!(
            "invalid path URI {uri:?}: a file URI has no query or fragment (encode `?` as %3F, `#` as %23)"
        )));
    }
    let path = match rest.strip_prefix("//") {
        Some(authority_and_path) => {
            let (host, path) = match authority_and_path.find('/') {
                Some(slash) => authority_and_path.split_at(slash),
                None => (authority_and_path, ""),
            };
            if !host.is_empty() && !host.eq_ignore_ascii_case("localhost") {
                return Err(invalid(format!(
                    "invalid path URI {uri:?}: host `{host}` is not this machine (use file:///path)"
                )));
            }
            path
        }
        None => rest,
    };
    let bytes: Vec<u8> = percent_decode_str(path).collect();
    AbsolutePathBuf::new(OsStr::from_bytes(&bytes))
        .map_err(|e| invalid(format!("invalid path URI {uri:?}: {e}")))
}

/// The `file:` URI of `path`: `file://` and the percent-encoded path.
pub fn uri_of_path(path: &AbsolutePathBuf) -> String {
    let bytes = path.as_path().as_os_str().as_bytes();
    format!("file://{}", percent_encode(bytes, PATH_ESCAPES))
}

/// A path as a request of `form` spells it.
pub fn spell(path: &AbsolutePathBuf, form: PathForm) -> String {
    match form {
        PathForm::Plain => path.to_string(),
        PathForm::Uri => uri_of_path(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> AbsolutePathBuf {
        AbsolutePathBuf::try_from(text).unwrap()
    }

    #[test]
    fn uris_decode_to_plain_paths() {
        for (uri, plain) in [
            ("file:///ws/a.txt", "/ws/a.txt"),
            ("file://localhost/ws/a.txt", "/ws/a.txt"),
            ("FILE://LocalHost/ws/a.txt", "/ws/a.txt"),
            ("file:/ws/a.txt", "/ws/a.txt"),
            ("file:///ws/sp%20ace/%23h%3Fq%25", "/ws/sp ace/#h?q%"),
            ("file:///ws/%C3%A9.txt", "/ws/é.txt"),
            ("file:///ws/%2e%2e/x", "/x"),
            ("file:///", "/"),
        ] {
            assert_eq!(path_of_uri(uri).unwrap(), path(plain), "{uri}");
        }
    }

    #[test]
    fn names_that_are_not_utf8_survive_decoding() {
        let decoded = path_of_uri("file:///ws/bad%FF").unwrap();
        assert_eq!(decoded.as_path().as_os_str().as_bytes(), b"/ws/bad\xff");
        assert_eq!(uri_of_path(&decoded), "file:///ws/bad%FF");
    }

    #[test]
    fn other_uris_are_refused_with_a_reason() {
        for (uri, reason) in [
            ("http://x/a", "unsupported path URI scheme `http`"),
            ("file://other/a", "host `other` is not this machine"),
            ("file:///a?b", "no query or fragment"),
            ("file:///a#b", "no query or fragment"),
            ("file://localhost", "not absolute"),
            ("file:relative", "not absolute"),
            ("file:///a%00b", "NUL"),
            ("nocolon", "has no scheme"),
        ] {
            let error = path_of_uri(uri).unwrap_err();
            assert_eq!(error.code, INVALID_PARAMS, "{uri}");
            assert!(error.message.contains(reason), "{uri}: {}", error.message);
        }
    }

    #[test]
    fn encoding_round_trips_every_byte() {
        let mut name = b"/ws/".to_vec();
        name.extend((1u8..=255).filter(|b| *b != b'/'));
        let original = AbsolutePathBuf::new(OsStr::from_bytes(&name)).unwrap();
        let uri = uri_of_path(&original);
        assert!(
            uri.is_ascii() && !uri[7..].contains(['?', '#', ' ']),
            "{uri}"
        );
        assert_eq!(path_of_uri(&uri).unwrap(), original);
    }
}
