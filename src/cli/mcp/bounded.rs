//! Reads bounded by the reply: a whole file up to a byte bound, the first lines of a file, or
//! its last lines read from the end in blocks. None reads more than the reply may carry.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use capfs::{AbsolutePathBuf, ExecutorFileSystem};

/// Bytes read per step when a file's end is read backwards.
const TAIL_BLOCK: usize = 64 * 1024;

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

/// The file up to and including its `n`-th newline (all of it when it has fewer), read no
/// further; more than `max` bytes before that is [`Stop::Over`].
pub(crate) async fn first_lines(
    fs: &dyn ExecutorFileSystem,
    path: &AbsolutePathBuf,
    n: usize,
    max: usize,
) -> Result<Vec<u8>, Stop> {
    collect(fs, path, max, Some(n)).await
}

/// A suffix of the file holding at least its last `n + 1` newline-separated pieces (all of it
/// when it has fewer): read from the end in blocks where the backend hands out the file's
/// descriptor, else streamed with only a window of `2 * max` bytes kept. A suffix that needs
/// more than `max` bytes is [`Stop::Over`].
pub(crate) async fn last_lines(
    fs: &dyn ExecutorFileSystem,
    path: &AbsolutePathBuf,
    n: usize,
    max: usize,
) -> Result<Vec<u8>, Stop> {
    if let Some(file) = fs.open_for_transfer(path).await? {
        return tokio::task::spawn_blocking(move || suffix_of_file(&file, n, max))
            .await
            .map_err(|e| Stop::Failed(io::Error::other(e.to_string())))?;
    }
    let mut window = Window {
        data: Vec::new(),
        max,
        trimmed: false,
    };
    fs.read_file_to(path, &mut window, &mut |_| {}).await?;
    let start = suffix_start(&window.data, n);
    if start.is_none() && window.trimmed {
        return Err(Stop::Over);
    }
    let suffix = &window.data[start.unwrap_or(0)..];
    if suffix.len() > max {
        return Err(Stop::Over);
    }
    Ok(suffix.to_vec())
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

/// [`last_lines`] on a file's descriptor: blocks read backwards from its end.
fn suffix_of_file(file: &std::fs::File, n: usize, max: usize) -> Result<Vec<u8>, Stop> {
    use std::os::unix::fs::FileExt;
    let size = file.metadata()?.len();
    let mut suffix: Vec<u8> = Vec::new();
    let mut end = size;
    while end > 0 {
        let start = end.saturating_sub(TAIL_BLOCK as u64);
        let mut block = vec![0u8; (end - start) as usize];
        file.read_exact_at(&mut block, start)?;
        block.extend_from_slice(&suffix);
        suffix = block;
        end = start;
        if let Some(at) = suffix_start(&suffix, n) {
            suffix.drain(..at);
            break;
        }
        if suffix.len() > max {
            return Err(Stop::Over);
        }
    }
    if suffix.len() > max {
        return Err(Stop::Over);
    }
    Ok(suffix)
}

/// A writer that keeps the last bytes it is given, at least `max` of them and at most twice.
struct Window {
    data: Vec<u8>,
    max: usize,
    trimmed: bool,
}

impl tokio::io::AsyncWrite for Window {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        this.data.extend_from_slice(buf);
        let keep = this.max.saturating_add(1);
        if this.data.len() > keep.saturating_mul(2) {
            let cut = this.data.len() - keep;
            this.data.drain(..cut);
            this.trimmed = true;
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

    #[test]
    fn files_are_read_backwards_only_as_far_as_needed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut body = "x".repeat(3 * TAIL_BLOCK);
        body.push_str("\nlast one\nlast two\n");
        std::fs::write(&path, &body).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let suffix = suffix_of_file(&file, 2, 100).unwrap();
        assert_eq!(suffix, b"\nlast two\n");
        // Four pieces reach into the long line: more than the bound.
        assert_eq!(
            suffix_of_file(&file, 3, 100).unwrap(),
            b"\nlast one\nlast two\n"
        );
        assert!(matches!(suffix_of_file(&file, 4, 100), Err(Stop::Over)));
        let all = suffix_of_file(&file, 9, body.len()).unwrap();
        assert_eq!(all, body.as_bytes());
    }
}
