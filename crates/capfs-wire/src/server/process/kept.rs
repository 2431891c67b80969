//! What the server keeps of one process for `process/read` and for a client that reconnects:
//! its last chunks of output (at most [`KEPT_BYTES`]), its `seq` count and how it ended.

use std::collections::VecDeque;

use capfs::process::{OutputStream, ProcessExit};

/// Output kept per process for `process/read`; older chunks are let go first.
pub(crate) const KEPT_BYTES: usize = 64 * 1024;

/// One kept chunk.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub(crate) seq: u64,
    pub(crate) stream: &'static str,
    pub(crate) bytes: Vec<u8>,
}

/// A process's state as the wire tells it.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    chunks: VecDeque<Chunk>,
    bytes: usize,
    /// The last `seq` given.
    pub(crate) seq: u64,
    pub(crate) exit: Option<ProcessExit>,
    pub(crate) closed: bool,
}

/// The wire name of a stream; a terminal's output is `pty`.
pub(crate) fn stream_name(stream: OutputStream, tty: bool) -> &'static str {
    match (stream, tty) {
        (_, true) => "pty",
        (OutputStream::Stdout, false) => "stdout",
        (OutputStream::Stderr, false) => "stderr",
    }
}

impl Kept {
    /// The next `seq`.
    pub(crate) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Keeps a chunk, letting go of the oldest beyond [`KEPT_BYTES`].
    pub(crate) fn keep(&mut self, chunk: Chunk) {
        self.bytes += chunk.bytes.len();
        self.chunks.push_back(chunk);
        while self.bytes > KEPT_BYTES
            && let Some(old) = self.chunks.pop_front()
        {
            self.bytes -= old.bytes.len();
        }
    }

    /// Chunks after `after`, at most `max_bytes` of them but at least one when there is one.
    pub(crate) fn after(&self, after: u64, max_bytes: usize) -> Vec<&Chunk> {
        let mut taken = 0usize;
        let mut out = Vec::new();
        for chunk in self.chunks.iter().filter(|c| c.seq > after) {
            if !out.is_empty() && taken + chunk.bytes.len() > max_bytes {
                break;
            }
            taken += chunk.bytes.len();
            out.push(chunk);
        }
        out
    }

    /// Whether a chunk after `after` is kept, or nothing more will come.
    pub(crate) fn ready(&self, after: u64) -> bool {
        self.closed || self.chunks.back().is_some_and(|c| c.seq > after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_chunks_go_first_and_reads_take_at_least_one() {
        let mut kept = Kept::default();
        for _ in 0..3 {
            let seq = kept.next_seq();
            let bytes = vec![b'x'; KEPT_BYTES / 2];
            kept.keep(Chunk {
                seq,
                stream: "stdout",
                bytes,
            });
        }
        let seqs: Vec<u64> = kept.after(0, usize::MAX).iter().map(|c| c.seq).collect();
        assert_eq!(seqs, [2, 3]);
        assert_eq!(kept.after(0, 1).len(), 1);
        assert!(kept.ready(2) && !kept.ready(3));
    }
}
