//! The methods the current codex exec-server protocol added beside the March 2026 ones: the
//! environment's description, `fs/walk`, `fs/canonicalize` and `fs/open` handles. Like the
//! handler, everything goes through [`ExecutorFileSystem`].

mod canonical;
pub(crate) mod handles;
pub(crate) mod policy;
mod walk;
pub(crate) mod watch;

use std::collections::BTreeMap;

use crate::encoding::STANDARD;
use base64::Engine;

use crate::protocol::codex::{
    CanonicalizeResponse, CloseParams, CodexWalkParams, EnvironmentConfigReadParams,
    EnvironmentConfigReadResponse, EnvironmentInfo, EnvironmentStatus, OpenMode, OpenParams,
    OpenResponse, ReadBlockParams, ShellInfo, WriteBlockParams,
};
use crate::protocol::uri::{spell, uri_of_path};
use crate::protocol::{ErrorObject, INVALID_REQUEST, PathParams, RootAccess};
use capfs::ExecutorFileSystem;

use super::fit::held_while_built;
use super::payload::{Payload, invalid_input, serialized};
use super::state::Call;

/// codex's capability names, each with whether capfs serves what it gates. codex calls a gated
/// method only when its capability is `true`.
const CAPABILITIES: &[(&str, bool)] = &[
    ("environmentConfigRead", true),
    ("sandboxedFileStreaming", true),
    ("fileWriteStreaming", true),
    ("fsWatchMissing", true),
    ("capabilityDiscoverySandbox", false),
    ("capabilityDiscoveryV2", false),
    // Served when processes' network is held (`ProcessesInfo::managed_network`).
    ("networkProxyLaunch", false),
    ("networkProxyReviewDomains", false),
    // Served when processes get transparent TCP (`ProcessesInfo::transparent_tcp`).
    ("networkProxyTransparentTcp", false),
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
        capabilities: capabilities(processes.as_ref()),
        processes,
    }
}

/// codex's capabilities for an environment whose processes are served as `processes` says
/// (none: not served). The same in `initialize`'s `environmentInfo`, which codex keeps and
/// checks before it sends a managed network, and in `environment/info`.
pub(crate) fn capabilities(
    processes: Option<&crate::protocol::process::ProcessesInfo>,
) -> BTreeMap<String, bool> {
    CAPABILITIES
        .iter()
        .map(|(name, served)| {
            // codex sends its managed network only to an executor that says it holds it.
            let served = match *name {
                "networkProxyLaunch" => processes.is_some_and(|p| p.managed_network),
                "networkProxyTransparentTcp" => processes.is_some_and(|p| p.transparent_tcp),
                _ => *served,
            };
            ((*name).to_string(), served)
        })
        .collect()
}

fn io(e: std::io::Error) -> ErrorObject {
    ErrorObject::from_io(&e)
}

/// `environment/info`.
pub(crate) async fn info(call: Call<'_>) -> Result<Payload, ErrorObject> {
    let processes = call.connection.processes_info.clone();
    serialized(environment_info(call.fs, processes))
}

/// `environment/status`.
pub(crate) async fn status(_: Call<'_>) -> Result<Payload, ErrorObject> {
    serialized(EnvironmentStatus {
        status: "ready".to_string(),
    })
}

/// `environmentConfig/read`: capfs has no configuration layers.
pub(crate) async fn config_read(
    _: Call<'_>,
    _: EnvironmentConfigReadParams,
) -> Result<Payload, ErrorObject> {
    serialized(EnvironmentConfigReadResponse::default())
}

/// `fs/walk`.
pub(crate) async fn walk(call: Call<'_>, p: CodexWalkParams) -> Result<Payload, ErrorObject> {
    let Call {
        fs,
        form,
        max_message_bytes,
        outcome,
        ..
    } = call;
    // Its size is known once it is built: built in the connection's turn, and built again after
    // a wait for the budget rather than held through it.
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
    let held = held_while_built(text.len());
    if !outcome.try_cover(held).map_err(io)? {
        drop((text, turn));
        outcome.cover(held).await.map_err(io)?;
        (text, entries) = walk_text().await?;
    }
    outcome.bytes = entries;
    Ok(Payload::Text(text))
}

/// `fs/canonicalize`.
pub(crate) async fn canonicalize(call: Call<'_>, p: PathParams) -> Result<Payload, ErrorObject> {
    let path = canonical::canonicalize(call.fs, &p.path)
        .await
        .map_err(io)?;
    serialized(CanonicalizeResponse {
        path: spell(&path, call.form),
    })
}

/// `fs/open`: a read handle holds its descriptor; a replace handle writes through the
/// connection's file system, since its write outlives the request.
pub(crate) async fn open(call: Call<'_>, p: OpenParams) -> Result<Payload, ErrorObject> {
    let handles = &call.connection.handles;
    match (p.mode, call.connection.fs()) {
        (OpenMode::Read, _) => {
            handles
                .open_read(call.fs, p.handle_id.clone(), &p.path)
                .await
        }
        (OpenMode::Replace, Some(shared)) => {
            let id = p.handle_id.clone();
            handles
                .open_replace(shared, id, p.path.path().clone())
                .await
        }
        (OpenMode::Replace, None) => {
            return Err(ErrorObject::new(
                INVALID_REQUEST,
                "fs/open in replace mode needs a connection",
            ));
        }
    }
    .map_err(io)?;
    serialized(OpenResponse {
        handle_id: p.handle_id,
    })
}

/// `fs/readBlock`.
pub(crate) async fn read_block(call: Call<'_>, p: ReadBlockParams) -> Result<Payload, ErrorObject> {
    // The block and its text, reserved before the block is read.
    let len = p.len.min(handles::MAX_BLOCK_BYTES);
    let outcome = call.outcome;
    outcome.cover(len + len.div_ceil(3) * 4).await.map_err(io)?;
    let (data, eof) = call
        .connection
        .handles
        .read_block(&p.handle_id, p.offset, p.len)
        .await
        .map_err(io)?;
    outcome.bytes = data.len() as u64;
    Ok(Payload::Block { data, eof })
}

/// `fs/writeBlock`.
pub(crate) async fn write_block(
    call: Call<'_>,
    p: WriteBlockParams,
) -> Result<Payload, ErrorObject> {
    let chunk = STANDARD
        .decode(p.chunk.as_bytes())
        .map_err(|e| invalid_input(INVALID_REQUEST, format!("chunk is not valid base64: {e}")))?;
    call.outcome.bytes = chunk.len() as u64;
    call.connection
        .handles
        .write_block(&p.handle_id, p.offset, chunk)
        .await
        .map_err(io)?;
    serialized(serde_json::json!({}))
}

/// `fs/close`.
pub(crate) async fn close(call: Call<'_>, p: CloseParams) -> Result<Payload, ErrorObject> {
    call.connection
        .handles
        .close(&p.handle_id)
        .await
        .map_err(io)?;
    serialized(serde_json::json!({}))
}

/// `fs/watchMissing`: the watch polls the connection's file system, since it outlives the
/// request.
pub(crate) async fn watch_missing(
    call: Call<'_>,
    p: watch::WatchParams,
) -> Result<Payload, ErrorObject> {
    let Some(shared) = call.connection.fs() else {
        return Err(ErrorObject::new(
            INVALID_REQUEST,
            "fs/watchMissing needs a connection",
        ));
    };
    watch::Watches::watch(&call.connection.watches, shared, p)
        .await
        .map_err(io)?;
    serialized(serde_json::json!({ "watching": true }))
}
