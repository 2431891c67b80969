//! The `initialize` handshake: what the client says and what the server offers.

use serde::{Deserialize, Serialize};

use super::codex;
pub use capfs::{RootAccess, RootDescription};

#[cfg(doc)]
use super::{
    CAPFS_NARROW_ROOTS_METHOD, CAPFS_READ_FILE_RANGE_METHOD, CAPFS_READ_FILE_STREAM_METHOD,
    CAPFS_WALK_METHOD, CAPFS_WRITE_FILE_STREAM_METHOD, INITIALIZE_METHOD, ReadStreamParams,
};

/// Params of [`INITIALIZE_METHOD`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
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
#[non_exhaustive]
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
#[non_exhaustive]
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
