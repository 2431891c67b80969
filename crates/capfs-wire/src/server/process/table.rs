//! What the server keeps of processes: the implementation and its bounds, each session's
//! table of processes by the client's ids, and a connection's attachment to its session.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, watch};

use super::kept::Kept;
use crate::protocol::RootDescription;
use crate::protocol::process::ProcessesInfo;
use crate::server::budget::ConnectionBudget;
use crate::server::metrics::Metrics;
use crate::server::outgoing::Outgoing;
use capfs::audit::AuditLog;
use capfs::process::{Confinement, ExecutorProcesses, ProcessControl};

/// Processes running at once across a server, by default.
pub const DEFAULT_MAX_PROCESSES: usize = 256;
/// Processes running at once in one session (one connection and its resumes), by default.
pub const DEFAULT_MAX_PROCESSES_PER_CONNECTION: usize = 64;
/// Ended processes a session keeps for `process/read`; the oldest is forgotten first.
const MAX_ENDED_KEPT: usize = 64;

/// Where a session's notifications go: the queue of the connection holding it, under that
/// connection's outgoing budget.
#[derive(Clone, Debug)]
pub(crate) struct Sink {
    pub(crate) out: mpsc::Sender<Outgoing>,
    pub(crate) budget: ConnectionBudget,
}

/// The processes of a server: the implementation, its bounds and each session's table.
pub(crate) struct ServerProcesses {
    pub(crate) imp: Arc<dyn ExecutorProcesses>,
    pub(super) slots: Arc<Semaphore>,
    pub(super) max_server: usize,
    pub(super) per_session: usize,
    pub(super) ttl: Duration,
    pub(super) audit: Option<AuditLog>,
    /// The roots of the server's file system: a connection serving other roots (narrowed) has
    /// its processes narrowed too.
    pub(super) roots: Vec<RootDescription>,
    pub(super) tables: Mutex<HashMap<String, Arc<SessionProcesses>>>,
    pub(super) metrics: Arc<Metrics>,
    /// Set once the server stops: no process starts after it.
    pub(super) stopping: AtomicBool,
}

impl std::fmt::Debug for ServerProcesses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerProcesses").finish_non_exhaustive()
    }
}

/// One process as a session holds it.
pub(crate) enum Slot {
    /// Its start was accepted and has not returned yet.
    Starting,
    Started(Arc<Running>),
}

/// The signal a stopping server sends its processes first.
const SIGTERM: i32 = 15;

/// A started process: its control and what the wire has been told of it.
pub(crate) struct Running {
    pub(crate) control: Arc<dyn ProcessControl>,
    pub(crate) tty: bool,
    pub(crate) kept: Mutex<Kept>,
    /// Bumped whenever `kept` changes, for `process/read` to wait on.
    pub(crate) changed: watch::Sender<u64>,
}

impl Running {
    /// Completes once the process has exited (or closed).
    async fn exited(&self) {
        let mut changed = self.changed.subscribe();
        loop {
            {
                let kept = self.kept.lock().expect("kept output");
                if kept.exit.is_some() || kept.closed {
                    return;
                }
            }
            if changed.changed().await.is_err() {
                return;
            }
        }
    }
}

/// A session's processes, by the client's ids.
pub(crate) struct SessionProcesses {
    pub(super) sink: watch::Sender<Option<Sink>>,
    /// Bumped by every attach and leave, so that a TTL that passed belongs to one absence.
    pub(super) generation: AtomicU64,
    pub(super) procs: Mutex<Procs>,
    /// The private home of the session's processes, made at its first start and removed
    /// once the session and every process that had it are gone.
    pub(super) home: Mutex<Option<Arc<capfs::process::Home>>>,
}

#[derive(Default)]
pub(super) struct Procs {
    pub(super) map: HashMap<String, Slot>,
    pub(super) ended: VecDeque<String>,
}

/// What a connection holds of the processes once its session is known.
#[derive(Clone)]
pub(crate) struct Attached {
    pub(crate) server: Arc<ServerProcesses>,
    pub(crate) session: Arc<SessionProcesses>,
    pub(crate) connection: u64,
    pub(crate) peer: Arc<str>,
}

/// What `environmentInfo` says of the processes an implementation starts.
pub(crate) fn info(imp: &dyn ExecutorProcesses) -> ProcessesInfo {
    let (served, confinement) = match imp.confinement() {
        Confinement::Enforced(how) => (true, how),
        Confinement::Unconfined => (true, "none: unconfined by the operator".to_string()),
        Confinement::Refused(why) => (false, format!("refused: {why}")),
        // A kind of confinement this server does not know is not served as if it held.
        other => (false, format!("refused: unknown confinement {other:?}")),
    };
    ProcessesInfo {
        served,
        confinement,
        managed_network: served && imp.holds_egress_narrowing(),
        transparent_tcp: served && imp.holds_egress_narrowing() && imp.serves_transparent_tcp(),
    }
}

impl ServerProcesses {
    pub(crate) fn new(
        imp: Arc<dyn ExecutorProcesses>,
        max_server: usize,
        per_session: usize,
        ttl: Duration,
        audit: Option<AuditLog>,
        roots: Vec<RootDescription>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            imp,
            slots: Arc::new(Semaphore::new(max_server)),
            max_server,
            per_session,
            ttl,
            audit,
            roots,
            tables: Mutex::new(HashMap::new()),
            metrics,
            stopping: AtomicBool::new(false),
        }
    }

    /// Session `id` is now held by a connection whose notifications go to `sink`.
    pub(crate) fn attach(&self, id: &str, sink: Sink) -> Arc<SessionProcesses> {
        let mut tables = self.tables.lock().expect("process tables");
        let table = tables.entry(id.to_string()).or_insert_with(|| {
            Arc::new(SessionProcesses {
                sink: watch::channel(None).0,
                generation: AtomicU64::new(0),
                procs: Mutex::new(Procs::default()),
                home: Mutex::new(None),
            })
        });
        table.generation.fetch_add(1, Ordering::SeqCst);
        table.sink.send_replace(Some(sink));
        Arc::clone(table)
    }

    /// The connection holding session `id` ends: its processes wait (stalled once their queues
    /// fill) for a resume, and are ended once the TTL passes without one.
    pub(crate) fn leave(self: &Arc<Self>, id: &str, table: &SessionProcesses) {
        // The sink holds the connection's queue: let go of it, so that its writer can end,
        // whether or not the table is still the server's (it is not once the server stops).
        table.sink.send_replace(None);
        if !self.tables.lock().expect("process tables").contains_key(id) {
            return;
        }
        let generation = table.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let server = Arc::downgrade(self);
        let (id, ttl) = (id.to_string(), self.ttl);
        tokio::spawn(async move {
            tokio::time::sleep(ttl).await;
            if let Some(server) = server.upgrade() {
                server.expire(&id, generation).await;
            }
        });
    }

    /// Ends session `id`'s processes if it was not taken back since `generation`.
    async fn expire(&self, id: &str, generation: u64) {
        let table = {
            let mut tables = self.tables.lock().expect("process tables");
            match tables.get(id) {
                Some(t) if t.generation.load(Ordering::SeqCst) == generation => tables.remove(id),
                _ => None,
            }
        };
        if let Some(table) = table {
            table.end_all().await;
        }
    }

    /// Ends every process of every session: the server stops. Each process is sent
    /// `SIGTERM` and given `grace` to exit; those still running then are ended with everything
    /// they started (`SIGKILL`). No process starts from the call on.
    ///
    /// The tables stay the server's until the grace is over, so that a shutdown cut short (the
    /// future dropped) leaves them to the next call, which kills what is left.
    pub(crate) async fn shutdown(&self, grace: Duration) {
        self.stopping.store(true, Ordering::SeqCst);
        let running: Vec<_> = {
            let tables = self.tables.lock().expect("process tables");
            tables
                .values()
                .flat_map(|table| table.running())
                .filter(|running| !running.kept.lock().expect("kept output").closed)
                .collect()
        };
        if !running.is_empty() && !grace.is_zero() {
            tracing::info!(count = running.len(), "asking processes to end (SIGTERM)");
            for process in &running {
                let _ = process.control.signal(SIGTERM).await;
            }
            let exited = async {
                for process in &running {
                    process.exited().await;
                }
            };
            if tokio::time::timeout(grace, exited).await.is_err() {
                tracing::warn!("processes still running after {grace:?}: killed");
            }
        }
        let tables: Vec<_> = self
            .tables
            .lock()
            .expect("process tables")
            .drain()
            .map(|(_, t)| t)
            .collect();
        for table in tables {
            table.end_all().await;
        }
    }

    /// True once the server stops.
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

impl SessionProcesses {
    /// The process the client calls `id`.
    pub(crate) fn get(&self, id: &str) -> Option<Option<Arc<Running>>> {
        let procs = self.procs.lock().expect("processes");
        procs.map.get(id).map(|slot| match slot {
            Slot::Starting => None,
            Slot::Started(running) => Some(Arc::clone(running)),
        })
    }

    pub(super) fn running(&self) -> Vec<Arc<Running>> {
        let procs = self.procs.lock().expect("processes");
        procs
            .map
            .values()
            .filter_map(|slot| match slot {
                Slot::Started(r) => Some(Arc::clone(r)),
                Slot::Starting => None,
            })
            .collect()
    }

    /// Ends every process still running; those that closed are left alone.
    async fn end_all(&self) {
        for running in self.running() {
            if running.kept.lock().expect("kept output").closed {
                continue;
            }
            let _ = running.control.terminate().await;
        }
    }

    /// Process `id` has closed: it is kept for `process/read` among the last ended ones.
    pub(super) fn ended(&self, id: &str) {
        let mut procs = self.procs.lock().expect("processes");
        procs.ended.push_back(id.to_string());
        while procs.ended.len() > MAX_ENDED_KEPT {
            if let Some(old) = procs.ended.pop_front() {
                procs.map.remove(&old);
            }
        }
    }

    /// The session's private home, made by `imp` at the first call; `None` when `imp` has
    /// no private homes.
    pub(super) fn home(
        &self,
        imp: &dyn ExecutorProcesses,
    ) -> std::io::Result<Option<Arc<capfs::process::Home>>> {
        let mut home = self.home.lock().expect("session home");
        if home.is_none() {
            *home = imp.new_home()?.map(Arc::new);
        }
        Ok(home.clone())
    }

    pub(super) fn sink(&self) -> watch::Receiver<Option<Sink>> {
        self.sink.subscribe()
    }
}

/// What a pump needs of its session without holding it alive.
pub(crate) type SessionRef = Weak<SessionProcesses>;
