//! What [`LocalProcesses`](super::LocalProcesses) allows the processes it starts: the network,
//! the user they run as, their bounds.

use std::path::PathBuf;
use std::sync::Arc;

use super::egress::EgressPolicy;
use std::time::Duration;

/// What a process may reach on the network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Network {
    /// Nothing: the process runs in a network namespace of its own with no interface up, and
    /// Landlock refuses every TCP bind and connect.
    #[default]
    None,
    /// Its own loopback only: a network namespace of its own whose `lo` is up, so the process
    /// and its children may talk to each other over 127.0.0.1, never to the host's services.
    Loopback,
    /// The host's network, unrestricted.
    All,
}

/// The unprivileged identity processes run as when the starter is root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunAs {
    /// The user id; never 0.
    pub uid: u32,
    /// The group id, the only group the process has; never 0.
    pub gid: u32,
}

/// How [`LocalProcesses`](super::LocalProcesses) confines and bounds its processes.
///
/// The default is the strictest: confined, no network, at most 64 processes at once, each
/// with at most 256 tasks, files of at most 4 GiB, no core dumps, no time limit.
///
/// # Examples
///
/// ```
/// use capfs::process::{Network, ProcessPolicy};
/// let policy = ProcessPolicy::default()
///     .with_network(Network::Loopback)
///     .with_run_as(65534, 65534)
///     .with_time_limit(std::time::Duration::from_secs(600));
/// assert_eq!(policy.network(), Network::Loopback);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ProcessPolicy {
    pub(crate) unconfined: bool,
    pub(crate) network: Network,
    pub(crate) run_as: Option<RunAs>,
    pub(crate) time_limit: Option<Duration>,
    pub(crate) max_processes: usize,
    pub(crate) max_tasks: u64,
    pub(crate) file_size_limit: u64,
    pub(crate) read_only_paths: Vec<PathBuf>,
    pub(crate) temp_parent: PathBuf,
    pub(crate) home_parent: PathBuf,
    pub(crate) egress: Option<Arc<EgressPolicy>>,
}

impl Default for ProcessPolicy {
    fn default() -> Self {
        Self {
            unconfined: false,
            network: Network::None,
            run_as: None,
            time_limit: None,
            max_processes: 64,
            max_tasks: 256,
            file_size_limit: 4 << 30,
            read_only_paths: Vec::new(),
            temp_parent: std::env::temp_dir(),
            home_parent: std::env::temp_dir(),
            egress: None,
        }
    }
}

impl ProcessPolicy {
    /// Runs processes without any kernel confinement: they reach everything the starter
    /// reaches. Only for an operator who asks for it explicitly; bounds and the kill of the
    /// whole tree still apply.
    pub fn unconfined(mut self) -> Self {
        self.unconfined = true;
        self
    }

    /// What processes may reach on the network.
    pub fn with_network(mut self, network: Network) -> Self {
        self.network = network;
        self
    }

    /// The unprivileged user and group processes run as; required when the starter's
    /// effective user is root. Read-write roots must be writable by that user.
    pub fn with_run_as(mut self, uid: u32, gid: u32) -> Self {
        self.run_as = Some(RunAs { uid, gid });
        self
    }

    /// Ends a process that runs longer than `limit` (its exit says `killed`).
    pub fn with_time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = Some(limit);
        self
    }

    /// The most processes running at once; a start past it is `QuotaExceeded`.
    pub fn with_max_processes(mut self, max: usize) -> Self {
        self.max_processes = max;
        self
    }

    /// The most tasks (processes and threads) one process and everything it starts may have
    /// at once: its cgroup's `pids.max`, and `RLIMIT_NPROC`.
    pub fn with_max_tasks(mut self, max: u64) -> Self {
        self.max_tasks = max;
        self
    }

    /// The largest file a process may write (`RLIMIT_FSIZE`), in bytes.
    pub fn with_file_size_limit(mut self, bytes: u64) -> Self {
        self.file_size_limit = bytes;
        self
    }

    /// Another directory or file processes may read and execute, beyond the roots and the
    /// system set.
    pub fn with_read_only_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.read_only_paths.push(path.into());
        self
    }

    /// Where each process's private temporary directory is made (the system's by default).
    pub fn with_temp_parent(mut self, dir: impl Into<PathBuf>) -> Self {
        self.temp_parent = dir.into();
        self
    }

    /// Where each session's private home is made (the system's temporary directory by
    /// default).
    pub fn with_home_parent(mut self, dir: impl Into<PathBuf>) -> Self {
        self.home_parent = dir.into();
        self
    }

    /// Lets processes reach the hosts `egress` allows, through a proxy of capfs's own that
    /// each process reaches on its own loopback (`HTTP_PROXY` and the rest are set for it);
    /// nothing else of the network. A policy that allows nothing changes nothing. Not with
    /// [`Network::All`] (`LocalProcesses::new` refuses the two together).
    pub fn with_egress(mut self, egress: EgressPolicy) -> Self {
        self.egress = egress.is_on().then(|| Arc::new(egress));
        self
    }

    /// The egress policy, when one allows anything.
    pub fn egress(&self) -> Option<&EgressPolicy> {
        self.egress.as_deref()
    }

    /// The network policy.
    pub fn network(&self) -> Network {
        self.network
    }

    /// The identity processes run as, if set.
    pub fn run_as(&self) -> Option<RunAs> {
        self.run_as
    }

    /// The time limit, if any.
    pub fn time_limit(&self) -> Option<Duration> {
        self.time_limit
    }

    /// Whether processes are confined by the kernel.
    pub fn is_confined(&self) -> bool {
        !self.unconfined
    }
}
