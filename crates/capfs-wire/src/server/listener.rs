//! Accepting connections: the TCP listener, its connection and handshake limits (the checks of
//! a handshake are in `admission.rs`) and `GET /readyz`.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::admission::{answer_readyz, check_handshake, is_readyz_request, peek_head, refusal};
use super::audit;
use super::config::{ServerConfig, ws_config};
use super::connection::Connection;
use super::shared::Shared;
use super::threads::ConnectionThreads;
use crate::transport::shared::SharedSocket;
use capfs::ExecutorFileSystem;

/// Accept failures are logged at most once per this interval, with a count of the others.
const ACCEPT_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// The first pause after accepting failed for want of descriptors or memory; it doubles with
/// every further failure up to [`MAX_ACCEPT_PAUSE`] and resets on the next success.
const MIN_ACCEPT_PAUSE: Duration = Duration::from_millis(10);
/// The longest pause between two accepts while descriptors or memory are exhausted.
const MAX_ACCEPT_PAUSE: Duration = Duration::from_millis(500);
/// Descriptors the server needs besides its connections: the runtime, the listener, the roots,
/// the audit log, and the files that requests have open.
const DESCRIPTOR_HEADROOM: u64 = 64;

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    fs: Arc<dyn ExecutorFileSystem>,
    config: ServerConfig,
    url: String,
}

impl Server {
    /// Checks the configuration and binds the listening socket; the server will serve `fs` (any
    /// [`ExecutorFileSystem`]: a local one, a remote one, a test double).
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a limit out of range (see [`ServerConfig::validate`]);
    /// `PermissionDenied` for a non-loopback address without a token; the bind error otherwise.
    pub async fn bind(fs: Arc<dyn ExecutorFileSystem>, config: ServerConfig) -> io::Result<Self> {
        config.validate()?;
        if !config.listen.ip().is_loopback() && config.token.is_none() {
            return Err(crate::error::token_required(config.listen));
        }
        warn_about_descriptor_limit(&config);
        let listener = TcpListener::bind(config.listen).await?;
        let url = format!("ws://{}", listener.local_addr()?);
        Ok(Self {
            listener,
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

    /// Serves until `shutdown` completes, then stops accepting and lets every connection finish
    /// the requests it is running, for at most the configured shutdown timeout; connections
    /// still open then are cut (their tasks dropped, their sockets closed).
    ///
    /// # Errors
    ///
    /// `TimedOut` when connections had to be cut at the shutdown deadline, saying how many.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        let handshakes = Arc::new(Semaphore::new(self.config.max_handshakes));
        let shutdown_timeout = self.config.shutdown_timeout;
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
                &connections,
                &cut,
            )?),
        };
        let mut failures = AcceptFailures::default();
        let mut next_connection_id = 0u64;
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => break,
                accepted = self.listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    if let Some(pause) = failures.record(&e) {
                        tokio::select! {
                            () = &mut shutdown => break,
                            () = tokio::time::sleep(pause) => {}
                        }
                    }
                    continue;
                }
            };
            failures.reset_pause();
            next_connection_id += 1;
            let id = next_connection_id;
            // A connection that has not finished its handshake holds a handshake slot, never a
            // connection slot; when every handshake slot is taken, the newcomer is closed at
            // once so that silent peers cannot pile up descriptors.
            let Ok(handshake) = Arc::clone(&handshakes).try_acquire_owned() else {
                tracing::debug!(connection = id, %peer, "too many handshakes in progress: closed");
                drop(stream);
                continue;
            };
            let shared = Arc::clone(&shared);
            let stop = stop.clone();
            let cut = cut.clone();
            let Some(threads) = &threads else {
                connections.spawn(async move {
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
            threads.run(connections.track_future(async move {
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
        drop(self.listener);
        tracing::info!("shutting down: finishing in-flight requests");
        stop.cancel();
        connections.close();
        // Processes end with their server, whatever their sessions' TTL.
        if let Some(processes) = processes {
            processes.shutdown().await;
        }
        if tokio::time::timeout(shutdown_timeout, connections.wait())
            .await
            .is_ok()
        {
            if let Some(threads) = threads {
                threads.finish().await;
            }
            return Ok(());
        }
        let open = connections.len();
        cut.cancel();
        connections.wait().await;
        if let Some(threads) = threads {
            threads.finish().await;
        }
        Err(shutdown_deadline_passed(shutdown_timeout, open))
    }
}

fn log_end(id: u64, peer: SocketAddr, served: Result<(), WsError>) {
    if let Err(e) = served {
        tracing::debug!(connection = id, %peer, "connection ended: {e}");
    }
}

/// Warns when `RLIMIT_NOFILE` cannot hold every connection and handshake the bounds allow:
/// the server still works, but accepts pause whenever the descriptors run out.
fn warn_about_descriptor_limit(config: &ServerConfig) {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let Some(current) = limit.current else {
        return;
    };
    let wanted = (config.max_connections + config.max_handshakes) as u64 + DESCRIPTOR_HEADROOM;
    if current < wanted {
        tracing::warn!(
            "RLIMIT_NOFILE is {current}, below --max-connections + --max-handshakes + \
             {DESCRIPTOR_HEADROOM} ({wanted}): accepts will pause while descriptors run out"
        );
    }
}

pub(super) use crate::error::shutdown_deadline_passed;

/// What the accept loop remembers of its failures: when it last logged one, how many it has
/// not logged since, and how long to pause after the next one.
struct AcceptFailures {
    logged_at: Option<Instant>,
    unlogged: u64,
    pause: Duration,
}

impl Default for AcceptFailures {
    fn default() -> Self {
        Self {
            logged_at: None,
            unlogged: 0,
            pause: MIN_ACCEPT_PAUSE,
        }
    }
}

impl AcceptFailures {
    /// Logs `error` unless one was logged less than [`ACCEPT_LOG_INTERVAL`] ago (then it is
    /// counted for the next line), and returns the pause to take before accepting again: one
    /// that grows for exhausted descriptors or memory, which no retry can fix at once, and none
    /// for a failure of one connection (a peer that reset before it was accepted).
    fn record(&mut self, error: &io::Error) -> Option<Duration> {
        let exhausted = is_resource_exhaustion(error);
        let now = Instant::now();
        if self
            .logged_at
            .is_some_and(|at| now.duration_since(at) < ACCEPT_LOG_INTERVAL)
        {
            self.unlogged += 1;
        } else {
            let unlogged = std::mem::take(&mut self.unlogged);
            let every = ACCEPT_LOG_INTERVAL;
            if exhausted {
                tracing::warn!(
                    unlogged,
                    "accept failed: {error}; pausing accepts (logged at most once every {every:?})"
                );
            } else {
                tracing::warn!(
                    unlogged,
                    "accept failed: {error} (logged at most once every {every:?})"
                );
            }
            self.logged_at = Some(now);
        }
        if !exhausted {
            return None;
        }
        let pause = self.pause;
        self.pause = (self.pause * 2).min(MAX_ACCEPT_PAUSE);
        Some(pause)
    }

    fn reset_pause(&mut self) {
        self.pause = MIN_ACCEPT_PAUSE;
    }
}

/// `EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`: the process or the system is out of descriptors or
/// memory, and accepting again at once would fail the same way.
fn is_resource_exhaustion(error: &io::Error) -> bool {
    use rustix::io::Errno;
    let Some(raw) = error.raw_os_error() else {
        return false;
    };
    [Errno::MFILE, Errno::NFILE, Errno::NOBUFS, Errno::NOMEM]
        .iter()
        .any(|errno| errno.raw_os_error() == raw)
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
    let handshake_shared = Arc::clone(&shared);
    let accept = async move {
        if is_readyz_request(&peek_head(&stream).await?) {
            answer_readyz(stream).await?;
            tracing::debug!(connection = id, %peer, "answered /readyz");
            return Ok(None);
        }
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
        let shared_socket = SharedSocket::new(stream);
        let socket = shared_socket.direct();
        let ws =
            tokio_tungstenite::accept_hdr_async_with_config(shared_socket, callback, Some(config))
                .await?;
        let permit = permit.expect("an accepted handshake took a connection slot");
        Ok::<_, WsError>(Some((ws, socket, permit)))
    };
    let deadline = shared.config.handshake_timeout;
    // A handshake has no request to finish: at shutdown it is dropped at once.
    let accepted = tokio::select! {
        () = stop.cancelled() => return Ok(()),
        accepted = tokio::time::timeout(deadline, accept) => accepted.map_err(|_| {
            WsError::Io(crate::error::handshake_timed_out())
        }),
    };
    drop(handshake);
    let Some((ws, socket, permit)) = accepted?? else {
        return Ok(());
    };
    tracing::debug!(connection = id, %peer, "connected");
    Connection::new(shared, id, peer.to_string().into())
        .run(ws, Some(socket), stop)
        .await;
    drop(permit);
    tracing::debug!(connection = id, %peer, "disconnected");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exhausted_resources_pause_accepts() {
        use rustix::io::Errno;
        let os = |errno: Errno| io::Error::from_raw_os_error(errno.raw_os_error());
        let mut failures = AcceptFailures::default();
        assert_eq!(failures.record(&os(Errno::MFILE)), Some(MIN_ACCEPT_PAUSE));
        assert_eq!(
            failures.record(&os(Errno::NFILE)),
            Some(MIN_ACCEPT_PAUSE * 2)
        );
        for _ in 0..20 {
            failures.record(&os(Errno::MFILE));
        }
        assert_eq!(failures.record(&os(Errno::MFILE)), Some(MAX_ACCEPT_PAUSE));
        // All but the first were counted, not logged: the interval has not passed.
        assert_eq!(failures.unlogged, 22);
        assert_eq!(failures.record(&os(Errno::CONNABORTED)), None);
        failures.reset_pause();
        assert_eq!(failures.record(&os(Errno::MFILE)), Some(MIN_ACCEPT_PAUSE));
    }
}
