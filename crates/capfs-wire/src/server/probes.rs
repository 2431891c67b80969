//! The plain HTTP endpoints a server answers beside the WebSocket upgrade (or alone, on its
//! admin address): `GET /healthz` (the process answers), `GET /readyz` (it can serve) and
//! `GET /metrics` (`metrics.rs`, behind the bearer token when the server has one). The probes
//! say nothing but `ok`, `ready` or `not ready`: no root, path or token ever appears in them.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::admission::{bearer_credentials, token_matches};
use super::shared::Shared;

/// Answers a request for any other path on the admin address with 404, and closes.
pub(super) async fn not_found(mut stream: TcpStream) -> io::Result<()> {
    let _ = read_head(&mut stream).await?;
    let answer = response("404 Not Found", "text/plain", "not found\n");
    stream.write_all(&answer).await?;
    stream.shutdown().await
}

/// The longest request head a probe reads; a longer one is refused.
const MAX_HEAD_BYTES: usize = 8192;
/// The longest a readiness check waits for a root to answer: a root that hangs (a network
/// file system gone away) makes the server unready, not the probe hang.
const ROOT_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// What a plain request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Probe {
    Health,
    Ready,
    Metrics,
}

/// The first bytes the peer sent, without consuming them.
pub(super) async fn peek_head(stream: &TcpStream) -> io::Result<Vec<u8>> {
    let mut head = vec![0u8; 2048];
    let n = stream.peek(&mut head).await?;
    head.truncate(n);
    Ok(head)
}

/// The probe `head` asks for: a `GET` of `/healthz`, `/readyz` or `/metrics` (a query allowed)
/// without an `Upgrade` header. A WebSocket handshake is never one, whatever its path.
pub(super) fn probe_of(head: &[u8]) -> Option<Probe> {
    let rest = head.strip_prefix(b"GET ")?;
    let end = rest.iter().position(|b| matches!(b, b' ' | b'?'))?;
    let probe = match &rest[..end] {
        b"/healthz" => Probe::Health,
        b"/readyz" => Probe::Ready,
        b"/metrics" => Probe::Metrics,
        _ => return None,
    };
    let upgrade = String::from_utf8_lossy(head)
        .to_ascii_lowercase()
        .contains("\nupgrade:");
    (!upgrade).then_some(probe)
}

/// Reads the request head (up to the blank line) and answers `probe` from `shared`, then
/// closes. The caller bounds the time this takes.
pub(super) async fn answer(mut stream: TcpStream, probe: Probe, shared: &Shared) -> io::Result<()> {
    let head = read_head(&mut stream).await?;
    let response = match head {
        None => response("400 Bad Request", "text/plain", "bad request\n"),
        Some(head) => respond(probe, &head, shared).await,
    };
    stream.write_all(&response).await?;
    stream.shutdown().await
}

/// The request head, consumed up to its blank line; `None` when it is too long or not HTTP.
async fn read_head(stream: &mut TcpStream) -> io::Result<Option<Vec<u8>>> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&buf[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        match httparse::Request::new(&mut headers).parse(&head) {
            Ok(httparse::Status::Complete(_)) => return Ok(Some(head)),
            Ok(httparse::Status::Partial) if head.len() < MAX_HEAD_BYTES => {}
            _ => return Ok(None),
        }
    }
}

async fn respond(probe: Probe, head: &[u8], shared: &Shared) -> Vec<u8> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    if request.parse(head).is_err() {
        return response("400 Bad Request", "text/plain", "bad request\n");
    }
    let upgrade = request
        .headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("upgrade"));
    if upgrade {
        // Seen only once the whole head was read: this connection is no WebSocket handshake.
        return response("400 Bad Request", "text/plain", "bad request\n");
    }
    match probe {
        Probe::Health => response("200 OK", "text/plain", "ok\n"),
        Probe::Ready if is_ready(shared).await => response("200 OK", "text/plain", "ready\n"),
        Probe::Ready => response("503 Service Unavailable", "text/plain", "not ready\n"),
        Probe::Metrics => {
            if let Some(token) = shared.config.token.as_deref() {
                let presented = request
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("authorization"))
                    .and_then(|h| std::str::from_utf8(h.value).ok())
                    .and_then(bearer_credentials)
                    .unwrap_or("");
                if !token_matches(presented, token) {
                    return response_with(
                        "401 Unauthorized",
                        "WWW-Authenticate: Bearer\r\n",
                        "text/plain",
                        "capfs: missing or wrong bearer token\n",
                    );
                }
            }
            response(
                "200 OK",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                &shared.metrics.encode(),
            )
        }
    }
}

/// True when the server can serve: not draining, every root answering as a directory to the
/// user the server acts as, its processes (when it serves them) confined as configured, and
/// the caller's own check (`ServerConfig::readiness`) passing.
pub(super) async fn is_ready(shared: &Shared) -> bool {
    if shared.is_draining() {
        return false;
    }
    if let Some(processes) = &shared.processes
        && !super::process::table::info(&*processes.imp).served
    {
        return false;
    }
    for root in shared.fs.served_roots() {
        let answered = tokio::time::timeout(ROOT_CHECK_TIMEOUT, shared.fs.get_metadata(&root.path));
        match answered.await {
            Ok(Ok(metadata)) if metadata.is_directory => {}
            _ => return false,
        }
    }
    let Some(check) = shared.config.readiness.clone() else {
        return true;
    };
    let checked = tokio::task::spawn_blocking(move || (check.0)());
    match tokio::time::timeout(ROOT_CHECK_TIMEOUT, checked).await {
        Ok(Ok(Ok(()))) => true,
        Ok(Ok(Err(e))) => {
            tracing::debug!("not ready: {e}");
            false
        }
        _ => false,
    }
}

/// A whole response that closes its connection.
fn response(status: &str, content_type: &str, body: &str) -> Vec<u8> {
    response_with(status, "", content_type, body)
}

/// A response with `extra` headers (each ending in CRLF).
fn response_with(status: &str, extra: &str, content_type: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\n{extra}Content-Type: {content_type}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_gets_of_the_three_paths_are_probes() {
        assert_eq!(probe_of(b"GET /healthz HTTP/1.1\r\n"), Some(Probe::Health));
        assert_eq!(probe_of(b"GET /readyz?x HTTP/1.0\r\n"), Some(Probe::Ready));
        assert_eq!(probe_of(b"GET /metrics HTTP/1.1\r\n"), Some(Probe::Metrics));
        assert_eq!(probe_of(b"GET /readyzz HTTP/1.1\r\n"), None);
        assert_eq!(probe_of(b"POST /healthz HTTP/1.1\r\n"), None);
        assert_eq!(probe_of(b"GET / HTTP/1.1\r\n"), None);
        assert_eq!(
            probe_of(b"GET /healthz HTTP/1.1\r\nUpgrade: websocket\r\n"),
            None
        );
    }
}
