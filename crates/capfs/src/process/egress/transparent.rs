//! Transparent TCP: a connection the process made to any IPv4 address on an allowed port,
//! accepted by capfs because every such address is local to the process's namespace. The
//! address it dialled (the accepted socket's own address) says where it meant to go: an
//! address of the synthetic range stands for the name the DNS responder gave it to, any other
//! address for itself, a literal. From there it is decided, connected, checked on 443 and
//! carried as a `CONNECT` to that name or address is.

use std::net::{IpAddr, Ipv4Addr};

use tokio::net::TcpStream;

use super::relay;
use super::session::{Line, Session};

/// Serves one transparent connection, filling its audit line. A refused one is closed
/// without a byte: the process sees its connection end.
pub(crate) async fn serve(client: TcpStream, session: &Session, line: &mut Line) {
    let dialled = match client.local_addr() {
        Ok(addr) => addr,
        Err(e) => {
            line.outcome = "failed";
            line.reason = Some(format!("the address dialled is unknown: {e}"));
            return;
        }
    };
    line.port = dialled.port();
    let ip = super::rules::unmapped(dialled.ip());
    line.host = ip.to_string();
    if let IpAddr::V4(v4) = ip
        && is_synthetic(v4)
    {
        let names = session.names.lock().unwrap_or_else(|e| e.into_inner());
        match names.name_of(v4) {
            Some(name) => line.host = name.to_string(),
            None => {
                line.outcome = "refused";
                line.reason = Some("an address capfs's DNS responder never gave".into());
                return;
            }
        }
    }
    if session.narrowing.read_only {
        line.outcome = "refused";
        line.reason = Some("reading only: no transparent connection".into());
        return;
    }
    let Ok(upstream) = relay::open(session, line).await else {
        return;
    };
    relay::tunnel(client, upstream, session, line).await;
}

/// Whether `addr` is in [`super::SYNTHETIC_RANGE`].
pub(crate) fn is_synthetic(addr: Ipv4Addr) -> bool {
    let (net, len) = super::SYNTHETIC_RANGE;
    let mask = u32::MAX << (32 - u32::from(len));
    u32::from(addr) & mask == u32::from(net)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_synthetic_range_is_198_18_slash_15() {
        assert!(is_synthetic(Ipv4Addr::new(198, 18, 0, 1)));
        assert!(is_synthetic(Ipv4Addr::new(198, 19, 255, 255)));
        assert!(!is_synthetic(Ipv4Addr::new(198, 20, 0, 1)));
        assert!(!is_synthetic(Ipv4Addr::new(127, 0, 0, 1)));
    }
}
