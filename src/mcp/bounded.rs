//! Reads bounded by the reply: a whole file up to a byte bound, the first lines of a file, or
//! its last lines read from the end in ranges (`read_file_range`: `pread` locally,
//! `capfs/readFileRange` through a server). None reads more than the reply may carry.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use capfs::{AbsolutePathBuf, ExecutorFileSystem};

/// Bytes of the first range `head` and `tail` read; each next one is twice as long, up to
/// [`MAX_BLOCK`].
const BLOCK: usize = 64 * 1024;
const MAX_BLOCK: usize = 1024 * 1024;

/// Why a bounded read stopped.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The file holds more than the bound allows.
    Over,
    /// The backend's error.
    Failed(io::Error),
}

impl From<io::Error> for Stop {
    fn from(e: io::Error) -> Self {
        Self::Failed(e)
    }
}

/// A writer that keeps what it is given, up to `max` bytes; with `lines`, it stops once that
/// many newlines have arrived.
struct Collect {
    data: Vec<u8>,
    max: usize,
    lines: Option<usize>,
    newlines: usize,
    over: bool,
    enough: bool,
}

impl tokio::io::AsyncWrite for Collect {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let mut take = buf.len();
        if let Some(lines) = this.lines {
            for (i, b) in buf.iter().enumerate() {
                if *b == b'\n' {
                    this.newlines += 1;
                    if this.newlines == lines {
                        take = i + 1;
                        this.enough = true;
                        break;
                    }
                }
            }
        }
        if this.data.len() + take > this.max {
            this.over = true;
            return Poll::Ready(Err(io::Error::other("bound reached")));
        }
        this.data.extend_from_slice(&buf[..take]);
        if this.enough {
            return Poll::Ready(Err(io::Error::other("enough lines")));
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

async fn collect(
    fs: &dyn ExecutorFileSystem,
    path: &AbsolutePathBuf,
    max: usize,
    lines: Option<usize>,
) -> Result<Vec<u8>, Stop> {
    let mut writer = Collect {
        data: Vec::new(),
        max,
        lines,
        newlines: 0,
        over: false,
        enough: false,
    };
    let result = fs.read_file_to(path, &mut writer, &mut |_| {}).await;
    if writer.over {
        return Err(Stop::Over);
    }
    if writer.enough {
        return Ok(writer.data);
    }
    result?;
    Ok(writer.data)
}

/// The whole file, when it holds at most `max` bytes: a file whose size already says more is
/// refused before it is read, one that grows is cut off after `max + 1` bytes.
pub(crate) async fn whole(
    fs: &dyn ExecutorFileSystem,
    path: &AbsolutePathBuf,
    max: usize,
) -> Result<Vec<u8>, Stop> {
    let metadata = fs.get_metadata(path).await?;
    if metadata.is_file && metadata.size > max as u64 {
        return Err(Stop::Over);
    }
    collect(fs, path, max, None).await
}

/// The file up to and including its `n`-th newline (all of it when it has fewer), read in
/// growing ranges and no further; more than `max` bytes before that is [`Stop::Over`].
pub(crate) async fn first_lines(
    fs: &dyn ExecutorFileSystem,
    path: &AbsolutePathBuf,
    n: usize,
    max: usize,
) -> Result<Vec<u8>, Stop> {
    let mut data: Vec<u8> = Vec::new();
    let mut newlines = 0;
    let mut block = BLOCK as u64;
    loop {
        let part = fs.read_file_range(path, data.len() as u64, block).await?;
        let ended = (part.len() as u64) < block;
        for (i, b) in part.iter().enumerate() {
            if *b == b'\n' {
                newlines += 1;
                if newlines == n {
                    if data.len() + i + 1 > max {
                        return Err(Stop::Over);
                    }
                    data.extend_from_slice(&part[..=i]);
                    return Ok(data);
                }
            }
        }
        data.extend_from_slice(&part);
        if data.len() > max {
            return Err(Stop::Over);
        }
        if ended {
            return Ok(data);
        }
        block = (block * 2).min(MAX_BLOCK as u64);
    }
}

/// A suffix of the file holding at least its last `n` newline-separated pieces (all of it when
/// it has fewer), read from the end in growing ranges; one that needs more than `max` bytes is
/// [`Stop::Over`].
pub(crate) async fn last_lines(
    fs: &dyn ExecutorFileSystem,
    path: &AbsolutePathBuf,
    n: usize,
    max: usize,
) -> Result<Vec<u8>, Stop> {
    let size = fs.get_metadata(path).await?.size;
    let mut suffix: Vec<u8> = Vec::new();
    let mut end = size;
    let mut block = BLOCK as u64;
    while end > 0 {
        let start = end.saturating_sub(block);
        let mut part = fs.read_file_range(path, start, end - start).await?;
        part.extend_from_slice(&suffix);
        suffix = part;
        end = start;
        if let Some(at) = suffix_start(&suffix, n) {
            suffix.drain(..at);
            break;
        }
        if suffix.len() > max {
            return Err(Stop::Over);
        }
        block = (block * 2).min(MAX_BLOCK as u64);
    }
    if suffix.len() > max {
        return Err(Stop::Over);
    }
    Ok(suffix)
}

/// Where the suffix holding the last `n` pieces starts in `data` (at the `n`-th newline from
/// the end), or `None` when `data` has fewer than `n` newlines.
fn suffix_start(data: &[u8], n: usize) -> Option<usize> {
    if n == 0 {
        return Some(data.len());
    }
    data.iter()
        .enumerate()
        .rev()
        .filter(|(_, b)| **b == b'\n')
        .nth(n - 1)
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::text;

    /// The suffix found from the end gives the same last lines as the whole text does.
    #[test]
    fn suffixes_hold_the_last_lines() {
        let texts = [
            "",
            "a",
            "a\n",
            "a\nb\nc\n",
            "a\r\nb\r\n\r\nc",
            "\n\n\n",
            "x\ny",
        ];
        for t in texts {
            for n in 1..6 {
                let start = suffix_start(t.as_bytes(), n).unwrap_or(0);
                let suffix = std::str::from_utf8(&t.as_bytes()[start..]).unwrap();
                assert_eq!(text::tail(suffix, n), text::tail(t, n), "{t:?} {n}");
            }
        }
    }

    #[tokio::test]
    async fn files_are_read_from_the_end_only_as_far_as_needed() {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = capfs::Sandbox::new()
            .with_root(dir.path(), capfs::Access::ReadWrite)
            .unwrap();
        let root = sandbox.roots()[0].path().clone();
        let fs = capfs::LocalFileSystem::with_read_limit(sandbox, 1024);
        let path = root.join("log").unwrap();
        let mut body = "x".repeat(3 * BLOCK);
        body.push_str("\nlast one\nlast two\n");
        std::fs::write(path.as_path(), &body).unwrap();
        // Past the read limit: only ranges are read.
        assert_eq!(
            last_lines(&fs, &path, 2, 100).await.unwrap(),
            b"\nlast two\n"
        );
        let three = last_lines(&fs, &path, 3, 100).await.unwrap();
        assert_eq!(three, b"\nlast one\nlast two\n");
        // Four pieces reach into the long line: more than the bound.
        assert!(matches!(
            last_lines(&fs, &path, 4, 100).await,
            Err(Stop::Over)
        ));
        let all = last_lines(&fs, &path, 9, body.len()).await.unwrap();
        assert_eq!(all, body.as_bytes());
        let head = format!("a\nb\n{}", "y".repeat(5 * BLOCK));
        std::fs::write(path.as_path(), &head).unwrap();
        assert_eq!(first_lines(&fs, &path, 2, 10).await.unwrap(), b"a\nb\n");
        assert!(matches!(
            first_lines(&fs, &path, 3, 1000).await,
            Err(Stop::Over)
        ));
        let whole = first_lines(&fs, &path, 3, head.len()).await.unwrap();
        assert_eq!(whole, head.as_bytes());
    }
}
