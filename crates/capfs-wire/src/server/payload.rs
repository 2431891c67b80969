//! What a handler returns and what it records: the result as it will be written into the reply
//! (a file's contents are encoded straight into the reply text), and the bytes it moved and the
//! outgoing budget its reply draws from.

use crate::encoding::STANDARD;
use base64::Engine;
use serde::Serialize;
use serde_json::Value;

use super::budget::ReplyBudget;
use crate::protocol::ErrorObject;

/// Bytes a reply's JSON needs beyond the base64 text of a file: the id, the member names and
/// the punctuation. Ids are at most a message long, so this is a bound only with the id
/// counted separately (see [`reply_fits`]).
pub(crate) const REPLY_ENVELOPE_BYTES: usize = 64;

/// A successful result, as it will be serialised into the reply's text.
#[derive(Debug)]
pub(crate) enum Payload {
    /// Any result.
    Json(Value),
    /// A result already serialised: the JSON text of a protocol type, written into the reply
    /// as it is, without a `Value` in between.
    Text(String),
    /// The result of `fs/readFile`: `{"dataBase64": ...}` built straight into the reply text,
    /// without a base64 string or a `Value` in between.
    FileData(Vec<u8>),
    /// The result of `fs/readBlock`: `{"chunk": ..., "eof": ...}`, built the same way.
    Block { data: Vec<u8>, eof: bool },
}

impl Payload {
    /// The result as a JSON value.
    pub(crate) fn into_value(self) -> Value {
        match self {
            Payload::Json(value) => value,
            Payload::Text(text) => serde_json::from_str(&text).expect("results are JSON"),
            Payload::FileData(data) => serde_json::json!({ "dataBase64": STANDARD.encode(data) }),
            Payload::Block { data, eof } => {
                serde_json::json!({ "chunk": STANDARD.encode(data), "eof": eof })
            }
        }
    }

    /// What the audit log sees of the result (it reads only a stream's `size`).
    pub(crate) fn for_log(reply: &Result<Payload, ErrorObject>) -> Result<Value, ErrorObject> {
        match reply {
            Ok(Payload::Json(value)) => Ok(value.clone()),
            Ok(Payload::FileData(_) | Payload::Text(_) | Payload::Block { .. }) => Ok(Value::Null),
            Err(error) => Err(error.clone()),
        }
    }
}

/// Length of the base64 text of `len` bytes.
pub(crate) fn base64_len(len: u64) -> u64 {
    len.div_ceil(3).saturating_mul(4)
}

/// True when a `fs/readFile` reply carrying `len` bytes stays within `max_message_bytes`: the
/// base64 text plus the envelope. A peer announces the same bound for what it receives.
pub(crate) fn reply_fits(len: u64, max_message_bytes: usize) -> bool {
    base64_len(len).saturating_add(REPLY_ENVELOPE_BYTES as u64) <= max_message_bytes as u64
}

/// What a request did, for logs: the bytes it moved and, when they are kept, the paths it named
/// as sent (noted when its params are read); and, on a connection, the outgoing budget its reply
/// draws from.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) bytes: u64,
    pub(crate) paths: Option<Vec<String>>,
    pub(crate) budget: Option<ReplyBudget>,
}

impl Outcome {
    /// Reserves `bytes` for the reply before it is built, waiting if need be (see
    /// [`ReplyBudget::cover`]); nothing to do without a budget.
    pub(crate) async fn cover(&mut self, bytes: u64) -> std::io::Result<()> {
        match self.budget.as_mut() {
            Some(budget) => budget.cover(bytes).await,
            None => Ok(()),
        }
    }

    /// Waits for the connection's turn to build a reply of unknown size (see
    /// [`ReplyBudget::unsized_work`]); `None` without a budget.
    pub(crate) async fn unsized_work(&mut self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        match self.budget.as_mut() {
            Some(budget) => Some(budget.unsized_work().await),
            None => None,
        }
    }

    /// Reserves `bytes` if that needs no wait: false when it would.
    pub(crate) fn try_cover(&mut self, bytes: u64) -> std::io::Result<bool> {
        match self.budget.as_mut() {
            Some(budget) => budget.try_cover(bytes),
            None => Ok(true),
        }
    }
}

pub(crate) fn invalid_input(code: i64, message: String) -> ErrorObject {
    ErrorObject {
        code,
        message,
        data: Some(serde_json::json!({ "kind": "InvalidInput" })),
    }
}

pub(crate) fn serialized(value: impl Serialize) -> Result<Payload, ErrorObject> {
    Ok(Payload::Text(
        serde_json::to_string(&value).expect("protocol results always serialize"),
    ))
}
