//! A streamed write's contents on their way to its staged file: gathered into batches on the
//! calling task (a source waiting for the network holds no thread), each batch written on the
//! blocking pool. A reader's bytes are copied into one buffer that goes to the pool and comes
//! back; a caller's own pieces ([`WriteChunks`]) go to the pool as they are, and each is written
//! from the caller's buffer.

use std::io;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::stage::StagedFile;
use crate::file_system::WriteChunks;

/// Pieces a batch holds at most. A piece keeps the whole buffer it was cut from alive until it
/// is written, so a peer that sends its contents in tiny pieces must not make a batch of a
/// million of them.
const BATCH_PIECES: usize = 16;

/// Where a streamed write's contents come from, with the spare batch for them.
pub(super) enum Source<'a> {
    Reader(&'a mut (dyn AsyncRead + Unpin + Send), Vec<u8>),
    Chunks(&'a mut dyn WriteChunks, Vec<Bytes>),
}

/// The contents of one batch, on their way to the pool and back.
pub(super) enum Batch {
    Copied(Vec<u8>),
    Pieces(Vec<Bytes>),
}

impl Source<'_> {
    /// The next batch: `want` bytes or more, fewer only at the end of the contents (so an empty
    /// batch is their end). Pieces are taken whole, so a batch of them may pass `want`; they
    /// stop at [`BATCH_PIECES`].
    pub(super) async fn next_batch(&mut self, want: u64) -> io::Result<Batch> {
        match self {
            Source::Reader(reader, spare) => {
                let mut batch = std::mem::take(spare);
                batch.clear();
                (&mut **reader).take(want).read_to_end(&mut batch).await?;
                Ok(Batch::Copied(batch))
            }
            Source::Chunks(chunks, spare) => {
                let mut pieces = std::mem::take(spare);
                pieces.clear();
                let mut len = 0u64;
                while len < want && pieces.len() < BATCH_PIECES {
                    match std::future::poll_fn(|cx| chunks.poll_next_chunk(cx)).await? {
                        Some(piece) if piece.is_empty() => {}
                        Some(piece) => {
                            len += piece.len() as u64;
                            pieces.push(piece);
                        }
                        None => break,
                    }
                }
                Ok(Batch::Pieces(pieces))
            }
        }
    }

    /// Takes back a written batch's room for the next one (its pieces are let go).
    pub(super) fn give_back(&mut self, batch: Batch) {
        match (self, batch) {
            (Source::Reader(_, spare), Batch::Copied(batch)) => *spare = batch,
            (Source::Chunks(_, spare), Batch::Pieces(mut pieces)) => {
                pieces.clear();
                *spare = pieces;
            }
            _ => {}
        }
    }
}

impl Batch {
    pub(super) fn len(&self) -> u64 {
        match self {
            Batch::Copied(bytes) => bytes.len() as u64,
            Batch::Pieces(pieces) => pieces.iter().map(|p| p.len() as u64).sum(),
        }
    }

    /// Writes the batch at the staged file's end.
    pub(super) fn write_to(&self, staged: &mut StagedFile) -> io::Result<()> {
        match self {
            Batch::Copied(bytes) => staged.write(bytes),
            Batch::Pieces(pieces) => pieces.iter().try_for_each(|piece| staged.write(piece)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::task::{Context, Poll};

    use super::*;

    struct Pieces(VecDeque<Bytes>);

    impl WriteChunks for Pieces {
        fn poll_next_chunk(&mut self, _: &mut Context<'_>) -> Poll<io::Result<Option<Bytes>>> {
            Poll::Ready(Ok(self.0.pop_front()))
        }
    }

    fn lens(batch: &Batch) -> Vec<usize> {
        match batch {
            Batch::Pieces(pieces) => pieces.iter().map(Bytes::len).collect(),
            Batch::Copied(_) => panic!("pieces were copied"),
        }
    }

    #[tokio::test]
    async fn a_batch_of_pieces_stops_at_its_size_or_its_count() {
        let tiny = (0..40).map(|_| Bytes::from_static(b"x"));
        let frames = (0..6).map(|_| Bytes::from(vec![0u8; 256 << 10]));
        let mut pieces = Pieces(tiny.chain(frames).collect());
        let mut source = Source::Chunks(&mut pieces, Vec::new());
        let want = 1 << 20;
        // Forty one-byte pieces make three batches, the count bounding each: however small
        // the pieces a peer sends, a batch keeps few of their buffers alive.
        let mut counts = Vec::new();
        let mut sizes = Vec::new();
        loop {
            let batch = source.next_batch(want).await.unwrap();
            if batch.len() == 0 {
                break;
            }
            counts.push(lens(&batch).len());
            sizes.push(batch.len());
            source.give_back(batch);
        }
        assert_eq!(counts, [16, 16, 12, 2]);
        assert_eq!(sizes, [16, 16, 8 + 4 * (256 << 10), 2 * (256 << 10)]);
    }
}
