//! Streamed reads and writes over data frames: the file's contents move in frames of
//! [`DATA_CHUNK_BYTES`] with bounded memory, whatever the file's size.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::client::Downloads;
use super::common::{connection_lost, no_reply};
use super::handle::RemoteFileSystem;
use super::outgoing::{Frames, Outgoing};
use super::reply::finish;
use crate::protocol::{
    CAPFS_READ_FILE_STREAM_METHOD, CAPFS_WRITE_FILE_STREAM_METHOD, DATA_CHUNK_BYTES,
    ReadStreamParams, StreamResponse, WriteStreamParams, data_frame_header, data_frame_last_header,
};
use capfs::error::{check_stream_size, stream_ended_early, stream_too_long};
use capfs::{AbsolutePathBuf, ExecutorFileSystem, WriteOptions};

/// Data frames a streamed read may have queued between the socket and its consumer.
pub(super) const DOWNLOAD_QUEUE_CHUNKS: usize = 8;
/// Writes at least this large use data frames when the server offers them.
pub(super) const STREAM_WRITE_THRESHOLD: usize = 64 * 1024;

impl RemoteFileSystem {
    /// [`ExecutorFileSystem::read_file_to`]: the file's data frames go to `writer` as they
    /// arrive, with bounded memory whatever the file size; with `max_bytes`, a file holding more
    /// fails as `fs/readFile` fails at the read limit.
    pub(super) async fn stream_read(
        &self,
        path: &AbsolutePathBuf,
        max_bytes: Option<u64>,
        writer: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> io::Result<u64> {
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
            path: path.clone().into(),
            stream_id,
            max_bytes,
            sandbox: None,
        };
        let (id, mut reply) = client
            .start_call(CAPFS_READ_FILE_STREAM_METHOD, params)
            .await?;
        let idle = client.stream_idle_timeout;
        let stalled = || {
            client.forget(id);
            no_reply(CAPFS_READ_FILE_STREAM_METHOD, "stream idle timeout", idle)
        };
        // More than `max_bytes` is refused here too: a server that ignores the bound cannot
        // make the client hold more.
        let too_much = |received: u64| match max_bytes {
            Some(max) if received > max => Err(crate::error::stream_overrun(path, max)),
            _ => Ok(()),
        };
        let deadline = tokio::time::sleep(idle);
        tokio::pin!(deadline);
        let mut received = 0u64;
        let reply = loop {
            tokio::select! {
                biased;
                chunk = chunks.recv() => match chunk {
                    Some(chunk) => {
                        received += chunk.len() as u64;
                        too_much(received)?;
                        writer.write_all(&chunk).await?;
                        progress(received);
                        deadline.as_mut().reset(tokio::time::Instant::now() + idle);
                    }
                    None => break (&mut reply).await,
                },
                reply = &mut reply => break reply,
                () = &mut deadline => return Err(stalled()),
            }
        };
        // Every data frame precedes the reply on the socket, so the rest are queued already.
        while let Ok(chunk) = chunks.try_recv() {
            received += chunk.len() as u64;
            too_much(received)?;
            writer.write_all(&chunk).await?;
            progress(received);
        }
        writer.flush().await?;
        let announced: StreamResponse = finish(CAPFS_READ_FILE_STREAM_METHOD, reply)?;
        if announced.size != received {
            return Err(crate::error::stream_short(path, received, announced.size));
        }
        Ok(received)
    }

    /// [`ExecutorFileSystem::write_file_from`]: `reader`'s bytes go out as data frames as they
    /// are read, with bounded memory whatever the size; without `size`, a last frame tagged
    /// [`DATA_FRAME_LAST_TAG`](crate::protocol::DATA_FRAME_LAST_TAG) ends them.
    pub(super) async fn stream_write(
        &self,
        path: &AbsolutePathBuf,
        reader: &mut (dyn tokio::io::AsyncRead + Unpin + Send),
        size: Option<u64>,
        options: WriteOptions,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> io::Result<u64> {
        if !self.client.data_frames {
            let mut data = Vec::new();
            let want = size.map_or(u64::MAX, |size| size.saturating_add(1));
            (&mut *reader).take(want).read_to_end(&mut data).await?;
            if let Some(size) = size {
                check_stream_size(data.len() as u64, size)?;
            }
            let written = data.len() as u64;
            self.write_inline(path, data, options).await?;
            progress(written);
            return Ok(written);
        }
        // A source that carries more than `size` fails before its last bytes go out, so the
        // server never replaces the file with its first `size` bytes; with `size` 0 the request
        // itself is all the server waits for.
        if size == Some(0) && carries_more(reader).await? {
            return Err(stream_too_long(0));
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
            path: path.clone().into(),
            stream_id,
            size,
            mode: options.mode,
            modified_at_ms: options.modified_at_ms,
            sandbox: None,
        };
        let (id, mut reply) = client
            .start_call(CAPFS_WRITE_FILE_STREAM_METHOD, params)
            .await?;
        let idle = client.stream_idle_timeout;
        // The server takes no frame, or gives no final reply, within the idle timeout.
        let stalled = || {
            client.abort_upload(&data_frame_header(stream_id));
            client.forget(id);
            no_reply(CAPFS_WRITE_FILE_STREAM_METHOD, "stream idle timeout", idle)
        };
        let header = data_frame_header(stream_id);
        let mut frames = Frames::new(client.writes_frames_itself);
        let mut sent = 0u64;
        loop {
            let left = size.map_or(u64::MAX, |size| size - sent);
            if left == 0 {
                break;
            }
            let early = match reply.try_recv() {
                Ok(early) => Some(early),
                Err(oneshot::error::TryRecvError::Empty) => None,
                // The connection is gone (the receiver cannot be polled again after this).
                Err(oneshot::error::TryRecvError::Closed) => return Err(connection_lost()),
            };
            if let Some(early) = early {
                // Refused before all the data went out (bad path, read-only root, ...).
                let _: StreamResponse = finish(CAPFS_WRITE_FILE_STREAM_METHOD, Ok(early))?;
                return Err(crate::error::write_finished_early(path));
            }
            let want = left.min(DATA_CHUNK_BYTES as u64) as usize;
            let n = frames
                .fill(&mut *reader, &header, want)
                .await
                .inspect_err(|_| client.abort_upload(&header))?;
            if let Some(size) = size
                && n as u64 == left
                && carries_more(reader)
                    .await
                    .inspect_err(|_| client.abort_upload(&header))?
            {
                client.abort_upload(&header);
                return Err(stream_too_long(size));
            }
            if n == 0 {
                if let Some(size) = size {
                    client.abort_upload(&header);
                    return Err(stream_ended_early(sent, size));
                }
                // The end of an unsized write: an empty last frame.
                let last = data_frame_last_header(stream_id);
                let last = Outgoing::Message(WsMessage::Binary(last.to_vec().into()));
                tokio::time::timeout(idle, client.send(last))
                    .await
                    .map_err(|_| stalled())??;
                break;
            }
            tokio::time::timeout(idle, client.send(frames.take(&header, n)))
                .await
                .map_err(|_| stalled())??;
            sent += n as u64;
            progress(sent);
        }
        let reply = tokio::time::timeout(idle, reply)
            .await
            .map_err(|_| stalled())?;
        let done: StreamResponse = finish(CAPFS_WRITE_FILE_STREAM_METHOD, reply)?;
        if done.size != sent {
            return Err(crate::error::write_size_mismatch(path, done.size, sent));
        }
        Ok(sent)
    }
}

/// Whether `reader` has a byte left.
async fn carries_more(reader: &mut (dyn tokio::io::AsyncRead + Unpin + Send)) -> io::Result<bool> {
    Ok(reader.read(&mut [0u8; 1]).await? > 0)
}

/// Removes a streamed read's consumer when the read ends, however it ends.
struct Registered<'a>(&'a Downloads, u64);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.lock().expect("downloads lock").remove(&self.1);
    }
}
