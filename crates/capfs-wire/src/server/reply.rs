//! Replies queued for the connection's writer under the outgoing budget: the reply's bytes are
//! reserved before its text is built (what a request reserved before reading a file covers
//! most of it), and the reservation goes with the text into the queue, to be given back once
//! the writer has flushed it.

use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::encoding::STANDARD;
use base64::Engine;
use serde_json::Value;

use super::budget::ReplyBudget;
use super::encoded::{self, EncodedReply};
use super::outgoing::{Outgoing, Tracked};
use super::payload::{Payload, REPLY_ENVELOPE_BYTES, base64_len};
use crate::protocol::{ErrorObject, ErrorResponse, Message, RequestId, Response};
use crate::transport::writer::Queued;

/// Queues the reply to `id`. A reply whose size is known before it is built (a file's, or a
/// result already serialised) is covered first; another (an error, a small result) is covered
/// as built. A reply no budget can hold is answered with the budget's error instead.
pub(crate) async fn send(
    out: &mpsc::Sender<Outgoing>,
    budget: &mut ReplyBudget,
    id: RequestId,
    reply: Result<Payload, ErrorObject>,
) {
    let id_len = serde_json::to_string(&id).map_or(0, |id| id.len()) as u64;
    let known = match &reply {
        // The bytes and their text, both held while the text is built (a writer that encodes
        // the text as it writes it holds the bytes and a piece's text, which is less).
        Ok(Payload::FileData(data) | Payload::Block { data, .. }) => {
            Some(data.len() as u64 + base64_len(data.len() as u64))
        }
        Ok(Payload::Text(text)) => Some(text.len() as u64),
        _ => None,
    };
    let reply = match known {
        Some(len) => match budget
            .cover(id_len + len + REPLY_ENVELOPE_BYTES as u64)
            .await
        {
            Ok(()) => reply,
            Err(e) => Err(ErrorObject::from_io(&e)),
        },
        None => reply,
    };
    let reply = match reply {
        Ok(Payload::FileData(data)) if encoded::in_pieces(data.len()) => {
            let opening = with_opening(&id, FILE_DATA_OPENING);
            return send_encoded(out, budget, opening, data, FILE_DATA_CLOSING).await;
        }
        Ok(Payload::Block { data, eof }) if encoded::in_pieces(data.len()) => {
            let opening = with_opening(&id, BLOCK_OPENING);
            return send_encoded(out, budget, opening, data, block_closing(eof)).await;
        }
        reply => reply,
    };
    let text = reply_text(id.clone(), reply);
    let text = match budget.cover(text.len() as u64).await {
        Ok(()) => text,
        Err(e) => {
            // An error reply larger than a whole share: its message is what cannot be sent.
            error_message(id, ErrorObject::from_io(&e)).to_text()
        }
    };
    let mut reservation = budget.take();
    reservation.shrink_to(text.len() as u64);
    // A closed writer means the peer is gone; there is no one left to tell.
    let _ = out
        .send(Outgoing::reserved(WsMessage::text(text), reservation))
        .await;
}

/// Queues a reply carrying more of a file than one piece, for the writer to encode as it
/// sends it (`encoded.rs`); its text was covered above, and the reservation shrinks to what
/// the writer holds meanwhile.
async fn send_encoded(
    out: &mpsc::Sender<Outgoing>,
    budget: &mut ReplyBudget,
    opening: String,
    data: Vec<u8>,
    closing: &'static str,
) {
    let mut reservation = budget.take();
    let envelope = opening.len() + closing.len();
    reservation.shrink_to(EncodedReply::held_bytes(data.len(), envelope));
    let reply = EncodedReply {
        opening,
        data,
        closing,
        reservation,
    };
    let _ = out.send(Queued::Own(Tracked::Encoded(reply))).await;
}

/// Queues `message`, answered without running a request, under `budget`.
pub(crate) async fn send_message(
    out: &mpsc::Sender<Outgoing>,
    budget: &mut ReplyBudget,
    message: &Message,
) {
    let mut text = message.to_text();
    if let Err(e) = budget.cover(text.len() as u64).await {
        let (Message::Response(Response { id, .. }) | Message::Error(ErrorResponse { id, .. })) =
            message
        else {
            return;
        };
        text = error_message(id.clone(), ErrorObject::from_io(&e)).to_text();
        if budget.cover(text.len() as u64).await.is_err() {
            return;
        }
    }
    let mut reservation = budget.take();
    reservation.shrink_to(text.len() as u64);
    let _ = out
        .send(Outgoing::reserved(WsMessage::text(text), reservation))
        .await;
}

/// The text of the reply to request `id`; a file's contents are encoded straight into it.
pub(crate) fn reply_text(id: RequestId, reply: Result<Payload, ErrorObject>) -> String {
    match reply {
        Ok(Payload::FileData(data)) => {
            let encoded = base64_len(data.len() as u64) as usize;
            let result_len = FILE_DATA_OPENING.len() + encoded + FILE_DATA_CLOSING.len();
            let mut text = result_opening(&id, result_len);
            text.push_str(FILE_DATA_OPENING);
            STANDARD.encode_string(&data, &mut text);
            text.push_str(FILE_DATA_CLOSING);
            text
        }
        Ok(Payload::Block { data, eof }) => {
            let encoded = base64_len(data.len() as u64) as usize;
            let closing = block_closing(eof);
            let mut text = result_opening(&id, BLOCK_OPENING.len() + encoded + closing.len());
            text.push_str(BLOCK_OPENING);
            STANDARD.encode_string(&data, &mut text);
            text.push_str(closing);
            text
        }
        Ok(Payload::Text(result)) => {
            let mut text = result_opening(&id, result.len() + 1);
            text.push_str(&result);
            text.push('}');
            text
        }
        Ok(Payload::Json(value)) => reply_message(id, Ok(value)).to_text(),
        Err(error) => reply_message(id, Err(error)).to_text(),
    }
}

/// What comes before and after the base64 of a file's contents in the result of `fs/readFile`
/// and of `fs/readBlock` (the reply's closing brace included).
const FILE_DATA_OPENING: &str = r#"{"dataBase64":""#;
const FILE_DATA_CLOSING: &str = r#""}}"#;
const BLOCK_OPENING: &str = r#"{"chunk":""#;

fn block_closing(eof: bool) -> &'static str {
    if eof {
        r#"","eof":true}}"#
    } else {
        r#"","eof":false}}"#
    }
}

/// `{"id":<id>,"result":` and then `result_start`.
fn with_opening(id: &RequestId, result_start: &str) -> String {
    let mut text = result_opening(id, result_start.len());
    text.push_str(result_start);
    text
}

/// `{"id":<id>,"result":`, with room for exactly `result_len` bytes more (the result and the
/// reply's closing brace). Exact, so that the text becomes a frame's bytes as it is: with room
/// to spare, the conversion allocated a second time.
fn result_opening(id: &RequestId, result_len: usize) -> String {
    // An integer id is written from a buffer on the stack: a string of its own was one more
    // allocation on every reply. A string id is escaped as JSON escapes it.
    let mut number = itoa::Buffer::new();
    let escaped;
    let id_text = match id {
        RequestId::Integer(n) => number.format(*n),
        RequestId::String(_) => {
            escaped = serde_json::to_string(id).expect("ids always serialize");
            escaped.as_str()
        }
    };
    let mut text = String::with_capacity(OPENING_BYTES + id_text.len() + result_len);
    text.push_str(r#"{"id":"#);
    text.push_str(id_text);
    text.push_str(r#","result":"#);
    text
}

/// `{"id":` and `,"result":`, around the id.
const OPENING_BYTES: usize = r#"{"id":,"result":"#.len();

/// The response or error answering request `id` with `reply`.
pub(crate) fn reply_message(id: RequestId, reply: Result<Value, ErrorObject>) -> Message {
    match reply {
        Ok(result) => Message::Response(Response { id, result }),
        Err(error) => error_message(id, error),
    }
}

pub(crate) fn error_message(id: RequestId, error: ErrorObject) -> Message {
    Message::Error(ErrorResponse { id, error })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply's text fills its allocation exactly, so that it becomes a frame's bytes without a
    /// second allocation, and reads as the JSON it stands for.
    #[test]
    fn reply_texts_are_sized_exactly() {
        let ids = [
            RequestId::Integer(0),
            RequestId::Integer(7),
            RequestId::Integer(-1),
            RequestId::Integer(1_000_000),
            RequestId::Integer(i64::MAX),
            RequestId::Integer(i64::MIN),
            RequestId::String("a\"b\\c\u{1}é".into()),
        ];
        for id in ids {
            let payloads = [
                Payload::Text(r#"{"size":5}"#.into()),
                Payload::FileData(b"hello, world".to_vec()),
                Payload::FileData(Vec::new()),
                Payload::Block {
                    data: vec![7; 1000],
                    eof: true,
                },
                Payload::Block {
                    data: vec![1, 2],
                    eof: false,
                },
            ];
            for payload in payloads {
                let text = reply_text(id.clone(), Ok(payload));
                assert_eq!(text.capacity(), text.len(), "{text}");
                let value: Value = serde_json::from_str(&text).expect(&text);
                assert_eq!(value["id"], serde_json::to_value(&id).unwrap(), "{text}");
                assert!(value["result"].is_object(), "{text}");
            }
        }
    }
}
