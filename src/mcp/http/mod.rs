//! `capfs mcp --listen`: the same tools over MCP Streamable HTTP, rmcp's service on hyper's
//! HTTP/1.1 server (TLS by rustls for `https://`). In front of rmcp, every request passes the
//! gate (Host, Origin, bearer token) and the session table (a session answers only to the
//! token that made it; sessions and open streams are bounded; idle sessions end). Each session
//! is a server of its own, so the client's roots narrow that session only.

mod gate;
mod listen;
mod sessions;
mod tls;

use std::convert::Infallible;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::roots::View;
use super::views::Views;
use super::{McpServer, wire};
use crate::args::McpArgs;
use crate::fail::{self, Failure};
use gate::{Gate, Reply, plain};
use sessions::{Limits, Refused, Table};

/// Time a connection has to send its request line and headers, and to finish TLS.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The `Mcp-Session-Id` header.
const SESSION_ID: &str = "mcp-session-id";

/// A bound listener, its flags checked, waiting for the file system.
pub(crate) struct Listener {
    tcp: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    url: String,
    path: String,
    gate: Gate,
    limits: Limits,
    max_connections: usize,
}

fn usage(message: impl std::fmt::Display) -> Failure {
    Failure::usage(format!("capfs mcp: {message}"))
}

/// Checks the flags of `--listen`, reads the token and the certificate, and binds.
///
/// # Errors
///
/// A malformed URL, no token, a non-loopback address without TLS, an unreadable certificate,
/// an address that cannot be bound.
pub(crate) async fn bind(args: &McpArgs) -> Result<Listener, Failure> {
    let flags = &args.listen;
    let url = flags.listen.as_deref().unwrap_or_default();
    let target = listen::parse(url).map_err(|e| usage(format!("--listen: {e}")))?;
    // One token a line: each client (or group of them) its own, bound to its sessions.
    let tokens: Vec<String> = crate::open::read_token(args.connection.token_file.as_deref())
        .map_err(|f| usage(f.message))?
        .ok_or_else(|| {
            usage("--listen needs a bearer token for its clients: --token-file FILE or CAPFS_TOKEN")
        })?
        .lines()
        .map(|line| line.trim().to_string())
        .filter(|line| !line.is_empty())
        .collect();
    let tls = match (target.tls, &flags.tls_cert, &flags.tls_key) {
        (true, Some(cert), Some(key)) => Some(tls::acceptor(cert, key).map_err(usage)?),
        (true, _, _) => return Err(usage("--listen https:// needs --tls-cert and --tls-key")),
        (false, None, None) => None,
        (false, _, _) => return Err(usage("--tls-cert and --tls-key are for https://")),
    };
    for (name, value) in [
        ("--max-sessions", flags.max_sessions),
        ("--max-sessions-per-token", flags.max_sessions_per_token),
        ("--max-streams", flags.max_streams),
        ("--max-streams-per-token", flags.max_streams_per_token),
        ("--max-streams-per-session", flags.max_streams_per_session),
        ("--max-connections", flags.max_connections),
    ] {
        if value == 0 {
            return Err(usage(format!("{name} 0: must be at least 1")));
        }
    }
    if flags.session_idle_timeout.is_zero() {
        return Err(usage("--session-idle-timeout 0: must be more than 0"));
    }
    let address = listen::resolve(&target).await.map_err(usage)?;
    if !address.ip().is_loopback() && tls.is_none() {
        return Err(usage(format!(
            "refusing to listen on non-loopback address {address} without TLS: use https:// \
             with --tls-cert and --tls-key, or a loopback address"
        )));
    }
    let tcp = TcpListener::bind(address).await.map_err(|e| {
        Failure::plain(
            format!(
                "capfs mcp: cannot listen on {url}: {}",
                fail::reason(&e, "")
            ),
            fail::status_of(e.kind()),
        )
    })?;
    let port = tcp
        .local_addr()
        .map_err(|e| Failure::plain(format!("capfs mcp: {e}"), 1))?
        .port();
    let base = target.base(port);
    let resource = format!("{base}{}", target.path);
    let mut hosts = listen::hosts(&target, address, port);
    hosts.extend(flags.allow_host.iter().cloned());
    let gate = Gate::new(
        tokens,
        hosts,
        &flags.allow_origin,
        &flags.authorization_server,
        &base,
        &resource,
        &target.path,
    );
    Ok(Listener {
        tcp,
        tls,
        url: resource,
        path: target.path,
        gate,
        limits: Limits {
            max_sessions: flags.max_sessions,
            max_sessions_per_token: flags.max_sessions_per_token,
            max_streams: flags.max_streams,
            max_streams_per_token: flags.max_streams_per_token,
            max_streams_per_session: flags.max_streams_per_session,
            idle: flags.session_idle_timeout,
        },
        max_connections: flags.max_connections,
    })
}

/// What every connection's requests share.
struct Shared {
    gate: Gate,
    table: Arc<Table>,
    path: String,
    rmcp: StreamableHttpService<McpServer, LocalSessionManager>,
}

impl Listener {
    /// Prints the URL on stdout, then serves until SIGINT or SIGTERM: each session a server
    /// of its own made from `views` and `base`.
    ///
    /// # Errors
    ///
    /// A failed write of the URL, a failed accept.
    pub(crate) async fn serve(self, views: Arc<Views>, base: View) -> Result<(), Failure> {
        let mut session_config = SessionConfig::default();
        // capfs ends idle sessions itself (and closes them in rmcp), counting requests only.
        session_config.keep_alive = None;
        let mut manager = LocalSessionManager::default();
        manager.session_config = session_config;
        let manager = Arc::new(manager);
        let stop = CancellationToken::new();
        // Host and Origin are checked by the gate, before the token.
        let mut config = StreamableHttpServerConfig::default().disable_allowed_hosts();
        config.max_request_body_bytes = wire::MAX_REQUEST_LINE;
        config.cancellation_token = stop.clone();
        let rmcp = StreamableHttpService::new(
            move || Ok(McpServer::new(Arc::clone(&views), base.clone())),
            Arc::clone(&manager),
            config,
        );
        let table = Table::new(self.limits);
        let shared = Arc::new(Shared {
            gate: self.gate,
            table: Arc::clone(&table),
            path: self.path,
            rmcp,
        });
        {
            let mut stdout = io::stdout().lock();
            writeln!(stdout, "{}", self.url)
                .and_then(|()| stdout.flush())
                .map_err(|e| Failure::at("cannot write", "stdout", &e))?;
        }
        tracing::info!(url = self.url, "listening");
        let expiring = tokio::spawn(expire(table, manager, self.limits.idle));
        let connections = Arc::new(Semaphore::new(self.max_connections));
        let accepting = async {
            loop {
                let (tcp, peer) = match self.tcp.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        continue;
                    }
                };
                let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
                    tracing::warn!(%peer, "connection refused: --max-connections reached");
                    continue;
                };
                let shared = Arc::clone(&shared);
                let tls = self.tls.clone();
                tokio::spawn(async move {
                    connection(shared, tcp, tls, peer).await;
                    drop(permit);
                });
            }
        };
        tokio::select! {
            () = accepting => {}
            () = crate::shutdown_signal() => {}
        }
        stop.cancel();
        expiring.abort();
        tracing::info!("stopped");
        Ok(())
    }
}

/// Ends the sessions the table finds idle, checking four times per idle timeout (at least
/// once a minute).
async fn expire(table: Arc<Table>, manager: Arc<LocalSessionManager>, idle: Duration) {
    let period = (idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(60));
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        for id in table.expire(Instant::now()) {
            tracing::info!("session ended: idle");
            if let Err(e) = manager.close_session(&id.into()).await {
                tracing::warn!("closing an idle session: {e}");
            }
        }
    }
}

/// Serves one connection, after its TLS handshake when there is one.
async fn connection(
    shared: Arc<Shared>,
    tcp: tokio::net::TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
    peer: SocketAddr,
) {
    let service = hyper::service::service_fn(move |request| {
        let shared = Arc::clone(&shared);
        async move { Ok::<_, Infallible>(shared.handle(request).await) }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HANDSHAKE_TIMEOUT);
    let served = match tls {
        None => http.serve_connection(TokioIo::new(tcp), service).await,
        Some(acceptor) => {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => http.serve_connection(TokioIo::new(stream), service).await,
                Ok(Err(e)) => return tracing::debug!(%peer, "TLS handshake failed: {e}"),
                Err(_) => return tracing::debug!(%peer, "TLS handshake timed out"),
            }
        }
    };
    if let Err(e) = served {
        tracing::debug!(%peer, "connection ended: {e}");
    }
}

impl Shared {
    async fn handle(&self, mut request: Request<Incoming>) -> Reply {
        let headers = request.headers();
        if !self.gate.host_allowed(headers) {
            return plain(
                StatusCode::FORBIDDEN,
                "capfs mcp: the Host header does not name this server",
            );
        }
        if !self.gate.origin_allowed(headers) {
            return plain(
                StatusCode::FORBIDDEN,
                "capfs mcp: requests from this Origin are refused",
            );
        }
        let path = request.uri().path();
        if self.gate.is_metadata_path(path) {
            return match *request.method() {
                Method::GET => self.gate.metadata().unwrap_or_else(not_found),
                _ => plain(StatusCode::METHOD_NOT_ALLOWED, "capfs mcp: GET only"),
            };
        }
        if path != self.path {
            return not_found();
        }
        let token = match self.gate.token(headers) {
            Ok(token) => token,
            Err(why) => return self.gate.unauthorized(&why),
        };
        // rmcp and the tools have no use for the token.
        request.headers_mut().remove(header::AUTHORIZATION);
        let session = request
            .headers()
            .get(SESSION_ID)
            .map(|v| v.to_str().unwrap_or_default().to_string());
        let method = request.method().clone();
        let mut rmcp = self.rmcp.clone();
        let reply = |r: Result<Reply, Infallible>| match r {
            Ok(reply) => reply,
            Err(never) => match never {},
        };
        match session {
            Some(id) if method == Method::DELETE => {
                if !self.table.owns(&id, token) {
                    return refusal(&Refused::NoSession);
                }
                let answer = reply(tower_service::Service::call(&mut rmcp, request).await);
                if answer.status().is_success() {
                    self.table.remove(&id);
                    tracing::info!("session ended by its client");
                }
                answer
            }
            Some(id) => {
                let stream = match self.table.admit(&id, token, Instant::now()) {
                    Ok(stream) => stream,
                    Err(refused) => return refusal(&refused),
                };
                let answer = reply(tower_service::Service::call(&mut rmcp, request).await);
                held(answer, stream)
            }
            None => {
                let making = match self.table.begin(token) {
                    Ok(making) => making,
                    Err(refused) => return refusal(&refused),
                };
                let answer = reply(tower_service::Service::call(&mut rmcp, request).await);
                let made = answer
                    .headers()
                    .get(SESSION_ID)
                    .and_then(|v| v.to_str().ok())
                    .filter(|_| answer.status().is_success());
                let stream = match made {
                    Some(id) => {
                        let stream = making.made(id, Instant::now());
                        let (sessions, streams) = self.table.counts();
                        tracing::info!(sessions, streams, "session started");
                        stream
                    }
                    None => making.failed(),
                };
                held(answer, stream)
            }
        }
    }
}

/// The reply whose body holds `stream`'s place until it is dropped.
fn held(reply: Reply, stream: sessions::Stream) -> Reply {
    reply.map(|body| {
        body.map_frame(move |frame| {
            let _ = &stream;
            frame
        })
        .boxed()
    })
}

fn not_found() -> Reply {
    plain(StatusCode::NOT_FOUND, "capfs mcp: not found")
}

fn refusal(refused: &Refused) -> Reply {
    match refused {
        // As the spec asks for a session the server no longer has: the client starts anew.
        Refused::NoSession => plain(StatusCode::NOT_FOUND, "capfs mcp: no such session"),
        Refused::Sessions => plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "capfs mcp: too many sessions (--max-sessions)",
        ),
        Refused::Streams => plain(
            StatusCode::TOO_MANY_REQUESTS,
            "capfs mcp: too many open streams (--max-streams, --max-streams-per-session)",
        ),
    }
}
