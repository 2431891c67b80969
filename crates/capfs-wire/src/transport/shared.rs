//! A stream socket (TCP, or a Unix socket pair such as a command's stdin and stdout) that
//! tungstenite and the code around it both write: tungstenite its messages, the connection's
//! writer whole data frames it builds itself, past tungstenite's buffers.
//!
//! The server sends the data frames of a streamed read this way (`server/outgoing.rs`), the
//! client those of a streamed write (`remote/outgoing.rs`). Both halves of tungstenite write:
//! the writer's half its messages, the read half the pong or close a ping or close asks for, at
//! any time. So the writer takes the socket for each data frame ([`Turn`]) once nothing of
//! tungstenite's is half-written on it, and tungstenite's writes wait until the frame is out: a
//! frame is only ever written whole.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker, ready};

use futures_util::{Sink, SinkExt};
use rustix::io::Errno;
use rustix::net::SendFlags;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::protocol::DATA_FRAME_HEADER_LEN;

/// Room for the longest WebSocket frame header (a 64-bit length and a masking key) and a
/// data-frame header, in front of a data frame's payload.
pub(crate) const FRAME_HEAD_ROOM: usize = 14 + DATA_FRAME_HEADER_LEN;

/// How much tungstenite reads from a server's connection at a time. Before every read it
/// zeroes the free room it reads into, up to this much, whatever arrives: with its default of
/// 128 KiB a request of a hundred bytes cost two 128 KiB `memset`s (the read that gets it and
/// the one that finds nothing more), most of a small call's server time. 16 KiB keeps that to
/// a fraction of a microsecond; a `put`'s data frames are read in more reads of the same total
/// length, each zeroing no more than it reads (`cargo bench --bench capfs -- bulk`: `put` the
/// same within the noise). `RemoteFileSystem` keeps tungstenite's 128 KiB: a `get` read 16 KiB
/// at a time lost a third of its speed, and the client's extra microsecond per small call is
/// its own.
pub(crate) const READ_BUFFER_BYTES: usize = 16 * 1024;

/// A connected stream socket of either kind a connection runs on with data frames written
/// past tungstenite: both are read and written the same way.
pub(crate) enum StreamSocket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl StreamSocket {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Self::Tcp(s) => s.poll_read_ready(cx),
            Self::Unix(s) => s.poll_read_ready(cx),
        }
    }

    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Self::Tcp(s) => s.poll_write_ready(cx),
            Self::Unix(s) => s.poll_write_ready(cx),
        }
    }

    fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        match self {
            Self::Tcp(s) => s.try_io(interest, f),
            Self::Unix(s) => s.try_io(interest, f),
        }
    }

    async fn async_io<R>(
        &self,
        interest: Interest,
        f: impl FnMut() -> io::Result<R>,
    ) -> io::Result<R> {
        match self {
            Self::Tcp(s) => s.async_io(interest, f).await,
            Self::Unix(s) => s.async_io(interest, f).await,
        }
    }

    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.try_write(buf),
            Self::Unix(s) => s.try_write(buf),
        }
    }
}

impl AsFd for StreamSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Self::Tcp(s) => s.as_fd(),
            Self::Unix(s) => s.as_fd(),
        }
    }
}

/// The socket of a connection as tungstenite reads and writes it; the writer's handle on the
/// same socket is [`DirectSocket`]. Only tungstenite reads.
pub(crate) struct SharedSocket {
    socket: Arc<StreamSocket>,
    turn: Arc<Turn>,
}

impl SharedSocket {
    pub(crate) fn new(socket: StreamSocket) -> Self {
        Self {
            socket: Arc::new(socket),
            turn: Arc::new(Turn::default()),
        }
    }

    /// The writer's handle on the same socket.
    pub(crate) fn direct(&self) -> DirectSocket {
        DirectSocket {
            socket: Arc::clone(&self.socket),
            turn: Arc::clone(&self.turn),
        }
    }
}

/// Who may write to a shared socket: tungstenite's writes wait while the writer has the
/// socket, and the writer takes it only once tungstenite has nothing half-written on it.
#[derive(Default)]
struct Turn {
    state: Mutex<TurnState>,
}

#[derive(Default)]
struct TurnState {
    /// The writer is writing a data frame.
    writing_frame: bool,
    /// tungstenite's last write took only part of its buffer: a frame of its may be half out.
    partial: bool,
    /// A tungstenite write waiting for the writer's frame to end.
    waiting: Option<Waker>,
}

impl AsyncRead for SharedSocket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            ready!(self.socket.poll_read_ready(cx))?;
            // tungstenite hands over initialised buffers, so this initialises nothing.
            let unfilled = buf.initialize_unfilled();
            let room = unfilled.len();
            let mut drained = None;
            // A read that leaves room has drained the socket. Saying `WouldBlock` to tokio then
            // clears the socket's readiness, as tokio's own `TcpStream` does, so the next read
            // waits for the next data instead of costing a system call that finds none.
            let result = self.socket.try_io(Interest::READABLE, || {
                let n = loop {
                    match rustix::io::read(&*self.socket, &mut *unfilled) {
                        Err(Errno::INTR) => {}
                        read => break read?,
                    }
                };
                if n > 0 && n < room {
                    drained = Some(n);
                    return Err(crate::error::would_block());
                }
                Ok(n)
            });
            let n = match (result, drained) {
                (_, Some(n)) | (Ok(n), None) => n,
                (Err(e), None) if e.kind() == io::ErrorKind::WouldBlock => continue,
                (Err(e), None) => return Poll::Ready(Err(e)),
            };
            buf.advance(n);
            return Poll::Ready(Ok(()));
        }
    }
}

impl AsyncWrite for SharedSocket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.socket.poll_write_ready(cx))?;
            let mut turn = self.turn.state.lock().expect("turn lock");
            if turn.writing_frame {
                turn.waiting = Some(cx.waker().clone());
                return Poll::Pending;
            }
            match self.socket.try_write(buf) {
                Ok(n) => {
                    // tungstenite writes all it holds each time: less means some is left.
                    turn.partial = n < buf.len();
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let shut = rustix::net::shutdown(&*self.socket, rustix::net::Shutdown::Write);
        Poll::Ready(match shut {
            Ok(()) | Err(Errno::NOTCONN) => Ok(()),
            Err(e) => Err(e.into()),
        })
    }
}

/// The writer's side of a [`SharedSocket`].
pub(crate) struct DirectSocket {
    socket: Arc<StreamSocket>,
    turn: Arc<Turn>,
}

impl std::fmt::Debug for DirectSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectSocket").finish_non_exhaustive()
    }
}

impl DirectSocket {
    /// Writes `frame`, one whole WebSocket frame, after everything `sink` (tungstenite's
    /// writing half on this socket) has taken. An error means the connection is over: the frame
    /// may be half out.
    pub(crate) async fn send_frame<S>(&self, sink: &mut S, frame: &[u8]) -> io::Result<()>
    where
        S: Sink<WsMessage> + Unpin,
    {
        self.take(sink).await?;
        let written = write_all(&self.socket, frame).await;
        self.release();
        written
    }

    /// Writes one whole text frame (RFC 6455 §5.2, final, unmasked: a server's) of `len` bytes
    /// after everything `sink` has taken, its payload made piece by piece: `pieces` gives the
    /// next piece, the frame's header in front of the first, and says whether more follow; each
    /// piece is written as it comes. A payload whose pieces do not add up to `len` is an error,
    /// as a broken socket is: the connection is over, the frame half out.
    pub(crate) async fn send_text_frame<S, P>(
        &self,
        sink: &mut S,
        len: usize,
        pieces: &mut P,
    ) -> io::Result<()>
    where
        S: Sink<WsMessage> + Unpin,
        P: TextPieces,
    {
        self.take(sink).await?;
        let (head, head_len) = frame_head(0x81, len, None);
        let mut front = &head[..head_len];
        let mut written = 0;
        let result = loop {
            let (piece, more) = match pieces.next_piece(front).await {
                Ok(next) => next,
                Err(e) => break Err(e),
            };
            front = &[];
            written += piece.len();
            if let Err(e) = write_all(&self.socket, &piece).await {
                break Err(e);
            }
            if !more {
                break if written == head_len + len {
                    Ok(())
                } else {
                    Err(crate::error::text_frame_length(written - head_len, len))
                };
            }
        };
        self.release();
        result
    }

    /// Takes the socket for one data frame: flushes what tungstenite holds, until nothing of
    /// its is half-written, then holds its writes back until [`release`](Self::release).
    async fn take<S>(&self, sink: &mut S) -> io::Result<()>
    where
        S: Sink<WsMessage> + Unpin,
    {
        loop {
            if sink.flush().await.is_err() {
                return Err(crate::error::websocket_writer_failed());
            }
            let mut turn = self.turn.state.lock().expect("turn lock");
            // The read half may have begun a pong since the flush; then flush again.
            if !turn.partial {
                turn.writing_frame = true;
                return Ok(());
            }
        }
    }

    /// Gives the socket back to tungstenite.
    fn release(&self) {
        let waiting = {
            let mut turn = self.turn.state.lock().expect("turn lock");
            turn.writing_frame = false;
            turn.waiting.take()
        };
        if let Some(waker) = waiting {
            waker.wake();
        }
    }
}

/// The payload of a text frame [`DirectSocket::send_text_frame`] writes, in the order it goes
/// out.
pub(crate) trait TextPieces {
    /// The next piece, `front` (the frame's header, before the first piece; empty after) in
    /// front of it, and whether more follow.
    fn next_piece(
        &mut self,
        front: &[u8],
    ) -> impl std::future::Future<Output = io::Result<(Vec<u8>, bool)>> + Send;
}

/// Writes all of `bytes` to the socket, waiting for room.
async fn write_all(socket: &StreamSocket, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        let n = socket
            .async_io(Interest::WRITABLE, || {
                rustix::net::send(socket, bytes, SendFlags::NOSIGNAL).map_err(io::Error::from)
            })
            .await?;
        if n == 0 {
            return Err(crate::error::socket_wrote_nothing());
        }
        bytes = &bytes[n..];
    }
    Ok(())
}

/// Makes `buffer[..FRAME_HEAD_ROOM + payload_len]`, a data-frame header's room and then
/// `payload_len` bytes of contents, into one final binary WebSocket frame (RFC 6455 §5.2) of
/// data-frame header `data_header`, masked with `mask` if given (a client's frames must be,
/// a server's must not); returns where the frame starts. The frame is
/// `buffer[start..FRAME_HEAD_ROOM + payload_len]`.
pub(crate) fn frame_in_place(
    buffer: &mut [u8],
    data_header: &[u8; DATA_FRAME_HEADER_LEN],
    payload_len: usize,
    mask: Option<[u8; 4]>,
) -> usize {
    let payload_start = FRAME_HEAD_ROOM - DATA_FRAME_HEADER_LEN;
    buffer[payload_start..FRAME_HEAD_ROOM].copy_from_slice(data_header);
    let len = DATA_FRAME_HEADER_LEN + payload_len;
    // FIN and opcode 2 (binary).
    let (head, at) = frame_head(0x82, len, mask);
    if let Some(key) = mask {
        apply_mask(&mut buffer[payload_start..payload_start + len], key);
    }
    let start = payload_start - at;
    buffer[start..payload_start].copy_from_slice(&head[..at]);
    start
}

/// The header of a frame whose first byte (FIN, opcode) is `first` and whose payload is `len`
/// bytes, with the masking key `mask` if given, and its length.
fn frame_head(first: u8, len: usize, mask: Option<[u8; 4]>) -> ([u8; 14], usize) {
    let mut head = [0u8; 14];
    head[0] = first;
    let mut at = 2;
    if len < 126 {
        head[1] = len as u8;
    } else if let Ok(short) = u16::try_from(len) {
        head[1] = 126;
        head[2..4].copy_from_slice(&short.to_be_bytes());
        at = 4;
    } else {
        head[1] = 127;
        head[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        at = 10;
    }
    if let Some(key) = mask {
        head[1] |= 0x80;
        head[at..at + 4].copy_from_slice(&key);
        at += 4;
    }
    (head, at)
}

/// XORs `payload` with the repeated `key`, as RFC 6455 §5.3 masks a client's frame: eight bytes
/// at a time, which the compiler turns into vector instructions.
fn apply_mask(payload: &mut [u8], key: [u8; 4]) {
    let wide = u64::from_ne_bytes([
        key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3],
    ]);
    let mut words = payload.chunks_exact_mut(8);
    for word in &mut words {
        let masked = u64::from_ne_bytes((&*word).try_into().expect("eight bytes")) ^ wide;
        word.copy_from_slice(&masked.to_ne_bytes());
    }
    // What is left starts at a multiple of eight, so at the key's first byte.
    for (byte, k) in words.into_remainder().iter_mut().zip(key.iter().cycle()) {
        *byte ^= k;
    }
}

#[cfg(test)]
mod tests {
    use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;

    use super::*;
    use crate::protocol::data_frame_header;

    /// Every length class of the frame header parses back, as tungstenite reads it, to the
    /// length written, with the mask given (or none); unmasked byte by byte as the RFC says, the
    /// payload is the data-frame header and the contents.
    #[test]
    fn frames_parse_back_with_their_lengths_and_masks() {
        let data_header = data_frame_header(0x0102_0304_0506_0708);
        for mask in [None, Some([0x5a, 0x01, 0xff, 0x80])] {
            for payload_len in [0, 1, 3, 116, 117, 65_526, 65_527, 262_144, (1 << 20) + 5] {
                let contents: Vec<u8> = (0..payload_len).map(|i| (i % 251) as u8).collect();
                let mut buffer = vec![0u8; FRAME_HEAD_ROOM + payload_len];
                buffer[FRAME_HEAD_ROOM..].copy_from_slice(&contents);
                let start = frame_in_place(&mut buffer, &data_header, payload_len, mask);
                let mut cursor = io::Cursor::new(&buffer[start..]);
                let (header, len) = FrameHeader::parse(&mut cursor)
                    .expect("parses")
                    .expect("complete");
                assert_eq!(len, (DATA_FRAME_HEADER_LEN + payload_len) as u64);
                assert!(header.is_final, "{header:?}");
                assert_eq!(header.mask, mask, "{payload_len}");
                let at = start + cursor.position() as usize;
                assert_eq!(at + len as usize, buffer.len(), "{payload_len}");
                let key = mask.unwrap_or_default();
                let payload: Vec<u8> = buffer[at..]
                    .iter()
                    .enumerate()
                    .map(|(i, b)| b ^ key[i % 4])
                    .collect();
                assert_eq!(&payload[..DATA_FRAME_HEADER_LEN], &data_header[..]);
                assert!(
                    payload[DATA_FRAME_HEADER_LEN..] == contents,
                    "{payload_len}"
                );
            }
        }
    }
}
