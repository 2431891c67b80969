//! The Landlock ruleset of one process, built in the parent: every file-system right the
//! kernel knows is handled, so whatever no rule grants is refused; TCP binds and connects are
//! handled unless the process may use the host's network; signals and abstract UNIX sockets
//! are scoped to the process's own domain.

use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access as _, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};

use super::policy::Network;
use crate::error;
use crate::sandbox::{Access, Root};

/// The oldest ABI enforced as a whole: TCP rules (4), ioctls on devices (5), signal and
/// abstract socket scopes (6). A kernel without it refuses processes.
const REQUIRED_ABI: ABI = ABI::V6;

/// The newest ABI this crate knows; rights beyond the kernel's are left out, never faked.
const BEST_ABI: ABI = ABI::V10;

/// What a shell and common tools read and execute beyond the roots: the system's programs and
/// libraries, and the few files of `/etc` the loader, the C library's name services and a
/// terminal need. Never `/etc` as a whole (it holds `shadow`, keys, credentials).
pub(crate) const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/inputrc",
    "/etc/terminfo",
    "/etc/ssl/certs",
    // What the system is (pip reads it for its user agent); no secret.
    "/etc/debian_version",
    "/etc/os-release",
];

/// Devices a process may open for reading and writing.
pub(crate) const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// What a process may reach beyond its roots besides the system set.
pub(crate) struct Reach<'a> {
    /// The roots, by their open handles (identity, not path).
    pub roots: &'a [Root],
    /// The process's private temporary directory.
    pub temp: &'a dyn AsFd,
    /// Its session's private home, if it has one.
    pub home: Option<&'a dyn AsFd>,
    /// Extra read-only paths from the policy.
    pub read_only: &'a [PathBuf],
    /// The network policy.
    pub network: Network,
    /// The process reaches the network through its egress proxy: TCP is handled as for
    /// [`Network::None`], and connecting to the proxy's two ports (and transparent TCP's) is
    /// all that is granted.
    pub proxy: bool,
    /// Transparent TCP: the ports it listens on, which the process may connect to too (on
    /// any address: every IPv4 address of its namespace is local, and nothing else is
    /// routed).
    pub transparent_ports: &'a [u16],
    /// The file bound over `/etc/resolv.conf` (transparent TCP), which it may read.
    pub resolv_conf: Option<&'a dyn AsFd>,
}

/// Fails unless the kernel enforces [`REQUIRED_ABI`] and, for `network`, its TCP rules.
pub(crate) fn probe(network: Network) -> io::Result<()> {
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(REQUIRED_ABI))
        .and_then(|r| handled_network(r, network))
        .and_then(|r| r.scope(Scope::AbstractUnixSocket | Scope::Signal))
        .and_then(Ruleset::create)
        .map(drop)
        .map_err(refused)
}

/// The ruleset for one process, ready for `landlock_restrict_self` in the child.
pub(crate) fn ruleset(reach: &Reach<'_>) -> io::Result<RulesetCreated> {
    let all = AccessFs::from_all(BEST_ABI);
    let read = AccessFs::from_read(BEST_ABI);
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(REQUIRED_ABI))
        .map_err(refused)?
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(refused)?
        .set_compatibility(CompatLevel::HardRequirement);
    let network = if reach.proxy {
        Network::None
    } else {
        reach.network
    };
    let ruleset = handled_network(ruleset, network)
        .and_then(|r| r.scope(Scope::AbstractUnixSocket | Scope::Signal))
        .and_then(Ruleset::create)
        .map_err(refused)?
        // Rights a path cannot carry (directory rights on a file) are dropped from its rule.
        .set_compatibility(CompatLevel::BestEffort);
    let mut ruleset = ruleset;
    if reach.proxy {
        let proxies = [
            super::egress::HTTP_PROXY_PORT,
            super::egress::SOCKS_PROXY_PORT,
        ];
        for port in proxies.iter().chain(reach.transparent_ports).copied() {
            ruleset = ruleset
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                .map_err(refused)?;
        }
    }
    for root in reach.roots {
        let access = match root.access() {
            Access::ReadWrite => all,
            Access::ReadOnly => read,
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(root.dir().as_fd(), access))
            .map_err(refused)?;
    }
    if let Some(file) = reach.resolv_conf {
        ruleset = ruleset
            .add_rule(PathBeneath::new(file.as_fd(), AccessFs::ReadFile))
            .map_err(refused)?;
    }
    for private in std::iter::once(reach.temp).chain(reach.home) {
        ruleset = ruleset
            .add_rule(PathBeneath::new(private.as_fd(), all))
            .map_err(refused)?;
    }
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev;
    let system = SYSTEM_READ.iter().map(|p| (Path::new(*p), read));
    let devices = DEVICES.iter().map(|p| (Path::new(*p), device));
    let proc_read = AccessFs::ReadFile | AccessFs::ReadDir;
    let procfs = std::iter::once((Path::new("/proc"), proc_read));
    let extra = reach.read_only.iter().map(|p| (p.as_path(), read));
    for (path, access) in system.chain(devices).chain(procfs) {
        // The system set is what exists here; a missing entry is simply not granted.
        if let Ok(fd) = PathFd::new(path) {
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, access))
                .map_err(refused)?;
        }
    }
    for (path, access) in extra {
        let fd = PathFd::new(path).map_err(|e| error::grant_missing(path, e))?;
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(refused)?;
    }
    Ok(ruleset)
}

/// TCP binds and connects handled (so refused, no port being granted) unless the host's
/// network is allowed; in a namespace of its own the process's loopback is its own, but
/// refusing TCP there too would break `Loopback`, so only `None` handles them.
fn handled_network(ruleset: Ruleset, network: Network) -> Result<Ruleset, landlock::RulesetError> {
    match network {
        Network::None => {
            let tcp: BitFlags<AccessNet> = AccessNet::BindTcp | AccessNet::ConnectTcp;
            ruleset.handle_access(tcp)
        }
        Network::Loopback | Network::All => Ok(ruleset),
    }
}

fn refused(err: impl std::fmt::Display) -> io::Error {
    error::landlock_refused(err)
}
