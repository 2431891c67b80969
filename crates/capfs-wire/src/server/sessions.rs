//! Sessions of the current codex protocol: each connection's `initialize` gets a session id (a
//! random UUID), and a client that reconnects within the session TTL may take its session back
//! with `resumeSessionId`. A session is held by one connection at a time; an unknown, expired
//! or held id is refused, as codex's own executor refuses it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Sessions known to a server, at most as many as it has connections plus those left within the
/// TTL, which the next `initialize` after their expiry forgets.
pub(crate) struct Sessions {
    ttl: Duration,
    known: Mutex<HashMap<String, Option<Instant>>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl Sessions {
    pub(crate) fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            known: Mutex::new(HashMap::new()),
        }
    }

    /// A new session, held by the calling connection.
    pub(crate) fn open(&self) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        let mut known = self.known.lock().expect("sessions");
        self.forget_expired(&mut known);
        known.insert(id.clone(), None);
        id
    }

    /// Takes back session `id` for the calling connection.
    ///
    /// # Errors
    ///
    /// The message codex's executor gives, for an id that is unknown, expired or held.
    pub(crate) fn resume(&self, id: &str) -> Result<(), String> {
        let mut known = self.known.lock().expect("sessions");
        self.forget_expired(&mut known);
        match known.get_mut(id) {
            Some(left @ Some(_)) => {
                *left = None;
                Ok(())
            }
            Some(None) => Err(format!("session {id} is in use by another connection")),
            None => Err(format!("unknown session id {id}")),
        }
    }

    /// The connection holding session `id` has ended: the session waits for a reconnect until
    /// the TTL passes.
    pub(crate) fn leave(&self, id: &str) {
        let mut known = self.known.lock().expect("sessions");
        if let Some(left) = known.get_mut(id) {
            *left = Some(Instant::now());
        }
    }

    fn forget_expired(&self, known: &mut HashMap<String, Option<Instant>>) {
        known.retain(|_, left| left.is_none_or(|at| at.elapsed() < self.ttl));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_resumed_once_its_connection_left_and_within_the_ttl() {
        let sessions = Sessions::new(Duration::from_secs(3600));
        let id = sessions.open();
        assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
        assert!(sessions.resume(&id).unwrap_err().contains("in use"));
        sessions.leave(&id);
        sessions.resume(&id).unwrap();
        assert!(sessions.resume(&id).unwrap_err().contains("in use"));
        assert_eq!(
            sessions.resume("nonsense").unwrap_err(),
            "unknown session id nonsense"
        );
    }

    #[test]
    fn an_expired_session_is_unknown() {
        let sessions = Sessions::new(Duration::ZERO);
        let id = sessions.open();
        sessions.leave(&id);
        assert!(
            sessions
                .resume(&id)
                .unwrap_err()
                .contains("unknown session id")
        );
    }
}
