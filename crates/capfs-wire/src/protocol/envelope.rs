//! The JSON-RPC envelope: ids, the four message shapes, the error codes and the fixed
//! protocol-level messages.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

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

/// A message as a server reads it: a request's params stay their JSON text, decoded once,
/// straight into the type of the method's params, by whoever runs the method.
#[derive(Debug)]
pub(crate) enum Incoming {
    Request {
        id: RequestId,
        method: String,
        params: Option<Box<RawValue>>,
    },
    Notification {
        method: String,
    },
    /// A response or an error response.
    Reply,
}

impl Incoming {
    /// Reads one message as [`Message::from_slice`] does, with the same errors; a request's
    /// params are only checked to be JSON.
    pub(crate) fn from_slice(bytes: &[u8]) -> serde_json::Result<Self> {
        // A request is read member by member without a `Value` of the whole; anything else is
        // rare (one `initialized` per connection) and read the general way. Members nobody
        // reads are only skipped by that reading, and skipping is laxer than decoding (bytes
        // that are not UTF-8, lone surrogates, numbers out of range), so the message is first
        // checked as decoding checks it, building nothing: what the general way refuses is
        // refused here too, with its message.
        if serde_json::from_slice::<Checked>(bytes).is_ok()
            && let Ok(Members::Object {
                id: Some(id),
                method: Some(method),
                params,
            }) = serde_json::from_slice::<Members>(bytes)
            && let (Ok(id), Ok(method)) = (RequestId::deserialize(id), String::deserialize(method))
        {
            return Ok(Incoming::Request { id, method, params });
        }
        Ok(match Message::from_slice(bytes)? {
            Message::Request(request) => Incoming::Request {
                id: request.id,
                method: request.method,
                params: request
                    .params
                    .map(|p| serde_json::value::to_raw_value(&p).expect("JSON values serialize")),
            },
            Message::Notification(n) => Incoming::Notification { method: n.method },
            Message::Response(_) | Message::Error(_) => Incoming::Reply,
        })
    }
}

/// A JSON text read as a `Value` would be, every string and number decoded and checked, with
/// nothing kept.
struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> serde::de::Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_entry::<Checked, Checked>()?.is_some() {}
        Ok(Checked)
    }
}

/// The top level of a message, its `id` and `method` as values (they are small) and its
/// `params` as text; `Other` for anything that is not a JSON object.
enum Members {
    Object {
        id: Option<Value>,
        method: Option<Value>,
        params: Option<Box<RawValue>>,
    },
    Other,
}

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(MembersVisitor)
    }
}

struct MembersVisitor;

impl<'de> serde::de::Visitor<'de> for MembersVisitor {
    type Value = Members;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
        let (mut id, mut method, mut params) = (None, None, None);
        // As in a `Value`, the last of a repeated member wins.
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "id" => id = Some(map.next_value()?),
                "method" => method = Some(map.next_value()?),
                "params" => params = Some(map.next_value::<Box<RawValue>>()?),
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        // `"params": null` is no params, as in a `Request`.
        let params = params.filter(|p| p.get() != "null");
        Ok(Members::Object { id, method, params })
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Members, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(Members::Other)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Members, E> {
        Ok(Members::Other)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Members, E> {
        Ok(Members::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Members, E> {
        Ok(Members::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Members, E> {
        Ok(Members::Other)
    }

    fn visit_str<E>(self, _: &str) -> Result<Members, E> {
        Ok(Members::Other)
    }

    fn visit_unit<E>(self) -> Result<Members, E> {
        Ok(Members::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server's reading of a message decides as [`Message::from_slice`] does, with the
    /// same error text, and keeps a request's params as sent.
    #[test]
    fn incoming_messages_read_as_messages_do() {
        let cases: &[&[u8]] = &[
            br#"{"id":1,"method":"fs/readFile","params":{"path":"/x"}}"#,
            br#"{"jsonrpc":"2.0","id":"a","method":"m","params":[1,{"b":null}]}"#,
            br#"{"id":1,"method":"m","params":null}"#,
            br#"{"id":1,"method":"m"}"#,
            br#"{"id":1,"id":2,"method":"m","params":{"a":1},"params":{"b":2}}"#,
            br#"{"id":null,"method":"m"}"#,
            br#"{"id":1.5,"method":"m"}"#,
            br#"{"id":[1],"method":"m"}"#,
            br#"{"id":1,"method":5}"#,
            br#"{"id":1,"method":null}"#,
            br#"{"method":"initialized"}"#,
            br#"{"method":7}"#,
            br#"{"id":7,"result":{}}"#,
            br#"{"id":7,"error":{"code":-32601,"message":"x"}}"#,
            br#"{"id":7,"error":5}"#,
            br#"{}"#,
            br#"[1,2]"#,
            br#""text""#,
            br#"null"#,
            b"not-json",
            br#"{"id":1,"method":"m","params":{"a":}"#,
            br#"{"id":1,"method":"m","params":{"a":"\q"}}"#,
            br#"{"id":1,"method":"m"} trailing"#,
            b"",
            // Laxer to skip than to decode: bytes that are not UTF-8, lone surrogates and
            // numbers out of range, where nothing reads them.
            b"{\"id\":1,\"method\":\"fs/readFile\",\"pasams\":{\"path\":\"/a\x89txt\"}}",
            b"{\"id\":1,\"method\":\"m\",\"params\":{\"x\":\"\xff\"}}",
            br#"{"id":1,"method":"m","other":"\ud800"}"#,
            br#"{"id":1,"method":"m","params":{"x":"\udc00"}}"#,
            br#"{"id":1,"method":"m","params":{"x":"\ud800\u0041"}}"#,
            br#"{"id":1,"method":"m","other":1e400}"#,
            br#"{"id":1,"method":"m","params":[-1e400]}"#,
            br#"{"id":1,"method":"m","params":{"x":"\uZZZZ"}}"#,
        ];
        for bytes in cases {
            let shown = String::from_utf8_lossy(bytes);
            let expected = Message::from_slice(bytes);
            let read = Incoming::from_slice(bytes);
            match (expected, read) {
                (Err(e), Err(r)) => assert_eq!(e.to_string(), r.to_string(), "{shown}"),
                (Ok(Message::Request(q)), Ok(Incoming::Request { id, method, params })) => {
                    assert_eq!((q.id, q.method), (id, method), "{shown}");
                    let params = params.map(|p| serde_json::from_str::<Value>(p.get()).unwrap());
                    assert_eq!(q.params.filter(|p| !p.is_null()), params, "{shown}");
                }
                (Ok(Message::Notification(n)), Ok(Incoming::Notification { method })) => {
                    assert_eq!(n.method, method, "{shown}");
                }
                (Ok(Message::Response(_) | Message::Error(_)), Ok(Incoming::Reply)) => {}
                (expected, read) => panic!("{shown}: {expected:?} but {read:?}"),
            }
        }
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
}
