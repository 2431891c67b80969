//! One task per process: takes its events one at a time, keeps each for `process/read`, and
//! sends it as a notification to whichever connection holds the session, under that
//! connection's outgoing budget. An event is taken only once the one before it is queued, so
//! a client that reads nothing stalls the process, not the server.

use std::sync::Arc;

use crate::encoding::STANDARD;
use base64::Engine;
use tokio::sync::{OwnedSemaphorePermit, mpsc, watch};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::audit::ProcessLog;
use super::kept::{Chunk, stream_name};
use super::table::{Running, SessionRef, Sink};
use crate::protocol::process::{
    ClosedNotification, ExitedNotification, OutputNotification, PROCESS_CLOSED_METHOD,
    PROCESS_EXITED_METHOD, PROCESS_OUTPUT_METHOD,
};
use crate::protocol::{Message, Notification};
use crate::server::outgoing::Outgoing;
use capfs::process::ProcessEvent;

/// What a pump runs with.
pub(crate) struct Pump {
    pub(crate) id: String,
    pub(crate) running: Arc<Running>,
    pub(crate) events: mpsc::Receiver<ProcessEvent>,
    pub(crate) sink: watch::Receiver<Option<Sink>>,
    pub(crate) session: SessionRef,
    pub(crate) log: ProcessLog,
    /// The process's place in the server's bound, given back once it closed.
    pub(crate) slot: OwnedSemaphorePermit,
    pub(crate) metrics: Arc<crate::server::metrics::Metrics>,
}

fn notification(method: &str, params: impl serde::Serialize) -> String {
    Message::Notification(Notification {
        method: method.to_string(),
        params: Some(serde_json::to_value(params).expect("notifications serialize")),
    })
    .to_text()
}

impl Pump {
    pub(crate) async fn run(mut self) {
        // `None` once the session is gone: the process is ended and its events only drained.
        let mut delivering = true;
        let mut closed = false;
        while !closed {
            let event = self.events.recv().await.unwrap_or(ProcessEvent::Closed);
            let text = self.keep(event, &mut closed);
            if delivering && let Some(text) = text {
                delivering = deliver(&mut self.sink, &text).await;
                if !delivering {
                    let _ = self.running.control.terminate().await;
                }
            }
        }
        drop(self.slot);
        self.metrics.process_closed();
        if let Some(session) = self.session.upgrade() {
            session.ended(&self.id);
        }
    }

    /// Records `event` and returns its notification.
    fn keep(&mut self, event: ProcessEvent, closed: &mut bool) -> Option<String> {
        let id = self.id.clone();
        let mut kept = self.running.kept.lock().expect("kept output");
        let text = match event {
            ProcessEvent::Output { stream, bytes } => {
                let seq = kept.next_seq();
                let stream = stream_name(stream, self.running.tty);
                let text = notification(
                    PROCESS_OUTPUT_METHOD,
                    OutputNotification {
                        process_id: id,
                        seq,
                        stream: stream.to_string(),
                        chunk: STANDARD.encode(&bytes),
                    },
                );
                kept.keep(Chunk { seq, stream, bytes });
                text
            }
            ProcessEvent::Exited(exit) => {
                if kept.exit.is_some() {
                    return None;
                }
                kept.exit = Some(exit);
                self.log.exited(&exit);
                let seq = kept.next_seq();
                notification(
                    PROCESS_EXITED_METHOD,
                    ExitedNotification {
                        process_id: id,
                        seq,
                        exit_code: exit.code,
                        sandbox_denied: false,
                    },
                )
            }
            ProcessEvent::Closed => {
                *closed = true;
                kept.closed = true;
                let seq = kept.next_seq();
                notification(
                    PROCESS_CLOSED_METHOD,
                    ClosedNotification {
                        process_id: id,
                        seq,
                    },
                )
            }
            // An event the protocol has no notification for is not sent.
            _ => return None,
        };
        drop(kept);
        self.running.changed.send_modify(|n| *n += 1);
        Some(text)
    }
}

/// Queues `text` on the connection holding the session, waiting for one while there is none
/// and trying the next one when the connection ends before it took the notification. False
/// once the session itself is gone.
async fn deliver(sink: &mut watch::Receiver<Option<Sink>>, text: &str) -> bool {
    loop {
        let current = sink.borrow_and_update().clone();
        let Some(current) = current else {
            if sink.changed().await.is_err() {
                return false;
            }
            continue;
        };
        let queued = async move {
            let reservation = current.budget.reserve(text.len() as u64).await.ok()?;
            let message = Outgoing::reserved(WsMessage::text(text.to_string()), reservation);
            current.out.send(message).await.ok()
        };
        tokio::select! {
            sent = queued => {
                if sent.is_some() {
                    return true;
                }
                // That connection is ending: the next holder gets it.
                if sink.changed().await.is_err() {
                    return false;
                }
            }
            changed = sink.changed() => {
                if changed.is_err() {
                    return false;
                }
            }
        }
    }
}
