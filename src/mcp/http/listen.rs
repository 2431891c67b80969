//! The `--listen` URL: `http://HOST:PORT/PATH` or `https://...`, the address it binds, and the
//! `Host` values that name it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// A parsed `--listen` URL.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) tls: bool,
    /// The host as written: a name, an IPv4 address or a bracketed IPv6 one.
    pub(super) host: String,
    pub(super) port: u16,
    /// The path the MCP endpoint answers at (`/` when none is given).
    pub(super) path: String,
}

/// Parses `url`.
pub(super) fn parse(url: &str) -> Result<Target, String> {
    let bad = |why: &str| format!("{url}: {why}; expected http://127.0.0.1:0/mcp or https://...");
    let (tls, rest) = if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else {
        return Err(bad("not http:// or https://"));
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if path.contains(['?', '#']) {
        return Err(bad("a query or fragment"));
    }
    let (host, port) = authority.rsplit_once(':').ok_or_else(|| bad("no port"))?;
    let port: u16 = port.parse().map_err(|_| bad("a bad port"))?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty()
        || host.contains('@')
        || (host.starts_with('[') && bare.parse::<IpAddr>().is_err())
    {
        return Err(bad("a bad host"));
    }
    Ok(Target {
        tls,
        host: host.to_ascii_lowercase(),
        port,
        path: if path.is_empty() {
            "/".into()
        } else {
            path.into()
        },
    })
}

impl Target {
    /// The IP address written as the host, if one is.
    fn ip(&self) -> Option<IpAddr> {
        self.host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .ok()
    }

    /// `scheme://host:port` with the port bound.
    pub(super) fn base(&self, port: u16) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}:{port}", self.host)
    }
}

/// The address to bind: the IP written, `localhost` as 127.0.0.1, else the name resolved.
pub(super) async fn resolve(target: &Target) -> Result<SocketAddr, String> {
    if let Some(ip) = target.ip() {
        return Ok(SocketAddr::new(ip, target.port));
    }
    if target.host == "localhost" {
        return Ok(SocketAddr::new(
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            target.port,
        ));
    }
    tokio::net::lookup_host((target.host.as_str(), target.port))
        .await
        .map_err(|e| format!("--listen: cannot resolve {}: {e}", target.host))?
        .next()
        .ok_or_else(|| format!("--listen: {} has no address", target.host))
}

/// The `Host` values that name the listener: its host as written and its address with the
/// port bound, the loopback names for a loopback address, and without the port when it is
/// the scheme's default.
pub(super) fn hosts(target: &Target, address: SocketAddr, port: u16) -> Vec<String> {
    let ip = match address.ip() {
        IpAddr::V6(v6) => format!("[{v6}]"),
        IpAddr::V4(v4) => v4.to_string(),
    };
    let mut names: Vec<String> = Vec::new();
    let loopback = ["localhost", "127.0.0.1", "[::1]"];
    let extra = if address.ip().is_loopback() {
        &loopback[..]
    } else {
        &[]
    };
    for name in [target.host.as_str(), &ip]
        .into_iter()
        .chain(extra.iter().copied())
    {
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    let default = if target.tls { 443 } else { 80 };
    let mut hosts: Vec<String> = names.iter().map(|n| format!("{n}:{port}")).collect();
    if port == default {
        hosts.extend(names);
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let t = parse("http://127.0.0.1:0/mcp").unwrap();
        assert_eq!(
            t,
            Target {
                tls: false,
                host: "127.0.0.1".into(),
                port: 0,
                path: "/mcp".into()
            }
        );
        assert_eq!(t.base(4711), "http://127.0.0.1:4711");
        let t = parse("https://[::1]:8443").unwrap();
        assert!(t.tls);
        assert_eq!(t.path, "/");
        assert_eq!(t.ip(), Some("::1".parse().unwrap()));
        for bad in [
            "ws://127.0.0.1:0",
            "http://127.0.0.1/mcp",
            "http://:80/",
            "http://a@b:1/",
            "http://h:1/p?q",
            "http://[zz]:1/",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hosts_name_the_listener_only() {
        let t = parse("http://127.0.0.1:0/mcp").unwrap();
        let names = hosts(&t, "127.0.0.1:0".parse().unwrap(), 5000);
        assert_eq!(names, ["127.0.0.1:5000", "localhost:5000", "[::1]:5000"]);
        let t = parse("https://mcp.example:443/mcp").unwrap();
        let names = hosts(&t, "192.0.2.7:443".parse().unwrap(), 443);
        assert_eq!(
            names,
            [
                "mcp.example:443",
                "192.0.2.7:443",
                "mcp.example",
                "192.0.2.7"
            ]
        );
    }
}
