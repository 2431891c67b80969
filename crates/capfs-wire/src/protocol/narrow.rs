//! The types of [`CAPFS_NARROW_ROOTS_METHOD`](super::CAPFS_NARROW_ROOTS_METHOD) and
//! [`CAPFS_READ_FILE_RANGE_METHOD`](super::CAPFS_READ_FILE_RANGE_METHOD).

use serde::{Deserialize, Serialize};

use super::RootDescription;
use super::codex::SandboxContext;
use super::wire_path::WirePath;

/// Params of [`CAPFS_NARROW_ROOTS_METHOD`](super::CAPFS_NARROW_ROOTS_METHOD): the directories the connection keeps, each inside
/// one of its roots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct NarrowRootsParams {
    /// The directories and the access wanted under each (never more than its root's).
    pub roots: Vec<RootDescription>,
}

/// Result of [`CAPFS_NARROW_ROOTS_METHOD`](super::CAPFS_NARROW_ROOTS_METHOD): one entry per directory asked for, in order. The
/// connection then serves the directories that could be opened and nothing else (none at all
/// when none could).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct NarrowRootsResponse {
    /// What became of each directory.
    pub roots: Vec<NarrowedRoot>,
}

/// One entry of [`NarrowRootsResponse`]: the root serving the directory now, or why it could
/// not be used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct NarrowedRoot {
    /// The root: its path (the directory's path with every symlink resolved) and access.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<RootDescription>,
    /// Why the directory could not be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Params of [`CAPFS_READ_FILE_RANGE_METHOD`](super::CAPFS_READ_FILE_RANGE_METHOD): at most
/// `length` bytes of the regular file `path` from byte `offset` (fewer at its end, none past
/// it). The result is `{dataBase64}`, as `fs/readFile`'s; a range whose reply would pass the
/// message limit is refused before it is read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ReadRangeParams {
    /// An absolute path.
    pub path: WirePath,
    /// Where the range starts.
    pub offset: u64,
    /// The most bytes returned.
    pub length: u64,
    /// The current codex protocol's per-request `sandbox` policy, which the server reads as a
    /// narrowing of its roots; capfs's client never sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxContext>,
}
