//! A byte stream whose end stops a connection instead of breaking it, and the pipes and sockets
//! such a stream runs over, widened.

use std::io;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::CancellationToken;

/// What a pipe a connection runs over should hold. The kernel's default, 64 KiB, made a 256
/// MiB `put` over `--remote-command` some 8,000 hand-overs between the two ends, each a
/// wake-up; 1 MiB is what `/proc/sys/fs/pipe-max-size` lets any user ask for by default.
pub(crate) const PIPE_BYTES: usize = 1 << 20;

/// Lets the pipe `fd` hold [`PIPE_BYTES`] when it holds less. Anything else is left as it is:
/// a descriptor that is not a pipe (a socket from ssh, a terminal), a pipe already larger, a
/// refusal (the user past their share of pipe memory): the connection works the same, with
/// more wake-ups.
pub(crate) fn widen_pipe(fd: impl AsFd) {
    let fd = fd.as_fd();
    if rustix::pipe::fcntl_getpipe_size(fd).is_ok_and(|size| size < PIPE_BYTES) {
        let _ = rustix::pipe::fcntl_setpipe_size(fd, PIPE_BYTES);
    }
}

/// Lets a Unix stream socket `fd` have [`PIPE_BYTES`] in flight from this end when it has
/// less (the kernel's default, `net.core.wmem_default`, is some 208 KiB; it keeps at most
/// `net.core.wmem_max` of what is asked); a refusal leaves it as it is.
pub(crate) fn widen_socket(fd: impl AsFd) {
    use rustix::net::sockopt::{set_socket_send_buffer_size, socket_send_buffer_size};
    let fd = fd.as_fd();
    if socket_send_buffer_size(fd).is_ok_and(|size| size < PIPE_BYTES) {
        let _ = set_socket_send_buffer_size(fd, PIPE_BYTES);
    }
}

/// A byte stream whose end of input stops the connection like a shutdown does, instead of
/// reaching tungstenite: tungstenite takes an end without a close frame for a dead connection
/// and refuses to write after it, which would lose the replies of the requests still running.
/// A client that closes its side (stdin) after its last request still gets every reply.
pub(crate) struct EndAsStop<S> {
    pub(crate) io: S,
    pub(crate) stop: CancellationToken,
}

impl<S: AsyncRead + Unpin> AsyncRead for EndAsStop<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) if buf.filled().len() == before && buf.remaining() > 0 => {
                this.stop.cancel();
                // Never ready again: the connection stops reading on the signal above.
                Poll::Pending
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for EndAsStop<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_is_widened() {
        let (read, write) = rustix::pipe::pipe().unwrap();
        assert!(rustix::pipe::fcntl_getpipe_size(&read).unwrap() < PIPE_BYTES);
        widen_pipe(&write);
        assert_eq!(rustix::pipe::fcntl_getpipe_size(&read).unwrap(), PIPE_BYTES);
    }

    #[test]
    fn a_socket_is_given_its_send_buffer() {
        let (ours, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let before = rustix::net::sockopt::socket_send_buffer_size(&ours).unwrap();
        assert!(before < PIPE_BYTES, "{before}");
        widen_socket(&ours);
        // The kernel caps what is asked at `net.core.wmem_max` and reports twice what it keeps.
        let cap: usize = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let after = rustix::net::sockopt::socket_send_buffer_size(&ours).unwrap();
        assert_eq!(after, 2 * PIPE_BYTES.min(cap), "{before} {cap}");
    }
}
