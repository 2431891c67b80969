//! Where the notifications of remote processes go: the connection's reader hands each to the
//! bounded event queue of its process, by the process's id on the wire.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::encoding::STANDARD;
use base64::Engine;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::protocol::process::{
    PROCESS_CLOSED_METHOD, PROCESS_EXITED_METHOD, PROCESS_OUTPUT_METHOD,
};
use capfs::process::{OutputStream, ProcessEvent, ProcessExit};

/// Where each process's notifications go, by its id on the wire.
pub(super) type Routes = Arc<Mutex<HashMap<String, Route>>>;

/// One process's queue and the last `seq` it was given.
#[derive(Debug)]
pub(super) struct Route {
    events: mpsc::Sender<ProcessEvent>,
    seq: u64,
}

impl Route {
    /// The route of a process not yet started: every `seq` is past its last.
    pub(super) fn new(events: mpsc::Sender<ProcessEvent>) -> Self {
        Self { events, seq: 0 }
    }
}

#[derive(Deserialize)]
struct Pushed {
    method: String,
    params: Value,
}

/// The event a process notification carries, with its process id and `seq`; `None` for any
/// other message, or one that does not parse.
fn event_of(bytes: &[u8]) -> Option<(String, u64, ProcessEvent)> {
    let pushed: Pushed = serde_json::from_slice(bytes).ok()?;
    let p = &pushed.params;
    let id = p["processId"].as_str()?.to_string();
    let seq = p["seq"].as_u64()?;
    let event = match pushed.method.as_str() {
        PROCESS_OUTPUT_METHOD => {
            let bytes = STANDARD.decode(p["chunk"].as_str()?).ok()?;
            let stream = match p["stream"].as_str()? {
                "stderr" => OutputStream::Stderr,
                _ => OutputStream::Stdout,
            };
            if bytes.is_empty() {
                return None;
            }
            ProcessEvent::Output { stream, bytes }
        }
        PROCESS_EXITED_METHOD => {
            let code = i32::try_from(p["exitCode"].as_i64()?).ok()?;
            ProcessEvent::Exited(match code {
                129..=192 => ProcessExit::signal(code - 128, false),
                _ => ProcessExit::code(code),
            })
        }
        PROCESS_CLOSED_METHOD => ProcessEvent::Closed,
        _ => return None,
    };
    Some((id, seq, event))
}

/// Hands a process notification to its process, waiting while its queue is full; a
/// notification repeated or out of order (its `seq` not past the last) is dropped, and a
/// process whose consumer is gone, or that closed, is forgotten.
pub(super) async fn route(bytes: &[u8], routes: &Routes) {
    let Some((id, seq, event)) = event_of(bytes) else {
        return;
    };
    let events = {
        let mut routes = routes.lock().expect("process routes");
        let Some(route) = routes.get_mut(&id) else {
            return;
        };
        if seq <= route.seq {
            return;
        }
        route.seq = seq;
        let events = route.events.clone();
        if event == ProcessEvent::Closed {
            routes.remove(&id);
        }
        events
    };
    if events.send(event).await.is_err() {
        routes.lock().expect("process routes").remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_become_events_and_others_are_left() {
        let output = br#"{"method":"process/output","params":{"processId":"a","seq":1,"stream":"stderr","chunk":"aGk="}}"#;
        let (id, seq, event) = event_of(output).unwrap();
        assert_eq!((id.as_str(), seq), ("a", 1));
        let bytes = b"hi".to_vec();
        assert_eq!(
            event,
            ProcessEvent::Output {
                stream: OutputStream::Stderr,
                bytes
            }
        );
        let exited =
            br#"{"method":"process/exited","params":{"processId":"a","seq":2,"exitCode":130}}"#;
        assert_eq!(
            event_of(exited).unwrap().2,
            ProcessEvent::Exited(ProcessExit::signal(2, false))
        );
        assert!(event_of(br#"{"method":"fs/missingChanged","params":{"watchId":1}}"#).is_none());
        assert!(event_of(b"not json").is_none());
    }
}
