//! Wire types of the capfs protocol: JSON-RPC 2.0 style messages over WebSocket, compatible with
//! the codex exec-server's file-system methods. Serde only; no I/O happens here.
//!
//! Envelope: request `{"id", "method", "params"}`, notification `{"method", "params"}`, response
//! `{"id", "result"}`, error `{"id", "error": {"code", "message", "data"}}`. Ids are integers or
//! strings and are echoed verbatim. A `"jsonrpc": "2.0"` member is accepted and ignored.
//!
//! Every struct here is `#[non_exhaustive]`: the protocol adds members to its messages, and a
//! new field must not break a caller. Outside this crate they are read, and built by decoding.

mod checked;
mod envelope;
mod error_data;
mod file_params;
mod frames;
mod handshake;
mod incoming;
mod methods;
mod narrow;
mod walk;
mod wire_path;

pub mod codex;
pub mod network_proxy;
pub mod process;
pub mod uri;

pub use envelope::{
    DUPLICATE_INITIALIZE_MESSAGE, ErrorObject, ErrorResponse, INTERNAL_ERROR, INVALID_PARAMS,
    INVALID_REQUEST, MALFORMED_MESSAGE_PREFIX, METHOD_NOT_FOUND, Message, NOT_INITIALIZED_MESSAGE,
    NOT_INITIALIZED_NOTIFICATION_MESSAGE, Notification, PARSE_ERROR, Request, RequestId, Response,
    SERVER_BUSY, UNKNOWN_REQUEST_ID,
};
pub use error_data::error_kind_name;
pub use file_params::{
    CopyParams, CreateDirectoryParams, CreateSymlinkParams, DirectoryEntry, GetMetadataResponse,
    PathParams, ReadDirectoryResponse, ReadFileResponse, ReadLinkResponse, ReadStreamParams,
    RemoveParams, RenameParams, StreamResponse, WriteFileParams, WriteStreamParams,
};
pub use frames::{
    DATA_CHUNK_BYTES, DATA_FRAME_HEADER_LEN, DATA_FRAME_LAST_TAG, DATA_FRAME_TAG,
    data_frame_header, data_frame_kind, data_frame_last_header, data_frame_stream,
};
pub use handshake::{
    InitializeParams, InitializeResponse, RootAccess, RootDescription, ServerCapabilities,
};
pub(crate) use incoming::{Incoming, RequestParams};
pub use methods::*;
pub use narrow::{NarrowRootsParams, NarrowRootsResponse, NarrowedRoot, ReadRangeParams};
pub use walk::{WalkEntryWire, WalkErrorWire, WalkParams, WalkResponse};
pub use wire_path::WirePath;
