//! Accepting connections: the TCP listener, its connection and handshake limits (the checks of
//! a handshake are in `admission.rs`), the plain HTTP probes (`probes.rs`) on it or on an
//! admin address of their own, and the drain at shutdown.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::accept::{AcceptFailures, warn_about_descriptor_limit};
use super::admission::{check_handshake, refusal};
use super::audit;
use super::config::{ServerConfig, ws_config};
use super::connection::Connection;
use super::probes::{self, peek_head, probe_of};
use super::shared::Shared;
use super::threads::ConnectionThreads;
use crate::transport::shared::{SharedSocket, StreamSocket};
use capfs::ExecutorFileSystem;

/// The answer to every request but a probe once the server drains.
const DRAINING_RESPONSE: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\
    Content-Length: 34\r\nConnection: close\r\n\r\ncapfs: the server is shutting down\n";

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    admin: Option<TcpListener>,
    fs: Arc<dyn ExecutorFileSystem>,
    config: ServerConfig,
    url: String,
}

impl Server {
    /// Checks the configuration and binds the listening socket (and the admin address, when
    /// one is configured); the server will serve `fs` (any [`ExecutorFileSystem`]: a local
    /// one, a remote one, a test double).
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a limit out of range (see [`ServerConfig::validate`]);
    /// `PermissionDenied` for a non-loopback address (or admin address) without a token; the
    /// bind error otherwise.
    pub async fn bind(fs: Arc<dyn ExecutorFileSystem>, config: ServerConfig) -> io::Result<Self> {
        config.validate()?;
        if !config.listen.ip().is_loopback() && config.token.is_none() {
            return Err(crate::error::token_required(config.listen));
        }
        if let Some(admin) = config.admin_listen
            && !admin.ip().is_loopback()
            && config.token.is_none()
        {
            return Err(crate::error::admin_token_required(admin));
        }
        warn_about_descriptor_limit(&config);
        let listener = TcpListener::bind(config.listen).await?;
        let admin = match config.admin_listen {
            Some(address) => Some(TcpListener::bind(address).await?),
            None => None,
        };
        let url = format!("ws://{}", listener.local_addr()?);
        Ok(Self {
            listener,
            admin,
            fs,
            config,
            url,
        })
    }

    /// Also serves the process methods (`process/start` and the rest) with `processes`;
    /// without them every process method is `-32601`. Processes belong to their session: they
    /// outlive a connection by the session TTL and end when the server stops.
    #[must_use]
    pub fn with_processes(mut self, processes: Arc<dyn capfs::process::ExecutorProcesses>) -> Self {
        self.config.processes = Some(super::ServedProcesses(processes));
        self
    }

    /// The URL clients connect to, with the port actually bound.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL of the admin address (`http://HOST:PORT`, the port actually bound), when the
    /// probes and metrics are served there.
    pub fn admin_url(&self) -> Option<String> {
        let admin = self.admin.as_ref()?;
        admin.local_addr().ok().map(|a| format!("http://{a}"))
    }

    /// Serves until `shutdown` completes, then drains (see [`Server::run_until_forced`]).
    ///
    /// # Errors
    ///
    /// As [`Server::run_until_forced`].
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        self.run_until_forced(shutdown, std::future::pending())
            .await
    }

    /// Serves until `shutdown` completes, then drains: `/readyz` answers 503 at once, every new
    /// connection but a probe is answered HTTP 503, each open connection finishes the requests
    /// it is running (a streamed write still receiving goes on to its end) and is closed with
    /// close code 1001, processes get `SIGTERM` and, after the process grace, `SIGKILL`.
    /// When all that is done within the shutdown timeout, it returns `Ok`; when the timeout
    /// passes first, or `force` completes, connections still open are cut (their tasks
    /// dropped, their sockets closed) and their processes killed.
    ///
    /// # Errors
    ///
    /// `TimedOut` when connections had to be cut at the shutdown deadline, saying how many;
    /// `Interrupted` when `force` cut them.
    pub async fn run_until_forced(
        self,
        shutdown: impl Future<Output = ()>,
        force: impl Future<Output = ()>,
    ) -> io::Result<()> {
        let shutdown_timeout = self.config.shutdown_timeout;
        let grace = self.config.process_grace.min(shutdown_timeout);
        let shared = Arc::new(Shared::new(self.fs, self.config));
        let processes = shared.processes.clone();
        // `stop` asks connections to stop reading and finish; `cut` drops them where they are.
        let stop = CancellationToken::new();
        let cut = CancellationToken::new();
        let connections = TaskTracker::new();
        let threads = match shared.config.connection_threads {
            0 => None,
            count => Some(ConnectionThreads::start(
                count,
                shared.config.max_blocking,
                shared.config.poll_before_sleep,
                &connections,
                &cut,
            )?),
        };
        let mut acceptor = Acceptor {
            listener: self.listener,
            handshakes: Arc::new(Semaphore::new(shared.config.max_handshakes)),
            shared: Arc::clone(&shared),
            stop: stop.clone(),
            cut: cut.clone(),
            connections: connections.clone(),
            threads: threads.as_ref(),
            failures: AcceptFailures::default(),
            next_id: 0,
        };
        let admin = serve_admin(self.admin, Arc::clone(&shared));
        tokio::pin!(shutdown, force, admin);
        tokio::select! {
            () = &mut shutdown => {}
            () = acceptor.run() => {}
            () = &mut admin => {}
        }
        shared.start_draining();
        tracing::info!("shutting down: draining");
        stop.cancel();
        connections.close();
        let drained = async {
            // Processes end with their server, whatever their sessions' TTL.
            if let Some(processes) = &processes {
                processes.shutdown(grace).await;
            }
            connections.wait().await;
        };
        let forced = tokio::select! {
            () = drained => None,
            () = acceptor.run() => None,
            () = &mut admin => None,
            () = tokio::time::sleep(shutdown_timeout) => Some(false),
            () = &mut force => Some(true),
        };
        let Some(forced) = forced else {
            drop(acceptor);
            if let Some(threads) = threads {
                threads.finish().await;
            }
            return Ok(());
        };
        let open = connections.len();
        cut.cancel();
        if let Some(processes) = &processes {
            processes.shutdown(Duration::ZERO).await;
        }
        connections.wait().await;
        drop(acceptor);
        if let Some(threads) = threads {
            threads.finish().await;
        }
        Err(if forced {
            crate::error::shutdown_forced(open)
        } else {
            shutdown_deadline_passed(shutdown_timeout, open)
        })
    }
}

pub(super) use crate::error::shutdown_deadline_passed;

/// The accept loop and what it keeps between accepts.
struct Acceptor<'a> {
    listener: TcpListener,
    handshakes: Arc<Semaphore>,
    shared: Arc<Shared>,
    stop: CancellationToken,
    cut: CancellationToken,
    connections: TaskTracker,
    threads: Option<&'a ConnectionThreads>,
    failures: AcceptFailures,
    next_id: u64,
}

impl Acceptor<'_> {
    /// Accepts for ever; cancel safe between accepts. Once the server drains, each new
    /// connection is a probe or answered 503, on a task the drain does not wait for.
    async fn run(&mut self) {
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    if let Some(pause) = self.failures.record(&e) {
                        tokio::time::sleep(pause).await;
                    }
                    continue;
                }
            };
            self.failures.reset_pause();
            self.next_id += 1;
            let id = self.next_id;
            // A connection that has not finished its handshake holds a handshake slot, never a
            // connection slot; when every handshake slot is taken, the newcomer is closed at
            // once so that silent peers cannot pile up descriptors.
            let Ok(handshake) = Arc::clone(&self.handshakes).try_acquire_owned() else {
                tracing::debug!(connection = id, %peer, "too many handshakes in progress: closed");
                drop(stream);
                continue;
            };
            let shared = Arc::clone(&self.shared);
            if shared.is_draining() {
                tokio::spawn(answer_while_draining(shared, stream, handshake));
                continue;
            }
            let (stop, cut) = (self.stop.clone(), self.cut.clone());
            let Some(threads) = self.threads else {
                self.connections.spawn(async move {
                    tokio::select! {
                        () = cut.cancelled() => {}
                        served = serve_connection(shared, stream, peer, id, handshake, stop) => {
                            log_end(id, peer, served);
                        }
                    }
                });
                continue;
            };
            // The socket leaves this runtime's reactor and joins that of the thread the
            // connection runs on, when it first polls there.
            let stream = match stream.into_std() {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::debug!(connection = id, %peer, "cannot hand off: {e}");
                    continue;
                }
            };
            threads.run(self.connections.track_future(async move {
                let stream = match TcpStream::from_std(stream) {
                    Ok(stream) => stream,
                    Err(e) => return log_end(id, peer, Err(WsError::Io(e))),
                };
                tokio::select! {
                    () = cut.cancelled() => {}
                    served = serve_connection(shared, stream, peer, id, handshake, stop) => {
                        log_end(id, peer, served);
                    }
                }
            }));
        }
    }
}

/// A connection accepted while the server drains: a probe is answered (`/readyz` with 503),
/// anything else with HTTP 503, all within the handshake timeout.
async fn answer_while_draining(
    shared: Arc<Shared>,
    mut stream: TcpStream,
    handshake: OwnedSemaphorePermit,
) {
    let deadline = shared.config.handshake_timeout;
    let answer = async {
        let head = peek_head(&stream).await?;
        let probe = probe_of(&head).filter(|_| shared.config.admin_listen.is_none());
        match probe {
            Some(probe) => probes::answer(stream, probe, &shared).await,
            None => {
                stream.write_all(DRAINING_RESPONSE).await?;
                stream.shutdown().await
            }
        }
    };
    let _ = tokio::time::timeout(deadline, answer).await;
    drop(handshake);
}

/// Answers the probes on the admin address, when there is one, for ever; each on a task of
/// its own, bounded by the handshake timeout.
async fn serve_admin(admin: Option<TcpListener>, shared: Arc<Shared>) {
    let Some(admin) = admin else {
        return std::future::pending().await;
    };
    let mut failures = AcceptFailures::default();
    loop {
        let stream = match admin.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                if let Some(pause) = failures.record(&e) {
                    tokio::time::sleep(pause).await;
                }
                continue;
            }
        };
        failures.reset_pause();
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let deadline = shared.config.handshake_timeout;
            let _ = tokio::time::timeout(deadline, async {
                let head = peek_head(&stream).await?;
                match probe_of(&head) {
                    Some(probe) => probes::answer(stream, probe, &shared).await,
                    None => probes::not_found(stream).await,
                }
            })
            .await;
        });
    }
}

fn log_end(id: u64, peer: SocketAddr, served: Result<(), WsError>) {
    if let Err(e) = served {
        tracing::debug!(connection = id, %peer, "connection ended: {e}");
    }
}

/// Runs one accepted connection: the handshake (holding `handshake`, a handshake slot, and
/// bounded by the handshake timeout), then, once it passed every check and took a connection
/// slot, the connection itself until it ends or `stop` asks it to finish.
async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    id: u64,
    handshake: OwnedSemaphorePermit,
    stop: CancellationToken,
) -> Result<(), WsError> {
    let _ = stream.set_nodelay(true);
    // One deadline for the probe or the handshake, whichever this connection turns out to be.
    let deadline = tokio::time::Instant::now() + shared.config.handshake_timeout;
    let timed_out = || WsError::Io(crate::error::handshake_timed_out());
    // A peer that has sent nothing yet is dropped at shutdown; a probe that has is answered
    // (`/readyz` with 503 once the server drains), within the handshake timeout.
    let head = tokio::select! {
        () = stop.cancelled() => return Ok(()),
        head = tokio::time::timeout_at(deadline, peek_head(&stream)) => {
            head.map_err(|_| timed_out())??
        }
    };
    let probe = probe_of(&head).filter(|_| shared.config.admin_listen.is_none());
    if let Some(probe) = probe {
        tokio::time::timeout_at(deadline, probes::answer(stream, probe, &shared))
            .await
            .map_err(|_| timed_out())??;
        drop(handshake);
        tracing::debug!(connection = id, %peer, "answered {probe:?}");
        return Ok(());
    }
    let handshake_shared = Arc::clone(&shared);
    let accept = async move {
        let shared = handshake_shared;
        // Taken only once the request has passed the other checks: a peer that sends half a
        // request, or the wrong token, never holds a connection slot.
        let mut permit: Option<OwnedSemaphorePermit> = None;
        let slot = &mut permit;
        let connections = Arc::clone(&shared.connections);
        let token = shared.config.token.clone();
        let audit = shared.config.audit.clone();
        // The callback's error type is tungstenite's, large as it is.
        #[allow(clippy::result_large_err)]
        let callback = move |request: &Request, response: Response| {
            let mut verdict = check_handshake(request, token.as_deref());
            if verdict.is_ok() {
                match connections.try_acquire_owned() {
                    Ok(acquired) => *slot = Some(acquired),
                    Err(_) => {
                        verdict = Err((
                            StatusCode::SERVICE_UNAVAILABLE,
                            "capfs: too many connections; try again later",
                        ));
                    }
                }
            }
            if let (Err(refused), Some(audit)) = (verdict, &audit) {
                audit::record_refused_handshake(audit, id, &peer.to_string(), refused);
            }
            verdict.map_err(refusal)?;
            Ok(response)
        };
        let config = ws_config(&shared.config);
        // Shared with the connection's writer, which writes data frames into it.
        let shared_socket = SharedSocket::new(StreamSocket::Tcp(stream));
        let socket = shared_socket.direct();
        let ws =
            tokio_tungstenite::accept_hdr_async_with_config(shared_socket, callback, Some(config))
                .await?;
        let permit = permit.expect("an accepted handshake took a connection slot");
        Ok::<_, WsError>((ws, socket, permit))
    };
    // A handshake has no request to finish: at shutdown it is dropped at once.
    let accepted = tokio::select! {
        () = stop.cancelled() => return Ok(()),
        accepted = tokio::time::timeout_at(deadline, accept) => accepted.map_err(|_| timed_out()),
    };
    drop(handshake);
    let (ws, socket, permit) = accepted??;
    tracing::debug!(connection = id, %peer, "connected");
    let _open = shared.metrics.connection_opened();
    Connection::new(shared, id, peer.to_string().into())
        .run(ws, Some(socket), stop)
        .await;
    drop(permit);
    tracing::debug!(connection = id, %peer, "disconnected");
    Ok(())
}
