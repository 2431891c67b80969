//! `fs/watchMissing`: a client names paths that do not exist yet (and optionally one that does)
//! and is told once, with the notification `fs/missingChanged {watchId}`, when one of the
//! missing ones appears or the present one goes. The paths are looked at through the trait, so a
//! watch sees only what the roots allow; a path under no root is refused when the watch is made.
//! Watches are polled (every [`POLL_INTERVAL`]), bounded per connection and per server, and end
//! with their notification or their connection.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::error;
use crate::protocol::codex::SandboxContext;
use crate::protocol::{Message, Notification, WirePath};
use crate::server::outgoing::Outgoing;
use capfs::ExecutorFileSystem;

/// How often a watch looks at its paths.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// Watches one connection may hold.
pub(crate) const MAX_WATCHES_PER_CONNECTION: usize = 64;
/// Watches across a server.
pub(crate) const MAX_WATCHES_PER_SERVER: usize = 1024;
/// Paths one watch may name.
pub(crate) const MAX_WATCHED_PATHS: usize = 64;

/// The notification a watch ends with.
const MISSING_CHANGED_METHOD: &str = "fs/missingChanged";

/// Params of `fs/watchMissing`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WatchParams {
    pub(crate) watch_id: u64,
    pub(crate) missing: Vec<WirePath>,
    #[serde(default)]
    pub(crate) present: Option<WirePath>,
    #[serde(default)]
    pub(crate) sandbox: Option<SandboxContext>,
}

/// The watches of one connection, and where their notifications go.
pub(crate) struct Watches {
    server: Arc<Semaphore>,
    active: Mutex<HashMap<u64, tokio::task::AbortHandle>>,
    /// Where notifications go, while the connection's writer runs.
    out: Mutex<Option<mpsc::Sender<Outgoing>>>,
}

impl Watches {
    pub(crate) fn new(server: Arc<Semaphore>) -> Self {
        Self {
            server,
            active: Mutex::new(HashMap::new()),
            out: Mutex::new(None),
        }
    }

    /// Where notifications go: the connection's queue, once its writer runs.
    pub(crate) fn send_to(&self, out: mpsc::Sender<Outgoing>) {
        *self.out.lock().expect("watches") = Some(out);
    }

    /// Ends every watch and lets go of the connection's queue, so that its writer can finish.
    pub(crate) fn stop(&self) {
        self.out.lock().expect("watches").take();
        for (_, task) in self.active.lock().expect("watches").drain() {
            task.abort();
        }
    }

    /// Starts watch `p.watch_id`; `watches` is this table, for the watch to leave when done.
    pub(crate) async fn watch(
        watches: &Arc<Self>,
        fs: Arc<dyn ExecutorFileSystem>,
        p: WatchParams,
    ) -> io::Result<()> {
        if p.missing.len() > MAX_WATCHED_PATHS {
            return Err(error::too_many_watched_paths(MAX_WATCHED_PATHS));
        }
        let Some(out) = watches.out.lock().expect("watches").clone() else {
            return Err(error::watch_needs_connection());
        };
        // Every path must be one the roots serve: looking at it says so.
        for path in p.missing.iter().chain(&p.present) {
            if let Err(e) = fs.get_metadata(path).await
                && e.kind() != io::ErrorKind::NotFound
            {
                return Err(e);
            }
        }
        // Checked, spawned and entered under one lock: two requests at once cannot both pass
        // the bound or take one id, and a watch that ends at once finds itself entered.
        let mut active = watches.active.lock().expect("watches");
        if active.contains_key(&p.watch_id) {
            return Err(error::watch_exists(p.watch_id));
        }
        if active.len() >= MAX_WATCHES_PER_CONNECTION {
            return Err(error::too_many_watches(MAX_WATCHES_PER_CONNECTION));
        }
        let slot = Arc::clone(&watches.server)
            .try_acquire_owned()
            .map_err(|_| error::watches_busy())?;
        let id = p.watch_id;
        let task = tokio::spawn(poll(fs, p, out, Arc::downgrade(watches), slot));
        active.insert(id, task.abort_handle());
        Ok(())
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Looks at the watch's paths until one changed, then tells the client and leaves the table.
async fn poll(
    fs: Arc<dyn ExecutorFileSystem>,
    p: WatchParams,
    out: mpsc::Sender<Outgoing>,
    table: Weak<Watches>,
    _slot: OwnedSemaphorePermit,
) {
    loop {
        let mut changed = false;
        for path in &p.missing {
            changed |= fs.get_metadata(path).await.is_ok();
        }
        if let Some(present) = &p.present {
            changed |= fs.get_metadata(present).await.is_err();
        }
        if changed {
            break;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
    let notification = Message::Notification(Notification {
        method: MISSING_CHANGED_METHOD.to_string(),
        params: Some(serde_json::json!({ "watchId": p.watch_id })),
    });
    let _ = out
        .send(Outgoing::Message(WsMessage::text(notification.to_text())))
        .await;
    if let Some(table) = table.upgrade() {
        table.active.lock().expect("watches").remove(&p.watch_id);
    }
}
