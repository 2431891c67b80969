//! The handlers of the March 2026 file methods and capfs's extensions: each takes its typed
//! params and its [`Call`], makes the trait calls and returns its result. None touches the file
//! system itself: everything goes through [`ExecutorFileSystem`](capfs::ExecutorFileSystem).

use crate::encoding::STANDARD;
use base64::Engine;

use super::fit;
use super::payload::{Payload, base64_len, invalid_input, reply_fits, serialized};
use super::state::Call;
use crate::error;
use crate::protocol::uri::PathForm;
use crate::protocol::{
    CAPFS_READ_FILE_STREAM_METHOD, CopyParams, CreateDirectoryParams, CreateSymlinkParams,
    ErrorObject, GetMetadataResponse, INVALID_PARAMS, INVALID_REQUEST, PathParams,
    ReadLinkResponse, ReadRangeParams, RemoveParams, RenameParams, WalkParams, WriteFileParams,
};
use capfs::error::with_path;
use capfs::{CopyOptions, CreateDirectoryOptions, RemoveOptions, RenameOptions, WriteOptions};
use std::io::Read;

fn io(e: std::io::Error) -> ErrorObject {
    ErrorObject::from_io(&e)
}

fn done() -> Result<Payload, ErrorObject> {
    serialized(serde_json::json!({}))
}

/// The largest file `fs/readFile` answers from its first read, before it looks at any size (see
/// there).
const SMALL_FILE_BYTES: u64 = 16 * 1024;

/// `fs/readFile`: the whole file in one reply, refused when the reply would pass the message
/// limit (the client then streams it with `capfs/readFileStream`).
pub(crate) async fn read_file(call: Call<'_>, p: PathParams) -> Result<Payload, ErrorObject> {
    let Call {
        fs,
        max_message_bytes,
        outcome,
        ..
    } = call;
    let too_large = || {
        io(error::reply_too_large(
            &p.path,
            max_message_bytes,
            CAPFS_READ_FILE_STREAM_METHOD,
        ))
    };
    // Most files an agent reads are small. A backend that hands over a descriptor (a local
    // disk, where a read blocks no longer than an inline read) is read here by one open: the
    // first `SMALL_FILE_BYTES` and one more byte, covered before they are read, are the whole
    // of such a file, where a look at its size first took a stat of its own. A file that holds
    // more, a read limit or a message limit below the range, a budget share too small for it
    // and every other backend go the long way, which covers the file's size before reading it.
    let small_cover = SMALL_FILE_BYTES + 1 + base64_len(SMALL_FILE_BYTES + 1);
    if reply_fits(SMALL_FILE_BYTES + 1, max_message_bytes)
        && fs
            .read_file_limit()
            .is_none_or(|limit| limit >= SMALL_FILE_BYTES)
        && outcome.cover(small_cover).await.is_ok()
        && let Some(file) = fs.open_for_transfer(&p.path).await.map_err(io)?
    {
        let mut data = Vec::with_capacity(SMALL_FILE_BYTES as usize + 1);
        file.take(SMALL_FILE_BYTES + 1)
            .read_to_end(&mut data)
            .map_err(|e| io(with_path(&p.path, e)))?;
        if data.len() as u64 <= SMALL_FILE_BYTES {
            outcome.bytes = data.len() as u64;
            return Ok(Payload::FileData(data));
        }
    }
    // Refused before anything is read when the size is known to be too large; checked again on
    // what was read, for a file that grew in between.
    if let Ok(metadata) = fs.get_metadata(&p.path).await
        && metadata.is_file
    {
        if !reply_fits(metadata.size, max_message_bytes) {
            return Err(too_large());
        }
        // The contents and their text are reserved before the file is read.
        let size = metadata.size;
        outcome.cover(size + base64_len(size)).await.map_err(io)?;
    }
    let data = fs.read_file(&p.path).await.map_err(io)?;
    if !reply_fits(data.len() as u64, max_message_bytes) {
        return Err(too_large());
    }
    outcome.bytes = data.len() as u64;
    Ok(Payload::FileData(data))
}

/// `capfs/readFileRange`: part of a file in one reply, read from its offset, so a client that
/// wants a file's last lines reads only those. A range whose reply would pass the message limit
/// is refused before anything is read.
pub(crate) async fn read_range(call: Call<'_>, p: ReadRangeParams) -> Result<Payload, ErrorObject> {
    if !reply_fits(p.length, call.max_message_bytes) {
        let limit = call.max_message_bytes;
        let e = error::reply_too_large(&p.path, limit, CAPFS_READ_FILE_STREAM_METHOD);
        return Err(io(e));
    }
    let data = call
        .fs
        .read_file_range(&p.path, p.offset, p.length)
        .await
        .map_err(io)?;
    call.outcome.bytes = data.len() as u64;
    Ok(Payload::FileData(data))
}

/// `fs/writeFile`, with capfs's `mode` and `modifiedAtMs` when given.
pub(crate) async fn write_file(call: Call<'_>, p: WriteFileParams) -> Result<Payload, ErrorObject> {
    let data = STANDARD.decode(p.data_base64.as_bytes()).map_err(|e| {
        invalid_input(
            INVALID_REQUEST,
            format!("dataBase64 is not valid base64: {e}"),
        )
    })?;
    call.outcome.bytes = data.len() as u64;
    let options = WriteOptions::default()
        .with_mode(p.mode)
        .with_modified_at_ms(p.modified_at_ms);
    if options == WriteOptions::default() {
        call.fs.write_file(&p.path, data).await.map_err(io)?;
    } else {
        // The capfs params: the same write, through the call that applies them.
        let size = Some(data.len() as u64);
        call.fs
            .write_file_from(&p.path, &mut data.as_slice(), size, options, &mut |_| {})
            .await
            .map_err(io)?;
    }
    done()
}

/// `fs/createDirectory`; `recursive` unless the request says otherwise.
pub(crate) async fn create_directory(
    call: Call<'_>,
    p: CreateDirectoryParams,
) -> Result<Payload, ErrorObject> {
    let options = CreateDirectoryOptions::default().with_recursive(p.recursive.unwrap_or(true));
    call.fs
        .create_directory(&p.path, options)
        .await
        .map_err(io)?;
    done()
}

/// `fs/getMetadata`.
pub(crate) async fn get_metadata(call: Call<'_>, p: PathParams) -> Result<Payload, ErrorObject> {
    let metadata = call.fs.get_metadata(&p.path).await.map_err(io)?;
    super::payload::metadata(&GetMetadataResponse::from(metadata))
}

/// `fs/readDirectory`, cut to the message limit; a request in URI form types a link by what it
/// leads to, as codex's own server does.
pub(crate) async fn read_directory(call: Call<'_>, p: PathParams) -> Result<Payload, ErrorObject> {
    let type_links = call.form == PathForm::Uri;
    fit::listing(
        call.fs,
        &p.path,
        type_links,
        call.max_message_bytes,
        call.outcome,
    )
    .await
}

/// `fs/remove`; `recursive` and `force` unless the request says otherwise.
pub(crate) async fn remove(call: Call<'_>, p: RemoveParams) -> Result<Payload, ErrorObject> {
    let options = RemoveOptions::default()
        .with_recursive(p.recursive.unwrap_or(true))
        .with_force(p.force.unwrap_or(true));
    call.fs.remove(&p.path, options).await.map_err(io)?;
    done()
}

/// `fs/copy`.
pub(crate) async fn copy(call: Call<'_>, p: CopyParams) -> Result<Payload, ErrorObject> {
    let options = CopyOptions::default().with_recursive(p.recursive.unwrap_or(false));
    call.fs
        .copy(&p.source_path, &p.destination_path, options)
        .await
        .map_err(io)?;
    done()
}

/// `fs/rename`.
pub(crate) async fn rename(call: Call<'_>, p: RenameParams) -> Result<Payload, ErrorObject> {
    let options = RenameOptions::default().with_overwrite(p.overwrite.unwrap_or(false));
    call.fs
        .rename(&p.source_path, &p.destination_path, options)
        .await
        .map_err(io)?;
    done()
}

/// `capfs/readLink`: the link's text as stored, which must be UTF-8 to cross the wire.
pub(crate) async fn read_link(call: Call<'_>, p: PathParams) -> Result<Payload, ErrorObject> {
    let target = call.fs.read_link(&p.path).await.map_err(io)?;
    let target = target.into_os_string().into_string().map_err(|_| {
        invalid_input(
            INVALID_REQUEST,
            format!("{}: the link's text is not UTF-8", p.path),
        )
    })?;
    serialized(ReadLinkResponse { target })
}

/// `capfs/createSymlink`.
pub(crate) async fn create_symlink(
    call: Call<'_>,
    p: CreateSymlinkParams,
) -> Result<Payload, ErrorObject> {
    if p.target.is_empty() || p.target.contains('\0') {
        return Err(invalid_input(
            INVALID_PARAMS,
            "invalid params: target must be non-empty and hold no NUL".to_string(),
        ));
    }
    call.fs
        .create_symlink(&p.path, std::path::Path::new(&p.target))
        .await
        .map_err(io)?;
    done()
}

/// `capfs/walk`, cut to the message limit.
pub(crate) async fn walk(call: Call<'_>, p: WalkParams) -> Result<Payload, ErrorObject> {
    fit::walk(call.fs, &p, call.max_message_bytes, call.outcome).await
}
