//! Streamed reads and writes over data frames: the file's contents move in frames of
//! [`DATA_CHUNK_BYTES`] with bounded memory, whatever the file's size.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::RemoteFileSystem;
use super::client::{Downloads, connection_lost, finish};
use crate::protocol::{
    CAPFS_READ_FILE_STREAM_METHOD, CAPFS_WRITE_FILE_STREAM_METHOD, DATA_CHUNK_BYTES,
    DATA_FRAME_HEADER_LEN, ReadStreamParams, StreamResponse, WriteStreamParams, data_frame_header,
};
use crate::{AbsolutePathBuf, ExecutorFileSystem, WriteOptions};

/// Data frames a streamed read may have queued between the socket and its consumer.
pub(super) const DOWNLOAD_QUEUE_CHUNKS: usize = 8;
/// Streamed writes at once per connection, well below the server's in-flight bound so that the
/// server never has to refuse one.
pub(super) const MAX_UPLOADS: usize = 16;
/// Writes at least this large use data frames when the server offers them.
pub(super) const STREAM_WRITE_THRESHOLD: usize = 64 * 1024;

impl RemoteFileSystem {
    /// Streams the file at `path` into `writer`, calling `progress` with the running byte count.
    /// Memory stays bounded whatever the file size. Returns the number of bytes written.
    ///
    /// # Errors
    ///
    /// As [`ExecutorFileSystem::read_file`]; the error of `writer`; `BrokenPipe` when the
    /// connection drops. What was already written to `writer` stays there.
    pub async fn read_file_to<W>(
        &self,
        path: &AbsolutePathBuf,
        writer: &mut W,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> io::Result<u64>
    where
        W: tokio::io::AsyncWrite + Unpin + Send,
    {
        if !self.client.data_frames {
            let data = self.read_file(path).await?;
            writer.write_all(&data).await?;
            progress(data.len() as u64);
            return Ok(data.len() as u64);
        }
        let client = &self.client;
        let stream_id = client.new_id() as u64;
        let (tx, mut chunks) = mpsc::channel(DOWNLOAD_QUEUE_CHUNKS);
        client
            .downloads
            .lock()
            .expect("downloads lock")
            .insert(stream_id, tx);
        let _registered = Registered(&client.downloads, stream_id);
        let params = ReadStreamParams {
            path: path.clone(),
            stream_id,
        };
        let mut reply = client
            .start_call(CAPFS_READ_FILE_STREAM_METHOD, params)
            .await?;
        let mut received = 0u64;
        let reply = loop {
            tokio::select! {
                biased;
                chunk = chunks.recv() => match chunk {
                    Some(chunk) => {
                        writer.write_all(&chunk).await?;
                        received += chunk.len() as u64;
                        progress(received);
                    }
                    None => break (&mut reply).await,
                },
                reply = &mut reply => break reply,
            }
        };
        // Every data frame precedes the reply on the socket, so the rest are queued already.
        while let Ok(chunk) = chunks.try_recv() {
            writer.write_all(&chunk).await?;
            received += chunk.len() as u64;
            progress(received);
        }
        writer.flush().await?;
        let announced: StreamResponse = finish(CAPFS_READ_FILE_STREAM_METHOD, reply)?;
        if announced.size != received {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{path}: received {received} bytes of {}", announced.size),
            ));
        }
        Ok(received)
    }

    /// Streams `size` bytes from `reader` into the file at `path`, which is replaced atomically
    /// once they have all arrived. Memory stays bounded whatever the size.
    ///
    /// # Errors
    ///
    /// As [`ExecutorFileSystem::write_file`]; `UnexpectedEof` when `reader` ends before `size`
    /// bytes (the file is then left as it was); `BrokenPipe` when the connection drops.
    pub async fn write_file_from<R>(
        &self,
        path: &AbsolutePathBuf,
        size: u64,
        reader: &mut R,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> io::Result<()>
    where
        R: tokio::io::AsyncRead + Unpin + Send,
    {
        self.write_file_from_with(path, size, WriteOptions::default(), reader, progress)
            .await
    }

    /// As [`RemoteFileSystem::write_file_from`], giving the file the mode and modification
    /// time of `options` on a capfs server (other servers are sent neither).
    ///
    /// # Errors
    ///
    /// As [`RemoteFileSystem::write_file_from`].
    pub async fn write_file_from_with<R>(
        &self,
        path: &AbsolutePathBuf,
        size: u64,
        options: WriteOptions,
        reader: &mut R,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> io::Result<()>
    where
        R: tokio::io::AsyncRead + Unpin + Send,
    {
        if !self.client.data_frames {
            let mut data = Vec::new();
            (&mut *reader).take(size).read_to_end(&mut data).await?;
            if (data.len() as u64) < size {
                return Err(short_source(data.len() as u64, size));
            }
            self.write_inline(path, data, options).await?;
            progress(size);
            return Ok(());
        }
        let client = &self.client;
        let _slot = client
            .upload_slots
            .acquire()
            .await
            .map_err(|_| connection_lost())?;
        let stream_id = client.new_id() as u64;
        let options = client.capfs_options(options);
        let params = WriteStreamParams {
            path: path.clone(),
            stream_id,
            size,
            mode: options.mode,
            modified_at_ms: options.modified_at_ms,
        };
        let mut reply = client
            .start_call(CAPFS_WRITE_FILE_STREAM_METHOD, params)
            .await?;
        let header = data_frame_header(stream_id);
        let mut sent = 0u64;
        while sent < size {
            if let Ok(early) = reply.try_recv() {
                // Refused before all the data went out (bad path, read-only root, ...).
                let _: StreamResponse = finish(CAPFS_WRITE_FILE_STREAM_METHOD, Ok(early))?;
                break;
            }
            let want = (size - sent).min(DATA_CHUNK_BYTES as u64) as usize;
            let mut frame = Vec::with_capacity(DATA_FRAME_HEADER_LEN + want);
            frame.extend_from_slice(&header);
            let n = (&mut *reader)
                .take(want as u64)
                .read_to_end(&mut frame)
                .await
                .inspect_err(|_| client.abort_upload(&header))?;
            if n == 0 {
                client.abort_upload(&header);
                return Err(short_source(sent, size));
            }
            client
                .out
                .send(WsMessage::Binary(frame.into()))
                .await
                .map_err(|_| connection_lost())?;
            sent += n as u64;
            progress(sent);
        }
        let _: StreamResponse = finish(CAPFS_WRITE_FILE_STREAM_METHOD, reply.await)?;
        Ok(())
    }
}

/// Removes a streamed read's consumer when the read ends, however it ends.
struct Registered<'a>(&'a Downloads, u64);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.lock().expect("downloads lock").remove(&self.1);
    }
}

fn short_source(got: u64, size: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("the source ended after {got} of {size} bytes"),
    )
}
