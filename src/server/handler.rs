//! Maps one wire request to one trait call and its result back to the wire. Never touches the
//! file system itself: everything goes through [`ExecutorFileSystem`].

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::audit;

use crate::protocol::{
    CAPFS_CREATE_SYMLINK_METHOD, CAPFS_READ_LINK_METHOD, CAPFS_WALK_METHOD, CopyParams,
    CreateDirectoryParams, CreateSymlinkParams, ErrorObject, FS_COPY_METHOD,
    FS_CREATE_DIRECTORY_METHOD, FS_GET_METADATA_METHOD, FS_READ_DIRECTORY_METHOD,
    FS_READ_FILE_METHOD, FS_REMOVE_METHOD, FS_RENAME_METHOD, FS_WRITE_FILE_METHOD,
    GetMetadataResponse, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PathParams,
    ReadDirectoryResponse, ReadFileResponse, ReadLinkResponse, RemoveParams, RenameParams,
    WalkParams, WalkResponse, WriteFileParams,
};
use crate::{
    CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, RemoveOptions, RenameOptions,
};

/// Every fs method the server answers (with capfs's walk, which runs like them).
pub const FS_METHODS: &[&str] = &[
    FS_READ_FILE_METHOD,
    FS_WRITE_FILE_METHOD,
    FS_CREATE_DIRECTORY_METHOD,
    FS_GET_METADATA_METHOD,
    FS_READ_DIRECTORY_METHOD,
    FS_REMOVE_METHOD,
    FS_COPY_METHOD,
    FS_RENAME_METHOD,
    CAPFS_READ_LINK_METHOD,
    CAPFS_CREATE_SYMLINK_METHOD,
    CAPFS_WALK_METHOD,
];

/// What a request did, for logs: the paths it named and the bytes it moved.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) paths: Vec<String>,
    pub(crate) bytes: u64,
}

/// Runs the fs method `method` with `params` on `fs`.
pub(crate) async fn dispatch(
    fs: &dyn ExecutorFileSystem,
    method: &str,
    params: Option<Value>,
    outcome: &mut Outcome,
) -> Result<Value, ErrorObject> {
    let io = |e: std::io::Error| ErrorObject::from_io(&e);
    // What was sent, for the audit line of a request whose params do not parse; replaced by
    // the parsed paths once they do.
    outcome.paths = audit::raw_paths(params.as_ref());
    match method {
        FS_READ_FILE_METHOD => {
            let p: PathParams = parse(params)?;
            outcome.paths = vec![p.path.to_string()];
            let data = fs.read_file(&p.path).await.map_err(io)?;
            outcome.bytes = data.len() as u64;
            reply(ReadFileResponse {
                data_base64: STANDARD.encode(&data),
            })
        }
        FS_WRITE_FILE_METHOD => {
            let p: WriteFileParams = parse(params)?;
            outcome.paths = vec![p.path.to_string()];
            let data = STANDARD.decode(p.data_base64.as_bytes()).map_err(|e| {
                invalid_input(
                    INVALID_REQUEST,
                    format!("dataBase64 is not valid base64: {e}"),
                )
            })?;
            outcome.bytes = data.len() as u64;
            fs.write_file(&p.path, data).await.map_err(io)?;
            reply(serde_json::json!({}))
        }
        FS_CREATE_DIRECTORY_METHOD => {
            let p: CreateDirectoryParams = parse(params)?;
            outcome.paths = vec![p.path.to_string()];
            let options = CreateDirectoryOptions {
                recursive: p.recursive.unwrap_or(true),
            };
            fs.create_directory(&p.path, options).await.map_err(io)?;
            reply(serde_json::json!({}))
        }
        FS_GET_METADATA_METHOD => {
            let p: PathParams = parse(params)?;
            outcome.paths = vec![p.path.to_string()];
            let metadata = fs.get_metadata(&p.path).await.map_err(io)?;
            reply(GetMetadataResponse::from(metadata))
        }
        FS_READ_DIRECTORY_METHOD => {
            let p: PathParams = parse(params)?;
            outcome.paths = vec![p.path.to_string()];
            let entries = fs.read_directory(&p.path).await.map_err(io)?;
            // A lossy name shown to the client would lead it to another entry (or none) when
            // sent back: such entries are left out and counted instead.
            let (lossy, exact): (Vec<_>, Vec<_>) =
                entries.into_iter().partition(|entry| entry.lossy_name);
            reply(ReadDirectoryResponse {
                entries: exact.into_iter().map(Into::into).collect(),
                non_utf8_names_omitted: lossy.len() as u64,
            })
        }
        FS_REMOVE_METHOD => {
            let p: RemoveParams = parse(params)?;
            outcome.paths = vec![p.path.to_string()];
            let options = RemoveOptions {
                recursive: p.recursive.unwrap_or(true),
                force: p.force.unwrap_or(true),
            };
            fs.remove(&p.path, options).await.map_err(io)?;
            reply(serde_json::json!({}))
        }
        FS_COPY_METHOD => {
            let p: CopyParams = parse(params)?;
            outcome.paths = vec![p.source_path.to_string(), p.destination_path.to_string()];
            let options = CopyOptions {
                recursive: p.recursive.unwrap_or(false),
            };
            fs.copy(&p.source_path, &p.destination_path, options)
                .await
                .map_err(io)?;
            reply(serde_json::json!({}))
        }
        FS_RENAME_METHOD => {
            let p: RenameParams = parse(params)?;
            outcome.paths = vec![p.source_path.to_string(), p.destination_path.to_string()];
            let options = RenameOptions {
                overwrite: p.overwrite.unwrap_or(false),
            };
            fs.rename(&p.source_path, &p.destination_path, options)
                .await
                .map_err(io)?;
            reply(serde_json::json!({}))
        }
        CAPFS_READ_LINK_METHOD => {
            let p: PathParams = parse(params)?;
            outcome.paths.push(p.path.to_string());
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
            outcome.paths.push(p.path.to_string());
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
            outcome.paths.push(p.path.to_string());
            let walk = fs.walk(&p.path, &p.options()).await.map_err(io)?;
            outcome.bytes = walk.entries.len() as u64;
            reply(WalkResponse::from(walk))
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

fn reply(value: impl Serialize) -> Result<Value, ErrorObject> {
    Ok(serde_json::to_value(value).expect("protocol results always serialize"))
}
