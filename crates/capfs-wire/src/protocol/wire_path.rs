//! [`WirePath`]: a path member of a request's params, read once, straight from the message's
//! text, in either form a request may use.

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::uri::{PathForm, path_of_uri, uri_of_path};
use capfs::AbsolutePathBuf;

/// A path as a request names it: a plain absolute path (`/ws/a.txt`) or a `file:` URI
/// (`file:///ws/a.txt`). Decoding parses it once into an [`AbsolutePathBuf`] (absolute,
/// normalised, no NUL) and remembers the form, which decides how the answer spells its paths
/// and which error codes it uses, and the text as sent where it is not the path's own
/// spelling (a URI, `..`, doubled slashes), which is what the audit log lists.
///
/// It dereferences to its [`AbsolutePathBuf`], and a client builds it from one (plain form).
#[derive(Clone, PartialEq, Eq)]
pub struct WirePath {
    path: AbsolutePathBuf,
    form: PathForm,
    /// The text as sent, when it is not `path`'s plain spelling.
    sent: Option<Box<str>>,
}

impl WirePath {
    /// Reads `text` as a request's path: a `file:` URI when it does not start with `/` and has
    /// a scheme, a plain path otherwise.
    ///
    /// # Errors
    ///
    /// The message of why the text names no path: the URI's (see [`path_of_uri`]) or the plain
    /// path's (relative, NUL).
    pub fn parse(text: &str) -> Result<Self, String> {
        let (path, form) = if !text.starts_with('/') && text.contains(':') {
            (path_of_uri(text).map_err(|e| e.message)?, PathForm::Uri)
        } else {
            let path = AbsolutePathBuf::new(text).map_err(|e| e.to_string())?;
            (path, PathForm::Plain)
        };
        let sent = (path.as_path().as_os_str() != text).then(|| text.into());
        Ok(Self { path, form, sent })
    }

    /// The path, normalised.
    pub fn path(&self) -> &AbsolutePathBuf {
        &self.path
    }

    /// How the request spelled it.
    pub fn form(&self) -> PathForm {
        self.form
    }

    /// The text as the request sent it.
    pub fn as_sent(&self) -> Cow<'_, str> {
        match &self.sent {
            Some(sent) => Cow::Borrowed(sent),
            None => self.path.to_string_lossy(),
        }
    }
}

impl From<AbsolutePathBuf> for WirePath {
    fn from(path: AbsolutePathBuf) -> Self {
        Self {
            path,
            form: PathForm::Plain,
            sent: None,
        }
    }
}

impl Deref for WirePath {
    type Target = AbsolutePathBuf;

    fn deref(&self) -> &AbsolutePathBuf {
        &self.path
    }
}

impl fmt::Debug for WirePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.as_sent(), f)
    }
}

impl fmt::Display for WirePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.path, f)
    }
}

/// Sent in its own form: the plain path, or its URI.
impl Serialize for WirePath {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.form {
            PathForm::Plain => self.path.serialize(serializer),
            PathForm::Uri => serializer.serialize_str(&uri_of_path(&self.path)),
        }
    }
}

impl<'de> Deserialize<'de> for WirePath {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(Text)
    }
}

/// Reads a path member where it stands in the message, without a `String` of it first.
struct Text;

impl serde::de::Visitor<'_> for Text {
    type Value = WirePath;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<WirePath, E> {
        WirePath::parse(text).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> WirePath {
        serde_json::from_str(&serde_json::to_string(text).unwrap()).unwrap()
    }

    #[test]
    fn both_forms_read_once_with_the_text_as_sent() {
        let plain = read("/ws/a.txt");
        assert_eq!(plain.form(), PathForm::Plain);
        assert_eq!(plain.path().as_path(), std::path::Path::new("/ws/a.txt"));
        assert_eq!(plain.as_sent(), "/ws/a.txt");
        assert!(plain.sent.is_none(), "a normal plain path keeps no copy");

        let climbing = read("/ws/sub/../../etc/passwd");
        assert_eq!(climbing.path().to_string(), "/etc/passwd");
        assert_eq!(climbing.as_sent(), "/ws/sub/../../etc/passwd");

        let uri = read("file:///ws/sp%20ace");
        assert_eq!(uri.form(), PathForm::Uri);
        assert_eq!(uri.path().to_string(), "/ws/sp ace");
        assert_eq!(uri.as_sent(), "file:///ws/sp%20ace");
        assert_eq!(serde_json::to_value(&uri).unwrap(), "file:///ws/sp%20ace");
        assert_eq!(serde_json::to_value(&climbing).unwrap(), "/etc/passwd");
    }

    #[test]
    fn what_names_no_path_is_refused_with_the_reason() {
        for (text, reason) in [
            ("relative/x", "path is not absolute"),
            ("", "path is not absolute"),
            ("/a\u{0}b", "NUL"),
            ("http://x/a", "unsupported path URI scheme `http`"),
            ("file://other/a", "is not this machine"),
        ] {
            let json = serde_json::to_string(text).unwrap();
            let error = serde_json::from_str::<WirePath>(&json).unwrap_err();
            assert!(error.to_string().contains(reason), "{text:?}: {error}");
        }
        assert!(serde_json::from_str::<WirePath>("7").is_err());
    }
}
