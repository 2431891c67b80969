//! What a handler returns and what it records: the result as it will be written into the reply
//! (a file's contents are encoded straight into the reply text), and the bytes it moved and the
//! outgoing budget its reply draws from.

use crate::encoding::STANDARD;
use base64::Engine;
use serde::Serialize;
use serde_json::Value;

use super::budget::ReplyBudget;
use crate::protocol::{ErrorObject, GetMetadataResponse};

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
    // Room for most results at once (a `getMetadata` is some 150 bytes): growing from
    // serde_json's own start took three reallocations a call.
    let mut text = Vec::with_capacity(SERIALIZED_ROOM);
    serde_json::to_writer(&mut text, &value).expect("protocol results always serialize");
    Ok(Payload::Text(
        String::from_utf8(text).expect("serde_json writes UTF-8"),
    ))
}

/// What a serialised result's text is given before it is written.
const SERIALIZED_ROOM: usize = 256;

/// The result of `fs/getMetadata`, written as serde writes it (its members in order, the
/// optional ones left out when absent) but without serde: it is the call codex makes most,
/// and serde_json scans every member name for characters to escape, which took a twelfth of
/// the server's instructions for the call (callgrind, 64 in flight). The test below holds the
/// two to the same text.
pub(crate) fn metadata(m: &GetMetadataResponse) -> Result<Payload, ErrorObject> {
    fn flag(value: bool) -> &'static str {
        if value { "true" } else { "false" }
    }
    let mut number = itoa::Buffer::new();
    let mut text = String::with_capacity(SERIALIZED_ROOM);
    text.push_str(r#"{"isDirectory":"#);
    text.push_str(flag(m.is_directory));
    text.push_str(r#","isFile":"#);
    text.push_str(flag(m.is_file));
    text.push_str(r#","isSymlink":"#);
    text.push_str(flag(m.is_symlink));
    text.push_str(r#","size":"#);
    text.push_str(number.format(m.size));
    text.push_str(r#","createdAtMs":"#);
    text.push_str(number.format(m.created_at_ms));
    text.push_str(r#","modifiedAtMs":"#);
    text.push_str(number.format(m.modified_at_ms));
    if let Some(ms) = m.accessed_at_ms {
        text.push_str(r#","accessedAtMs":"#);
        text.push_str(number.format(ms));
    }
    if let Some(mode) = m.mode {
        text.push_str(r#","mode":"#);
        text.push_str(number.format(mode));
    }
    text.push('}');
    Ok(Payload::Text(text))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn response() -> impl Strategy<Value = GetMetadataResponse> {
        let flags = (any::<bool>(), any::<bool>(), any::<bool>());
        let numbers = (any::<u64>(), any::<i64>(), any::<i64>());
        let extensions = (any::<Option<i64>>(), any::<Option<u32>>());
        (flags, numbers, extensions).prop_map(|((dir, file, link), (size, c, m), (a, mode))| {
            let mut r: GetMetadataResponse = serde_json::from_value(serde_json::json!({
                "isDirectory": dir, "isFile": file, "isSymlink": link, "size": size,
                "createdAtMs": c, "modifiedAtMs": m,
            }))
            .unwrap();
            r.accessed_at_ms = a;
            r.mode = mode;
            r
        })
    }

    proptest! {
        #[test]
        fn metadata_is_written_as_serde_writes_it(r in response()) {
            let Ok(Payload::Text(text)) = metadata(&r) else { panic!("a text result") };
            prop_assert_eq!(text, serde_json::to_string(&r).unwrap());
        }
    }
}
