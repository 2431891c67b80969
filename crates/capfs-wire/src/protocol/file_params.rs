//! Params and results of the file methods, and their conversions to the library's types.

use serde::{Deserialize, Serialize};

use super::codex::SandboxContext;
use super::wire_path::WirePath;
use capfs::{FileMetadata, ReadDirectoryEntry};

#[cfg(doc)]
use super::{
    CAPFS_CREATE_SYMLINK_METHOD, CAPFS_READ_FILE_STREAM_METHOD, CAPFS_READ_LINK_METHOD,
    CAPFS_WRITE_FILE_STREAM_METHOD, DATA_FRAME_LAST_TAG, DATA_FRAME_TAG, FS_COPY_METHOD,
    FS_CREATE_DIRECTORY_METHOD, FS_GET_METADATA_METHOD, FS_READ_DIRECTORY_METHOD,
    FS_READ_FILE_METHOD, FS_REMOVE_METHOD, FS_RENAME_METHOD, FS_WRITE_FILE_METHOD,
};

/// Params of [`CAPFS_READ_FILE_STREAM_METHOD`]. The server answers with data frames of
/// `streamId` carrying the contents in order, then with [`StreamResponse`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ReadStreamParams {
    /// An absolute path.
    pub path: WirePath,
    /// Chosen by the client, unique among its open streams on the connection.
    pub stream_id: u64,
    /// When set, a file holding more than this many bytes fails with `InvalidInput`
    /// (`file is too large to read: limit is {N} bytes`), as `fs/readFile` does at the read
    /// limit: refused before any data frame when its size says so, cut off after at most this
    /// many bytes when it grows. Absent: the whole file, whatever its size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// The current codex protocol's per-request `sandbox` policy, which the server reads as a
    /// narrowing of its roots; capfs's client never sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxContext>,
}

/// Params of [`CAPFS_WRITE_FILE_STREAM_METHOD`]. The client sends exactly `size` bytes as data
/// frames of `streamId` after the request; the server replaces the file once it has them all.
/// Without `size`, the contents end with a frame tagged [`DATA_FRAME_LAST_TAG`]. An empty frame
/// tagged [`DATA_FRAME_TAG`] aborts the write either way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct WriteStreamParams {
    /// An absolute path.
    pub path: WirePath,
    /// Chosen by the client, unique among its open streams on the connection.
    pub stream_id: u64,
    /// How many bytes follow; absent when the client does not know (a pipe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Permission bits for the file (capfs; see [`capfs::WriteOptions::mode`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    /// Modification time in ms since the Unix epoch (capfs; see
    /// [`capfs::WriteOptions::modified_at_ms`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_at_ms: Option<i64>,
    /// The current codex protocol's per-request `sandbox` policy, which the server reads as a
    /// narrowing of its roots; capfs's client never sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxContext>,
}

/// Result of both stream methods: how many bytes the data frames carried.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct StreamResponse {
    /// Bytes carried by the stream's data frames.
    pub size: u64,
}

/// Params with a single `path`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PathParams {
    /// An absolute path.
    pub path: WirePath,
    /// The current codex protocol's per-request `sandbox` policy, which the server reads as a
    /// narrowing of its roots; capfs's client never sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxContext>,
}

/// Result of [`FS_READ_FILE_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ReadFileResponse {
    /// The contents, standard padded base64.
    pub data_base64: String,
}

/// Params of [`FS_WRITE_FILE_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct WriteFileParams {
    /// An absolute path.
    pub path: WirePath,
    /// The contents, standard padded base64.
    pub data_base64: String,
    /// capfs extension: the permission bits to give the file (setuid, setgid and sticky are
    /// never applied). Absent: an existing file keeps its bits, a new one gets the default.
    /// Sent only to servers that announced `capfs` in `initialize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    /// capfs extension: the modification time to give the file, in ms since the Unix epoch.
    /// Absent: the time of the write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_at_ms: Option<i64>,
    /// The current codex protocol's per-request `sandbox` policy, which the server reads as a
    /// narrowing of its roots; capfs's client never sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxContext>,
}

/// Params of [`CAPFS_CREATE_SYMLINK_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CreateSymlinkParams {
    /// Where the link goes (an absolute path).
    pub path: WirePath,
    /// The link's text, stored as it is.
    pub target: String,
    /// The current codex protocol's per-request `sandbox` policy, which the server reads as a
    /// narrowing of its roots; capfs's client never sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxContext>,
}

/// Result of [`CAPFS_READ_LINK_METHOD`] (params: [`PathParams`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ReadLinkResponse {
    /// The link's text.
    pub target: String,
}

/// Params of [`FS_CREATE_DIRECTORY_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CreateDirectoryParams {
    /// An absolute path.
    pub path: WirePath,
    /// Create parents too; null or missing means true.
    #[serde(default)]
    pub recursive: Option<bool>,
    /// The current codex protocol's per-request `sandbox` policy, which the server reads as a
    /// narrowing of its roots; capfs's client never sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxContext>,
}

/// Result of [`FS_GET_METADATA_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct GetMetadataResponse {
    /// See [`FileMetadata::is_directory`].
    pub is_directory: bool,
    /// See [`FileMetadata::is_file`].
    pub is_file: bool,
    /// See [`FileMetadata::is_symlink`].
    #[serde(default)]
    pub is_symlink: bool,
    /// See [`FileMetadata::size`].
    #[serde(default)]
    pub size: u64,
    /// See [`FileMetadata::created_at_ms`].
    #[serde(default)]
    pub created_at_ms: i64,
    /// See [`FileMetadata::modified_at_ms`].
    #[serde(default)]
    pub modified_at_ms: i64,
    /// capfs extension: see [`FileMetadata::accessed_at_ms`]; absent from other servers (and
    /// then 0, unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accessed_at_ms: Option<i64>,
    /// capfs extension: see [`FileMetadata::mode`]; absent from other servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
}

impl From<FileMetadata> for GetMetadataResponse {
    fn from(m: FileMetadata) -> Self {
        Self {
            is_directory: m.is_directory,
            is_file: m.is_file,
            is_symlink: m.is_symlink,
            size: m.size,
            created_at_ms: m.created_at_ms,
            modified_at_ms: m.modified_at_ms,
            accessed_at_ms: Some(m.accessed_at_ms),
            mode: Some(m.mode),
        }
    }
}

impl From<GetMetadataResponse> for FileMetadata {
    fn from(m: GetMetadataResponse) -> Self {
        FileMetadata::default()
            .with_is_directory(m.is_directory)
            .with_is_file(m.is_file)
            .with_is_symlink(m.is_symlink)
            .with_size(m.size)
            .with_created_at_ms(m.created_at_ms)
            .with_modified_at_ms(m.modified_at_ms)
            .with_accessed_at_ms(m.accessed_at_ms.unwrap_or(0))
            .with_mode(m.mode.unwrap_or(0))
    }
}

/// One entry of [`ReadDirectoryResponse`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DirectoryEntry {
    /// See [`ReadDirectoryEntry::file_name`].
    pub file_name: String,
    /// See [`ReadDirectoryEntry::is_directory`].
    pub is_directory: bool,
    /// See [`ReadDirectoryEntry::is_file`].
    pub is_file: bool,
    /// See [`ReadDirectoryEntry::is_symlink`].
    #[serde(default)]
    pub is_symlink: bool,
}

impl From<ReadDirectoryEntry> for DirectoryEntry {
    fn from(e: ReadDirectoryEntry) -> Self {
        Self {
            file_name: e.file_name,
            is_directory: e.is_directory,
            is_file: e.is_file,
            is_symlink: e.is_symlink,
        }
    }
}

impl From<DirectoryEntry> for ReadDirectoryEntry {
    /// A name that came over the wire is exact: JSON text is UTF-8, and the server leaves out
    /// the entries whose names are not.
    fn from(e: DirectoryEntry) -> Self {
        ReadDirectoryEntry::new(e.file_name)
            .with_is_directory(e.is_directory)
            .with_is_file(e.is_file)
            .with_is_symlink(e.is_symlink)
    }
}

/// Result of [`FS_READ_DIRECTORY_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ReadDirectoryResponse {
    /// One entry per name, in readdir order, except names that are not valid UTF-8.
    pub entries: Vec<DirectoryEntry>,
    /// A capfs extension: how many entries were left out because their names are not valid
    /// UTF-8 (a lossy rendering would name another entry, or none). Absent when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub non_utf8_names_omitted: u64,
    /// A capfs extension: the listing was cut to fit the server's message limit, and holds only
    /// the first entries. Absent when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub truncated: bool,
}

pub(super) fn is_zero(n: &u64) -> bool {
    *n == 0
}

pub(super) fn is_false(b: &bool) -> bool {
    !*b
}

/// Params of [`FS_REMOVE_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct RemoveParams {
    /// An absolute path.
    pub path: WirePath,
    /// Remove directories with their contents; null or missing means true.
    #[serde(default)]
    pub recursive: Option<bool>,
    /// Ignore a missing path; null or missing means true.
    #[serde(default)]
    pub force: Option<bool>,
    /// The current codex protocol's per-request `sandbox` policy, which the server reads as a
    /// narrowing of its roots; capfs's client never sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxContext>,
}

/// Params of [`FS_COPY_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CopyParams {
    /// What to copy.
    pub source_path: WirePath,
    /// Where to.
    pub destination_path: WirePath,
    /// Required for directories; null or missing means false.
    #[serde(default)]
    pub recursive: Option<bool>,
    /// The current codex protocol's per-request `sandbox` policy, which the server reads as a
    /// narrowing of its roots; capfs's client never sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxContext>,
}

/// Params of [`FS_RENAME_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct RenameParams {
    /// What to rename.
    pub source_path: WirePath,
    /// The new path, in the same root.
    pub destination_path: WirePath,
    /// Replace an existing destination; null or missing means false.
    #[serde(default)]
    pub overwrite: Option<bool>,
    /// The current codex protocol's per-request `sandbox` policy, which the server reads as a
    /// narrowing of its roots; capfs's client never sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxContext>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_and_nul_paths_do_not_parse() {
        for bad in [r#"{"path":"rel"}"#, r#"{"path":"/a\u0000b"}"#, r#"{}"#] {
            assert!(serde_json::from_str::<PathParams>(bad).is_err(), "{bad}");
        }
    }
}
