//! The SOCKS5 proxy (RFC 1928): no authentication, the CONNECT command, destinations by
//! name (resolved by capfs, `socks5h://`) or by IPv4 or IPv6 address.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::relay::{self, NotOpened};
use super::session::{Line, Session};

/// How long the client has to say where it goes.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

const SUCCEEDED: u8 = 0;
const NOT_ALLOWED: u8 = 2;
const HOST_UNREACHABLE: u8 = 4;
const COMMAND_NOT_SUPPORTED: u8 = 7;
const ADDRESS_NOT_SUPPORTED: u8 = 8;

/// Serves one SOCKS connection, filling its audit line.
pub(crate) async fn serve(mut client: TcpStream, session: &Session, line: &mut Line) {
    let asked = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&mut client)).await;
    let (host, port) = match asked {
        Ok(Ok(destination)) => destination,
        Ok(Err((code, reason))) => {
            if let Some(code) = code {
                let _ = client.write_all(&reply(code)).await;
            }
            line.outcome = "refused";
            line.reason = Some(reason);
            return;
        }
        Err(_) => {
            line.outcome = "refused";
            line.reason = Some("no SOCKS request in time".into());
            return;
        }
    };
    line.host = host;
    line.port = port;
    if session.narrowing.read_only {
        line.outcome = "refused";
        line.reason = Some("reading only: no SOCKS tunnel".into());
        let _ = client.write_all(&reply(NOT_ALLOWED)).await;
        return;
    }
    let upstream = match relay::open(session, line).await {
        Ok(upstream) => upstream,
        Err(not) => {
            let code = match not {
                NotOpened::Refused => NOT_ALLOWED,
                NotOpened::Failed => HOST_UNREACHABLE,
            };
            let _ = client.write_all(&reply(code)).await;
            return;
        }
    };
    if client.write_all(&reply(SUCCEEDED)).await.is_err() {
        line.outcome = "failed";
        line.reason = Some("the client went away".into());
        return;
    }
    relay::tunnel(client, upstream, session, line).await;
}

/// A reply with no bound address (0.0.0.0:0): clients connecting through do not use it.
fn reply(code: u8) -> [u8; 10] {
    [5, code, 0, 1, 0, 0, 0, 0, 0, 0]
}

type Refusal = (Option<u8>, String);

fn broken(e: std::io::Error) -> Refusal {
    (None, format!("reading the SOCKS request: {e}"))
}

/// The greeting and the request: where the client wants to go.
async fn handshake(client: &mut TcpStream) -> Result<(String, u16), Refusal> {
    let mut head = [0u8; 2];
    client.read_exact(&mut head).await.map_err(broken)?;
    if head[0] != 5 {
        return Err((None, "not SOCKS version 5".into()));
    }
    let mut methods = vec![0u8; usize::from(head[1])];
    client.read_exact(&mut methods).await.map_err(broken)?;
    if !methods.contains(&0) {
        let _ = client.write_all(&[5, 0xff]).await;
        return Err((
            None,
            "the client offers no method without authentication".into(),
        ));
    }
    client.write_all(&[5, 0]).await.map_err(broken)?;
    let mut request = [0u8; 4];
    client.read_exact(&mut request).await.map_err(broken)?;
    if request[0] != 5 {
        return Err((None, "not SOCKS version 5".into()));
    }
    if request[1] != 1 {
        let what = format!("SOCKS command {} (only CONNECT is served)", request[1]);
        return Err((Some(COMMAND_NOT_SUPPORTED), what));
    }
    let host = match request[3] {
        1 => {
            let mut a = [0u8; 4];
            client.read_exact(&mut a).await.map_err(broken)?;
            Ipv4Addr::from(a).to_string()
        }
        3 => {
            let mut len = [0u8; 1];
            client.read_exact(&mut len).await.map_err(broken)?;
            let mut name = vec![0u8; usize::from(len[0])];
            client.read_exact(&mut name).await.map_err(broken)?;
            String::from_utf8_lossy(&name).into_owned()
        }
        4 => {
            let mut a = [0u8; 16];
            client.read_exact(&mut a).await.map_err(broken)?;
            Ipv6Addr::from(a).to_string()
        }
        other => {
            let what = format!("SOCKS address type {other}");
            return Err((Some(ADDRESS_NOT_SUPPORTED), what));
        }
    };
    let mut port = [0u8; 2];
    client.read_exact(&mut port).await.map_err(broken)?;
    Ok((host, u16::from_be_bytes(port)))
}
