//! `capfs serve --exec`: the flags that turn the process methods on and choose the policy of
//! [`LocalProcesses`], and the implementation they make.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use capfs::Sandbox;
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
    /// The processes to serve over `sandbox` (the same roots as the file system), if `--exec`.
    ///
    /// # Errors
    ///
    /// A usage failure when processes cannot be confined as asked (no Landlock, nested roots),
    /// naming why.
    pub fn processes(&self, sandbox: Sandbox) -> Result<Option<ServedProcesses>, Failure> {
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
