//! Wire types of the capfs protocol: JSON-RPC 2.0 style messages over WebSocket, compatible with
//! the codex exec-server's file-system methods. Serde only; no I/O happens here.
//!
//! Envelope: request `{"id", "method", "params"}`, notification `{"method", "params"}`, response
//! `{"id", "result"}`, error `{"id", "error": {"code", "message", "data"}}`. Ids are integers or
//! strings and are echoed verbatim. A `"jsonrpc": "2.0"` member is accepted and ignored.

use std::io;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{AbsolutePathBuf, FileMetadata, ReadDirectoryEntry};

mod walk;
pub use walk::{WalkEntryWire, WalkErrorWire, WalkParams, WalkResponse};

pub mod codex;
pub mod process;
pub mod uri;

/// `initialize`: the first request on a connection.
pub const INITIALIZE_METHOD: &str = "initialize";
/// `initialized`: the notification that completes the handshake.
pub const INITIALIZED_METHOD: &str = "initialized";
/// `fs/readFile`.
pub const FS_READ_FILE_METHOD: &str = "fs/readFile";
/// `fs/writeFile`.
pub const FS_WRITE_FILE_METHOD: &str = "fs/writeFile";
/// `fs/createDirectory`.
pub const FS_CREATE_DIRECTORY_METHOD: &str = "fs/createDirectory";
/// `fs/getMetadata`.
pub const FS_GET_METADATA_METHOD: &str = "fs/getMetadata";
/// `fs/readDirectory`.
pub const FS_READ_DIRECTORY_METHOD: &str = "fs/readDirectory";
/// `fs/remove`.
pub const FS_REMOVE_METHOD: &str = "fs/remove";
/// `fs/copy`.
pub const FS_COPY_METHOD: &str = "fs/copy";
/// `fs/rename`.
pub const FS_RENAME_METHOD: &str = "fs/rename";

/// `capfs/readFileStream`: a capfs extension; the contents follow as data frames.
pub const CAPFS_READ_FILE_STREAM_METHOD: &str = "capfs/readFileStream";
/// `capfs/writeFileStream`: a capfs extension; the contents follow as data frames.
pub const CAPFS_WRITE_FILE_STREAM_METHOD: &str = "capfs/writeFileStream";
/// `capfs/walk`: a capfs extension; a confined walk of a directory tree in one request.
pub const CAPFS_WALK_METHOD: &str = "capfs/walk";
/// `capfs/readLink`: a capfs extension; the text of a symlink.
pub const CAPFS_READ_LINK_METHOD: &str = "capfs/readLink";
/// `capfs/createSymlink`: a capfs extension; creates a symlink.
pub const CAPFS_CREATE_SYMLINK_METHOD: &str = "capfs/createSymlink";
/// `capfs/narrowRoots`: a capfs extension; narrows the connection's roots to directories
/// inside them, each opened as a root of its own.
pub const CAPFS_NARROW_ROOTS_METHOD: &str = "capfs/narrowRoots";

/// `capfs/readFileRange`: a capfs extension; part of a file, read from an offset.
pub const CAPFS_READ_FILE_RANGE_METHOD: &str = "capfs/readFileRange";

mod narrow;
pub use narrow::{NarrowRootsParams, NarrowRootsResponse, NarrowedRoot, ReadRangeParams};

/// First byte of a data frame. JSON text never starts with it, so a binary frame is a data frame
/// exactly when it starts with this byte.
pub const DATA_FRAME_TAG: u8 = 0x00;
/// First byte of the data frame that ends an unsized streamed write (one whose request has no
/// `size`); its payload, possibly empty, is the last of the contents.
pub const DATA_FRAME_LAST_TAG: u8 = 0x01;
/// Length of a data frame's header: the tag and the stream id (u64, big-endian).
pub const DATA_FRAME_HEADER_LEN: usize = 9;
/// The payload size capfs puts in one data frame.
pub const DATA_CHUNK_BYTES: usize = 256 * 1024;

/// The header of a data frame of stream `stream_id`.
pub fn data_frame_header(stream_id: u64) -> [u8; DATA_FRAME_HEADER_LEN] {
    let mut header = [0u8; DATA_FRAME_HEADER_LEN];
    header[0] = DATA_FRAME_TAG;
    header[1..].copy_from_slice(&stream_id.to_be_bytes());
    header
}

/// The header of the data frame that ends unsized stream `stream_id`.
pub fn data_frame_last_header(stream_id: u64) -> [u8; DATA_FRAME_HEADER_LEN] {
    let mut header = data_frame_header(stream_id);
    header[0] = DATA_FRAME_LAST_TAG;
    header
}

/// The stream id of a data frame of either tag, and whether it is the last frame of an unsized
/// write; `None` when `frame` is not a data frame.
pub fn data_frame_kind(frame: &[u8]) -> Option<(u64, bool)> {
    if frame.len() < DATA_FRAME_HEADER_LEN {
        return None;
    }
    let last = match frame[0] {
        DATA_FRAME_TAG => false,
        DATA_FRAME_LAST_TAG => true,
        _ => return None,
    };
    let mut id = [0u8; 8];
    id.copy_from_slice(&frame[1..DATA_FRAME_HEADER_LEN]);
    Some((u64::from_be_bytes(id), last))
}

/// The stream id of a data frame, or `None` when `frame` is not one.
pub fn data_frame_stream(frame: &[u8]) -> Option<u64> {
    if frame.len() < DATA_FRAME_HEADER_LEN || frame[0] != DATA_FRAME_TAG {
        return None;
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&frame[1..DATA_FRAME_HEADER_LEN]);
    Some(u64::from_be_bytes(id))
}

/// Not valid JSON (the capfs server answers malformed input with [`INVALID_REQUEST`]).
pub const PARSE_ERROR: i64 = -32700;
/// Not a valid request, an `InvalidInput` failure, or a handshake-order violation.
pub const INVALID_REQUEST: i64 = -32600;
/// Unknown method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Params that do not parse (missing field, relative path, NUL byte).
pub const INVALID_PARAMS: i64 = -32602;
/// Every other failure.
pub const INTERNAL_ERROR: i64 = -32603;
/// The server is shutting down or over a limit; the request was not run.
pub const SERVER_BUSY: i64 = -32000;

/// The id the server uses for errors about a message whose id could not be read.
pub const UNKNOWN_REQUEST_ID: RequestId = RequestId::Integer(-1);

/// Prefix of the error message for input that is not a JSON-RPC message.
pub const MALFORMED_MESSAGE_PREFIX: &str =
    "failed to parse websocket JSON-RPC message from exec-server websocket";
/// An fs call before `initialize`.
pub const NOT_INITIALIZED_MESSAGE: &str =
    "client must call initialize before using filesystem methods";
/// An fs call after `initialize` but before `initialized`.
pub const NOT_INITIALIZED_NOTIFICATION_MESSAGE: &str =
    "client must send initialized before using filesystem methods";
/// A second `initialize`.
pub const DUPLICATE_INITIALIZE_MESSAGE: &str = "initialize may only be sent once per connection";

/// A request id: an integer or a string, echoed verbatim.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// An integer id.
    Integer(i64),
    /// A string id.
    String(String),
}

/// A request: a method call that expects a response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Echoed in the response.
    pub id: RequestId,
    /// The method name, for example [`FS_READ_FILE_METHOD`].
    pub method: String,
    /// The method's params; absent means `null`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

/// A notification: a method call without a response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    /// The method name, for example [`INITIALIZED_METHOD`].
    pub method: String,
    /// The method's params.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

/// A successful response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// The id of the request answered.
    pub id: RequestId,
    /// The method's result.
    pub result: Value,
}

/// The `error` member of an error response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// A JSON-RPC error code, for example [`INVALID_PARAMS`].
    pub code: i64,
    /// A human-readable message; for fs calls, the `io::Error`'s message.
    pub message: String,
    /// `{"kind": "<io::ErrorKind name>"}` for fs failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// An error response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorResponse {
    /// The id of the request answered ([`UNKNOWN_REQUEST_ID`] when it could not be read).
    pub id: RequestId,
    /// What went wrong.
    pub error: ErrorObject,
}

/// Any message on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Message {
    /// Has `id` and `method`.
    Request(Request),
    /// Has `method` and no `id`.
    Notification(Notification),
    /// Has `id` and `result`.
    Response(Response),
    /// Has `id` and `error`.
    Error(ErrorResponse),
}

impl Message {
    /// Parses one message. The members decide the variant: `method` with `id` is a request,
    /// `method` alone a notification, `result` a response, `error` an error.
    ///
    /// # Errors
    ///
    /// The parse error, when `bytes` is not JSON or not an object of one of those shapes.
    pub fn from_slice(bytes: &[u8]) -> serde_json::Result<Self> {
        let value: Value = serde_json::from_slice(bytes)?;
        let Some(object) = value.as_object() else {
            return Err(serde::de::Error::custom("a message must be a JSON object"));
        };
        let object = Some(object);
        let has = |key: &str| object.is_some_and(|o| o.contains_key(key));
        if has("method") && has("id") {
            serde_json::from_value(value).map(Message::Request)
        } else if has("method") {
            serde_json::from_value(value).map(Message::Notification)
        } else if has("error") {
            serde_json::from_value(value).map(Message::Error)
        } else {
            serde_json::from_value(value).map(Message::Response)
        }
    }

    /// The message as JSON text.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).expect("protocol messages always serialize")
    }
}

/// Params of [`INITIALIZE_METHOD`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    /// Who is connecting, for the server's logs.
    #[serde(default)]
    pub client_name: String,
    /// The session a reconnecting client takes back (the current codex protocol).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_session_id: Option<String>,
}

/// Result of [`INITIALIZE_METHOD`]. A plain codex-style peer ignores the extra member.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    /// The connection's session (a UUID), which a reconnect may take back; absent from servers
    /// of the March 2026 protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// What the executor is, as `environment/info` answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_info: Option<codex::EnvironmentInfo>,
    /// The capfs protocol extensions this server offers; absent from other servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capfs: Option<ServerCapabilities>,
}

/// What a capfs server offers beyond the standard methods.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerCapabilities {
    /// The capfs server's version.
    pub version: String,
    /// The largest message the server accepts, in bytes.
    pub max_message_bytes: u64,
    /// The server understands [`CAPFS_READ_FILE_STREAM_METHOD`],
    /// [`CAPFS_WRITE_FILE_STREAM_METHOD`] and data frames.
    #[serde(default)]
    pub data_frames: bool,
    /// The largest file `fs/readFile` returns, when the served file system has such a bound; a
    /// client applies it to its own whole-file reads over streams (see
    /// [`ReadStreamParams::max_bytes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_limit: Option<u64>,
    /// The server understands [`CAPFS_WALK_METHOD`].
    #[serde(default)]
    pub walk: bool,
    /// The sandbox roots the server serves (absent from older capfs servers).
    #[serde(default)]
    pub roots: Vec<RootDescription>,
    /// The server understands [`CAPFS_NARROW_ROOTS_METHOD`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub narrow_roots: bool,
    /// The server understands [`CAPFS_READ_FILE_RANGE_METHOD`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ranges: bool,
}

/// One sandbox root in [`ServerCapabilities::roots`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RootDescription {
    /// The root's absolute path, as clients name it.
    pub path: AbsolutePathBuf,
    /// What clients may do under it.
    pub access: RootAccess,
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

impl From<crate::Access> for RootAccess {
    fn from(access: crate::Access) -> Self {
        match access {
            crate::Access::ReadWrite => Self::ReadWrite,
            crate::Access::ReadOnly => Self::ReadOnly,
        }
    }
}

/// Params of [`CAPFS_READ_FILE_STREAM_METHOD`]. The server answers with data frames of
/// `streamId` carrying the contents in order, then with [`StreamResponse`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadStreamParams {
    /// An absolute path.
    pub path: AbsolutePathBuf,
    /// Chosen by the client, unique among its open streams on the connection.
    pub stream_id: u64,
    /// When set, a file holding more than this many bytes fails with `InvalidInput`
    /// (`file is too large to read: limit is {N} bytes`), as `fs/readFile` does at the read
    /// limit: refused before any data frame when its size says so, cut off after at most this
    /// many bytes when it grows. Absent: the whole file, whatever its size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

/// Params of [`CAPFS_WRITE_FILE_STREAM_METHOD`]. The client sends exactly `size` bytes as data
/// frames of `streamId` after the request; the server replaces the file once it has them all.
/// Without `size`, the contents end with a frame tagged [`DATA_FRAME_LAST_TAG`]. An empty frame
/// tagged [`DATA_FRAME_TAG`] aborts the write either way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteStreamParams {
    /// An absolute path.
    pub path: AbsolutePathBuf,
    /// Chosen by the client, unique among its open streams on the connection.
    pub stream_id: u64,
    /// How many bytes follow; absent when the client does not know (a pipe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Permission bits for the file (capfs; see [`crate::WriteOptions::mode`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    /// Modification time in ms since the Unix epoch (capfs; see
    /// [`crate::WriteOptions::modified_at_ms`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_at_ms: Option<i64>,
}

/// Result of both stream methods: how many bytes the data frames carried.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamResponse {
    /// Bytes carried by the stream's data frames.
    pub size: u64,
}

/// Params with a single `path`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathParams {
    /// An absolute path.
    pub path: AbsolutePathBuf,
}

/// Result of [`FS_READ_FILE_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadFileResponse {
    /// The contents, standard padded base64.
    pub data_base64: String,
}

/// Params of [`FS_WRITE_FILE_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteFileParams {
    /// An absolute path.
    pub path: AbsolutePathBuf,
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
}

/// Params of [`CAPFS_CREATE_SYMLINK_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateSymlinkParams {
    /// Where the link goes (an absolute path).
    pub path: AbsolutePathBuf,
    /// The link's text, stored as it is.
    pub target: String,
}

/// Result of [`CAPFS_READ_LINK_METHOD`] (params: [`PathParams`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadLinkResponse {
    /// The link's text.
    pub target: String,
}

/// Params of [`FS_CREATE_DIRECTORY_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateDirectoryParams {
    /// An absolute path.
    pub path: AbsolutePathBuf,
    /// Create parents too; null or missing means true.
    #[serde(default)]
    pub recursive: Option<bool>,
}

/// Result of [`FS_GET_METADATA_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
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
            mode: Some(m.mode),
        }
    }
}

impl From<GetMetadataResponse> for FileMetadata {
    fn from(m: GetMetadataResponse) -> Self {
        Self {
            is_directory: m.is_directory,
            is_file: m.is_file,
            is_symlink: m.is_symlink,
            size: m.size,
            created_at_ms: m.created_at_ms,
            modified_at_ms: m.modified_at_ms,
            mode: m.mode.unwrap_or(0),
        }
    }
}

/// One entry of [`ReadDirectoryResponse`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
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
        Self {
            file_name: e.file_name,
            is_directory: e.is_directory,
            is_file: e.is_file,
            is_symlink: e.is_symlink,
            lossy_name: false,
            raw_name: None,
        }
    }
}

/// Result of [`FS_READ_DIRECTORY_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
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

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Params of [`FS_REMOVE_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoveParams {
    /// An absolute path.
    pub path: AbsolutePathBuf,
    /// Remove directories with their contents; null or missing means true.
    #[serde(default)]
    pub recursive: Option<bool>,
    /// Ignore a missing path; null or missing means true.
    #[serde(default)]
    pub force: Option<bool>,
}

/// Params of [`FS_COPY_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CopyParams {
    /// What to copy.
    pub source_path: AbsolutePathBuf,
    /// Where to.
    pub destination_path: AbsolutePathBuf,
    /// Required for directories; null or missing means false.
    #[serde(default)]
    pub recursive: Option<bool>,
}

/// Params of [`FS_RENAME_METHOD`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenameParams {
    /// What to rename.
    pub source_path: AbsolutePathBuf,
    /// The new path, in the same root.
    pub destination_path: AbsolutePathBuf,
    /// Replace an existing destination; null or missing means false.
    #[serde(default)]
    pub overwrite: Option<bool>,
}

/// The `io::ErrorKind` values that travel by name in `error.data.kind`. Any other kind travels
/// as `Other`.
const ERROR_KINDS: &[(io::ErrorKind, &str)] = &[
    (io::ErrorKind::NotFound, "NotFound"),
    (io::ErrorKind::PermissionDenied, "PermissionDenied"),
    (io::ErrorKind::AlreadyExists, "AlreadyExists"),
    (io::ErrorKind::IsADirectory, "IsADirectory"),
    (io::ErrorKind::NotADirectory, "NotADirectory"),
    (io::ErrorKind::DirectoryNotEmpty, "DirectoryNotEmpty"),
    (io::ErrorKind::InvalidInput, "InvalidInput"),
    (io::ErrorKind::InvalidData, "InvalidData"),
    (io::ErrorKind::CrossesDevices, "CrossesDevices"),
    (io::ErrorKind::ReadOnlyFilesystem, "ReadOnlyFilesystem"),
    (io::ErrorKind::StorageFull, "StorageFull"),
    (io::ErrorKind::QuotaExceeded, "QuotaExceeded"),
    (io::ErrorKind::FileTooLarge, "FileTooLarge"),
    (io::ErrorKind::InvalidFilename, "InvalidFilename"),
    (io::ErrorKind::TooManyLinks, "TooManyLinks"),
    (io::ErrorKind::ResourceBusy, "ResourceBusy"),
    (io::ErrorKind::ExecutableFileBusy, "ExecutableFileBusy"),
    (io::ErrorKind::BrokenPipe, "BrokenPipe"),
    (io::ErrorKind::TimedOut, "TimedOut"),
    (io::ErrorKind::Interrupted, "Interrupted"),
    (io::ErrorKind::Unsupported, "Unsupported"),
    (io::ErrorKind::UnexpectedEof, "UnexpectedEof"),
    (io::ErrorKind::OutOfMemory, "OutOfMemory"),
    (io::ErrorKind::WouldBlock, "WouldBlock"),
    (io::ErrorKind::ConnectionAborted, "ConnectionAborted"),
    (io::ErrorKind::Other, "Other"),
];

/// The `ELOOP` kind has no stable name to construct it by; it travels as `FilesystemLoop`.
const FILESYSTEM_LOOP: &str = "FilesystemLoop";

fn is_filesystem_loop(kind: io::ErrorKind) -> bool {
    kind == io::Error::from_raw_os_error(rustix::io::Errno::LOOP.raw_os_error()).kind()
}

/// The name of `kind` as it travels in `error.data.kind`.
pub fn error_kind_name(kind: io::ErrorKind) -> &'static str {
    if is_filesystem_loop(kind) {
        return FILESYSTEM_LOOP;
    }
    ERROR_KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or("Other", |(_, name)| name)
}

/// Builds an `io::Error` of the kind named `name` (see [`error_kind_name`]); `None` for an
/// unknown name.
fn error_kind_from_name(name: &str, message: String) -> Option<io::Error> {
    if name == FILESYSTEM_LOOP {
        let raw = io::Error::from_raw_os_error(rustix::io::Errno::LOOP.raw_os_error());
        return Some(io::Error::new(raw.kind(), message));
    }
    ERROR_KINDS
        .iter()
        .find(|(_, n)| *n == name)
        .map(|(kind, _)| io::Error::new(*kind, message))
}

impl ErrorObject {
    /// The wire form of a failed fs call: `InvalidInput` is -32600, everything else -32603, and
    /// `data.kind` carries the exact kind.
    pub fn from_io(err: &io::Error) -> Self {
        let code = if err.kind() == io::ErrorKind::InvalidInput {
            INVALID_REQUEST
        } else {
            INTERNAL_ERROR
        };
        Self {
            code,
            message: err.to_string(),
            data: Some(serde_json::json!({ "kind": error_kind_name(err.kind()) })),
        }
    }

    /// The same error with the code the current codex protocol gives its kind: `NotFound` is
    /// -32004 and `PermissionDenied` -32600 (codex's client reads the kind from the code alone);
    /// `data.kind` stays for capfs's own client.
    pub fn for_form(mut self, form: uri::PathForm) -> Self {
        if form == uri::PathForm::Uri && self.code == INTERNAL_ERROR {
            let kind = self
                .data
                .as_ref()
                .and_then(|d| d.get("kind"))
                .and_then(Value::as_str);
            match kind {
                Some("NotFound") => self.code = codex::NOT_FOUND_CODE,
                Some("PermissionDenied") => self.code = INVALID_REQUEST,
                _ => {}
            }
        }
        self
    }

    /// A protocol-level error with no `io::ErrorKind` behind it.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The `io::Error` the call would have given locally: the kind from `data.kind` when
    /// present, otherwise `InvalidInput` for -32600 and -32602, `NotFound` for -32004 and
    /// `Other` for the rest.
    pub fn into_io(self) -> io::Error {
        let named = self
            .data
            .as_ref()
            .and_then(|d| d.get("kind"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(err) = named.and_then(|name| error_kind_from_name(&name, self.message.clone()))
        {
            return err;
        }
        let kind = match self.code {
            INVALID_REQUEST | INVALID_PARAMS => io::ErrorKind::InvalidInput,
            codex::NOT_FOUND_CODE => io::ErrorKind::NotFound,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_kind_round_trips() {
        let mut kinds: Vec<io::ErrorKind> = ERROR_KINDS.iter().map(|(k, _)| *k).collect();
        kinds.push(io::Error::from_raw_os_error(rustix::io::Errno::LOOP.raw_os_error()).kind());
        for kind in kinds {
            let wire = ErrorObject::from_io(&io::Error::new(kind, "m"));
            let back = wire.clone().into_io();
            assert_eq!(back.kind(), kind, "{wire:?}");
            assert_eq!(back.to_string(), "m");
            let expected_code = if kind == io::ErrorKind::InvalidInput {
                -32600
            } else {
                -32603
            };
            assert_eq!(wire.code, expected_code);
        }
    }

    #[test]
    fn a_peer_without_data_still_maps_codes() {
        assert_eq!(
            ErrorObject::new(INVALID_REQUEST, "x").into_io().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            ErrorObject::new(INTERNAL_ERROR, "x").into_io().kind(),
            io::ErrorKind::Other
        );
    }

    #[test]
    fn messages_parse_by_shape_with_either_id_type() {
        let m = Message::from_slice(
            br#"{"jsonrpc":"2.0","id":"a","method":"fs/readFile","params":{"path":"/x"}}"#,
        )
        .unwrap();
        assert!(
            matches!(m, Message::Request(Request { id: RequestId::String(ref s), .. }) if s == "a")
        );
        let m = Message::from_slice(br#"{"method":"initialized"}"#).unwrap();
        assert!(matches!(m, Message::Notification(_)));
        let m = Message::from_slice(br#"{"id":7,"result":{}}"#).unwrap();
        assert!(matches!(
            m,
            Message::Response(Response {
                id: RequestId::Integer(7),
                ..
            })
        ));
        let m = Message::from_slice(br#"{"id":7,"error":{"code":-32601,"message":"x"}}"#).unwrap();
        assert!(matches!(m, Message::Error(_)));
        assert!(Message::from_slice(b"not-json").is_err());
        assert!(Message::from_slice(b"[1,2]").is_err());
    }

    #[test]
    fn relative_and_nul_paths_do_not_parse() {
        for bad in [r#"{"path":"rel"}"#, r#"{"path":"/a\u0000b"}"#, r#"{}"#] {
            assert!(serde_json::from_str::<PathParams>(bad).is_err(), "{bad}");
        }
    }
}
