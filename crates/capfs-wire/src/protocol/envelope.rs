//! The JSON-RPC envelope: ids, the four message shapes, the error codes and the fixed
//! protocol-level messages.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(doc)]
use super::{FS_READ_FILE_METHOD, INITIALIZED_METHOD};

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
#[non_exhaustive]
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
#[non_exhaustive]
pub struct Notification {
    /// The method name, for example [`INITIALIZED_METHOD`].
    pub method: String,
    /// The method's params.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

/// A successful response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Response {
    /// The id of the request answered.
    pub id: RequestId,
    /// The method's result.
    pub result: Value,
}

/// The `error` member of an error response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
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
#[non_exhaustive]
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
