//! `AbsolutePathBuf`: the only door through which untrusted path strings enter capfs.
//!
//! A value of this type is absolute, lexically normalised (`.` dropped, `..` popped, never above
//! `/`, no empty components, no trailing slash) and free of NUL bytes. Parsing never consults the
//! file system and never resolves relative input against the process's working directory.

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// An absolute, lexically normalised path without NUL bytes.
///
/// # Examples
///
/// ```
/// use capfs::AbsolutePathBuf;
///
/// let p = AbsolutePathBuf::try_from("/ws/./a/../b/").unwrap();
/// assert_eq!(p.as_path(), std::path::Path::new("/ws/b"));
/// assert!(AbsolutePathBuf::try_from("relative/path").is_err());
/// assert!(AbsolutePathBuf::try_from("/../..").unwrap().as_path() == std::path::Path::new("/"));
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AbsolutePathBuf(PathBuf);

impl AbsolutePathBuf {
    /// Parses and normalises `path`.
    ///
    /// # Errors
    ///
    /// `InvalidInput` when the path is relative or empty, or contains a NUL byte.
    pub fn new(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref();
        if path.as_os_str().as_bytes().contains(&0) {
            return Err(invalid_path(path, "path contains a NUL byte"));
        }
        if !path.is_absolute() {
            return Err(invalid_path(path, "path is not absolute"));
        }
        // Normalising never lengthens an absolute path: one allocation, never a growth.
        let mut normal = PathBuf::with_capacity(path.as_os_str().len());
        normal.push("/");
        for component in path.components() {
            match component {
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
                Component::ParentDir => {
                    normal.pop();
                }
                Component::Normal(name) => normal.push(name),
            }
        }
        Ok(Self(normal))
    }

    /// The path as a `Path`.
    pub fn as_path(&self) -> &Path {
        &self.0
    }

    /// Appends a relative path and normalises the result (`..` never climbs above `/`).
    ///
    /// # Errors
    ///
    /// `InvalidInput` when `rest` contains a NUL byte.
    pub fn join(&self, rest: impl AsRef<Path>) -> io::Result<Self> {
        let rest = rest.as_ref();
        if rest.is_absolute() {
            return Self::new(rest);
        }
        Self::new(self.0.join(rest))
    }

    /// The parent directory, or `None` for `/`.
    pub fn parent(&self) -> Option<Self> {
        self.0.parent().map(|p| Self(p.to_path_buf()))
    }

    /// The last component, or `None` for `/`.
    pub fn file_name(&self) -> Option<&OsStr> {
        self.0.file_name()
    }

    /// The path relative to `base` when `base` is a prefix at a component boundary.
    pub fn strip_prefix(&self, base: &AbsolutePathBuf) -> Option<&Path> {
        self.0.strip_prefix(&base.0).ok()
    }

    /// Lossy UTF-8 rendering, for messages and the wire.
    pub fn to_string_lossy(&self) -> std::borrow::Cow<'_, str> {
        self.0.to_string_lossy()
    }

    /// Consumes the value and returns the inner `PathBuf`.
    pub fn into_path_buf(self) -> PathBuf {
        self.0
    }
}

fn invalid_path(path: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{}: {why}", path.display()),
    )
}

impl fmt::Debug for AbsolutePathBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for AbsolutePathBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.display(), f)
    }
}

impl AsRef<Path> for AbsolutePathBuf {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl TryFrom<&str> for AbsolutePathBuf {
    type Error = io::Error;
    fn try_from(value: &str) -> io::Result<Self> {
        Self::new(value)
    }
}

impl TryFrom<String> for AbsolutePathBuf {
    type Error = io::Error;
    fn try_from(value: String) -> io::Result<Self> {
        Self::new(value)
    }
}

impl TryFrom<&Path> for AbsolutePathBuf {
    type Error = io::Error;
    fn try_from(value: &Path) -> io::Result<Self> {
        Self::new(value)
    }
}

impl TryFrom<PathBuf> for AbsolutePathBuf {
    type Error = io::Error;
    fn try_from(value: PathBuf) -> io::Result<Self> {
        Self::new(value)
    }
}

/// Serialises as a string. A path that is not valid UTF-8 is an error, never a lossy string: a
/// replaced byte would name another file on the other side of the wire.
impl serde::Serialize for AbsolutePathBuf {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0.to_str() {
            Some(text) => serializer.serialize_str(text),
            None => Err(serde::ser::Error::custom(format!(
                "{}: path is not valid UTF-8 and cannot be sent over the wire",
                self.0.display()
            ))),
        }
    }
}

impl<'de> serde::Deserialize<'de> for AbsolutePathBuf {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::new(text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_lexically() {
        let cases = [
            ("/", "/"),
            ("/ws", "/ws"),
            ("/ws/", "/ws"),
            ("/ws/.", "/ws"),
            ("/ws/sub/..", "/ws"),
            ("/ws/../../..", "/"),
            ("//ws//a///b", "/ws/a/b"),
            ("/ws/a/./b/../c", "/ws/a/c"),
        ];
        for (input, expected) in cases {
            let p = AbsolutePathBuf::new(input).unwrap();
            assert_eq!(p.as_path(), Path::new(expected), "{input}");
        }
    }

    #[test]
    fn rejects_relative_empty_and_nul() {
        for input in ["", "a", "./a", "../a", "/a\0b"] {
            let err = AbsolutePathBuf::new(input).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{input:?}");
        }
    }
}
