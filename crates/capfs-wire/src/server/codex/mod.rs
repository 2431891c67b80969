//! The methods the current codex exec-server protocol added beside the March 2026 ones: the
//! environment's description, `fs/walk`, `fs/canonicalize` and `fs/open` handles. Like the
//! handler, everything goes through [`ExecutorFileSystem`].

mod canonical;
pub(crate) mod handles;
pub(crate) mod policy;
mod walk;
pub(crate) mod watch;

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use crate::protocol::codex::{
    CanonicalizeResponse, CloseParams, CodexWalkParams, ENVIRONMENT_CONFIG_READ_METHOD,
    ENVIRONMENT_INFO_METHOD, ENVIRONMENT_STATUS_METHOD, EnvironmentConfigReadParams,
    EnvironmentConfigReadResponse, EnvironmentInfo, EnvironmentStatus, FS_CANONICALIZE_METHOD,
    FS_CLOSE_METHOD, FS_OPEN_METHOD, FS_READ_BLOCK_METHOD, FS_WALK_METHOD, FS_WATCH_MISSING_METHOD,
    FS_WRITE_BLOCK_METHOD, OpenMode, OpenParams, OpenResponse, ReadBlockParams, ShellInfo,
    WriteBlockParams,
};
use crate::protocol::uri::{PathForm, spell, uri_of_path};
use crate::protocol::{ErrorObject, INVALID_REQUEST, PathParams, RootAccess};
use capfs::ExecutorFileSystem;
use handles::Handles;

use super::handler::{Outcome, Payload, Touch, invalid_input, parse, reply};
use policy::{Need, Policy};

/// What one connection keeps between its requests for these methods.
pub(crate) struct ConnectionState {
    /// The file system the connection serves (narrowed with it), for work that outlives a
    /// request (a replace handle's write, a watch); `None` where requests are handled without
    /// a connection.
    fs: std::sync::RwLock<Option<Arc<dyn ExecutorFileSystem>>>,
    pub(crate) handles: Handles,
    pub(crate) watches: Arc<watch::Watches>,
    /// The session's processes, once the handshake named the session; `None` on a server
    /// that serves no processes.
    processes: std::sync::RwLock<Option<crate::server::process::Attached>>,
    /// What `environmentInfo` says of processes, on a server that serves them.
    pub(crate) processes_info: Option<crate::protocol::process::ProcessesInfo>,
}

impl ConnectionState {
    pub(crate) fn new(
        fs: Option<Arc<dyn ExecutorFileSystem>>,
        handles: Handles,
        watches: watch::Watches,
    ) -> Self {
        Self {
            fs: std::sync::RwLock::new(fs),
            handles,
            watches: Arc::new(watches),
            processes: std::sync::RwLock::new(None),
            processes_info: None,
        }
    }

    /// The session's processes, once attached.
    pub(crate) fn processes(&self) -> Option<crate::server::process::Attached> {
        self.processes.read().expect("connection processes").clone()
    }

    /// The connection now holds the session whose processes are `attached`.
    pub(crate) fn set_processes(&self, attached: crate::server::process::Attached) {
        *self.processes.write().expect("connection processes") = Some(attached);
    }

    /// The file system the connection serves now.
    pub(crate) fn fs(&self) -> Option<Arc<dyn ExecutorFileSystem>> {
        self.fs.read().expect("connection file system").clone()
    }

    /// The connection now serves `fs` (a narrowing of what it served).
    pub(crate) fn set_fs(&self, fs: Arc<dyn ExecutorFileSystem>) {
        *self.fs.write().expect("connection file system") = Some(fs);
    }
}

impl std::fmt::Debug for ConnectionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionState").finish_non_exhaustive()
    }
}

/// codex's capability names, each with whether capfs serves what it gates. codex calls a gated
/// method only when its capability is `true`.
const CAPABILITIES: &[(&str, bool)] = &[
    ("environmentConfigRead", true),
    ("sandboxedFileStreaming", true),
    ("fileWriteStreaming", true),
    ("fsWatchMissing", true),
    ("capabilityDiscoverySandbox", false),
    ("capabilityDiscoveryV2", false),
    ("networkProxyLaunch", false),
    ("networkProxyReviewDomains", false),
    ("credentialMasking", false),
    ("credentialMaskingCustomProviders", false),
    ("httpHeaderEnvVars", false),
    ("shellSnapshotV2", false),
    ("windowsMxc", false),
    ("linuxRootWritePreservesDevices", false),
    ("linuxApprovedRootWritePreservesRestrictions", false),
];

/// The environment `fs` makes: its roots decide where a turn starts; `processes` says whether
/// and how processes are served.
pub(crate) fn environment_info(
    fs: &dyn ExecutorFileSystem,
    processes: Option<crate::protocol::process::ProcessesInfo>,
) -> EnvironmentInfo {
    let roots = fs.served_roots();
    let cwd = roots
        .iter()
        .find(|root| root.access == RootAccess::ReadWrite)
        .or(roots.first())
        .map(|root| uri_of_path(&root.path));
    EnvironmentInfo {
        shell: ShellInfo {
            name: "sh".to_string(),
            path: "/bin/sh".to_string(),
        },
        executor_version: env!("CARGO_PKG_VERSION").to_string(),
        cwd,
        platform_os: "linux".to_string(),
        temporary_directories: Vec::new(),
        capabilities: CAPABILITIES
            .iter()
            .map(|(name, served)| ((*name).to_string(), *served))
            .collect::<BTreeMap<_, _>>(),
        processes,
    }
}

/// Refuses a request whose `sandbox` policy does not allow what `touch` says it does to the
/// paths in `params` (already plain). Paths that do not parse are left to the params' parser.
pub(crate) async fn check_policy(
    fs: &dyn ExecutorFileSystem,
    touch: Touch,
    params: Option<&Value>,
) -> std::io::Result<()> {
    let Some(params) = params else {
        return Ok(());
    };
    let needs: &[(&str, Need)] = match touch {
        Touch::Nothing => return Ok(()),
        Touch::Reads => &[("path", Need::Read)],
        Touch::Writes => &[("path", Need::Write)],
        Touch::Copies => &[("sourcePath", Need::Read), ("destinationPath", Need::Write)],
        Touch::Moves => &[
            ("sourcePath", Need::Write),
            ("destinationPath", Need::Write),
        ],
        Touch::Opens if params["mode"] == "replace" => &[("path", Need::Write)],
        Touch::Opens => &[("path", Need::Read)],
    };
    let Some(policy) = Policy::parse(params.get("sandbox"))? else {
        return Ok(());
    };
    for (member, need) in needs {
        let path = params[*member].as_str().map(capfs::AbsolutePathBuf::new);
        if let Some(Ok(path)) = path {
            policy.check(fs, &path, *need).await?;
        }
    }
    Ok(())
}

/// Runs `method` when it is one of this module's, with params already in plain-path form.
/// Handle methods carry no path, so their errors take the codex codes whatever the form.
pub(crate) async fn dispatch(
    fs: &dyn ExecutorFileSystem,
    state: &ConnectionState,
    method: &str,
    params: &mut Option<Value>,
    form: PathForm,
    max_message_bytes: usize,
    outcome: &mut Outcome,
) -> Option<Result<Payload, ErrorObject>> {
    let io = |e: std::io::Error| ErrorObject::from_io(&e);
    let result = match method {
        ENVIRONMENT_INFO_METHOD => reply(environment_info(fs, state.processes_info.clone())),
        ENVIRONMENT_STATUS_METHOD => reply(EnvironmentStatus {
            status: "ready".to_string(),
        }),
        ENVIRONMENT_CONFIG_READ_METHOD => parse::<EnvironmentConfigReadParams>(params.take())
            .and_then(|_| reply(EnvironmentConfigReadResponse::default())),
        FS_WALK_METHOD => {
            async {
                let p: CodexWalkParams = parse(params.take())?;
                // Its size is known once it is built: built in the connection's turn, and built
                // again after a wait for the budget rather than held through it.
                let turn = outcome.unsized_work().await;
                let walk_text = || async {
                    let found = walk::walk(fs, &p.path, &p.options, form, max_message_bytes)
                        .await
                        .map_err(io)?;
                    let entries = found.response.entries.len() as u64;
                    let mut value = serde_json::to_value(found.response).expect("walks serialize");
                    if found.non_utf8_names_omitted > 0 {
                        value["nonUtf8NamesOmitted"] = found.non_utf8_names_omitted.into();
                    }
                    Ok::<_, ErrorObject>((value.to_string(), entries))
                };
                let (mut text, mut entries) = walk_text().await?;
                let held = super::fit::held_while_built(text.len());
                if !outcome.try_cover(held).map_err(io)? {
                    drop((text, turn));
                    outcome.cover(held).await.map_err(io)?;
                    (text, entries) = walk_text().await?;
                }
                outcome.bytes = entries;
                Ok(Payload::Text(text))
            }
            .await
        }
        FS_CANONICALIZE_METHOD => {
            async {
                let p: PathParams = parse(params.take())?;
                let path = canonical::canonicalize(fs, &p.path).await.map_err(io)?;
                reply(CanonicalizeResponse {
                    path: spell(&path, form),
                })
            }
            .await
        }
        FS_OPEN_METHOD => {
            async {
                let p: OpenParams = parse(params.take())?;
                match (p.mode, state.fs()) {
                    (OpenMode::Read, _) => {
                        state
                            .handles
                            .open_read(fs, p.handle_id.clone(), &p.path)
                            .await
                    }
                    (OpenMode::Replace, Some(shared)) => {
                        let id = p.handle_id.clone();
                        state.handles.open_replace(shared, id, p.path.clone()).await
                    }
                    (OpenMode::Replace, None) => {
                        return Err(ErrorObject::new(
                            INVALID_REQUEST,
                            "fs/open in replace mode needs a connection",
                        ));
                    }
                }
                .map_err(io)?;
                reply(OpenResponse {
                    handle_id: p.handle_id,
                })
            }
            .await
        }
        FS_READ_BLOCK_METHOD => {
            async {
                let p: ReadBlockParams = parse(params.take())?;
                // The block and its text, reserved before the block is read.
                let len = p.len.min(handles::MAX_BLOCK_BYTES);
                outcome.cover(len + len.div_ceil(3) * 4).await.map_err(io)?;
                let (data, eof) = state
                    .handles
                    .read_block(&p.handle_id, p.offset, p.len)
                    .await
                    .map_err(io)?;
                outcome.bytes = data.len() as u64;
                Ok(Payload::Block { data, eof })
            }
            .await
        }
        FS_WRITE_BLOCK_METHOD => {
            async {
                let p: WriteBlockParams = parse(params.take())?;
                let chunk = STANDARD.decode(p.chunk.as_bytes()).map_err(|e| {
                    invalid_input(INVALID_REQUEST, format!("chunk is not valid base64: {e}"))
                })?;
                outcome.bytes = chunk.len() as u64;
                state
                    .handles
                    .write_block(&p.handle_id, p.offset, chunk)
                    .await
                    .map_err(io)?;
                reply(serde_json::json!({}))
            }
            .await
        }
        FS_CLOSE_METHOD => {
            async {
                let p: CloseParams = parse(params.take())?;
                state.handles.close(&p.handle_id).await.map_err(io)?;
                reply(serde_json::json!({}))
            }
            .await
        }
        FS_WATCH_MISSING_METHOD => {
            async {
                let p: watch::WatchParams = parse(params.take())?;
                let Some(shared) = state.fs() else {
                    return Err(ErrorObject::new(
                        INVALID_REQUEST,
                        "fs/watchMissing needs a connection",
                    ));
                };
                watch::Watches::watch(&state.watches, shared, p)
                    .await
                    .map_err(io)?;
                reply(serde_json::json!({ "watching": true }))
            }
            .await
        }
        _ => return None,
    };
    Some(result.map_err(|error| error.for_form(PathForm::Uri)))
}
