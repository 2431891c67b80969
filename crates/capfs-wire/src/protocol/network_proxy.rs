//! codex's managed network as `process/start` carries it (`networkProxy`, codex's
//! `RemoteNetworkProxyLaunchConfig`): the configuration of a proxy codex would have the
//! executor launch for the process. capfs holds its domains as a narrowing of the server's own
//! egress policy. Serde only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `networkProxy`: the proxy's configuration, and whether codex asks for transparent TCP
/// (which capfs does not serve, nor advertise).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct NetworkProxyLaunch {
    /// The proxy's settings.
    #[serde(default)]
    pub proxy: RemoteNetworkProxy,
    /// Redirect every TCP connection to the proxy (codex 0.171, `transparent_tcp`).
    #[serde(default)]
    pub transparent_tcp: bool,
}

/// codex's `RemoteNetworkProxyConfig`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct RemoteNetworkProxy {
    /// The managed network is on; off, the process gets no network.
    #[serde(default)]
    pub enabled: bool,
    /// A SOCKS5 listener beside the HTTP one (capfs always has one).
    #[serde(default)]
    pub enable_socks5: bool,
    /// UDP through SOCKS5 (capfs has none: UDP ASSOCIATE is refused, so asking for it only
    /// narrows).
    #[serde(default)]
    pub enable_socks5_udp: bool,
    /// Chain to an upstream proxy (ignored: capfs connects itself).
    #[serde(default)]
    pub allow_upstream_proxy: bool,
    /// Any UNIX socket (refused when asked: capfs's processes have none of the host's).
    #[serde(default)]
    pub dangerously_allow_all_unix_sockets: bool,
    /// `full`, or `limited`: only plain-HTTP reading methods, no tunnel.
    #[serde(default)]
    pub mode: Option<String>,
    /// Domain patterns (`example.com`, `*.example.com`, `**.example.com`, `*`) with
    /// `allow` or `deny`.
    #[serde(default)]
    pub domains: Option<BTreeMap<String, String>>,
    /// UNIX sockets by path (refused when any is asked for).
    #[serde(default)]
    pub unix_sockets: Option<serde_json::Value>,
    /// Loopback and private destinations (codex's proxy refuses them unless this is on; off,
    /// capfs refuses them too, even where the operator pins or lists them).
    #[serde(default)]
    pub allow_local_binding: bool,
}
