//! The handlers of the process methods: each parses its params, finds the process in the
//! session's table and calls its [`ProcessControl`](capfs::process::ProcessControl).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::encoding::STANDARD;
use base64::Engine;
use serde_json::Value;
use tokio::sync::watch;

use super::audit::{ProcessLog, StartRecord};
use super::kept::Kept;
use super::pump::Pump;
use super::table::{Attached, Running, Slot};
use crate::protocol::process::{
    CAPFS_PROCESS_CLOSE_INPUT_METHOD, CAPFS_PROCESS_RESIZE_METHOD, OutputChunk,
    PROCESS_READ_METHOD, PROCESS_SIGNAL_METHOD, PROCESS_START_METHOD, PROCESS_TERMINATE_METHOD,
    PROCESS_WRITE_METHOD, ReadParams, ReadResponse, ResizeParams, SignalParams, StartParams,
    StartResponse, TerminateParams, TerminateResponse, WriteParams, WriteResponse,
};
use crate::protocol::uri::path_of_uri;
use crate::protocol::{ErrorObject, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, RootAccess};
use crate::server::codex::policy::Policy;
use crate::server::payload::{Payload, invalid_input, serialized};
use crate::server::state::Call;
use capfs::process::{Confinement, ProcessRequest, TerminalSize};
use capfs::{Access, ExecutorFileSystem};

/// The longest `process/read` waits for output, whatever its `waitMs`.
const MAX_READ_WAIT: Duration = Duration::from_secs(10);
/// The longest `process/write` waits for a process to take its input.
const MAX_WRITE_WAIT: Duration = Duration::from_secs(30);
/// The bytes `process/read` gives at most, whatever its `maxBytes`.
const MAX_READ_BYTES: usize = super::kept::KEPT_BYTES;

fn io(e: std::io::Error) -> ErrorObject {
    ErrorObject::from_io(&e)
}

fn unknown(id: &str) -> ErrorObject {
    ErrorObject::new(INVALID_REQUEST, format!("unknown process id {id}"))
}

/// The session's processes; `-32601` on a server that serves none (the method table refuses
/// such a request before its params are read, so this is only the handlers' own guard).
fn attached(call: &Call<'_>, method: &str) -> Result<Attached, ErrorObject> {
    call.connection
        .processes()
        .ok_or_else(|| ErrorObject::new(METHOD_NOT_FOUND, format!("unknown method: {method}")))
}

/// The roots a start gets: narrowed by its `sandbox` policy, and by the connection's own
/// narrowing; `None` when neither narrows.
fn narrowing(
    attached: &Attached,
    fs: &dyn ExecutorFileSystem,
    sandbox: Option<&Value>,
) -> Result<Option<Vec<(capfs::AbsolutePathBuf, Access)>>, ErrorObject> {
    let served = fs.served_roots();
    let policy = Policy::parse(sandbox).map_err(io)?;
    if policy.is_none() && served == attached.server.roots {
        return Ok(None);
    }
    let roots: Vec<_> = served
        .into_iter()
        .map(|r| {
            let access = match r.access {
                RootAccess::ReadWrite => Access::ReadWrite,
                RootAccess::ReadOnly => Access::ReadOnly,
            };
            (r.path, access)
        })
        .collect();
    match policy {
        None => Ok(Some(roots)),
        Some(policy) => policy.narrowing(&roots).map(Some).map_err(io),
    }
}

fn described(narrowing: &Option<Vec<(capfs::AbsolutePathBuf, Access)>>) -> Option<Vec<String>> {
    narrowing.as_ref().map(|roots| {
        roots
            .iter()
            .map(|(path, access)| match access {
                Access::ReadWrite => format!("rw:{path}"),
                Access::ReadOnly => format!("ro:{path}"),
            })
            .collect()
    })
}

/// The longest process id a start accepts.
const MAX_PROCESS_ID_BYTES: usize = 256;

/// `process/start`.
pub(crate) async fn start(call: Call<'_>, p: StartParams) -> Result<Payload, ErrorObject> {
    let attached = &attached(&call, PROCESS_START_METHOD)?;
    let fs = call.fs;
    if p.argv.is_empty() {
        return Err(invalid_input(
            INVALID_PARAMS,
            "argv must not be empty".into(),
        ));
    }
    // The id is kept with the process (and after it, for `process/read`) and sent with every
    // notification, so it is bounded like a file handle's.
    if p.process_id.is_empty() || p.process_id.len() > MAX_PROCESS_ID_BYTES {
        return Err(invalid_input(
            INVALID_PARAMS,
            format!("processId must be 1 to {MAX_PROCESS_ID_BYTES} bytes"),
        ));
    }
    let cwd = path_of_uri(&p.cwd)?;
    let narrowing = narrowing(attached, fs, p.sandbox.as_ref())?;
    let egress = super::network::narrowing(
        p.enforce_managed_network,
        p.network_proxy.as_ref(),
        attached.server.imp.holds_egress_narrowing(),
        attached.server.imp.serves_transparent_tcp(),
    )
    .map_err(|m| invalid_input(INVALID_PARAMS, format!("managed network: {m}")))?;
    let base = super::env::base(&cwd.to_string(), p.tty);
    let env = super::env::build(p.env_policy.as_ref(), &p.env, base)
        .map_err(|m| invalid_input(INVALID_PARAMS, m))?;
    let server = &attached.server;
    let session = &attached.session;
    if server.is_stopping() {
        return Err(io(crate::error::server_stopping()));
    }
    let slot = {
        let mut procs = session.procs.lock().expect("processes");
        if procs.map.contains_key(&p.process_id) {
            return Err(ErrorObject::new(
                INVALID_REQUEST,
                format!("process {} already exists", p.process_id),
            ));
        }
        let running = procs
            .map
            .values()
            .filter(|slot| match slot {
                Slot::Starting => true,
                Slot::Started(r) => !r.kept.lock().expect("kept output").closed,
            })
            .count();
        if running >= server.per_session {
            return Err(io(crate::error::too_many_processes_per_connection(
                server.per_session,
            )));
        }
        let slot = Arc::clone(&server.slots)
            .try_acquire_owned()
            .map_err(|_| io(crate::error::too_many_processes(server.max_server)))?;
        procs.map.insert(p.process_id.clone(), Slot::Starting);
        slot
    };
    let mut request = ProcessRequest::new(p.argv.clone(), cwd.clone());
    request.arg0 = p.arg0.clone();
    request.env = env;
    request.tty = p.tty.then(TerminalSize::default);
    request.pipe_stdin = p.pipe_stdin;
    request.narrowing = narrowing.clone();
    request.egress = egress;
    let mut log = ProcessLog {
        audit: server.audit.clone(),
        connection: attached.connection,
        peer: Arc::clone(&attached.peer),
        process_id: p.process_id.clone(),
        pid: 0,
        started: Instant::now(),
    };
    let record = |error| StartRecord {
        argv: &p.argv,
        cwd: cwd.as_path().to_str().unwrap_or("(not UTF-8)"),
        narrowing: described(&narrowing),
        uid: rustix::process::geteuid().as_raw(),
        error,
    };
    // The session's home is made at its first start, and a failure to make it fails the start.
    let asked = Instant::now();
    let started = match session.home(server.imp.as_ref()) {
        Ok(home) => {
            request.home = home;
            server.imp.start(request).await
        }
        Err(e) => Err(e),
    };
    server
        .metrics
        .process_start(started.is_ok(), asked.elapsed());
    let started = match started {
        Ok(started) => started,
        Err(e) => {
            session
                .procs
                .lock()
                .expect("processes")
                .map
                .remove(&p.process_id);
            log.started(record(Some(&e)));
            return Err(io(e));
        }
    };
    log.pid = started.pid;
    log.started(record(None));
    let running = Arc::new(Running {
        control: started.control,
        tty: p.tty,
        kept: std::sync::Mutex::new(Kept::default()),
        changed: watch::channel(0).0,
    });
    session
        .procs
        .lock()
        .expect("processes")
        .map
        .insert(p.process_id.clone(), Slot::Started(Arc::clone(&running)));
    tokio::spawn(
        Pump {
            id: p.process_id.clone(),
            running,
            events: started.events,
            sink: session.sink(),
            session: Arc::downgrade(session),
            log,
            slot,
            metrics: Arc::clone(&server.metrics),
        }
        .run(),
    );
    // codex knows only its own sandbox names; a process the kernel confines on Linux is
    // `linuxSeccomp` to it (how it is confined is in `environmentInfo.processes`).
    let sandbox_type = match server.imp.confinement() {
        Confinement::Unconfined => "none",
        _ => "linuxSeccomp",
    };
    serialized(StartResponse {
        process_id: p.process_id,
        sandbox_type: sandbox_type.to_string(),
    })
}

pub(crate) async fn read(call: Call<'_>, p: ReadParams) -> Result<Payload, ErrorObject> {
    let attached = &attached(&call, PROCESS_READ_METHOD)?;
    let after = p.after_seq.unwrap_or(0);
    let Some(found) = attached.session.get(&p.process_id) else {
        return Err(unknown(&p.process_id));
    };
    let Some(running) = found else {
        return serialized(ReadResponse {
            chunks: Vec::new(),
            next_seq: after + 1,
            exited: false,
            exit_code: None,
            closed: false,
            failure: None,
            sandbox_denied: false,
        });
    };
    let wait = Duration::from_millis(p.wait_ms.unwrap_or(0)).min(MAX_READ_WAIT);
    let mut changed = running.changed.subscribe();
    let _ = tokio::time::timeout(wait, async {
        while !running.kept.lock().expect("kept output").ready(after) {
            if changed.changed().await.is_err() {
                break;
            }
        }
    })
    .await;
    let kept = running.kept.lock().expect("kept output");
    let max = p.max_bytes.unwrap_or(MAX_READ_BYTES).min(MAX_READ_BYTES);
    let chunks: Vec<OutputChunk> = kept
        .after(after, max)
        .into_iter()
        .map(|c| OutputChunk {
            seq: c.seq,
            stream: c.stream.to_string(),
            chunk: STANDARD.encode(&c.bytes),
        })
        .collect();
    let next_seq = chunks.last().map_or(kept.seq + 1, |c| c.seq + 1);
    serialized(ReadResponse {
        chunks,
        next_seq,
        exited: kept.exit.is_some(),
        exit_code: kept.exit.map(|e| e.code),
        closed: kept.closed,
        failure: None,
        sandbox_denied: false,
    })
}

pub(crate) async fn write(call: Call<'_>, p: WriteParams) -> Result<Payload, ErrorObject> {
    let attached = &attached(&call, PROCESS_WRITE_METHOD)?;
    let bytes = STANDARD
        .decode(p.chunk.as_bytes())
        .map_err(|e| invalid_input(INVALID_PARAMS, format!("chunk is not valid base64: {e}")))?;
    let status = match attached.session.get(&p.process_id) {
        None => "unknownProcess",
        Some(None) => "starting",
        Some(Some(running)) => {
            match tokio::time::timeout(MAX_WRITE_WAIT, running.control.write(&bytes)).await {
                Ok(Ok(())) => "accepted",
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => "stdinClosed",
                Ok(Err(e)) => return Err(io(e)),
                Err(_) => {
                    return Err(io(crate::error::input_stalled(
                        &p.process_id,
                        MAX_WRITE_WAIT,
                    )));
                }
            }
        }
    };
    serialized(WriteResponse {
        status: status.to_string(),
    })
}

/// The signal codex names `name`.
fn signal_number(name: &str) -> Option<i32> {
    match name {
        "interrupt" => Some(2),
        "terminate" => Some(15),
        "kill" => Some(9),
        "hangup" => Some(1),
        "quit" => Some(3),
        _ => None,
    }
}

pub(crate) async fn signal(call: Call<'_>, p: SignalParams) -> Result<Payload, ErrorObject> {
    let attached = &attached(&call, PROCESS_SIGNAL_METHOD)?;
    let Some(number) = signal_number(&p.signal) else {
        return Err(invalid_input(
            INVALID_PARAMS,
            format!(
                "unknown signal {:?}: interrupt, terminate, kill, hangup or quit",
                p.signal
            ),
        ));
    };
    if let Some(Some(running)) = attached.session.get(&p.process_id) {
        running.control.signal(number).await.map_err(io)?;
    }
    serialized(serde_json::json!({}))
}

pub(crate) async fn terminate(call: Call<'_>, p: TerminateParams) -> Result<Payload, ErrorObject> {
    let attached = &attached(&call, PROCESS_TERMINATE_METHOD)?;
    let running = match attached.session.get(&p.process_id) {
        Some(Some(running)) => running.control.terminate().await.map_err(io)?,
        _ => false,
    };
    serialized(TerminateResponse { running })
}

pub(crate) async fn resize(call: Call<'_>, p: ResizeParams) -> Result<Payload, ErrorObject> {
    let attached = &attached(&call, CAPFS_PROCESS_RESIZE_METHOD)?;
    if p.rows == 0 || p.cols == 0 {
        return Err(invalid_input(
            INVALID_PARAMS,
            "rows and cols must be at least 1".into(),
        ));
    }
    let Some(Some(running)) = attached.session.get(&p.process_id) else {
        return Err(unknown(&p.process_id));
    };
    let size = TerminalSize {
        rows: p.rows,
        cols: p.cols,
    };
    running.control.resize(size).await.map_err(io)?;
    serialized(serde_json::json!({}))
}

pub(crate) async fn close_input(
    call: Call<'_>,
    p: TerminateParams,
) -> Result<Payload, ErrorObject> {
    let attached = &attached(&call, CAPFS_PROCESS_CLOSE_INPUT_METHOD)?;
    let Some(Some(running)) = attached.session.get(&p.process_id) else {
        return Err(unknown(&p.process_id));
    };
    running.control.close_input().await.map_err(io)?;
    serialized(serde_json::json!({}))
}
