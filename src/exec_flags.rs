//! `capfs serve --exec`: the flags that turn the process methods on and choose the policy of
//! [`LocalProcesses`], and the implementation they make.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use capfs::Sandbox;
use capfs::process::egress::EgressPolicy;
use capfs::process::{Confinement, ExecutorProcesses, LocalProcesses, Network, ProcessPolicy};
use capfs_wire::server::ServedProcesses;

use crate::fail::{self, Failure};
use crate::parse::parse_duration;

/// What processes may reach on the network.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ExecNetwork {
    /// Nothing: no interface, no TCP.
    None,
    /// A loopback of their own, never the host's.
    Loopback,
    /// The host's network.
    All,
}

/// The process flags of `capfs serve`.
#[derive(Clone, Debug, clap::Args)]
pub struct ExecFlags {
    /// Serve the process methods (process/start and the rest): commands confined by the
    /// kernel to the roots.
    #[arg(long)]
    pub exec: bool,
    /// What processes may reach on the network.
    #[arg(long, value_enum, default_value = "none", requires = "exec")]
    pub exec_network: ExecNetwork,
    /// Where each session's private home (the HOME of its processes, kept across them and
    /// removed with the session) is made [default: the system's temporary directory].
    #[arg(long, value_name = "DIR", requires = "exec")]
    pub exec_homes: Option<PathBuf>,
    /// Another directory processes may read and execute, besides the roots and the system's
    /// (repeatable).
    #[arg(long, value_name = "PATH", requires = "exec")]
    pub exec_read: Vec<PathBuf>,
    /// End a process that runs longer than this (seconds, or with a unit: 10m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "exec")]
    pub exec_time_limit: Option<Duration>,
    /// Most processes running at once across the server.
    #[arg(long, value_name = "N", default_value_t = capfs_wire::server::DEFAULT_MAX_PROCESSES)]
    pub max_processes: usize,
    /// Most processes running at once for one connection (and its resumes).
    #[arg(
        long,
        value_name = "N",
        default_value_t = capfs_wire::server::DEFAULT_MAX_PROCESSES_PER_CONNECTION
    )]
    pub max_processes_per_connection: usize,
    /// A host processes may reach through their proxy, `PATTERN[:PORT]` (repeatable): a name,
    /// `*.suffix` (every name below it), an address or range (`10.0.0.0/8`, `[fd00::]/8`);
    /// PORT a number or `*`, 80 and 443 when absent. Any allow turns egress on.
    #[arg(long, value_name = "PATTERN[:PORT]", requires = "exec")]
    pub exec_allow_host: Vec<String>,
    /// A host refused whatever allows it, as for --exec-allow-host (repeatable).
    #[arg(long, value_name = "PATTERN[:PORT]", requires = "exec")]
    pub exec_deny_host: Vec<String>,
    /// Answer NAME with ADDR for processes' connections, as curl's --resolve (repeatable;
    /// PORT may be `*`): the operator's own address, no range refused for it.
    #[arg(long, value_name = "NAME:PORT:ADDR", requires = "exec")]
    pub exec_resolve: Vec<String>,
    /// A file of egress directives, one a line: `allow PATTERN[:PORT]`, `deny PATTERN[:PORT]`,
    /// `resolve NAME:PORT:ADDR`; `#` starts a comment line.
    #[arg(long, value_name = "FILE", requires = "exec")]
    pub exec_network_policy: Option<PathBuf>,
    /// Transparent TCP for the allowed hosts: a tool that ignores the proxy variables resolves
    /// names through capfs (a DNS responder in the process's namespace that answers allowed
    /// names only, and never asks anyone) and its connections to ports 80, 443 and the ports
    /// of the allow rules go through the same policy as the proxy's. Needs an allowed host.
    #[arg(long, requires = "exec")]
    pub exec_transparent_tcp: bool,
    /// Run processes without any confinement: they reach everything this server reaches.
    /// Only for measurements against an unconfined baseline.
    #[arg(long, requires = "exec")]
    pub exec_unconfined: bool,
}

pub fn parse_user(text: &str) -> Result<(u32, u32), String> {
    let number = |part: &str| {
        part.parse::<u32>()
            .map_err(|_| format!("{part:?} is not a user or group number"))
    };
    match text.split_once(':') {
        Some((uid, gid)) => Ok((number(uid)?, number(gid)?)),
        None => number(text).map(|uid| (uid, uid)),
    }
}

impl ExecFlags {
    /// The processes to serve over `sandbox` (the same roots as the file system), if `--exec`,
    /// with `egress` ([`ExecFlags::egress`]) when it allows anything.
    ///
    /// # Errors
    ///
    /// A usage failure when processes cannot be confined as asked (no Landlock, nested roots),
    /// naming why.
    pub fn processes(
        &self,
        sandbox: Sandbox,
        egress: Option<EgressPolicy>,
    ) -> Result<Option<ServedProcesses>, Failure> {
        if !self.exec {
            return Ok(None);
        }
        let mut policy = ProcessPolicy::default()
            .with_network(match self.exec_network {
                ExecNetwork::None => Network::None,
                ExecNetwork::Loopback => Network::Loopback,
                ExecNetwork::All => Network::All,
            })
            .with_max_processes(self.max_processes);
        if let Some(dir) = &self.exec_homes {
            policy = policy.with_home_parent(dir.clone());
        }
        for path in &self.exec_read {
            policy = policy.with_read_only_path(path.clone());
        }
        if let Some(limit) = self.exec_time_limit {
            policy = policy.with_time_limit(limit);
        }
        if self.exec_unconfined {
            policy = policy.unconfined();
        }
        if let Some(egress) = egress {
            policy = policy.with_egress(egress);
        }
        // The server already acts as the one unprivileged user (identity.rs): its processes
        // run as that user, with no change of identity of their own.
        let local = LocalProcesses::new(sandbox, policy)
            .map_err(|e| Failure::usage(format!("--exec: {}", fail::reason(&e, ""))))?;
        match local.confinement() {
            Confinement::Enforced(how) => tracing::info!(confinement = how, "serving processes"),
            Confinement::Unconfined => {
                tracing::warn!("serving processes UNCONFINED (--exec-unconfined)");
            }
            Confinement::Refused(why) => {
                return Err(Failure::usage(format!("--exec: processes refused: {why}")));
            }
            _ => {}
        }
        Ok(Some(ServedProcesses(Arc::new(local))))
    }
}

impl ExecFlags {
    /// The egress policy of the flags and the policy file; `None` when it allows nothing.
    ///
    /// # Errors
    ///
    /// A usage failure for a malformed pattern or entry, an unreadable file, or an allow
    /// with a network that is not `none`.
    pub fn egress(&self) -> Result<Option<EgressPolicy>, Failure> {
        let mut egress = EgressPolicy::default();
        if let Some(path) = &self.exec_network_policy {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Failure::at("cannot read", &path.to_string_lossy(), &e))?;
            egress = egress.with_directives(&text).map_err(|e| {
                Failure::usage(format!("--exec-network-policy {}: {e}", path.display()))
            })?;
        }
        let flag =
            |name: &'static str| move |e: std::io::Error| Failure::usage(format!("--{name}: {e}"));
        for rule in &self.exec_allow_host {
            egress = egress.allow(rule).map_err(flag("exec-allow-host"))?;
        }
        for rule in &self.exec_deny_host {
            egress = egress.deny(rule).map_err(flag("exec-deny-host"))?;
        }
        for entry in &self.exec_resolve {
            egress = egress.resolve(entry).map_err(flag("exec-resolve"))?;
        }
        if !egress.is_on() {
            if self.exec_transparent_tcp {
                return Err(Failure::usage(
                    "--exec-transparent-tcp: no host is allowed (--exec-allow-host, \
                     --exec-network-policy), so there is nothing to reach",
                ));
            }
            return Ok(None);
        }
        if self.exec_transparent_tcp {
            egress = egress.with_transparent_tcp();
        }
        match self.exec_network {
            ExecNetwork::None => {}
            ExecNetwork::Loopback | ExecNetwork::All => {
                return Err(Failure::usage(
                    "allowed hosts (--exec-allow-host, --exec-network-policy) reach the network \
                     through capfs's proxy only: not with --exec-network all or loopback",
                ));
            }
        }
        Ok(Some(egress))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_is_a_uid_with_an_optional_gid() {
        assert_eq!(parse_user("1000"), Ok((1000, 1000)));
        assert_eq!(parse_user("1000:100"), Ok((1000, 100)));
        assert!(parse_user("alice").is_err());
        assert!(parse_user("1:").is_err());
    }
}
