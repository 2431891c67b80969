//! Network egress by name: an operator's list of hosts processes may reach, enforced by a
//! proxy of capfs's own that each process reaches inside its network namespace (its only way
//! out: the namespace has nothing but its loopback, and Landlock lets the process connect to
//! the proxy's two ports only).
//!
//! [`EgressPolicy`] is the list and its matching: allow and deny rules (deny wins), names
//! pinned to addresses (curl's `--resolve`), a [`Resolver`] for the rest, and the bounds of
//! one process's connections. Names are resolved outside the process, by capfs; an address a
//! name resolves to in a loopback, private, link-local or metadata range is refused unless a
//! rule lists that range.
//!
//! With transparent TCP ([`EgressPolicy::with_transparent_tcp`]) a process also gets a DNS
//! responder (`dns.rs`) that gives allowed names addresses of [`SYNTHETIC_RANGE`] and asks no
//! one, and listeners on the allowed ports that receive every IPv4 connection of the process
//! (every such address is local to its namespace); `transparent.rs` maps the address dialled
//! back to its name and goes on as the proxies do (`relay.rs`).

mod dns;
mod hello;
mod proxy;
mod relay;
mod rules;
mod session;
mod sni;
mod socks;
mod transparent;
mod web;

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use async_trait::async_trait;

use crate::audit::AuditLog;

pub(crate) use proxy::Proxy;
pub use rules::HostRule;
use rules::Target;

/// The port of the HTTP proxy inside a process's network namespace.
pub const HTTP_PROXY_PORT: u16 = 3128;
/// The port of the SOCKS5 proxy inside a process's network namespace.
pub const SOCKS_PROXY_PORT: u16 = 1080;

/// Where the DNS responder of transparent TCP listens inside a process's network namespace
/// (UDP port 53): the C library's resolver when `/etc/resolv.conf` names no server, and what
/// the process's `/etc/resolv.conf` names.
pub const DNS_ADDRESS: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// The most ports transparent TCP listens on (80, 443 and the ports of the allow rules).
pub const MAX_TRANSPARENT_PORTS: usize = 32;

/// The range the DNS responder of transparent TCP answers allowed names from (198.18.0.0/15,
/// reserved for benchmarking, RFC 2544): its addresses exist only inside a process's own
/// network namespace, where every IPv4 address is local.
pub const SYNTHETIC_RANGE: (Ipv4Addr, u8) = (Ipv4Addr::new(198, 18, 0, 0), 15);

/// Resolves host names for the proxy, outside the processes.
#[async_trait]
pub trait Resolver: Send + Sync + fmt::Debug {
    /// The addresses of `name` (normalised: lower case, no trailing dot) for `port`.
    async fn lookup(&self, name: &str, port: u16) -> io::Result<Vec<IpAddr>>;
}

/// The C library's resolver (`getaddrinfo`: `/etc/hosts`, then DNS), on tokio's threads.
#[derive(Debug, Default)]
pub struct SystemResolver;

#[async_trait]
impl Resolver for SystemResolver {
    async fn lookup(&self, name: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        let found = tokio::net::lookup_host((name, port)).await?;
        Ok(found.map(|a| a.ip()).collect())
    }
}

/// A name pinned to addresses by the operator, as curl's `--resolve NAME:PORT:ADDR[,ADDR]`.
/// Pinned addresses are the operator's word: no range is refused for them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pinned {
    name: String,
    /// `None` for `*`: every port.
    port: Option<u16>,
    addrs: Vec<IpAddr>,
}

impl Pinned {
    /// Parses `NAME:PORT:ADDR[,ADDR...]`, PORT a number or `*`, an IPv6 ADDR bracketed or not.
    ///
    /// # Errors
    ///
    /// `InvalidInput` naming the entry and what is wrong with it.
    pub fn parse(text: &str) -> io::Result<Self> {
        let bad = |why: &str| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("resolve entry {text:?}: {why} (NAME:PORT:ADDR)"),
            )
        };
        let mut parts = text.trim().splitn(3, ':');
        let (Some(name), Some(port), Some(addrs)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("three parts are needed"));
        };
        let name = match Target::parse(name) {
            Some(Target::Name(name)) => name,
            _ => return Err(bad("the name is not a host name")),
        };
        let port = match port {
            "*" => None,
            p => Some(
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| bad("the port is not a number from 1 to 65535 nor `*`"))?,
            ),
        };
        let addrs = addrs
            .split(',')
            .map(|a| {
                let a = a.trim();
                let bare = a
                    .strip_prefix('[')
                    .and_then(|a| a.strip_suffix(']'))
                    .unwrap_or(a);
                bare.parse::<IpAddr>()
                    .map(rules::unmapped)
                    .map_err(|_| bad("an address is not an IP address"))
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Self { name, port, addrs })
    }
}

/// A client's narrowing of the operator's policy for one process (codex's managed network
/// domains): it can only take away.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EgressNarrowing {
    /// When set, only destinations one of these also covers pass.
    pub allow: Option<Vec<HostRule>>,
    /// Destinations refused on top of the operator's.
    pub deny: Vec<HostRule>,
    /// Reading only (codex's `limited` mode): plain-HTTP `GET`, `HEAD` and `OPTIONS`; no
    /// tunnel (`CONNECT`, SOCKS), whose contents the proxy cannot see.
    pub read_only: bool,
    /// No loopback, private, link-local or metadata address, whatever the operator allows or
    /// pins (codex's `allowLocalBinding: false`, its default).
    pub local_refused: bool,
}

impl EgressNarrowing {
    /// Only what `allow` covers (everything the operator allows when `None`), and nothing
    /// `deny` covers.
    pub fn new(allow: Option<Vec<HostRule>>, deny: Vec<HostRule>) -> Self {
        Self {
            allow,
            deny,
            read_only: false,
            local_refused: false,
        }
    }

    /// The same, reading only.
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// The same, refusing every loopback, private, link-local and metadata address, even one
    /// the operator lists or pins.
    pub fn without_local(mut self) -> Self {
        self.local_refused = true;
        self
    }
}

/// The hosts processes may reach through their proxy, and its bounds.
///
/// # Examples
///
/// ```
/// use capfs::process::egress::EgressPolicy;
/// let policy = EgressPolicy::default()
///     .allow("*.pypi.org")?
///     .allow("files.pythonhosted.org")?
///     .deny("evil.pypi.org")?
///     .resolve("pypi.test:443:127.0.0.5")?;
/// assert!(policy.is_on());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct EgressPolicy {
    allow: Vec<HostRule>,
    deny: Vec<HostRule>,
    pinned: Vec<Pinned>,
    resolver: Arc<dyn Resolver>,
    pub(crate) max_connections: usize,
    pub(crate) max_bytes: u64,
    pub(crate) audit: Option<AuditLog>,
    pub(crate) transparent: bool,
}

impl Default for EgressPolicy {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            deny: Vec::new(),
            pinned: Vec::new(),
            resolver: Arc::new(SystemResolver),
            max_connections: 64,
            max_bytes: 4 << 30,
            audit: None,
            transparent: false,
        }
    }
}

impl EgressPolicy {
    /// Allows `PATTERN[:PORT]` ([`HostRule::parse`]).
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a malformed rule.
    pub fn allow(mut self, rule: &str) -> io::Result<Self> {
        self.allow.push(HostRule::parse(rule)?);
        Ok(self)
    }

    /// Refuses `PATTERN[:PORT]`, whatever allows it.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a malformed rule.
    pub fn deny(mut self, rule: &str) -> io::Result<Self> {
        self.deny.push(HostRule::parse(rule)?);
        Ok(self)
    }

    /// Pins `NAME:PORT:ADDR` ([`Pinned::parse`]): the proxy answers NAME with ADDR.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a malformed entry.
    pub fn resolve(mut self, entry: &str) -> io::Result<Self> {
        self.pinned.push(Pinned::parse(entry)?);
        Ok(self)
    }

    /// Adds the directives of a policy file: one a line, `allow PATTERN[:PORT]`,
    /// `deny PATTERN[:PORT]` or `resolve NAME:PORT:ADDR`; blank lines and lines starting with
    /// `#` are skipped.
    ///
    /// # Errors
    ///
    /// `InvalidInput` naming the first bad line.
    pub fn with_directives(mut self, text: &str) -> io::Result<Self> {
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |e: io::Error| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("line {}: {e}", number + 1),
                )
            };
            let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            self = match word {
                "allow" => self.allow(rest).map_err(at)?,
                "deny" => self.deny(rest).map_err(at)?,
                "resolve" => self.resolve(rest).map_err(at)?,
                _ => {
                    return Err(at(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{word:?} is not allow, deny or resolve"),
                    )));
                }
            };
        }
        Ok(self)
    }

    /// Resolves names with `resolver` instead of the C library's.
    pub fn with_resolver(mut self, resolver: Arc<dyn Resolver>) -> Self {
        self.resolver = resolver;
        self
    }

    /// The most connections one process may have open at once (64 by default).
    pub fn with_max_connections(mut self, max: usize) -> Self {
        self.max_connections = max;
        self
    }

    /// The most bytes, both ways, one process's connections may carry in all (4 GiB by
    /// default); past it its connections are cut and new ones refused.
    pub fn with_max_bytes(mut self, max: u64) -> Self {
        self.max_bytes = max;
        self
    }

    /// Writes one line per connection, allowed or refused, to `audit`.
    pub fn with_audit(mut self, audit: AuditLog) -> Self {
        self.audit = Some(audit);
        self
    }

    /// Transparent TCP: besides its proxies, each process gets a DNS responder on its own
    /// loopback that answers the names the policy allows with addresses of its own
    /// ([`SYNTHETIC_RANGE`]), and every IPv4 address of its network namespace is local, so that
    /// a tool that ignores the proxy variables and connects to such an address on an allowed
    /// port reaches capfs, which decides it as it decides a `CONNECT` to the name.
    pub fn with_transparent_tcp(mut self) -> Self {
        self.transparent = true;
        self
    }

    /// Whether transparent TCP is on.
    pub fn transparent_tcp(&self) -> bool {
        self.transparent
    }

    /// The ports transparent TCP listens on: 80, 443 and every port an allow rule names (a
    /// rule for every port adds none), less the proxies' own; sorted.
    pub fn transparent_ports(&self) -> Vec<u16> {
        let mut ports = vec![80, 443];
        for rule in &self.allow {
            if let rules::Ports::One(port) = rule.ports {
                ports.push(port);
            }
        }
        ports.retain(|p| ![HTTP_PROXY_PORT, SOCKS_PROXY_PORT].contains(p));
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// Whether the policy allows anything: a policy with no allow rule is no egress at all.
    pub fn is_on(&self) -> bool {
        !self.allow.is_empty()
    }

    /// The allow rules.
    pub fn allowed(&self) -> &[HostRule] {
        &self.allow
    }

    /// Decides a connection to `host` (a name or an address literal) on `port` under
    /// `narrowing`: the addresses to try, or why it is refused.
    pub(crate) async fn decide(
        &self,
        host: &str,
        port: u16,
        narrowing: &EgressNarrowing,
    ) -> Result<Vec<SocketAddr>, String> {
        let target = Target::parse(host).ok_or("not a host name or an IP address")?;
        self.admits(&target, port, narrowing)?;
        let denied = self.deny.iter().chain(&narrowing.deny);
        let name = match target {
            Target::Address(addr) if narrowing.local_refused && rules::is_special(addr) => {
                return Err(LOCAL_REFUSED.into());
            }
            Target::Address(addr) => return Ok(vec![SocketAddr::new(addr, port)]),
            Target::Name(name) => name,
        };
        let pinned = self
            .pinned
            .iter()
            .find(|p| p.name == name && p.port.is_none_or(|p| p == port));
        let (addrs, checked) = match pinned {
            Some(pinned) => (pinned.addrs.clone(), false),
            None => (
                self.resolver
                    .lookup(&name, port)
                    .await
                    .map_err(|e| format!("not resolved: {e}"))?,
                true,
            ),
        };
        let found = addrs.len();
        let kept: Vec<SocketAddr> = addrs
            .into_iter()
            .map(rules::unmapped)
            .filter(|a| !denied.clone().any(|r| r.holds(*a, port)))
            .filter(|a| {
                !checked || !rules::is_special(*a) || self.allow.iter().any(|r| r.holds(*a, port))
            })
            .filter(|a| !narrowing.local_refused || !rules::is_special(*a))
            .map(|a| SocketAddr::new(a, port))
            .collect();
        if kept.is_empty() {
            return Err(match found {
                0 => "no address".into(),
                _ if narrowing.local_refused => LOCAL_REFUSED.into(),
                _ => "resolves only to refused addresses (loopback, private, link-local, metadata or denied)".into(),
            });
        }
        Ok(kept)
    }

    /// The rules alone, before any name is resolved: whether `target` on `port` is allowed
    /// under `narrowing`, or why not.
    fn admits(
        &self,
        target: &Target,
        port: u16,
        narrowing: &EgressNarrowing,
    ) -> Result<(), String> {
        let denied = self.deny.iter().chain(&narrowing.deny);
        if denied.clone().any(|r| r.covers(target, port)) {
            return Err("denied".into());
        }
        let allowed = self.allow.iter().any(|r| r.covers(target, port))
            && narrowing
                .allow
                .as_ref()
                .is_none_or(|rules| rules.iter().any(|r| r.covers(target, port)));
        if !allowed {
            return Err("not allowed".into());
        }
        Ok(())
    }

    /// Whether the DNS responder of transparent TCP answers `name` (normalised): the rules
    /// admit it on one of `ports`. Nothing is resolved.
    pub(crate) fn answers(&self, name: &str, ports: &[u16], narrowing: &EgressNarrowing) -> bool {
        let target = Target::Name(name.to_string());
        ports
            .iter()
            .any(|port| self.admits(&target, *port, narrowing).is_ok())
    }
}

/// Why a connection to a local address is refused under a narrowing without local addresses.
const LOCAL_REFUSED: &str = "a loopback, private or link-local address, which the client's \
                             managed network refuses (allowLocalBinding is off)";

/// The variables that point a process's tools at its proxy, in both cases; `NO_PROXY` keeps
/// them off the process's own loopback, which the proxy could not reach.
pub(crate) fn environment() -> Vec<(String, String)> {
    let http = format!("http://127.0.0.1:{HTTP_PROXY_PORT}");
    let socks = format!("socks5h://127.0.0.1:{SOCKS_PROXY_PORT}");
    let mut vars = Vec::new();
    for (name, value) in [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("ALL_PROXY", &socks),
        ("NO_PROXY", &"localhost,127.0.0.1,::1".to_string()),
    ] {
        vars.push((name.to_string(), value.clone()));
        vars.push((name.to_ascii_lowercase(), value.clone()));
    }
    vars
}

#[cfg(test)]
mod tests;
