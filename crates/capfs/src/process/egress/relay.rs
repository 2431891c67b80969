//! What every protocol of the proxy does once it knows where the process wants to go: decide,
//! connect, check a TLS name on port 443, then carry bytes both ways within the budget.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::session::{Line, Session};
use super::sni;

/// Why a destination was not connected: refused by the policy, or the connection failed.
pub(crate) enum NotOpened {
    Refused,
    Failed,
}

/// Decides `line.host` on `line.port` and connects; fills the line's address, or its outcome
/// and reason.
pub(crate) async fn open(session: &Session, line: &mut Line) -> Result<TcpStream, NotOpened> {
    let addrs = match session
        .policy
        .decide(&line.host, line.port, &session.narrowing)
        .await
    {
        Ok(addrs) => addrs,
        Err(reason) => {
            line.outcome = "refused";
            line.reason = Some(reason);
            return Err(NotOpened::Refused);
        }
    };
    match session.connect(&addrs).await {
        Ok(stream) => {
            line.address = stream.peer_addr().ok();
            Ok(stream)
        }
        Err(reason) => {
            line.outcome = "failed";
            line.reason = Some(reason);
            Err(NotOpened::Failed)
        }
    }
}

/// Carries a tunnel's bytes once the client was told it is open: on port 443 the client's
/// first bytes must be a TLS ClientHello naming the host it asked for (no fronting).
pub(crate) async fn tunnel(
    mut client: TcpStream,
    mut upstream: TcpStream,
    session: &Session,
    line: &mut Line,
) {
    if line.port == 443 {
        match sni::client_hello(&mut client).await {
            Ok((hello, name)) => {
                if let Err(reason) = sni::matches(&line.host, name.as_deref()) {
                    line.outcome = "refused";
                    line.reason = Some(reason);
                    return;
                }
                if !session.spend(hello.len()) {
                    line.outcome = "refused";
                    line.reason = Some(BUDGET_SPENT.into());
                    return;
                }
                if upstream.write_all(&hello).await.is_err() {
                    line.outcome = "failed";
                    line.reason = Some("writing to the host failed".into());
                    return;
                }
                line.bytes_out
                    .fetch_add(hello.len() as u64, Ordering::Relaxed);
            }
            Err(reason) => {
                line.outcome = "refused";
                line.reason = Some(reason);
                return;
            }
        }
    }
    relay(client, upstream, session, line).await;
}

const BUDGET_SPENT: &str = "the process's byte budget is spent";

/// Carries bytes both ways until both sides ended, or the budget is spent.
pub(crate) async fn relay(
    client: TcpStream,
    upstream: TcpStream,
    session: &Session,
    line: &mut Line,
) {
    let (client_read, client_write) = client.into_split();
    let (upstream_read, upstream_write) = upstream.into_split();
    let out = pump(client_read, upstream_write, session, &line.bytes_out);
    let back = pump(upstream_read, client_write, session, &line.bytes_in);
    tokio::pin!(out, back);
    let (mut sent, mut received, mut cut) = (false, false, false);
    while !(cut || (sent && received)) {
        tokio::select! {
            done = &mut out, if !sent => {
                sent = true;
                cut = done;
            }
            done = &mut back, if !received => {
                received = true;
                cut = done;
                // The server's side ended and all of it reached the client: a process that
                // closes before its own side does leaves this connection served, not cut.
                if !done {
                    line.outcome = "ok";
                }
            }
        }
    }
    line.outcome = "ok";
    if cut {
        line.outcome = "refused";
        line.reason = Some(BUDGET_SPENT.into());
    }
}

/// Copies `from` to `to` until the end of `from`, counting in `count`; whether the budget cut
/// it short.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    session: &Session,
    count: &AtomicU64,
) -> bool {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if !session.spend(n) {
            return true;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
        count.fetch_add(n as u64, Ordering::Relaxed);
    }
    let _ = to.shutdown().await;
    false
}
