//! How a file system describes the roots it serves: each root's path and what clients may do
//! under it. The same type is the wire's `capfs.roots` entry, so a server announces exactly
//! what its file system returns.

use serde::{Deserialize, Serialize};

use crate::path::AbsolutePathBuf;
use crate::sandbox::Access;

/// One sandbox root a file system serves: what
/// [`ExecutorFileSystem::served_roots`](crate::ExecutorFileSystem::served_roots) returns and a
/// server announces in its `initialize` result (`capfs.roots`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct RootDescription {
    /// The root's absolute path, as clients name it.
    pub path: AbsolutePathBuf,
    /// What clients may do under it.
    pub access: RootAccess,
}

impl RootDescription {
    /// The root at `path` with `access`.
    pub fn new(path: AbsolutePathBuf, access: RootAccess) -> Self {
        Self { path, access }
    }
}

/// The access of a [`RootDescription`]: `"read-write"` or `"read-only"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RootAccess {
    /// Reads and writes.
    ReadWrite,
    /// Reads only.
    ReadOnly,
}

impl From<Access> for RootAccess {
    fn from(access: Access) -> Self {
        match access {
            Access::ReadWrite => Self::ReadWrite,
            Access::ReadOnly => Self::ReadOnly,
        }
    }
}
