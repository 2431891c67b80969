//! The HTTP proxy: `CONNECT host:port` tunnels, and plain-HTTP requests in absolute form
//! (`GET http://host/path`), passed on in origin form with `Connection: close`, so that one
//! connection carries requests to the one host it was decided for.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::relay::{self, NotOpened};
use super::session::{Line, Session};

/// The largest request head read.
const MAX_HEAD: usize = 32 * 1024;

/// How long the client has to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// Headers for the proxy alone, or about the connection: never passed on.
const HOP_BY_HOP: &[&str] = &[
    "proxy-connection",
    "proxy-authorization",
    "connection",
    "keep-alive",
];

/// Serves one HTTP proxy connection, filling its audit line.
pub(crate) async fn serve(mut client: TcpStream, session: &Session, line: &mut Line) {
    let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(head)) => head,
        Ok(Err(reason)) => return refuse(client, line, "400 Bad Request", reason).await,
        Err(_) => return refuse(client, line, "408 Request Timeout", "no request".into()).await,
    };
    let (head, early) = head;
    let request = match Request::parse(&head) {
        Ok(request) => request,
        Err(reason) => return refuse(client, line, "400 Bad Request", reason).await,
    };
    line.host = request.host.clone();
    line.port = request.port;
    if session.narrowing.read_only && !request.reading {
        let reason = "reading only: plain-HTTP GET, HEAD and OPTIONS".to_string();
        return refuse(client, line, "403 Forbidden", reason).await;
    }
    if request.tunnel {
        line.via = "connect";
        if !early.is_empty() {
            let reason = "bytes sent before the tunnel was open".to_string();
            return refuse(client, line, "400 Bad Request", reason).await;
        }
    }
    let mut upstream = match relay::open(session, line).await {
        Ok(upstream) => upstream,
        Err(not) => {
            let status = match not {
                NotOpened::Refused => "403 Forbidden",
                NotOpened::Failed => "502 Bad Gateway",
            };
            let reason = line.reason.clone().unwrap_or_default();
            return answer(client, line, status, &reason).await;
        }
    };
    if request.tunnel {
        let open = b"HTTP/1.1 200 Connection established\r\n\r\n";
        if client.write_all(open).await.is_err() {
            line.outcome = "failed";
            line.reason = Some("the client went away".into());
            return;
        }
        return relay::tunnel(client, upstream, session, line).await;
    }
    let mut first = request.forwarded.into_bytes();
    first.extend_from_slice(&early);
    if !session.spend(first.len()) || upstream.write_all(&first).await.is_err() {
        line.outcome = "failed";
        line.reason = Some("passing the request on failed".into());
        return;
    }
    line.bytes_out
        .fetch_add(first.len() as u64, Ordering::Relaxed);
    relay::relay(client, upstream, session, line).await;
}

async fn refuse(client: TcpStream, line: &mut Line, status: &str, reason: String) {
    line.outcome = "refused";
    line.reason = Some(reason.clone());
    answer(client, line, status, &reason).await;
}

/// Answers the client with `status` and a one-line body, and closes.
async fn answer(mut client: TcpStream, line: &Line, status: &str, reason: &str) {
    let body = format!("capfs egress: {}:{}: {reason}\n", line.host, line.port);
    let text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(text.as_bytes()).await;
    let _ = client.shutdown().await;
}

/// The request head (without its blank line) and whatever followed it.
async fn read_head(client: &mut TcpStream) -> Result<(String, Vec<u8>), String> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            let early = seen.split_off(end + 4);
            seen.truncate(end);
            let head = String::from_utf8(seen).map_err(|_| "a request head not in UTF-8")?;
            return Ok((head, early));
        }
        if seen.len() > MAX_HEAD {
            return Err("the request head is too large".into());
        }
        let n = client
            .read(&mut buf)
            .await
            .map_err(|e| format!("reading the request: {e}"))?;
        if n == 0 {
            return Err("the client ended before its request head".into());
        }
        seen.extend_from_slice(&buf[..n]);
    }
}

/// What the proxy takes from a request head.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    tunnel: bool,
    /// A plain `GET`, `HEAD` or `OPTIONS`.
    reading: bool,
    host: String,
    port: u16,
    /// The head to pass on for a plain request, with its blank line.
    forwarded: String,
}

impl Request {
    fn parse(head: &str) -> Result<Self, String> {
        let mut lines = head.split("\r\n");
        let first = lines.next().unwrap_or_default();
        let mut parts = first.split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("a malformed request line".into());
        };
        if !version.starts_with("HTTP/1.") {
            return Err("not HTTP/1".into());
        }
        if method.eq_ignore_ascii_case("CONNECT") {
            let (host, port) = host_port(target, None)?;
            return Ok(Self {
                tunnel: true,
                reading: false,
                host,
                port,
                forwarded: String::new(),
            });
        }
        let Some(rest) = strip_prefix_ignore_case(target, "http://") else {
            return Err("only http:// URLs in absolute form, or CONNECT".into());
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(end);
        if authority.contains('@') {
            return Err("credentials in the URL".into());
        }
        let (host, port) = host_port(authority, Some(80))?;
        let path = match path {
            "" => "/".to_string(),
            p if p.starts_with('/') => p.to_string(),
            p => format!("/{p}"),
        };
        let mut forwarded = format!("{method} {path} {version}\r\n");
        for header in lines {
            let (name, value) = header.split_once(':').ok_or("a malformed header")?;
            let name_lower = name.trim().to_ascii_lowercase();
            if HOP_BY_HOP.contains(&name_lower.as_str()) {
                continue;
            }
            if name_lower == "host" {
                let (named, _) = host_port(value.trim(), Some(80))?;
                if !named.eq_ignore_ascii_case(&host) {
                    return Err("the Host header names another host than the URL".into());
                }
            }
            forwarded.push_str(header);
            forwarded.push_str("\r\n");
        }
        forwarded.push_str("Connection: close\r\n\r\n");
        Ok(Self {
            tunnel: false,
            reading: ["GET", "HEAD", "OPTIONS"].contains(&method),
            host,
            port,
            forwarded,
        })
    }
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// `host:port` or `[v6]:port`; the port may be left out when there is a default.
fn host_port(text: &str, default: Option<u16>) -> Result<(String, u16), String> {
    let (host, port) = match text.strip_prefix('[') {
        Some(rest) => {
            let (v6, after) = rest
                .split_once(']')
                .ok_or("an IPv6 address lacks its `]`")?;
            (v6, after.strip_prefix(':'))
        }
        None => match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        },
    };
    let port = match (port, default) {
        (Some(p), _) => p.parse::<u16>().ok().filter(|p| *p > 0),
        (None, d) => d,
    }
    .ok_or("a missing or malformed port")?;
    if host.is_empty() {
        return Err("no host".into());
    }
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::Request;

    #[test]
    fn a_plain_request_goes_on_in_origin_form_with_connection_close() {
        let head = "GET http://Pypi.test:8080/simple/?x=1 HTTP/1.1\r\nHost: pypi.test:8080\r\nProxy-Connection: keep-alive\r\nAccept: */*";
        let request = Request::parse(head).expect("parsed");
        assert_eq!((request.host.as_str(), request.port), ("Pypi.test", 8080));
        assert_eq!(
            request.forwarded,
            "GET /simple/?x=1 HTTP/1.1\r\nHost: pypi.test:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn connect_needs_a_port_and_plain_requests_a_matching_host() {
        let request = Request::parse("CONNECT [::1]:443 HTTP/1.1\r\nHost: x").expect("parsed");
        assert!(request.tunnel);
        assert_eq!((request.host.as_str(), request.port), ("::1", 443));
        assert!(Request::parse("CONNECT pypi.test HTTP/1.1").is_err());
        assert!(Request::parse("GET http://a.test/ HTTP/1.1\r\nHost: b.test").is_err());
        assert!(Request::parse("GET http://u:p@a.test/ HTTP/1.1").is_err());
        assert!(Request::parse("GET https://a.test/ HTTP/1.1").is_err());
        assert!(Request::parse("GET /relative HTTP/1.1").is_err());
    }
}
