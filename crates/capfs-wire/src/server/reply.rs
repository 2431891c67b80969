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
use super::outgoing::Outgoing;
use super::payload::{Payload, REPLY_ENVELOPE_BYTES, base64_len};
use crate::protocol::{ErrorObject, ErrorResponse, Message, RequestId, Response};

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
        Ok(Payload::FileData(data)) => Some(base64_len(data.len() as u64)),
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
            let mut text = result_opening(&id, base64_len(data.len() as u64) as usize);
            text.push_str(r#"{"dataBase64":""#);
            STANDARD.encode_string(&data, &mut text);
            text.push_str(r#""}}"#);
            text
        }
        Ok(Payload::Block { data, eof }) => {
            let mut text = result_opening(&id, base64_len(data.len() as u64) as usize);
            text.push_str(r#"{"chunk":""#);
            STANDARD.encode_string(&data, &mut text);
            text.push_str(if eof {
                r#"","eof":true}}"#
            } else {
                r#"","eof":false}}"#
            });
            text
        }
        Ok(Payload::Text(result)) => {
            let mut text = result_opening(&id, result.len());
            text.push_str(&result);
            text.push('}');
            text
        }
        Ok(Payload::Json(value)) => reply_message(id, Ok(value)).to_text(),
        Err(error) => reply_message(id, Err(error)).to_text(),
    }
}

/// `{"id":<id>,"result":` with room for a result of `result_len` bytes and the closing brace.
fn result_opening(id: &RequestId, result_len: usize) -> String {
    let id = serde_json::to_string(id).expect("ids always serialize");
    let mut text = String::with_capacity(result_len + id.len() + REPLY_ENVELOPE_BYTES);
    text.push_str(r#"{"id":"#);
    text.push_str(&id);
    text.push_str(r#","result":"#);
    text
}

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
