//! Maps one wire request to one trait call and its result back to the wire, and queues the reply
//! for the connection's writer. Never touches the file system itself: everything goes through
//! [`ExecutorFileSystem`].

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::budget::ReplyBudget;
use super::codex::{self as codex_methods, ConnectionState};
use super::fit;
pub(crate) use super::methods::{Runs, Touch, method};
use super::outgoing::Outgoing;
use crate::error;
use crate::protocol::uri;
use crate::protocol::{
    CAPFS_CREATE_SYMLINK_METHOD, CAPFS_READ_FILE_RANGE_METHOD, CAPFS_READ_FILE_STREAM_METHOD,
    CAPFS_READ_LINK_METHOD, CAPFS_WALK_METHOD, CopyParams, CreateDirectoryParams,
    CreateSymlinkParams, ErrorObject, ErrorResponse, FS_COPY_METHOD, FS_CREATE_DIRECTORY_METHOD,
    FS_GET_METADATA_METHOD, FS_READ_DIRECTORY_METHOD, FS_READ_FILE_METHOD, FS_REMOVE_METHOD,
    FS_RENAME_METHOD, FS_WRITE_FILE_METHOD, GetMetadataResponse, INVALID_PARAMS, INVALID_REQUEST,
    METHOD_NOT_FOUND, Message, PathParams, ReadLinkResponse, RemoveParams, RenameParams, RequestId,
    Response, WalkParams, WriteFileParams,
};
use capfs::{
    CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, RemoveOptions, RenameOptions,
    WriteOptions,
};

/// Bytes a reply's JSON needs beyond the base64 text of a file: the id, the member names and
/// the punctuation. Ids are at most a message long, so this is a bound only with the id
/// counted separately (see [`reply_fits`]).
const REPLY_ENVELOPE_BYTES: usize = 64;

/// A successful result, as it will be serialised into the reply's text.
#[derive(Debug)]
pub(crate) enum Payload {
    /// Any result.
    Json(Value),
    /// A result already serialised: the JSON text of a protocol type, written into the reply
    /// as it is, without a `Value` in between.
    Text(String),
    /// The result of `fs/readFile`: `{"dataBase64": ...}` built straight into the reply text,
    /// without a base64 string or a `Value` in between.
    FileData(Vec<u8>),
    /// The result of `fs/readBlock`: `{"chunk": ..., "eof": ...}`, built the same way.
    Block { data: Vec<u8>, eof: bool },
}

impl Payload {
    /// The result as a JSON value.
    pub(crate) fn into_value(self) -> Value {
        match self {
            Payload::Json(value) => value,
            Payload::Text(text) => serde_json::from_str(&text).expect("results are JSON"),
            Payload::FileData(data) => serde_json::json!({ "dataBase64": STANDARD.encode(data) }),
            Payload::Block { data, eof } => {
                serde_json::json!({ "chunk": STANDARD.encode(data), "eof": eof })
            }
        }
    }

    /// What the audit log sees of the result (it reads only a stream's `size`).
    pub(crate) fn for_log(reply: &Result<Payload, ErrorObject>) -> Result<Value, ErrorObject> {
        match reply {
            Ok(Payload::Json(value)) => Ok(value.clone()),
            Ok(Payload::FileData(_) | Payload::Text(_) | Payload::Block { .. }) => Ok(Value::Null),
            Err(error) => Err(error.clone()),
        }
    }
}

/// Length of the base64 text of `len` bytes.
pub(crate) fn base64_len(len: u64) -> u64 {
    len.div_ceil(3).saturating_mul(4)
}

/// True when a `fs/readFile` reply carrying `len` bytes stays within `max_message_bytes`: the
/// base64 text plus the envelope. A peer announces the same bound for what it receives.
pub(crate) fn reply_fits(len: u64, max_message_bytes: usize) -> bool {
    base64_len(len).saturating_add(REPLY_ENVELOPE_BYTES as u64) <= max_message_bytes as u64
}

/// What a request did, for logs: the bytes it moved (its paths are logged as sent, from its raw
/// params: `audit::raw_paths`); and, on a connection, the outgoing budget its reply draws from.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) bytes: u64,
    pub(crate) budget: Option<ReplyBudget>,
}

impl Outcome {
    /// Reserves `bytes` for the reply before it is built, waiting if need be (see
    /// [`ReplyBudget::cover`]); nothing to do without a budget.
    pub(crate) async fn cover(&mut self, bytes: u64) -> std::io::Result<()> {
        match self.budget.as_mut() {
            Some(budget) => budget.cover(bytes).await,
            None => Ok(()),
        }
    }

    /// Waits for the connection's turn to build a reply of unknown size (see
    /// [`ReplyBudget::unsized_work`]); `None` without a budget.
    pub(crate) async fn unsized_work(&mut self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        match self.budget.as_mut() {
            Some(budget) => Some(budget.unsized_work().await),
            None => None,
        }
    }

    /// Reserves `bytes` if that needs no wait: false when it would.
    pub(crate) fn try_cover(&mut self, bytes: u64) -> std::io::Result<bool> {
        match self.budget.as_mut() {
            Some(budget) => budget.try_cover(bytes),
            None => Ok(true),
        }
    }
}

/// Runs the fs method `method` with `params` on `fs`; a `fs/readFile` reply may be at most
/// `max_message_bytes` long, and walks and listings are cut to it.
pub(crate) async fn dispatch(
    fs: &dyn ExecutorFileSystem,
    state: &ConnectionState,
    method: &str,
    mut params: Option<Value>,
    max_message_bytes: usize,
    outcome: &mut Outcome,
) -> Result<Payload, ErrorObject> {
    if super::process::is_process_method(method) {
        return super::process::dispatch(state.processes(), fs, method, params).await;
    }
    let form = uri::plain_params(&mut params)?;
    let touch = self::method(method).map_or(Touch::Nothing, |m| m.touch);
    codex_methods::check_policy(fs, touch, params.as_ref())
        .await
        .map_err(|e| ErrorObject::from_io(&e).for_form(form))?;
    if let Some(reply) = codex_methods::dispatch(
        fs,
        state,
        method,
        &mut params,
        form,
        max_message_bytes,
        outcome,
    )
    .await
    {
        return reply;
    }
    let reply = dispatch_fs(fs, method, params, form, max_message_bytes, outcome).await;
    reply.map_err(|error| error.for_form(form))
}

/// The methods of the March 2026 protocol and capfs's extensions.
async fn dispatch_fs(
    fs: &dyn ExecutorFileSystem,
    method: &str,
    params: Option<Value>,
    form: uri::PathForm,
    max_message_bytes: usize,
    outcome: &mut Outcome,
) -> Result<Payload, ErrorObject> {
    let io = |e: std::io::Error| ErrorObject::from_io(&e);
    match method {
        CAPFS_READ_FILE_RANGE_METHOD => {
            super::range::read_range(fs, params, max_message_bytes, outcome).await
        }
        FS_READ_FILE_METHOD => {
            let p: PathParams = parse(params)?;
            let too_large = || {
                io(error::reply_too_large(
                    &p.path,
                    max_message_bytes,
                    CAPFS_READ_FILE_STREAM_METHOD,
                ))
            };
            // Refused before anything is read when the size is known to be too large; checked
            // again on what was read, for a file that grew in between.
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
        FS_WRITE_FILE_METHOD => {
            let p: WriteFileParams = parse(params)?;
            let data = STANDARD.decode(p.data_base64.as_bytes()).map_err(|e| {
                invalid_input(
                    INVALID_REQUEST,
                    format!("dataBase64 is not valid base64: {e}"),
                )
            })?;
            outcome.bytes = data.len() as u64;
            let options = WriteOptions::default()
                .with_mode(p.mode)
                .with_modified_at_ms(p.modified_at_ms);
            if options == WriteOptions::default() {
                fs.write_file(&p.path, data).await.map_err(io)?;
            } else {
                // The capfs params: the same write, through the call that applies them.
                let size = Some(data.len() as u64);
                fs.write_file_from(&p.path, &mut data.as_slice(), size, options, &mut |_| {})
                    .await
                    .map_err(io)?;
            }
            reply(serde_json::json!({}))
        }
        FS_CREATE_DIRECTORY_METHOD => {
            let p: CreateDirectoryParams = parse(params)?;
            let options =
                CreateDirectoryOptions::default().with_recursive(p.recursive.unwrap_or(true));
            fs.create_directory(&p.path, options).await.map_err(io)?;
            reply(serde_json::json!({}))
        }
        FS_GET_METADATA_METHOD => {
            let p: PathParams = parse(params)?;
            let metadata = fs.get_metadata(&p.path).await.map_err(io)?;
            reply(GetMetadataResponse::from(metadata))
        }
        FS_READ_DIRECTORY_METHOD => {
            let p: PathParams = parse(params)?;
            fit::listing(
                fs,
                &p.path,
                form == uri::PathForm::Uri,
                max_message_bytes,
                outcome,
            )
            .await
        }
        FS_REMOVE_METHOD => {
            let p: RemoveParams = parse(params)?;
            let options = RemoveOptions::default()
                .with_recursive(p.recursive.unwrap_or(true))
                .with_force(p.force.unwrap_or(true));
            fs.remove(&p.path, options).await.map_err(io)?;
            reply(serde_json::json!({}))
        }
        FS_COPY_METHOD => {
            let p: CopyParams = parse(params)?;
            let options = CopyOptions::default().with_recursive(p.recursive.unwrap_or(false));
            fs.copy(&p.source_path, &p.destination_path, options)
                .await
                .map_err(io)?;
            reply(serde_json::json!({}))
        }
        FS_RENAME_METHOD => {
            let p: RenameParams = parse(params)?;
            let options = RenameOptions::default().with_overwrite(p.overwrite.unwrap_or(false));
            fs.rename(&p.source_path, &p.destination_path, options)
                .await
                .map_err(io)?;
            reply(serde_json::json!({}))
        }
        CAPFS_READ_LINK_METHOD => {
            let p: PathParams = parse(params)?;
            let target = fs.read_link(&p.path).await.map_err(io)?;
            let target = target.into_os_string().into_string().map_err(|_| {
                invalid_input(
                    INVALID_REQUEST,
                    format!("{}: the link's text is not UTF-8", p.path),
                )
            })?;
            reply(ReadLinkResponse { target })
        }
        CAPFS_CREATE_SYMLINK_METHOD => {
            let p: CreateSymlinkParams = parse(params)?;
            if p.target.is_empty() || p.target.contains('\0') {
                return Err(invalid_input(
                    INVALID_PARAMS,
                    "invalid params: target must be non-empty and hold no NUL".to_string(),
                ));
            }
            fs.create_symlink(&p.path, std::path::Path::new(&p.target))
                .await
                .map_err(io)?;
            reply(serde_json::json!({}))
        }
        CAPFS_WALK_METHOD => {
            let p: WalkParams = parse(params)?;
            fit::walk(fs, &p, max_message_bytes, outcome).await
        }
        other => Err(ErrorObject::new(
            METHOD_NOT_FOUND,
            format!("unknown method: {other}"),
        )),
    }
}

/// Decodes a method's params; failures are -32602 with kind `InvalidInput`.
pub(crate) fn parse<T: DeserializeOwned>(params: Option<Value>) -> Result<T, ErrorObject> {
    serde_json::from_value(params.unwrap_or(Value::Null))
        .map_err(|e| invalid_input(INVALID_PARAMS, format!("invalid params: {e}")))
}

pub(crate) fn invalid_input(code: i64, message: String) -> ErrorObject {
    ErrorObject {
        code,
        message,
        data: Some(serde_json::json!({ "kind": "InvalidInput" })),
    }
}

pub(crate) fn reply(value: impl Serialize) -> Result<Payload, ErrorObject> {
    Ok(Payload::Text(
        serde_json::to_string(&value).expect("protocol results always serialize"),
    ))
}

/// The text of the reply to request `id`; a file's contents are encoded straight into it.
pub(crate) fn reply_text(id: RequestId, reply: Result<Payload, ErrorObject>) -> String {
    match reply {
        Ok(Payload::FileData(data)) => {
            let mut text = result_opening(&id, base64_len(data.len() as u64) as usize);
            text.push_str(r#"{"dataBase64":""#);
            STANDARD.encode_string(&data, &mut text);
            text.push_str(r#""}}"#);
            text
        }
        Ok(Payload::Block { data, eof }) => {
            let mut text = result_opening(&id, base64_len(data.len() as u64) as usize);
            text.push_str(r#"{"chunk":""#);
            STANDARD.encode_string(&data, &mut text);
            text.push_str(if eof {
                r#"","eof":true}}"#
            } else {
                r#"","eof":false}}"#
            });
            text
        }
        Ok(Payload::Text(result)) => {
            let mut text = result_opening(&id, result.len());
            text.push_str(&result);
            text.push('}');
            text
        }
        Ok(Payload::Json(value)) => reply_message(id, Ok(value)).to_text(),
        Err(error) => reply_message(id, Err(error)).to_text(),
    }
}

/// `{"id":<id>,"result":` with room for a result of `result_len` bytes and the closing brace.
fn result_opening(id: &RequestId, result_len: usize) -> String {
    let id = serde_json::to_string(id).expect("ids always serialize");
    let mut text = String::with_capacity(result_len + id.len() + REPLY_ENVELOPE_BYTES);
    text.push_str(r#"{"id":"#);
    text.push_str(&id);
    text.push_str(r#","result":"#);
    text
}

/// The response or error answering request `id` with `reply`.
pub(crate) fn reply_message(id: RequestId, reply: Result<Value, ErrorObject>) -> Message {
    match reply {
        Ok(result) => Message::Response(Response { id, result }),
        Err(error) => error_message(id, error),
    }
}

pub(crate) fn error_message(id: RequestId, error: ErrorObject) -> Message {
    Message::Error(ErrorResponse { id, error })
}

pub(crate) async fn send(out: &mpsc::Sender<Outgoing>, message: WsMessage) {
    // A closed writer means the peer is gone; there is no one left to tell.
    let _ = out.send(Outgoing::Message(message)).await;
}
