//! [`RemoteProcesses`]: the process methods of a `capfs serve --exec` (or a codex executor)
//! as an [`ExecutorProcesses`], on the connection of a [`RemoteFileSystem`]. The connection's
//! reader routes each process's notifications by id into that process's bounded event queue;
//! a consumer that stops taking its events stalls the reader, so the server's outgoing budget
//! fills and the process itself stalls: nothing is dropped and nothing grows.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use crate::encoding::STANDARD;
use async_trait::async_trait;
use base64::Engine;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::client::Client;
use super::handle::RemoteFileSystem;
use super::routes::Route;
use crate::protocol::process::{
    CAPFS_PROCESS_CLOSE_INPUT_METHOD, CAPFS_PROCESS_RESIZE_METHOD, PROCESS_SIGNAL_METHOD,
    PROCESS_START_METHOD, PROCESS_TERMINATE_METHOD, PROCESS_WRITE_METHOD, StartResponse,
    TerminateResponse, WriteResponse,
};
use crate::protocol::uri::uri_of_path;
use capfs::process::{
    Confinement, ExecutorProcesses, PROCESS_EVENT_QUEUE, ProcessControl, ProcessRequest,
    StartedProcess, TerminalSize,
};
use capfs::{AbsolutePathBuf, Access};

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
            .insert(id.clone(), Route::new(tx));
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
