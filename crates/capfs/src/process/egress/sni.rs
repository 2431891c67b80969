//! The name a TLS client asks for, read from its ClientHello (`hello.rs`), so that a tunnel
//! to an allowed host cannot carry a connection meant for another one behind the same address
//! (domain fronting).

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::hello::{self, Hello, MAX_HELLO};
use super::rules::{Target, normal_name};

/// How long the client has to send it.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads the client's first bytes up to a whole ClientHello: the bytes, to pass on, and the
/// server name it asks for.
pub(crate) async fn client_hello(
    client: &mut TcpStream,
) -> Result<(Vec<u8>, Option<String>), String> {
    match tokio::time::timeout(HELLO_TIMEOUT, read_hello(client)).await {
        Ok(read) => read,
        Err(_) => Err("no TLS ClientHello in time".into()),
    }
}

async fn read_hello(client: &mut TcpStream) -> Result<(Vec<u8>, Option<String>), String> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if seen.len() > MAX_HELLO + 1024 {
            return Err("the TLS ClientHello is too large".into());
        }
        let n = client
            .read(&mut buf)
            .await
            .map_err(|e| format!("reading the TLS ClientHello: {e}"))?;
        if n == 0 {
            return Err("the client sent no TLS ClientHello".into());
        }
        seen.extend_from_slice(&buf[..n]);
        match hello::parse(&seen).map_err(|e| format!("not a TLS ClientHello: {e}"))? {
            Hello::Incomplete => {}
            Hello::Complete(name) => return Ok((seen, name)),
        }
    }
}

/// Whether a ClientHello naming `sni` may go to `host`: a name must be asked for by that very
/// name; an address literal by none.
pub(crate) fn matches(host: &str, sni: Option<&str>) -> Result<(), String> {
    match (Target::parse(host), sni) {
        (Some(Target::Name(name)), Some(sni)) if normal_name(sni).as_deref() == Some(&name) => {
            Ok(())
        }
        (Some(Target::Name(_)), None) => Err("the TLS ClientHello names no server".into()),
        (Some(Target::Address(_)), None) => Ok(()),
        (_, Some(sni)) => Err(format!(
            "the TLS ClientHello names {:?}, not the host asked for",
            crate::audit::cut(sni, 255)
        )),
        (None, None) => Err("not a host name or an IP address".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn the_client_hello_must_name_the_host_asked_for() {
        assert!(matches("pypi.test", Some("PYPI.test.")).is_ok());
        assert!(matches("pypi.test", Some("evil.test")).is_err());
        assert!(matches("pypi.test", None).is_err());
        assert!(matches("127.0.0.5", None).is_ok());
        assert!(matches("127.0.0.5", Some("pypi.test")).is_err());
    }
}
