//! The pieces of an egress policy: host patterns with their ports, the destination a process
//! asks for, and the address ranges a name must not resolve into unless listed.

use std::fmt;
use std::io;
use std::net::IpAddr;

/// The ports a rule covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ports {
    /// 80 and 443, when a rule names no port.
    Web,
    /// One port.
    One(u16),
    /// Every port (`:*`).
    Any,
}

impl Ports {
    fn covers(self, port: u16) -> bool {
        match self {
            Ports::Web => port == 80 || port == 443,
            Ports::One(p) => p == port,
            Ports::Any => true,
        }
    }
}

/// What a rule matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Pattern {
    /// One name, exactly (lower case, no trailing dot).
    Name(String),
    /// Every name strictly below this suffix (`*.example.com`: `a.example.com`,
    /// `a.b.example.com`, never `example.com` itself).
    Below(String),
    /// An address range: an address and a prefix length.
    Range(IpAddr, u8),
}

/// One `--exec-allow-host` or `--exec-deny-host`: a pattern and its ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRule {
    pub(crate) pattern: Pattern,
    pub(crate) ports: Ports,
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pattern {
            Pattern::Name(name) => write!(f, "{name}")?,
            Pattern::Below(suffix) => write!(f, "*.{suffix}")?,
            Pattern::Range(IpAddr::V4(a), len) => write!(f, "{a}/{len}")?,
            Pattern::Range(IpAddr::V6(a), len) => write!(f, "[{a}]/{len}")?,
        }
        match self.ports {
            Ports::Web => Ok(()),
            Ports::One(p) => write!(f, ":{p}"),
            Ports::Any => write!(f, ":*"),
        }
    }
}

fn malformed(text: &str, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("host pattern {text:?}: {why}"),
    )
}

impl HostRule {
    /// Parses `PATTERN[:PORT]`: PATTERN an exact name, `*.suffix`, an address (`10.0.0.1`,
    /// `[fd00::1]`) or a range (`10.0.0.0/8`, `[fd00::]/8`); PORT a number or `*`, 80 and 443
    /// when absent.
    ///
    /// # Errors
    ///
    /// `InvalidInput` naming the pattern and what is wrong with it.
    pub fn parse(text: &str) -> io::Result<Self> {
        let text = text.trim();
        let (pattern, port) = split_port(text).map_err(|why| malformed(text, why))?;
        let ports = match port {
            None => Ports::Web,
            Some("*") => Ports::Any,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => Ports::One(n),
                _ => return Err(malformed(text, "the port is not a number from 1 to 65535")),
            },
        };
        let pattern = parse_pattern(pattern).map_err(|why| malformed(text, why))?;
        Ok(Self { pattern, ports })
    }

    /// Whether the rule covers `target` on `port`.
    pub(crate) fn covers(&self, target: &Target, port: u16) -> bool {
        self.ports.covers(port)
            && match (&self.pattern, target) {
                (Pattern::Name(n), Target::Name(t)) => n == t,
                (Pattern::Below(s), Target::Name(t)) => t
                    .strip_suffix(s.as_str())
                    .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
                (Pattern::Range(net, len), Target::Address(a)) => in_range(*a, *net, *len),
                _ => false,
            }
    }

    /// Whether the rule is a range holding `addr` on `port`.
    pub(crate) fn holds(&self, addr: IpAddr, port: u16) -> bool {
        self.covers(&Target::Address(addr), port)
    }
}

/// Splits `PATTERN[:PORT]`; an IPv6 address is bracketed (`[::1]:443`, `[fd00::]/8:443`).
fn split_port(text: &str) -> Result<(&str, Option<&str>), &'static str> {
    if let Some(rest) = text.strip_prefix('[') {
        let close = rest.find(']').ok_or("an IPv6 address lacks its `]`")?;
        let after = &rest[close + 1..];
        let (len, port) = match after.split_once(':') {
            Some((len, port)) => (len, Some(port)),
            None => (after, None),
        };
        if !(len.is_empty() || len.starts_with('/')) {
            return Err("unexpected text after `]`");
        }
        return Ok((&text[..close + 2 + len.len()], port));
    }
    match text.split_once(':') {
        Some((pattern, port)) => Ok((pattern, Some(port))),
        None => Ok((text, None)),
    }
}

fn parse_pattern(text: &str) -> Result<Pattern, &'static str> {
    if text.is_empty() {
        return Err("empty");
    }
    if let Some(suffix) = text.strip_prefix("*.") {
        let name = normal_name(suffix).ok_or("`*.` must be followed by a host name")?;
        return Ok(Pattern::Below(name));
    }
    if text.contains('*') {
        return Err("`*` only as the first label (`*.example.com`)");
    }
    let (addr, len) = match text.split_once('/') {
        Some((addr, len)) => (addr, Some(len)),
        None => (text, None),
    };
    let bare = addr.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        if ip.is_ipv6() != addr.starts_with('[') {
            return Err("an IPv6 address is written in brackets, an IPv4 one without");
        }
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(len) => match len.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => return Err("the prefix length is out of range"),
            },
        };
        if masked(ip, len) != ip {
            return Err("the range has bits set past its prefix length");
        }
        return Ok(Pattern::Range(ip, len));
    }
    if len.is_some() {
        return Err("a prefix length needs an address");
    }
    if looks_numeric(text) {
        return Err("not an address in dotted-decimal form, nor a host name");
    }
    normal_name(text)
        .map(Pattern::Name)
        .ok_or("not a host name (letters, digits, `-` and `_` in dot-separated labels)")
}

/// A host name in the form rules compare: lower case, without a trailing dot; `None` unless
/// every label is 1 to 63 letters, digits, `-` or `_` and the whole at most 253 characters.
pub(crate) fn normal_name(text: &str) -> Option<String> {
    let text = text.strip_suffix('.').unwrap_or(text);
    let ok = !text.is_empty()
        && text.len() <= 253
        && text.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    ok.then(|| text.to_ascii_lowercase())
}

/// A name whose last label is a number (`2130706433`, `127.1`, `0x7f.1`): the C library would
/// read it as an address, so it is never taken as a name.
fn looks_numeric(text: &str) -> bool {
    let text = text.strip_suffix('.').unwrap_or(text);
    let last = text.rsplit('.').next().unwrap_or(text);
    let hex = last
        .strip_prefix("0x")
        .or_else(|| last.strip_prefix("0X"))
        .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    hex || (!last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()))
}

/// Where a process asks to connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// A host name, normalised.
    Name(String),
    /// An address literal.
    Address(IpAddr),
}

impl Target {
    /// The destination a client named: an address literal (IPv6 bracketed or not) or a host
    /// name; `None` for anything else, numbers the C library would read as an address
    /// included.
    pub(crate) fn parse(host: &str) -> Option<Self> {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Some(Target::Address(unmapped(ip)));
        }
        if looks_numeric(host) {
            return None;
        }
        normal_name(host).map(Target::Name)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Name(n) => f.write_str(n),
            Target::Address(a) => write!(f, "{a}"),
        }
    }
}

/// An IPv4 address carried in IPv6 (`::ffff:a.b.c.d`) is that IPv4 address.
pub(crate) fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

fn masked(ip: IpAddr, len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let bits = u32::from(a);
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            IpAddr::V4((bits & mask).into())
        }
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            IpAddr::V6((bits & mask).into())
        }
    }
}

fn in_range(addr: IpAddr, net: IpAddr, len: u8) -> bool {
    addr.is_ipv4() == net.is_ipv4() && masked(addr, len) == masked(net, len)
}

/// Ranges a name must not resolve into unless a rule lists them: the host's own and private
/// networks, link-local (cloud metadata at 169.254.169.254 included), shared and
/// unspecified addresses, multicast, and their IPv6 counterparts and tunnels (`fd00:ec2::254`, the
/// metadata address of some clouds, is unique-local).
const SPECIAL: &[(&str, u8)] = &[
    ("0.0.0.0", 8),
    ("10.0.0.0", 8),
    ("100.64.0.0", 10),
    ("127.0.0.0", 8),
    ("169.254.0.0", 16),
    ("172.16.0.0", 12),
    ("192.0.0.0", 24),
    ("192.168.0.0", 16),
    ("198.18.0.0", 15),
    ("224.0.0.0", 4),
    ("240.0.0.0", 4),
    ("::", 128),
    ("::1", 128),
    ("64:ff9b::", 96),
    // 6to4 and Teredo carry an IPv4 address inside: a relay could reach a private one.
    ("2001::", 32),
    ("2002::", 16),
    ("fc00::", 7),
    ("fe80::", 10),
    ("ff00::", 8),
];

/// Whether `addr` is in one of the special ranges.
pub(crate) fn is_special(addr: IpAddr) -> bool {
    let addr = unmapped(addr);
    SPECIAL.iter().any(|(net, len)| {
        let net: IpAddr = net.parse().expect("the table holds addresses");
        in_range(addr, net, *len)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> HostRule {
        HostRule::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn name(text: &str) -> Target {
        Target::parse(text).expect("a target")
    }

    #[test]
    fn patterns_parse_and_print_back() {
        for text in [
            "example.com",
            "*.example.com",
            "example.com:8080",
            "example.com:*",
            "10.0.0.0/8",
            "127.0.0.5:9000",
            "[fd00::]/8:443",
            "[::1]",
        ] {
            let printed = rule(text).to_string();
            let again = if text == "[::1]" { "[::1]/128" } else { text };
            let expected = match text {
                "127.0.0.5:9000" => "127.0.0.5/32:9000",
                _ => again,
            };
            assert_eq!(printed, expected);
        }
    }

    #[test]
    fn malformed_patterns_are_refused() {
        for text in [
            "",
            "*",
            "a.*.com",
            "exa mple.com",
            "example.com:0",
            "example.com:70000",
            "example.com:http",
            "10.0.0.1/8",
            "10.0.0.0/33",
            "::1",
            "[10.0.0.1]",
            "2130706433",
            "127.1",
            "0x7f.1",
            "-a.com",
            "a..com",
            "host/8",
        ] {
            assert!(HostRule::parse(text).is_err(), "{text:?} was accepted");
        }
    }

    #[test]
    fn names_match_exactly_or_strictly_below() {
        assert!(rule("example.com").covers(&name("EXAMPLE.com."), 443));
        assert!(!rule("example.com").covers(&name("a.example.com"), 443));
        assert!(!rule("example.com").covers(&name("example.com"), 8080));
        assert!(rule("*.example.com").covers(&name("a.b.example.com"), 80));
        assert!(!rule("*.example.com").covers(&name("example.com"), 80));
        assert!(!rule("*.example.com").covers(&name("badexample.com"), 80));
        assert!(rule("example.com:*").covers(&name("example.com"), 22));
        assert!(!rule("example.com").covers(&name("127.0.0.1"), 443));
        assert!(rule("127.0.0.0/8:*").covers(&name("127.0.0.5"), 1));
        assert!(rule("127.0.0.0/8:*").covers(&name("[::ffff:127.0.0.5]"), 1));
    }

    #[test]
    fn numbers_the_c_library_reads_as_addresses_are_no_names() {
        for text in ["2130706433", "127.1", "0x7f.1", "0177.0.0.1", "1.2.3.4.5"] {
            assert_eq!(Target::parse(text), None, "{text}");
        }
    }

    #[test]
    fn special_ranges_hold_metadata_loopback_and_private_addresses() {
        for text in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            assert!(is_special(text.parse().expect("addr")), "{text}");
        }
        for text in ["93.184.216.34", "2606:2800:220:1::1", "8.8.8.8"] {
            assert!(!is_special(text.parse().expect("addr")), "{text}");
        }
    }
}
