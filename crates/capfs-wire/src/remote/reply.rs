//! Replies as the reader task sees them: which call a message answers, how a reply decodes
//! into the caller's type or `io::Error`, and the error replies the reader gives waiting calls
//! itself when the server breaks the connection.

use std::io;

use bytes::Bytes;
use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::error::{CapacityError, ProtocolError};

use super::common::{Reply, connection_lost};
use crate::protocol::{ErrorObject, ErrorResponse, Message, RequestId};

/// What a server did when it sent a frame or message over the client's limit.
pub(super) fn too_big(err: CapacityError) -> io::Error {
    let message = match err {
        CapacityError::MessageTooLong { size, max_size } => format!(
            "the server announced a message of {size} bytes, over the client's limit of {max_size} \
             bytes"
        ),
        e => format!("the server sent too much: {e}"),
    };
    crate::error::broken_by_server(message)
}

/// What a server did when its connection ended in a WebSocket error that is its fault, a
/// protocol violation; `None` for a connection that was merely lost.
pub(super) fn broken_by(err: &WsError) -> Option<io::Error> {
    let message = match err {
        // The peer went away: lost, not broken.
        WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => return None,
        WsError::Protocol(e) => format!("the server broke the WebSocket protocol: {e}"),
        WsError::Utf8(_) => "the server sent a text frame that is not UTF-8".to_string(),
        _ => return None,
    };
    Some(crate::error::broken_by_server(message))
}

/// The error reply the reader gives call `id` itself, decoded by the caller like a server's.
pub(super) fn local_error_reply(id: i64, err: &io::Error) -> Reply {
    let message = Message::Error(ErrorResponse {
        id: RequestId::Integer(id),
        error: ErrorObject::from_io(err),
    });
    Bytes::from(message.to_text())
}

/// How many bytes the id at the start of `text` takes, when it is one as a capfs client sends
/// it and JSON allows it: 1 to 18 digits, no leading zero but in `0` itself (`09` is not JSON,
/// and serde refuses the whole message). `None` for anything else, left to serde.
pub(super) fn id_digits(text: &[u8]) -> Option<usize> {
    let digits = text.iter().take_while(|b| b.is_ascii_digit()).count();
    let leading_zero = text.first() == Some(&b'0') && digits > 1;
    ((1..=18).contains(&digits) && !leading_zero).then_some(digits)
}

/// The id of the call a reply answers, or `None` when `message` is not a reply to one of ours
/// (a request or notification from the server, a string id, not a JSON object). Only the
/// envelope is looked at; the caller decodes the rest.
pub(super) fn reply_id(message: &[u8]) -> Option<i64> {
    // A capfs server writes the id first: `{"id":7,"result":...` or `{"id":7,"error":...`.
    if let Some(rest) = message.strip_prefix(br#"{"id":"#)
        && let Some(digits) = id_digits(rest)
    {
        let tail = &rest[digits..];
        if tail.starts_with(br#","result":"#) || tail.starts_with(br#","error":"#) {
            return std::str::from_utf8(&rest[..digits]).ok()?.parse().ok();
        }
    }
    /// Just the members that tell a reply from a message of another kind.
    #[derive(Deserialize)]
    struct Envelope {
        id: Option<RequestId>,
        #[serde(default, deserialize_with = "present")]
        method: bool,
        #[serde(default, deserialize_with = "present")]
        result: bool,
        #[serde(default, deserialize_with = "present")]
        error: bool,
    }
    /// True for a member that is there, whatever its value (`null` included).
    fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        IgnoredAny::deserialize(d).map(|_| true)
    }
    match serde_json::from_slice(message).ok()? {
        Envelope {
            id: Some(RequestId::Integer(id)),
            method: false,
            result,
            error,
        } if result || error => Some(id),
        _ => None,
    }
}

/// A reply decoded into the result type the caller expects.
#[derive(Deserialize)]
struct Answer<T> {
    result: Option<T>,
    error: Option<ErrorObject>,
}

/// Decodes a reply: the server's error as the `io::Error` it stands for, a result as `T`.
pub(super) fn finish<T: DeserializeOwned>(
    method: &str,
    reply: Result<Reply, oneshot::error::RecvError>,
) -> io::Result<T> {
    finish_with(method, reply, |_| None)
}

/// [`finish`], where `fast` reads the reply first: a result it returns is the call's, and a
/// reply it leaves (`None`) is decoded as any other. `fast` must return only what serde would
/// decode from the same reply (`canonical.rs`).
pub(super) fn finish_with<T: DeserializeOwned>(
    method: &str,
    reply: Result<Reply, oneshot::error::RecvError>,
    fast: impl FnOnce(&str) -> Option<T>,
) -> io::Result<T> {
    let reply = reply.map_err(|_| connection_lost())?;
    let unexpected = |e: &dyn std::fmt::Display| crate::error::unexpected_result(method, e);
    // The whole reply is checked for UTF-8 once, here; decoded from bytes, serde_json would
    // check every string of it again, each on its own (a 100-entry listing holds 500 of them).
    let text = std::str::from_utf8(&reply).map_err(|e| unexpected(&e))?;
    if let Some(result) = fast(text) {
        return Ok(result);
    }
    let answer: Answer<T> = serde_json::from_str(text).map_err(|e| unexpected(&e))?;
    match answer {
        Answer {
            error: Some(error), ..
        } => Err(error.into_io()),
        Answer {
            result: Some(result),
            ..
        } => Ok(result),
        Answer { .. } => Err(unexpected(&"neither a result nor an error")),
    }
}

/// The code of an error reply; `None` for a result.
pub(super) fn error_code(reply: &[u8]) -> Option<i64> {
    #[derive(Deserialize)]
    struct Code {
        code: i64,
    }
    #[derive(Deserialize)]
    struct Coded {
        error: Option<Code>,
    }
    serde_json::from_slice::<Coded>(reply)
        .ok()
        .and_then(|c| c.error)
        .map(|e| e.code)
}

/// The empty result of mutating methods; any object is accepted.
#[derive(Debug, Deserialize)]
pub(super) struct Empty {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::InitializeResponse;

    #[test]
    fn replies_are_told_from_other_messages() {
        assert_eq!(reply_id(br#"{"id":7,"result":{}}"#), Some(7));
        assert_eq!(
            reply_id(br#"{"id":8,"error":{"code":1,"message":"m"}}"#),
            Some(8)
        );
        // Members in another order, as another server may send them.
        assert_eq!(
            reply_id(br#"{"jsonrpc":"2.0","result":null,"id":9}"#),
            Some(9)
        );
        // A request or notification from the server is not a reply, whatever its id.
        assert_eq!(reply_id(br#"{"id":7,"method":"x","result":1}"#), None);
        assert_eq!(reply_id(br#"{"method":"x"}"#), None);
        assert_eq!(reply_id(br#"{"id":"7","result":{}}"#), None);
        assert_eq!(reply_id(br#"{"id":7}"#), None);
        assert_eq!(reply_id(b"[1]"), None);
        // Not JSON: a leading zero is no number serde reads, so no call is answered.
        assert_eq!(reply_id(br#"{"id":07,"result":{}}"#), None);
        assert_eq!(reply_id(br#"{"id":0,"result":{}}"#), Some(0));
        assert_eq!(
            reply_id(br#"{"id":99999999999999999999,"result":{}}"#),
            None
        );
    }

    #[test]
    fn replies_decode_into_the_expected_type() {
        let ok: InitializeResponse =
            finish("m", Ok(Bytes::from_static(br#"{"id":1,"result":{}}"#))).unwrap();
        assert_eq!(ok, InitializeResponse::default());
        let reply =
            br#"{"id":1,"error":{"code":-32600,"message":"/a: nope","data":{"kind":"NotFound"}}}"#;
        let err = finish::<Empty>("m", Ok(Bytes::from_static(reply))).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        let reply = br#"{"id":1,"result":[1]}"#;
        let err = finish::<Empty>("m", Ok(Bytes::from_static(reply))).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let err = finish::<Empty>("m", Ok(Bytes::from_static(br#"{"id":1}"#))).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        // A binary message is JSON too, but not always UTF-8.
        let reply = b"{\"id\":1,\"result\":{\"a\":\"\xff\"}}";
        let err = finish::<Empty>("m", Ok(Bytes::from_static(reply))).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
