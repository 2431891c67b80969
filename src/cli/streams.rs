//! Streamed reads and writes on either backend, with the file system trait's streaming
//! signatures.

use std::io;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncSeekExt, AsyncWrite, AsyncWriteExt};

use capfs::{AbsolutePathBuf, WriteOptions};

use crate::transfer::Backend;

/// Bytes moved per step of a local transfer.
const CHUNK: usize = 256 * 1024;

impl Backend {
    /// Streams the file at `path` into `writer`; returns the bytes written.
    pub async fn read_file_to(
        &self,
        path: &AbsolutePathBuf,
        mut writer: &mut (dyn AsyncWrite + Unpin + Send),
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> io::Result<u64> {
        match self {
            Backend::Remote(fs) => fs.read_file_to(path, &mut writer, progress).await,
            Backend::Local(fs) => {
                let (file, _) = fs.open_read(path).await?;
                let mut input = tokio::fs::File::from_std(file);
                let mut buf = vec![0u8; CHUNK];
                let mut copied = 0u64;
                loop {
                    let n = input.read(&mut buf).await?;
                    if n == 0 {
                        break;
                    }
                    writer.write_all(&buf[..n]).await?;
                    copied += n as u64;
                    progress(copied);
                }
                writer.flush().await?;
                Ok(copied)
            }
        }
    }

    /// Streams `reader` into the file at `path` (`size` bytes, or to its end when `None`),
    /// replacing it atomically once complete; returns the bytes written.
    pub async fn write_file_from(
        &self,
        path: &AbsolutePathBuf,
        mut reader: &mut (dyn AsyncRead + Unpin + Send),
        size: Option<u64>,
        options: WriteOptions,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> io::Result<u64> {
        let Some(size) = size else {
            // Spooled to an unnamed temporary file first, to learn the size with bounded
            // memory.
            let mut spool = tokio::fs::File::from_std(tempfile::tempfile()?);
            let size = tokio::io::copy(&mut reader, &mut spool).await?;
            spool.rewind().await?;
            return Box::pin(self.write_file_from(path, &mut spool, Some(size), options, progress))
                .await;
        };
        match self {
            Backend::Remote(fs) => {
                fs.write_file_from_with(path, size, options, &mut reader, progress)
                    .await?;
            }
            Backend::Local(fs) => {
                let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(8);
                let feed = async move {
                    let mut sent = 0u64;
                    while sent < size {
                        let want = (size - sent).min(CHUNK as u64);
                        let mut chunk = Vec::with_capacity(want as usize);
                        let n = (&mut reader).take(want).read_to_end(&mut chunk).await?;
                        if n == 0 || tx.send(Bytes::from(chunk)).await.is_err() {
                            break;
                        }
                        sent += n as u64;
                        progress(sent);
                    }
                    io::Result::Ok(())
                };
                let (written, fed) =
                    tokio::join!(fs.write_file_stream(path, size, options, rx), feed);
                fed?;
                written?;
            }
        }
        Ok(size)
    }
}
