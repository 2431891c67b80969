//! The stdio lines between the client and rmcp, so that every request gets an answer:
//!
//! - a lone UTF-16 surrogate escape (`"\ud800"`, which `JSON.stringify` writes) is replaced by
//!   `\ufffd`, as the reference server ends up storing it, instead of failing to parse;
//! - a line longer than [`MAX_REQUEST_LINE`] is not buffered: it is answered with an error
//!   carrying its id when the id can be read from its start or end, `null` otherwise;
//! - a line that is not JSON is answered with a parse error (`id: null`);
//! - rmcp's own errors for input without a readable id get `"id": null`, as JSON-RPC 2.0
//!   requires (rmcp leaves the member out).
//!
//! Everything written to stdout goes through one task, so the lines of rmcp's replies and of
//! the errors answered here never interleave.

mod ids;

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::mpsc;
use tokio_util::sync::PollSender;

/// The longest request line passed on: 16 MiB, less room for rmcp's own bound of 16 MiB with
/// the newline.
pub(crate) const MAX_REQUEST_LINE: usize = 16 * 1024 * 1024 - 16;
/// Bytes of an oversized line kept to find its id: the start and the end.
const KEPT_HEAD: usize = 64 * 1024;
const KEPT_TAIL: usize = 256;
/// rmcp's serialisation of an error without an id, and the same with `"id": null`.
const ID_LESS_ERROR: &[u8] = br#"{"jsonrpc":"2.0","error":"#;
const NULL_ID_ERROR: &[u8] = br#"{"jsonrpc":"2.0","id":null,"error":"#;

/// The client's lines, repaired or answered, as rmcp reads them.
pub(crate) struct Incoming<R> {
    inner: R,
    /// Bytes read and not yet split into lines.
    partial: Vec<u8>,
    /// The line being discarded, when it grew past the bound: its start and its last bytes.
    oversized: Option<(Vec<u8>, VecDeque<u8>, usize)>,
    /// Whole lines ready for rmcp.
    ready: Vec<u8>,
    answers: mpsc::UnboundedSender<Vec<u8>>,
    chunk: Box<[u8]>,
}

/// rmcp's output, as lines for the writer task.
pub(crate) struct Outgoing {
    line: Vec<u8>,
    lines: VecDeque<Vec<u8>>,
    sender: PollSender<Vec<u8>>,
}

/// Wraps stdin and stdout: returns the reader and writer to give rmcp, and the task that
/// writes every line to `write` (it ends once both sides are dropped).
pub(crate) fn wrap<R, W>(
    read: R,
    mut write: W,
) -> (
    Incoming<R>,
    Outgoing,
    impl std::future::Future<Output = io::Result<()>>,
)
where
    W: AsyncWrite + Unpin,
{
    let (replies, mut replies_rx) = mpsc::channel::<Vec<u8>>(4);
    let (answers, mut answers_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let incoming = Incoming {
        inner: read,
        partial: Vec::new(),
        oversized: None,
        ready: Vec::new(),
        answers,
        chunk: vec![0; 64 * 1024].into_boxed_slice(),
    };
    let outgoing = Outgoing {
        line: Vec::new(),
        lines: VecDeque::new(),
        sender: PollSender::new(replies),
    };
    let writer = async move {
        let (mut replies_open, mut answers_open) = (true, true);
        while replies_open || answers_open {
            let line = tokio::select! {
                line = replies_rx.recv(), if replies_open => line.or_else(|| { replies_open = false; None }),
                line = answers_rx.recv(), if answers_open => line.or_else(|| { answers_open = false; None }),
            };
            if let Some(line) = line {
                write.write_all(&line).await?;
                write.flush().await?;
            }
        }
        Ok(())
    };
    (incoming, outgoing, writer)
}

fn error_line(id: Value, code: i64, message: String) -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message },
    }))
    .expect("an error always serialises");
    line.push(b'\n');
    line
}

impl<R> Incoming<R> {
    /// Splits what was read into lines: whole lines go to `ready` (repaired) or are answered;
    /// a line past the bound is dropped as it arrives, keeping its ends.
    fn take_lines(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let newline = data.iter().position(|b| *b == b'\n');
            let (piece, ends) = match newline {
                Some(at) => (&data[..at], true),
                None => (data, false),
            };
            data = match newline {
                Some(at) => &data[at + 1..],
                None => &[],
            };
            if let Some((head, tail, len)) = &mut self.oversized {
                keep_ends(head, tail, piece);
                *len += piece.len();
                if ends {
                    self.answer_oversized();
                }
                continue;
            }
            if self.partial.len() + piece.len() > MAX_REQUEST_LINE {
                let mut head = Vec::new();
                let mut tail = VecDeque::new();
                let partial = std::mem::take(&mut self.partial);
                keep_ends(&mut head, &mut tail, &partial);
                keep_ends(&mut head, &mut tail, piece);
                self.oversized = Some((head, tail, partial.len() + piece.len()));
                if ends {
                    self.answer_oversized();
                }
                continue;
            }
            self.partial.extend_from_slice(piece);
            if ends {
                let line = std::mem::take(&mut self.partial);
                self.pass_line(line);
            }
        }
    }

    /// Answers the oversized line that just ended, with its id when its ends show it.
    fn answer_oversized(&mut self) {
        let Some((head, tail, len)) = self.oversized.take() else {
            return;
        };
        let tail: Vec<u8> = tail.into_iter().collect();
        let id = ids::request_id(&head, &tail).unwrap_or(Value::Null);
        let message = format!(
            "request refused: its line holds {len} bytes, more than the {MAX_REQUEST_LINE} \
             bytes capfs mcp reads in one message"
        );
        let _ = self.answers.send(error_line(id, -32600, message));
    }

    /// Passes one whole line on, repaired, or answers it when it is not JSON.
    fn pass_line(&mut self, line: Vec<u8>) {
        let line = match ids::replace_lone_surrogates(&line) {
            Some(repaired) => repaired,
            None => line,
        };
        let blank = line.iter().all(u8::is_ascii_whitespace);
        if !blank && let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&line) {
            let message = format!("Parse error: {e}");
            let _ = self.answers.send(error_line(Value::Null, -32700, message));
            return;
        }
        self.ready.extend_from_slice(&line);
        self.ready.push(b'\n');
    }
}

/// Keeps the first [`KEPT_HEAD`] and the last [`KEPT_TAIL`] bytes of a line given in pieces.
fn keep_ends(head: &mut Vec<u8>, tail: &mut VecDeque<u8>, piece: &[u8]) {
    let room = KEPT_HEAD.saturating_sub(head.len());
    head.extend_from_slice(&piece[..room.min(piece.len())]);
    let last = &piece[piece.len().saturating_sub(KEPT_TAIL)..];
    tail.extend(last);
    while tail.len() > KEPT_TAIL {
        tail.pop_front();
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Incoming<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if !this.ready.is_empty() {
                let n = this.ready.len().min(buf.remaining());
                buf.put_slice(&this.ready[..n]);
                this.ready.drain(..n);
                return Poll::Ready(Ok(()));
            }
            let mut chunk = ReadBuf::new(&mut this.chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut chunk))?;
            let filled = chunk.filled().len();
            if filled == 0 {
                // The end: a last line without its newline is passed on as it is.
                let rest = std::mem::take(&mut this.partial);
                this.ready.extend_from_slice(&rest);
                if this.ready.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            let data = this.chunk[..filled].to_vec();
            this.take_lines(&data);
        }
    }
}

impl Outgoing {
    /// Hands the complete lines to the writer task while it has room.
    fn push(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some(line) = self.lines.pop_front() {
            match self.sender.poll_reserve(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(_)) => return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
                Poll::Pending => {
                    self.lines.push_front(line);
                    return Poll::Pending;
                }
            }
            self.sender
                .send_item(line)
                .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Outgoing {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        // Lines from before wait for room first: rmcp's writes wait on the client's reading.
        if !this.lines.is_empty() {
            ready!(this.push(cx))?;
        }
        let mut rest = buf;
        while let Some(at) = rest.iter().position(|b| *b == b'\n') {
            this.line.extend_from_slice(&rest[..=at]);
            rest = &rest[at + 1..];
            let mut line = std::mem::take(&mut this.line);
            if line.starts_with(ID_LESS_ERROR) {
                line.splice(..ID_LESS_ERROR.len(), NULL_ID_ERROR.iter().copied());
            }
            this.lines.push_back(line);
        }
        this.line.extend_from_slice(rest);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.push(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.push(cx))?;
        self.sender.close();
        Poll::Ready(Ok(()))
    }
}
