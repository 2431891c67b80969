//! Replies that carry more of a file than one piece (`fs/readFile`, `fs/readBlock`) are encoded
//! as the connection's writer writes them. The text's length is known before any of it is
//! made (the base64 of so many bytes, and the envelope), so on a TCP connection the writer takes
//! the socket, as for a data frame (`outgoing.rs`), writes the text frame's header and then the
//! text piece by piece. The writer makes the first piece; a thread of the blocking pool encodes
//! the next ones while the writer sends those before ([`Pieces`]), at most [`LEAD_PIECES`]
//! ahead. The peer receives the first bytes while the rest are encoded, the text is never whole
//! in memory, nor copied again into tungstenite's buffer: a 1 MiB block costs the server one
//! copy of each byte out of the page cache and one into the socket, besides the encoding, which
//! runs beside the writing (docs/performance.md, "Round four" and "Round nine"). Where the
//! writer has no socket of its own (stdio, any byte stream), the text is built whole and goes
//! through tungstenite.
//!
//! The frame is the same one message tungstenite would have written: a peer cannot tell them
//! apart.

use futures_util::{Sink, SinkExt};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::budget::Reservation;
use super::payload::base64_len;
use crate::encoding::STANDARD;
use crate::transport::shared::{DirectSocket, TextPieces};
use base64::Engine;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::mpsc;

/// The file bytes one piece carries: a multiple of 3, so that every piece's base64 but the
/// last ends without padding and the pieces join into the base64 of the whole. Its text is
/// 512 KiB, so a 1 MiB block is three pieces: the writer makes the first while the helper
/// makes the other two, and waits for the helper at most twice. Pieces of half that size sent
/// a block 10% slower, each wait for the helper's next piece costing the writer a wake-up
/// (docs/performance.md, "Round twelve").
pub(crate) const PIECE_DATA_BYTES: usize = 3 * 128 * 1024;

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
/// text is out and no thread encodes any of it.
///
/// `helper` is the writer's: one writer has at most one helper queued or running at a time,
/// so a busy pool holds at most one waiting task per connection, and that task holds no reply.
pub(crate) async fn send<S>(
    sink: &mut S,
    socket: Option<&DirectSocket>,
    reply: EncodedReply,
    helper: &Helper,
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
    let mut pieces = Pieces::start(reply, helper);
    let sent = socket.send_text_frame(sink, len, &mut pieces).await;
    if let Err(e) = &sent {
        tracing::debug!("writing an encoded reply failed: {e}");
    }
    sent.is_ok()
}

/// How many pieces a helper makes ahead of the writer at most (2 MiB of text): a 1 MiB block is
/// made in one go, and a larger reply's text is never whole in memory.
const LEAD_PIECES: usize = 4;

/// Whether one writer's helper is queued on the blocking pool or running.
#[derive(Debug, Default)]
pub(crate) struct Helper {
    busy: Arc<AtomicBool>,
}

/// Ends a helper's turn when dropped, whether it ran or was dropped unrun.
struct TurnEnds(Arc<AtomicBool>);

impl Drop for TurnEnds {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The text of a reply, made piece by piece. The writer makes the first piece; from the second
/// on, a thread of the blocking pool (the helper) encodes them ahead of the writer while the
/// writer sends the ones before, so that the encoding of a large reply runs beside its
/// writing, on the other core, where one thread did both in turn. Either side claims the next
/// piece nobody has claimed ([`Progress::unclaimed`]): a writer that finds its next piece
/// unclaimed (the helper not started yet, the pool busy, or the helper ended) makes it itself
/// and never waits for the pool; one whose next piece the helper claimed waits for it, which is
/// being encoded. A helper [`LEAD_PIECES`] ahead of the writer ends rather than wait for the
/// peer (a peer that never reads holds no thread); the writer starts another once the last has
/// ended and pieces are left. A helper still queued holds only a weak reference: the reply and
/// its reservation go as soon as the writer is done with them.
struct Pieces {
    progress: Arc<Progress>,
    /// The piece the writer asks for next.
    next: usize,
    /// The pieces the last helper started for this reply made, in the order it claimed them;
    /// closed once it ended.
    made: Option<mpsc::UnboundedReceiver<(usize, Vec<u8>)>>,
    /// The writer's helper, busy or not.
    busy: Arc<AtomicBool>,
}

/// What the writer and its helper share: the reply (and so its reservation, given back when
/// the last of them lets go) and how far each got.
struct Progress {
    reply: EncodedReply,
    /// Pieces in the text: at least one.
    count: usize,
    /// The first piece neither side has claimed.
    unclaimed: AtomicUsize,
    /// The pieces the writer has taken.
    taken: AtomicUsize,
}

impl Progress {
    /// Claims the next piece for a helper: none once all are claimed or the helper is
    /// [`LEAD_PIECES`] ahead of the writer.
    fn claim_ahead(&self) -> Option<usize> {
        let mut index = self.unclaimed.load(Ordering::Acquire);
        loop {
            let ahead = index.saturating_sub(self.taken.load(Ordering::Acquire));
            if index >= self.count || ahead >= LEAD_PIECES {
                return None;
            }
            match self.unclaimed.compare_exchange(
                index,
                index + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(index),
                Err(now) => index = now,
            }
        }
    }
}

impl Pieces {
    /// The pieces of `reply`, the writer's first claimed, and `helper` started when there are
    /// more and it is free.
    fn start(reply: EncodedReply, helper: &Helper) -> Self {
        let count = reply.data.len().div_ceil(PIECE_DATA_BYTES).max(1);
        let progress = Arc::new(Progress {
            reply,
            count,
            unclaimed: AtomicUsize::new(1),
            taken: AtomicUsize::new(0),
        });
        let mut pieces = Self {
            progress,
            next: 0,
            made: None,
            busy: Arc::clone(&helper.busy),
        };
        pieces.help();
        pieces
    }

    /// Starts the helper when pieces are left unclaimed, the writer has every piece the last
    /// helper of this reply made, and the helper is free (not queued nor running for this or
    /// an earlier reply).
    fn help(&mut self) {
        let progress = &self.progress;
        if progress.unclaimed.load(Ordering::Acquire) >= progress.count {
            return;
        }
        if let Some(made) = &self.made
            && !(made.is_closed() && made.is_empty())
        {
            return;
        }
        if self
            .busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let progress = Arc::downgrade(progress);
        let turn = TurnEnds(Arc::clone(&self.busy));
        drop(tokio::task::spawn_blocking(move || {
            let _turn = turn;
            let Some(progress) = progress.upgrade() else {
                return;
            };
            while let Some(index) = progress.claim_ahead() {
                let text = piece(&progress.reply, progress.count, index, &[]);
                if tx.send((index, text)).is_err() {
                    break;
                }
            }
        }));
        self.made = Some(rx);
    }
}

impl TextPieces for Pieces {
    async fn next_piece(&mut self, front: &[u8]) -> std::io::Result<(Vec<u8>, bool)> {
        let index = self.next;
        self.next += 1;
        let progress = &self.progress;
        let more = self.next < progress.count;
        let mine = index == 0
            || progress
                .unclaimed
                .compare_exchange(index, index + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
        let text = if mine {
            piece(&progress.reply, progress.count, index, front)
        } else {
            // The helper claimed it; the pieces it made before are the writer's already.
            match self.made.as_mut() {
                Some(made) => match made.recv().await {
                    Some((made, text)) if made == index => text,
                    _ => return Err(crate::error::encoder_ended(index)),
                },
                None => return Err(crate::error::encoder_ended(index)),
            }
        };
        progress.taken.store(self.next, Ordering::Release);
        if more {
            self.help();
        }
        Ok((text, more))
    }
}

/// Piece `index` of the `count` of `reply`'s text, `front` before it: the opening before the
/// first, the closing after the last.
fn piece(reply: &EncodedReply, count: usize, index: usize, front: &[u8]) -> Vec<u8> {
    let start = (index * PIECE_DATA_BYTES).min(reply.data.len());
    let part = &reply.data[start..(start + PIECE_DATA_BYTES).min(reply.data.len())];
    let opening = if index == 0 {
        reply.opening.as_bytes()
    } else {
        &[]
    };
    let closing = if index + 1 == count {
        reply.closing.as_bytes()
    } else {
        &[]
    };
    let encoded = base64_len(part.len() as u64) as usize;
    let mut text = Vec::with_capacity(front.len() + opening.len() + encoded + closing.len());
    text.extend_from_slice(front);
    text.extend_from_slice(opening);
    let at = text.len();
    text.resize(at + encoded, 0);
    let written = STANDARD
        .encode_slice(part, &mut text[at..])
        .expect("room for the base64 of the part");
    text.truncate(at + written);
    text.extend_from_slice(closing);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRONT: &[u8] = b"HEAD";

    fn reply(data: Vec<u8>) -> EncodedReply {
        EncodedReply {
            opening: r#"{"id":7,"result":{"chunk":""#.to_owned(),
            data,
            closing: r#"","eof":false}}"#,
            reservation: Reservation::default(),
        }
    }

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 % 256) as u8).collect()
    }

    fn whole(data: &[u8]) -> String {
        format!(
            r#"HEAD{{"id":7,"result":{{"chunk":"{}","eof":false}}}}"#,
            STANDARD.encode(data)
        )
    }

    /// Every piece of `pieces` joined, and how many there were.
    async fn join(pieces: &mut Pieces) -> (String, usize) {
        let (mut text, mut count) = (Vec::new(), 0);
        loop {
            let front = if count == 0 { FRONT } else { &[] };
            let (piece, more) = pieces.next_piece(front).await.expect("a piece");
            text.extend_from_slice(&piece);
            count += 1;
            if !more {
                return (String::from_utf8(text).unwrap(), count);
            }
        }
    }

    #[test]
    fn the_pieces_join_into_the_whole_text_of_the_announced_length() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let _in_runtime = runtime.enter();
        for len in [
            0,
            1,
            PIECE_DATA_BYTES - 1,
            PIECE_DATA_BYTES,
            PIECE_DATA_BYTES + 1,
            2 * PIECE_DATA_BYTES + 2,
            1 << 20,
            (16 << 20) + 5,
        ] {
            let data = data(len);
            let whole = whole(&data);
            let reply = reply(data);
            assert_eq!(FRONT.len() + reply.text_len(), whole.len(), "{len}");
            let helper = Helper::default();
            let (text, count) = runtime.block_on(join(&mut Pieces::start(reply, &helper)));
            assert_eq!(count, len.div_ceil(PIECE_DATA_BYTES).max(1), "{len}");
            assert_eq!(text, whole, "{len}");
            let (text, _) = self::reply(self::data(len)).into_text();
            assert_eq!(format!("HEAD{text}"), whole, "{len}");
        }
    }

    /// A writer whose blocking pool is busy makes every piece itself instead of waiting for a
    /// thread; the helper left queued holds nothing of the reply (its reservation goes with the
    /// writer's), and the writer queues no second one for its next reply.
    #[test]
    fn a_writer_whose_pool_is_busy_makes_every_piece_itself() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .max_blocking_threads(1)
            .enable_time()
            .build()
            .unwrap();
        let _in_runtime = runtime.enter();
        let (busy, free) = std::sync::mpsc::channel::<()>();
        let occupied = runtime.spawn_blocking(move || free.recv());
        let helper = Helper::default();
        // Bounded, so that a writer that waits for the pool fails here instead of hanging.
        let bound = std::time::Duration::from_secs(60);
        for reply_number in 0..2 {
            let data = data(3 * PIECE_DATA_BYTES + 7);
            let whole = whole(&data);
            let mut pieces = Pieces::start(reply(data), &helper);
            assert_eq!(
                pieces.made.is_some(),
                reply_number == 0,
                "a helper is queued for the first reply only"
            );
            let held = Arc::downgrade(&pieces.progress);
            let joined = runtime.block_on(tokio::time::timeout(bound, join(&mut pieces)));
            assert_eq!(joined.expect("made without the pool"), (whole, 4));
            drop(pieces);
            assert!(held.upgrade().is_none(), "the queued helper holds no reply");
            assert!(
                helper.busy.load(Ordering::Acquire),
                "the helper is still queued"
            );
        }
        busy.send(()).unwrap();
        runtime.block_on(async {
            occupied.await.unwrap().unwrap();
            // One thread runs the pool's tasks in order: this one runs after the helper.
            tokio::task::spawn_blocking(|| ()).await.unwrap();
        });
        assert!(
            !helper.busy.load(Ordering::Acquire),
            "the helper's turn ended"
        );
    }

    /// A helper ends once it is [`LEAD_PIECES`] ahead of the writer, however slow the peer, and
    /// the writer's later helpers and own pieces still make the whole text.
    #[test]
    fn a_helper_ends_its_lead_ahead_and_the_text_still_comes_whole() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .max_blocking_threads(1)
            .build()
            .unwrap();
        let _in_runtime = runtime.enter();
        // One thread runs the pool's tasks in order: a task spawned after the helper ends after it.
        let after_the_helpers = || {
            runtime
                .block_on(tokio::task::spawn_blocking(|| ()))
                .unwrap()
        };
        let (busy, free) = std::sync::mpsc::channel::<()>();
        let occupied = runtime.spawn_blocking(move || free.recv());
        let count = 3 * LEAD_PIECES;
        let data = data(count * PIECE_DATA_BYTES - 1);
        let whole = whole(&data);
        let helper = Helper::default();
        let mut pieces = Pieces::start(reply(data), &helper);
        let (first, more) = runtime.block_on(pieces.next_piece(FRONT)).unwrap();
        assert!(more);
        busy.send(()).unwrap();
        runtime.block_on(occupied).unwrap().unwrap();
        after_the_helpers();
        let claimed = pieces.progress.unclaimed.load(Ordering::Acquire);
        assert_eq!(
            claimed,
            1 + LEAD_PIECES,
            "the helper stopped its lead past the writer"
        );
        let (rest, taken) = runtime.block_on(async {
            let (mut rest, mut taken) = (Vec::new(), 1);
            loop {
                let (piece, more) = pieces.next_piece(&[]).await.unwrap();
                rest.extend_from_slice(&piece);
                taken += 1;
                if !more {
                    return (rest, taken);
                }
            }
        });
        assert_eq!(taken, count);
        assert_eq!([first, rest].concat(), whole.into_bytes());
    }
}
