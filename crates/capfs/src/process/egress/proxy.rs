//! One process's proxy: the accept loops on the two listeners its child handed over, the
//! bounds of its connections, and one audit line per connection.

use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::{AbortHandle, JoinSet};

use super::{EgressNarrowing, EgressPolicy};
use crate::audit::{MAX_ERROR_CHARS, cut, timestamp};

/// How long a connection out may take to be made.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The listeners a child sent, HTTP then SOCKS.
pub(crate) fn receive_listeners(channel: &OwnedFd) -> io::Result<[OwnedFd; 2]> {
    crate::process::listen::receive(channel)
}

/// What one process's connections share.
pub(crate) struct Session {
    pub(crate) policy: Arc<EgressPolicy>,
    pub(crate) narrowing: EgressNarrowing,
    pub(crate) pid: u32,
    open: Arc<Semaphore>,
    /// Bytes its connections may still carry, both ways.
    left: AtomicU64,
}

impl Session {
    /// Takes `n` bytes from the budget; `false` once it is spent.
    pub(crate) fn spend(&self, n: usize) -> bool {
        self.left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(n as u64)
            })
            .is_ok()
    }

    fn spent(&self) -> bool {
        self.left.load(Ordering::Acquire) == 0
    }

    /// Connects to the first of `addrs` that answers.
    pub(crate) async fn connect(&self, addrs: &[SocketAddr]) -> Result<TcpStream, String> {
        let mut last = String::from("no address");
        for addr in addrs {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => return Ok(stream),
                Ok(Err(e)) => last = format!("connecting to {addr}: {e}"),
                Err(_) => last = format!("connecting to {addr}: timed out"),
            }
        }
        Err(last)
    }

    /// Writes the connection's audit line.
    pub(crate) fn record(&self, line: &Line) {
        let Some(audit) = &self.policy.audit else {
            return;
        };
        let reason = line.reason.as_deref().map(|r| cut(r, MAX_ERROR_CHARS));
        audit.write_line(&AuditLine {
            time: timestamp(),
            method: "egress",
            pid: self.pid,
            via: line.via,
            host: cut(&line.host, 300).into_owned(),
            port: line.port,
            address: line.address.map(|a| a.to_string()),
            bytes_out: line.bytes_out,
            bytes_in: line.bytes_in,
            outcome: line.outcome,
            reason: reason.map(|r| r.into_owned()),
        });
    }
}

/// What a connection's audit line says.
#[derive(Debug, Default)]
pub(crate) struct Line {
    pub(crate) via: &'static str,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) address: Option<SocketAddr>,
    pub(crate) bytes_out: u64,
    pub(crate) bytes_in: u64,
    /// `ok`, `refused` (by the policy or a bound) or `failed` (the connection out).
    pub(crate) outcome: &'static str,
    pub(crate) reason: Option<String>,
}

#[derive(Serialize)]
struct AuditLine {
    time: String,
    method: &'static str,
    pid: u32,
    via: &'static str,
    host: String,
    port: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    address: Option<String>,
    #[serde(rename = "bytesOut")]
    bytes_out: u64,
    #[serde(rename = "bytesIn")]
    bytes_in: u64,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// A process's running proxy; dropping it ends its listeners and every connection.
#[derive(Debug)]
pub(crate) struct Proxy {
    tasks: Vec<AbortHandle>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Http,
    Socks,
}

impl Proxy {
    /// Serves `listeners` (HTTP, SOCKS) for the process `pid` under `policy` and `narrowing`.
    pub(crate) fn start(
        listeners: [OwnedFd; 2],
        policy: Arc<EgressPolicy>,
        narrowing: EgressNarrowing,
        pid: u32,
    ) -> io::Result<Self> {
        let session = Arc::new(Session {
            open: Arc::new(Semaphore::new(policy.max_connections)),
            left: AtomicU64::new(policy.max_bytes),
            policy,
            narrowing,
            pid,
        });
        let mut tasks = Vec::new();
        for (fd, kind) in listeners.into_iter().zip([Kind::Http, Kind::Socks]) {
            let listener = std::net::TcpListener::from(fd);
            listener.set_nonblocking(true)?;
            let listener = TcpListener::from_std(listener)?;
            let task = tokio::spawn(accept(listener, kind, session.clone()));
            tasks.push(task.abort_handle());
        }
        Ok(Self { tasks })
    }
}

async fn accept(listener: TcpListener, kind: Kind, session: Arc<Session>) {
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors, say: let the connections that hold them go on first.
            tokio::task::yield_now().await;
            continue;
        };
        let permit = match session.open.clone().try_acquire_owned() {
            Ok(permit) if !session.spent() => permit,
            refused => {
                let reason = match refused {
                    Ok(_) => "the process's byte budget is spent",
                    Err(_) => "too many connections at once",
                };
                session.record(&Line {
                    via: match kind {
                        Kind::Http => "http",
                        Kind::Socks => "socks5",
                    },
                    outcome: "refused",
                    reason: Some(reason.into()),
                    ..Line::default()
                });
                continue;
            }
        };
        let session = session.clone();
        connections.spawn(serve(stream, kind, session, permit));
    }
}

async fn serve(
    stream: TcpStream,
    kind: Kind,
    session: Arc<Session>,
    _permit: OwnedSemaphorePermit,
) {
    let line = match kind {
        Kind::Http => super::web::serve(stream, &session).await,
        Kind::Socks => super::socks::serve(stream, &session).await,
    };
    session.record(&line);
}
