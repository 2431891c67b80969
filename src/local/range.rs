//! Ranges of files: read with `pread` from the opened file, or, for a backend that cannot seek,
//! picked out of a stream.

use std::io;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::{INLINE_READ_BYTES, Inner, read};
use crate::{AbsolutePathBuf, ExecutorFileSystem};

/// At most `length` bytes of `path` from `offset`, read with `pread` (the file is opened and
/// checked as a streamed read opens it).
pub(super) fn read_range(
    fs: &Inner,
    path: &AbsolutePathBuf,
    offset: u64,
    length: u64,
) -> io::Result<Vec<u8>> {
    let (file, size) = read::open_regular(fs, path)?;
    let want = length.min(size.saturating_sub(offset));
    let mut data = vec![0u8; usize::try_from(want).unwrap_or(usize::MAX)];
    let mut filled = 0;
    while filled < data.len() {
        match file.read_at(&mut data[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(crate::error::with_path(path, e)),
        }
    }
    data.truncate(filled);
    Ok(data)
}

/// True when a range of `length` bytes is small enough to read on the calling task.
pub(super) fn is_small(length: u64) -> bool {
    length <= INLINE_READ_BYTES
}

/// The default [`ExecutorFileSystem::read_file_range`]: the file streamed, only the range kept.
pub(crate) async fn range_by_streaming<F: ExecutorFileSystem + ?Sized>(
    fs: &F,
    path: &AbsolutePathBuf,
    offset: u64,
    length: u64,
) -> io::Result<Vec<u8>> {
    let mut keep = Keep {
        at: 0,
        offset,
        end: offset.saturating_add(length),
        data: Vec::new(),
    };
    match fs.read_file_to(path, &mut keep, &mut |_| {}).await {
        Err(_) if keep.at >= keep.end => Ok(keep.data),
        Err(e) => Err(e),
        Ok(_) => Ok(keep.data),
    }
}

/// A writer keeping the bytes of one range of what it is given, and refusing more past it.
struct Keep {
    at: u64,
    offset: u64,
    end: u64,
    data: Vec<u8>,
}

impl tokio::io::AsyncWrite for Keep {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let start = this.at;
        let stop = start + buf.len() as u64;
        let from = this.offset.max(start);
        let to = this.end.min(stop);
        if from < to {
            this.data
                .extend_from_slice(&buf[(from - start) as usize..(to - start) as usize]);
        }
        this.at = stop;
        if this.at >= this.end {
            return Poll::Ready(Err(io::Error::other("the range is read")));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
