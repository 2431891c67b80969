//! The data-frame extension: `capfs/readFileStream` and `capfs/writeFileStream`.
//!
//! A streamed read sends the file as data frames (binary WebSocket frames: a zero tag byte, the
//! stream id, then up to [`DATA_CHUNK_BYTES`] of contents) and then the JSON response with the
//! byte count. A streamed write receives the data frames after its request and replaces the file
//! once all `size` bytes have arrived. Memory stays bounded: a read has at most the writer
//! channel's capacity in chunks queued, a write at most [`UPLOAD_QUEUE_CHUNKS`].

use std::collections::HashMap;
use std::io::{self, Read};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::audit::RequestLog;
use super::connection::{reply_message, send};
use super::handler::{invalid_input, parse};
use crate::LocalFileSystem;
use crate::error::too_large;
use crate::protocol::{
    DATA_CHUNK_BYTES, DATA_FRAME_HEADER_LEN, ErrorObject, INVALID_PARAMS, ReadStreamParams,
    RequestId, StreamResponse, WriteStreamParams, data_frame_header,
};

/// Chunks a streamed write may have queued between the socket and the disk.
pub(crate) const UPLOAD_QUEUE_CHUNKS: usize = 8;

/// A streamed write still expecting data.
pub(crate) struct Upload {
    chunks: mpsc::Sender<Bytes>,
    remaining: u64,
}

fn stream_reply(result: io::Result<u64>) -> Result<Value, ErrorObject> {
    result
        .map(|size| serde_json::to_value(StreamResponse { size }).expect("serializable"))
        .map_err(|e| ErrorObject::from_io(&e))
}

/// Starts a streamed read: opens the file, sends its contents as data frames, then the reply.
pub(crate) fn start_read(
    fs: LocalFileSystem,
    id: RequestId,
    raw_params: Option<Value>,
    out: mpsc::Sender<WsMessage>,
    permit: OwnedSemaphorePermit,
    log: RequestLog,
) {
    tokio::spawn(async move {
        let reply = match parse::<ReadStreamParams>(raw_params) {
            Err(error) => Err(error),
            Ok(p) => {
                let limit = fs.read_limit();
                let sent = match fs.open_read(&p.path).await {
                    Err(e) => Err(e),
                    Ok((file, _)) => {
                        let out = out.clone();
                        tokio::task::spawn_blocking(move || {
                            send_frames(file, limit, p.stream_id, &out)
                        })
                        .await
                        .unwrap_or_else(|e| Err(io::Error::other(e)))
                    }
                };
                stream_reply(sent)
            }
        };
        log.finish(&reply, 0);
        send(&out, reply_message(id, reply)).await;
        drop(permit);
    });
}

/// Sends `file` up to its end as data frames, like `read_file` reads it: a file that turns out
/// to hold more than `limit` bytes (one that grows, or a procfs file reporting size 0) fails with
/// the same error, after at most `limit + 1` bytes were read.
fn send_frames(
    mut file: std::fs::File,
    limit: u64,
    stream_id: u64,
    out: &mpsc::Sender<WsMessage>,
) -> io::Result<u64> {
    let header = data_frame_header(stream_id);
    let mut sent = 0u64;
    loop {
        let want = (limit.saturating_add(1) - sent).min(DATA_CHUNK_BYTES as u64) as usize;
        let mut frame = Vec::with_capacity(DATA_FRAME_HEADER_LEN + want);
        frame.extend_from_slice(&header);
        // Reads into the spare capacity until `want` bytes or the end: no zero-filling first.
        let n = (&mut file).take(want as u64).read_to_end(&mut frame)?;
        if n == 0 {
            break;
        }
        if sent + n as u64 > limit {
            return Err(too_large(limit));
        }
        out.blocking_send(WsMessage::Binary(frame.into()))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))?;
        sent += n as u64;
    }
    Ok(sent)
}

/// Starts a streamed write: registers the stream so data frames reach it, then writes them.
pub(crate) fn start_write(
    fs: LocalFileSystem,
    uploads: &mut HashMap<u64, Upload>,
    id: RequestId,
    raw_params: Option<Value>,
    out: mpsc::Sender<WsMessage>,
    permit: OwnedSemaphorePermit,
    log: RequestLog,
) -> Result<(), ErrorObject> {
    let p: WriteStreamParams = parse(raw_params)?;
    if uploads.contains_key(&p.stream_id) {
        return Err(invalid_input(
            INVALID_PARAMS,
            format!("stream id {} is already in use", p.stream_id),
        ));
    }
    let (tx, rx) = mpsc::channel(UPLOAD_QUEUE_CHUNKS);
    if p.size > 0 {
        uploads.insert(
            p.stream_id,
            Upload {
                chunks: tx,
                remaining: p.size,
            },
        );
    }
    tokio::spawn(async move {
        let options = crate::WriteOptions {
            mode: p.mode,
            modified_at_ms: p.modified_at_ms,
        };
        let written = fs.write_file_stream(&p.path, p.size, options, rx).await;
        let reply = stream_reply(written.map(|()| p.size));
        log.finish(&reply, 0);
        send(&out, reply_message(id, reply)).await;
        drop(permit);
    });
    Ok(())
}

/// Hands a data frame's payload to its streamed write. Frames of unknown streams (finished, or
/// refused before their data arrived) are dropped.
pub(crate) async fn route_data(uploads: &mut HashMap<u64, Upload>, stream_id: u64, payload: Bytes) {
    let Some(upload) = uploads.get_mut(&stream_id) else {
        return;
    };
    let len = payload.len() as u64;
    let last = len >= upload.remaining;
    upload.remaining = upload.remaining.saturating_sub(len);
    let delivered = upload.chunks.send(payload).await.is_ok();
    if last || !delivered {
        uploads.remove(&stream_id);
    }
}
