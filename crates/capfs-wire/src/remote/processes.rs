//! [`RemoteProcesses`]: the process methods of a `capfs serve --exec` (or a codex executor)
//! as an [`ExecutorProcesses`], on the connection of a [`RemoteFileSystem`]. The connection's
//! reader routes each process's notifications by id into that process's bounded event queue;
//! a consumer that stops taking its events stalls the reader, so the server's outgoing budget
//! fills and the process itself stalls: nothing is dropped and nothing grows.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::RemoteFileSystem;
use super::client::Client;
use crate::protocol::process::{
    CAPFS_PROCESS_CLOSE_INPUT_METHOD, CAPFS_PROCESS_RESIZE_METHOD, PROCESS_CLOSED_METHOD,
    PROCESS_EXITED_METHOD, PROCESS_OUTPUT_METHOD, PROCESS_SIGNAL_METHOD, PROCESS_START_METHOD,
    PROCESS_TERMINATE_METHOD, PROCESS_WRITE_METHOD, StartResponse, TerminateResponse,
    WriteResponse,
};
use crate::protocol::uri::uri_of_path;
use capfs::process::{
    Confinement, ExecutorProcesses, OutputStream, PROCESS_EVENT_QUEUE, ProcessControl,
    ProcessEvent, ProcessExit, ProcessRequest, StartedProcess, TerminalSize,
};
use capfs::{AbsolutePathBuf, Access};

/// Where each process's notifications go, by its id on the wire.
pub(super) type Routes = Arc<Mutex<HashMap<String, Route>>>;

/// One process's queue and the last `seq` it was given.
#[derive(Debug)]
pub(super) struct Route {
    events: mpsc::Sender<ProcessEvent>,
    seq: u64,
}

#[derive(Deserialize)]
struct Pushed {
    method: String,
    params: Value,
}

/// The event a process notification carries, with its process id and `seq`; `None` for any
/// other message, or one that does not parse.
fn event_of(bytes: &[u8]) -> Option<(String, u64, ProcessEvent)> {
    let pushed: Pushed = serde_json::from_slice(bytes).ok()?;
    let p = &pushed.params;
    let id = p["processId"].as_str()?.to_string();
    let seq = p["seq"].as_u64()?;
    let event = match pushed.method.as_str() {
        PROCESS_OUTPUT_METHOD => {
            let bytes = STANDARD.decode(p["chunk"].as_str()?).ok()?;
            let stream = match p["stream"].as_str()? {
                "stderr" => OutputStream::Stderr,
                _ => OutputStream::Stdout,
            };
            if bytes.is_empty() {
                return None;
            }
            ProcessEvent::Output { stream, bytes }
        }
        PROCESS_EXITED_METHOD => {
            let code = i32::try_from(p["exitCode"].as_i64()?).ok()?;
            ProcessEvent::Exited(match code {
                129..=192 => ProcessExit::signal(code - 128, false),
                _ => ProcessExit::code(code),
            })
        }
        PROCESS_CLOSED_METHOD => ProcessEvent::Closed,
        _ => return None,
    };
    Some((id, seq, event))
}

/// Hands a process notification to its process, waiting while its queue is full; a
/// notification repeated or out of order (its `seq` not past the last) is dropped, and a
/// process whose consumer is gone, or that closed, is forgotten.
pub(super) async fn route(bytes: &[u8], routes: &Routes) {
    let Some((id, seq, event)) = event_of(bytes) else {
        return;
    };
    let events = {
        let mut routes = routes.lock().expect("process routes");
        let Some(route) = routes.get_mut(&id) else {
            return;
        };
        if seq <= route.seq {
            return;
        }
        route.seq = seq;
        let events = route.events.clone();
        if event == ProcessEvent::Closed {
            routes.remove(&id);
        }
        events
    };
    if events.send(event).await.is_err() {
        routes.lock().expect("process routes").remove(&id);
    }
}

/// The processes of a remote server, on a [`RemoteFileSystem`]'s connection.
#[derive(Clone, Debug)]
pub struct RemoteProcesses {
    client: Arc<Client>,
}

impl RemoteFileSystem {
    /// The server's processes, on this connection; `None` when the server serves none.
    pub fn processes(&self) -> Option<RemoteProcesses> {
        self.client.processes_info.as_ref()?;
        Some(RemoteProcesses {
            client: Arc::clone(&self.client),
        })
    }
}

/// A narrowing as the request's `sandbox` policy: exactly these directories, each with its
/// access, and nothing else.
fn sandbox_of(narrowing: &[(AbsolutePathBuf, Access)]) -> Value {
    let entries: Vec<Value> = narrowing
        .iter()
        .map(|(path, access)| {
            let access = match access {
                Access::ReadWrite => "write",
                Access::ReadOnly => "read",
            };
            json!({"path": {"type": "path", "path": uri_of_path(path)}, "access": access})
        })
        .collect();
    json!({"permissions": {"type": "managed",
        "file_system": {"type": "restricted", "entries": entries}}})
}

#[async_trait]
impl ExecutorProcesses for RemoteProcesses {
    fn confinement(&self) -> Confinement {
        match &self.client.processes_info {
            Some(info) if info.served && info.confinement.starts_with("none") => {
                Confinement::Unconfined
            }
            Some(info) if info.served => Confinement::Enforced(info.confinement.clone()),
            Some(info) => Confinement::Refused(info.confinement.clone()),
            None => Confinement::Refused("the server serves no processes".to_string()),
        }
    }

    async fn start(&self, request: ProcessRequest) -> io::Result<StartedProcess> {
        if request.argv.is_empty() {
            return Err(crate::error::empty_argv());
        }
        let id = uuid::Uuid::new_v4().to_string();
        let (tx, rx) = mpsc::channel(PROCESS_EVENT_QUEUE);
        // Entered before the start is sent: its first output may come before its answer.
        self.client
            .routes
            .lock()
            .expect("process routes")
            .insert(id.clone(), Route { events: tx, seq: 0 });
        let env: HashMap<&str, &str> = request
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let params = json!({
            "processId": id, "argv": request.argv, "cwd": uri_of_path(&request.cwd),
            "env": env, "tty": request.tty.is_some(), "pipeStdin": request.pipe_stdin,
            "arg0": request.arg0,
            "sandbox": request.narrowing.as_deref().map(sandbox_of),
        });
        let started: io::Result<StartResponse> =
            self.client.call(PROCESS_START_METHOD, params).await;
        if let Err(e) = started {
            self.client
                .routes
                .lock()
                .expect("process routes")
                .remove(&id);
            return Err(e);
        }
        let control = Arc::new(RemoteControl {
            client: Arc::clone(&self.client),
            id,
        });
        if let Some(size) = request.tty
            && size != TerminalSize::default()
        {
            control.resize(size).await?;
        }
        Ok(StartedProcess::new(0, control, rx))
    }
}

/// A remote process's control: each call is one request on the connection.
#[derive(Debug)]
struct RemoteControl {
    client: Arc<Client>,
    id: String,
}

fn closed(id: &str) -> io::Error {
    crate::error::process_input_closed(id)
}

#[async_trait]
impl ProcessControl for RemoteControl {
    async fn write(&self, bytes: &[u8]) -> io::Result<()> {
        let params = json!({"processId": self.id, "chunk": STANDARD.encode(bytes),
            "writeId": uuid::Uuid::new_v4().to_string()});
        let reply: WriteResponse = self.client.call(PROCESS_WRITE_METHOD, params).await?;
        match reply.status.as_str() {
            "accepted" => Ok(()),
            _ => Err(closed(&self.id)),
        }
    }

    async fn close_input(&self) -> io::Result<()> {
        let params = json!({"processId": self.id});
        let _: Value = self
            .client
            .call(CAPFS_PROCESS_CLOSE_INPUT_METHOD, params)
            .await?;
        Ok(())
    }

    async fn resize(&self, size: TerminalSize) -> io::Result<()> {
        let params = json!({"processId": self.id, "rows": size.rows, "cols": size.cols});
        let _: Value = self
            .client
            .call(CAPFS_PROCESS_RESIZE_METHOD, params)
            .await?;
        Ok(())
    }

    async fn signal(&self, signal: i32) -> io::Result<()> {
        let name = match signal {
            1 => "hangup",
            2 => "interrupt",
            3 => "quit",
            9 => "kill",
            15 => "terminate",
            other => {
                return Err(crate::error::signal_not_sendable(other));
            }
        };
        let params = json!({"processId": self.id, "signal": name});
        let _: Value = self.client.call(PROCESS_SIGNAL_METHOD, params).await?;
        Ok(())
    }

    async fn terminate(&self) -> io::Result<bool> {
        let params = json!({"processId": self.id});
        let reply: TerminateResponse = self.client.call(PROCESS_TERMINATE_METHOD, params).await?;
        Ok(reply.running)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_become_events_and_others_are_left() {
        let output = br#"{"method":"process/output","params":{"processId":"a","seq":1,"stream":"stderr","chunk":"aGk="}}"#;
        let (id, seq, event) = event_of(output).unwrap();
        assert_eq!((id.as_str(), seq), ("a", 1));
        let bytes = b"hi".to_vec();
        assert_eq!(
            event,
            ProcessEvent::Output {
                stream: OutputStream::Stderr,
                bytes
            }
        );
        let exited =
            br#"{"method":"process/exited","params":{"processId":"a","seq":2,"exitCode":130}}"#;
        assert_eq!(
            event_of(exited).unwrap().2,
            ProcessEvent::Exited(ProcessExit::signal(2, false))
        );
        assert!(event_of(br#"{"method":"fs/missingChanged","params":{"watchId":1}}"#).is_none());
        assert!(event_of(b"not json").is_none());
    }
}
