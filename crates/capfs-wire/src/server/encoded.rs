//! Replies that carry more of a file than one piece (`fs/readFile`, `fs/readBlock`) are encoded
//! by the connection's writer as it writes them. The text's length is known before any of it is
//! made (the base64 of so many bytes, and the envelope), so on a TCP connection the writer takes
//! the socket, as for a data frame (`outgoing.rs`), writes the text frame's header and then the
//! text piece by piece, each piece encoded into one buffer just before it is written. The peer
//! receives the first bytes while the rest are encoded, where it waited for the last byte to be
//! encoded, and the text is never whole in memory, nor copied again into tungstenite's buffer:
//! a 1 MiB block costs the server one copy of each byte out of the page cache and one into the
//! socket, besides the encoding (docs/performance.md, "Round four"). Where the writer has no
//! socket of its own (stdio, any byte stream), the text is built whole and goes through
//! tungstenite.
//!
//! The frame is the same one message tungstenite would have written: a peer cannot tell them
//! apart.

use futures_util::{Sink, SinkExt};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::budget::Reservation;
use super::payload::base64_len;
use crate::encoding::STANDARD;
use crate::transport::shared::DirectSocket;
use base64::Engine;

/// The file bytes one piece carries: a multiple of 3, so that every piece's base64 but the
/// last ends without padding and the pieces join into the base64 of the whole. Its text is
/// 256 KiB.
pub(crate) const PIECE_DATA_BYTES: usize = 3 * 64 * 1024;

/// True when a reply carrying `len` bytes of a file is encoded by the writer, in pieces.
pub(crate) fn in_pieces(len: usize) -> bool {
    len > PIECE_DATA_BYTES
}

/// A reply whose text is `opening`, the base64 of `data`, then `closing`, under the
/// reservation of what the writer holds while it sends it ([`EncodedReply::held_bytes`]).
pub(crate) struct EncodedReply {
    pub(crate) opening: String,
    pub(crate) data: Vec<u8>,
    pub(crate) closing: &'static str,
    pub(crate) reservation: Reservation,
}

impl EncodedReply {
    /// What the writer holds at most while sending a reply of `data_len` bytes and an envelope
    /// of `envelope_len`: the bytes and their whole text, as a writer without a socket of its
    /// own builds it (one with a socket holds a piece's text instead).
    pub(crate) fn held_bytes(data_len: usize, envelope_len: usize) -> u64 {
        data_len as u64 + base64_len(data_len as u64) + envelope_len as u64
    }

    /// The length of the whole text.
    fn text_len(&self) -> usize {
        let encoded = base64_len(self.data.len() as u64) as usize;
        self.opening.len() + encoded + self.closing.len()
    }

    /// The whole text, for a writer without a socket of its own, and the reservation it
    /// stays under until it is out.
    fn into_text(self) -> (String, Reservation) {
        let mut text = String::with_capacity(self.text_len());
        text.push_str(&self.opening);
        STANDARD.encode_string(&self.data, &mut text);
        text.push_str(self.closing);
        (text, self.reservation)
    }
}

/// Sends `reply`: into `socket` piece by piece when the writer has one, else as one message
/// through `sink`. False when the connection broke. Its reservation is given back once the
/// text is out.
pub(crate) async fn send<S>(
    sink: &mut S,
    socket: Option<&DirectSocket>,
    reply: EncodedReply,
) -> bool
where
    S: Sink<WsMessage> + Unpin,
{
    let Some(socket) = socket else {
        let (text, reservation) = reply.into_text();
        let sent = sink.send(WsMessage::text(text)).await.is_ok();
        drop(reservation);
        return sent;
    };
    let len = reply.text_len();
    let mut pieces = Pieces::new(&reply);
    let sent = socket
        .send_text_frame(sink, len, |buffer| pieces.next_into(buffer))
        .await;
    if let Err(e) = &sent {
        tracing::debug!("writing an encoded reply failed: {e}");
    }
    drop(reply);
    sent.is_ok()
}

/// The text of a reply, made piece by piece.
struct Pieces<'a> {
    opening: Option<&'a str>,
    parts: std::iter::Peekable<std::slice::Chunks<'a, u8>>,
    closing: &'a str,
}

impl<'a> Pieces<'a> {
    fn new(reply: &'a EncodedReply) -> Self {
        Self {
            opening: Some(&reply.opening),
            parts: reply.data.chunks(PIECE_DATA_BYTES).peekable(),
            closing: reply.closing,
        }
    }

    /// Appends the next piece to `buffer`; false once it was the last.
    fn next_into(&mut self, buffer: &mut Vec<u8>) -> bool {
        if let Some(opening) = self.opening.take() {
            buffer.extend_from_slice(opening.as_bytes());
        }
        let part = self.parts.next().unwrap_or_default();
        let start = buffer.len();
        buffer.resize(start + base64_len(part.len() as u64) as usize, 0);
        let written = STANDARD
            .encode_slice(part, &mut buffer[start..])
            .expect("room for the base64 of the part");
        buffer.truncate(start + written);
        let more = self.parts.peek().is_some();
        if !more {
            buffer.extend_from_slice(self.closing.as_bytes());
        }
        more
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(data: Vec<u8>) -> EncodedReply {
        EncodedReply {
            opening: r#"{"id":7,"result":{"chunk":""#.to_owned(),
            data,
            closing: r#"","eof":false}}"#,
            reservation: Reservation::default(),
        }
    }

    #[test]
    fn the_pieces_join_into_the_whole_text_of_the_announced_length() {
        for len in [
            0,
            1,
            PIECE_DATA_BYTES - 1,
            PIECE_DATA_BYTES,
            PIECE_DATA_BYTES + 1,
            2 * PIECE_DATA_BYTES + 2,
            1 << 20,
        ] {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 % 256) as u8).collect();
            let whole = format!(
                r#"{{"id":7,"result":{{"chunk":"{}","eof":false}}}}"#,
                STANDARD.encode(&data)
            );
            let reply = reply(data);
            assert_eq!(reply.text_len(), whole.len(), "{len}");
            let mut pieces = Pieces::new(&reply);
            let mut text = Vec::new();
            let mut count = 0;
            loop {
                let mut buffer = Vec::new();
                let more = pieces.next_into(&mut buffer);
                text.extend_from_slice(&buffer);
                count += 1;
                if !more {
                    break;
                }
            }
            assert_eq!(count, len.div_ceil(PIECE_DATA_BYTES).max(1), "{len}");
            assert_eq!(String::from_utf8(text).unwrap(), whole, "{len}");
            assert_eq!(reply.into_text().0, whole, "{len}");
        }
    }
}
