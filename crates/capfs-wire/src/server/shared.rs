//! What every connection of one server shares: the file system, the configuration, and the
//! server-wide bounds (connections, file-system work, sessions, handles, watches, the outgoing
//! budget, processes).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Semaphore;

use super::budget::Budget;
use super::codex::watch::MAX_WATCHES_PER_SERVER;
use super::config::ServerConfig;
use super::metrics::Metrics;
use super::process::table::ServerProcesses;
use super::sessions::Sessions;
use capfs::ExecutorFileSystem;

/// What every connection of one server shares.
pub(crate) struct Shared {
    pub(crate) fs: Arc<dyn ExecutorFileSystem>,
    pub(crate) config: ServerConfig,
    pub(crate) connections: Arc<Semaphore>,
    /// Requests doing file-system work at once, across the server.
    pub(crate) work: Arc<Semaphore>,
    /// Sessions of the current codex protocol, which outlive their connections by the TTL.
    pub(crate) sessions: Arc<Sessions>,
    /// `fs/open` handles open at once across the server.
    pub(crate) handles: Arc<Semaphore>,
    /// `fs/watchMissing` watches at once across the server.
    pub(crate) watches: Arc<Semaphore>,
    /// The outgoing bytes replies and data frames may hold, across the server.
    pub(crate) budget: Budget,
    /// The processes the server serves, if it does.
    pub(crate) processes: Option<Arc<ServerProcesses>>,
    /// What `GET /metrics` reports.
    pub(crate) metrics: Arc<Metrics>,
    /// Set once the server was asked to stop: `/readyz` answers 503 and no new session starts.
    draining: AtomicBool,
}

/// `fs/open` handles open at once across a server (each read handle holds a descriptor).
const MAX_OPEN_HANDLES: usize = 1024;

impl Shared {
    pub(crate) fn new(fs: Arc<dyn ExecutorFileSystem>, config: ServerConfig) -> Self {
        let fs_roots = fs.served_roots();
        let budget = Budget::new(
            config.max_outgoing_bytes,
            config.max_outgoing_bytes_per_connection,
        );
        let metrics = Arc::new(Metrics::new(budget.clone(), config.audit.clone()));
        Self {
            fs,
            connections: Arc::new(Semaphore::new(config.max_connections)),
            work: Arc::new(Semaphore::new(config.max_blocking)),
            sessions: Arc::new(Sessions::new(config.session_ttl)),
            handles: Arc::new(Semaphore::new(MAX_OPEN_HANDLES)),
            watches: Arc::new(Semaphore::new(MAX_WATCHES_PER_SERVER)),
            budget,
            processes: config.processes.as_ref().map(|served| {
                Arc::new(ServerProcesses::new(
                    Arc::clone(&served.0),
                    config.max_processes,
                    config.max_processes_per_connection,
                    config.session_ttl,
                    config.audit.clone(),
                    fs_roots,
                    Arc::clone(&metrics),
                ))
            }),
            metrics,
            draining: AtomicBool::new(false),
            config,
        }
    }

    /// True once the server drains.
    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// The server drains from now on.
    pub(crate) fn start_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }
}
