//! Wire types of the methods the current codex exec-server protocol added (codex 0.169): the
//! environment's description, the codex-shaped walk, canonical paths and file handles. Paths in
//! results are strings in the form the request used ([`super::uri::PathForm`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::wire_path::WirePath;

/// `environment/info`: the environment's description (also sent in the `initialize` result).
pub const ENVIRONMENT_INFO_METHOD: &str = "environment/info";
/// `environment/status`: whether the executor is ready.
pub const ENVIRONMENT_STATUS_METHOD: &str = "environment/status";
/// `environmentConfig/read`: codex configuration layers found on the executor.
pub const ENVIRONMENT_CONFIG_READ_METHOD: &str = "environmentConfig/read";
/// `fs/walk`: a bounded breadth-first walk, in codex's shape.
pub const FS_WALK_METHOD: &str = "fs/walk";
/// `fs/canonicalize`: the path with every symlink resolved.
pub const FS_CANONICALIZE_METHOD: &str = "fs/canonicalize";
/// `fs/open`: a file handle, for reading blocks or for replacing the file.
pub const FS_OPEN_METHOD: &str = "fs/open";
/// `fs/readBlock`: bytes at an offset of a read handle.
pub const FS_READ_BLOCK_METHOD: &str = "fs/readBlock";
/// `fs/writeBlock`: the next bytes of a replace handle.
pub const FS_WRITE_BLOCK_METHOD: &str = "fs/writeBlock";
/// `fs/close`: closes a handle; a replace handle's file is replaced then.
pub const FS_CLOSE_METHOD: &str = "fs/close";
/// `fs/watchMissing`: a notification `fs/missingChanged` once a missing path appears.
pub const FS_WATCH_MISSING_METHOD: &str = "fs/watchMissing";

/// The error code codex gives `NotFound` failures; its client reads the kind from the code.
pub const NOT_FOUND_CODE: i64 = -32004;

/// A request's `sandbox` member (codex's `FileSystemSandboxContext`): the turn's permission
/// profile. It stays JSON because the server reads the shapes it knows and takes any other for
/// reads only, rather than refusing the request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SandboxContext(serde_json::Value);

impl SandboxContext {
    /// The profile as sent.
    pub fn as_value(&self) -> &serde_json::Value {
        &self.0
    }
}

/// The shell an environment runs commands with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ShellInfo {
    /// A stable name: `sh`, `bash`, `zsh`.
    pub name: String,
    /// The shell's executable.
    pub path: String,
}

/// The result of [`ENVIRONMENT_INFO_METHOD`] and the `environmentInfo` of `initialize`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct EnvironmentInfo {
    /// The shell commands would run with.
    pub shell: ShellInfo,
    /// The executor's version (capfs's).
    pub executor_version: String,
    /// Where a turn starts: the first read-write root, else the first root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `linux`.
    pub platform_os: String,
    /// Directories under the roots a turn may use for temporary files: none.
    #[serde(default)]
    pub temporary_directories: Vec<String>,
    /// The optional methods this executor serves, by codex's capability names. Only what is
    /// served is `true`.
    pub capabilities: BTreeMap<String, bool>,
    /// capfs: whether processes are served and how they are confined; absent when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<super::process::ProcessesInfo>,
}

/// The result of [`ENVIRONMENT_STATUS_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EnvironmentStatus {
    /// `ready`.
    pub status: String,
}

/// Params of [`ENVIRONMENT_CONFIG_READ_METHOD`]; only their shape is checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct EnvironmentConfigReadParams {
    /// The turn's directory.
    pub cwd: String,
    /// Configuration keys asked for.
    #[serde(default)]
    pub config_paths: Vec<Vec<String>>,
    /// Requirement keys asked for.
    #[serde(default)]
    pub requirements_paths: Vec<Vec<String>>,
}

/// Configuration layers, in [`EnvironmentConfigReadResponse`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ConfigLayers {
    /// The layers found: capfs reads no codex configuration, so none.
    pub layers: Vec<serde_json::Value>,
    /// Where cloud layers go among them.
    pub cloud_insertion_index: u64,
}

/// The result of [`ENVIRONMENT_CONFIG_READ_METHOD`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EnvironmentConfigReadResponse {
    /// The executor's configuration layers.
    pub config: ConfigLayers,
    /// The executor's requirement layers.
    pub requirements: ConfigLayers,
}

/// The options of [`FS_WALK_METHOD`], all required as codex sends them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CodexWalkOptions {
    /// Levels below the start to list (0 and 1 both list its entries only).
    pub max_depth: u64,
    /// Directories to read, the start included.
    pub max_directories: u64,
    /// Entries to return.
    pub max_entries: u64,
    /// Enter links to directories (inside the roots only).
    pub follow_directory_symlinks: bool,
    /// List directories whose name starts with `.` but do not enter them.
    pub prune_hidden_directories: bool,
}

/// Params of [`FS_WALK_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CodexWalkParams {
    /// Where the walk starts.
    pub path: WirePath,
    /// Its bounds.
    pub options: CodexWalkOptions,
    /// The current codex protocol's per-request `sandbox` policy, which the server reads as a
    /// narrowing of its roots; capfs's client never sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxContext>,
}

/// One entry of a [`CodexWalkResponse`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CodexWalkEntry {
    /// The entry's path, in the request's form.
    pub path: String,
    /// `file`, `directory` or `other`.
    pub kind: String,
}

/// A directory a walk could not read, in a [`CodexWalkResponse`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CodexWalkError {
    /// The directory, in the request's form.
    pub path: String,
    /// Why it could not be read.
    pub message: String,
}

/// The result of [`FS_WALK_METHOD`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CodexWalkResponse {
    /// Breadth first, each directory's entries in byte order of their names.
    pub entries: Vec<CodexWalkEntry>,
    /// Directories that could not be read.
    pub errors: Vec<CodexWalkError>,
    /// A bound cut the walk short.
    pub truncated: bool,
}

/// The result of [`FS_CANONICALIZE_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CanonicalizeResponse {
    /// The resolved path, in the request's form.
    pub path: String,
}

/// What an [`FS_OPEN_METHOD`] handle is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum OpenMode {
    /// Blocks read at any offset, from the file as it was opened.
    Read,
    /// Blocks written in order into a new file that replaces the path on `fs/close`.
    Replace,
}

/// Params of [`FS_OPEN_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct OpenParams {
    /// The client's name for the handle (at most 32 bytes).
    pub handle_id: String,
    /// The file.
    pub path: WirePath,
    /// Read, or replace.
    #[serde(default = "read_mode")]
    pub mode: OpenMode,
    /// The current codex protocol's per-request `sandbox` policy, which the server reads as a
    /// narrowing of its roots; capfs's client never sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxContext>,
}

fn read_mode() -> OpenMode {
    OpenMode::Read
}

/// The result of [`FS_OPEN_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct OpenResponse {
    /// The handle, as the client named it.
    pub handle_id: String,
}

/// Params of [`FS_READ_BLOCK_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ReadBlockParams {
    /// A read handle.
    pub handle_id: String,
    /// Where the block starts.
    pub offset: u64,
    /// Bytes wanted, 1 to 1 MiB.
    pub len: u64,
}

/// The result of [`FS_READ_BLOCK_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ReadBlockResponse {
    /// The bytes, standard padded base64.
    pub chunk: String,
    /// The block reached the end of the file.
    pub eof: bool,
}

/// Params of [`FS_WRITE_BLOCK_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct WriteBlockParams {
    /// A replace handle.
    pub handle_id: String,
    /// Where the bytes go: the number of bytes written so far.
    pub offset: u64,
    /// The bytes, standard padded base64.
    pub chunk: String,
}

/// Params of [`FS_CLOSE_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CloseParams {
    /// The handle to close.
    pub handle_id: String,
}
