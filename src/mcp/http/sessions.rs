//! The sessions of `capfs mcp --listen`, as capfs counts them in front of rmcp: which token made
//! each one (a session answers only to it), how many streams each session and each token holds
//! open, and when each session was last used. A request is admitted here before rmcp sees it,
//! and its stream (the response body) holds its place until the body is dropped, so no client
//! holds more than its share whether or not it reads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The bounds the table keeps.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    pub(super) max_sessions: usize,
    pub(super) max_sessions_per_token: usize,
    pub(super) max_streams: usize,
    pub(super) max_streams_per_token: usize,
    pub(super) max_streams_per_session: usize,
    pub(super) idle: Duration,
}

/// Why a request is not admitted.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// No such session, or one that another token made: answered as unknown (404).
    NoSession,
    /// Every session is taken, in all or for the token.
    Sessions,
    /// The session, the token or the server holds as many streams as it may.
    Streams,
}

struct Entry {
    /// The index of the token that made it.
    token: usize,
    streams: usize,
    last_used: Instant,
}

/// What one token holds: its sessions (those being made included) and open streams.
#[derive(Default)]
struct Held {
    sessions: usize,
    streams: usize,
}

#[derive(Default)]
struct State {
    sessions: HashMap<String, Entry>,
    /// Sessions being made: initialize requests not yet answered.
    pending: usize,
    streams: usize,
    tokens: HashMap<usize, Held>,
}

impl State {
    fn token(&mut self, token: usize) -> &mut Held {
        self.tokens.entry(token).or_default()
    }

    /// Removes session `id` and gives its place back to its token.
    fn forget(&mut self, id: &str) -> bool {
        let Some(entry) = self.sessions.remove(id) else {
            return false;
        };
        self.token(entry.token).sessions -= 1;
        true
    }
}

/// Every session and stream, behind one lock held only to count.
pub(super) struct Table {
    limits: Limits,
    state: Mutex<State>,
}

/// An open stream: its place is given back when this is dropped (with the response body).
pub(super) struct Stream {
    table: Arc<Table>,
    token: usize,
    session: Option<String>,
}

/// A session being made: a place among the sessions and a stream for its initialize request.
pub(super) struct Making {
    stream: Option<Stream>,
}

impl Table {
    pub(super) fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a request of `token` that makes a session (an initialize): a session and a
    /// stream are reserved until [`Making::made`] or [`Making::failed`].
    pub(super) fn begin(self: &Arc<Self>, token: usize) -> Result<Making, Refused> {
        let limits = self.limits;
        let mut state = self.lock();
        let in_all = (state.sessions.len() + state.pending, state.streams);
        let held = state.token(token);
        if in_all.0 >= limits.max_sessions || held.sessions >= limits.max_sessions_per_token {
            return Err(Refused::Sessions);
        }
        if in_all.1 >= limits.max_streams || held.streams >= limits.max_streams_per_token {
            return Err(Refused::Streams);
        }
        held.sessions += 1;
        held.streams += 1;
        state.pending += 1;
        state.streams += 1;
        Ok(Making {
            stream: Some(Stream {
                table: Arc::clone(self),
                token,
                session: None,
            }),
        })
    }

    /// Admits a request of `token` in session `id` at `now`: the session must be one `token`
    /// made, with a stream free in it, for the token and in all.
    pub(super) fn admit(
        self: &Arc<Self>,
        id: &str,
        token: usize,
        now: Instant,
    ) -> Result<Stream, Refused> {
        let limits = self.limits;
        let mut state = self.lock();
        let in_all = state.streams;
        let for_token = state.token(token).streams;
        let entry = match state.sessions.get_mut(id) {
            Some(entry) if entry.token == token => entry,
            _ => return Err(Refused::NoSession),
        };
        if entry.streams >= limits.max_streams_per_session
            || for_token >= limits.max_streams_per_token
            || in_all >= limits.max_streams
        {
            return Err(Refused::Streams);
        }
        entry.streams += 1;
        entry.last_used = now;
        state.streams += 1;
        state.token(token).streams += 1;
        Ok(Stream {
            table: Arc::clone(self),
            token,
            session: Some(id.to_string()),
        })
    }

    /// Whether session `id` is one `token` made, for a request that opens no stream (a
    /// `DELETE`, which a session at its bound must still be able to send).
    pub(super) fn owns(&self, id: &str, token: usize) -> bool {
        self.lock()
            .sessions
            .get(id)
            .is_some_and(|entry| entry.token == token)
    }

    /// Forgets session `id` (ended by its client); its open streams keep their places until
    /// they close.
    pub(super) fn remove(&self, id: &str) {
        self.lock().forget(id);
    }

    /// The sessions unused for the idle timeout at `now`, removed from the table.
    pub(super) fn expire(&self, now: Instant) -> Vec<String> {
        let idle = self.limits.idle;
        let mut state = self.lock();
        let expired: Vec<String> = state
            .sessions
            .iter()
            .filter(|(_, e)| now.saturating_duration_since(e.last_used) >= idle)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            state.forget(id);
        }
        expired
    }

    /// Sessions and open streams, for the log and the tests.
    pub(super) fn counts(&self) -> (usize, usize) {
        let state = self.lock();
        (state.sessions.len(), state.streams)
    }
}

impl Making {
    /// The session rmcp made, `id`, belongs to the token that asked; the initialize request's
    /// stream becomes one of its streams. Returns that stream.
    pub(super) fn made(mut self, id: &str, now: Instant) -> Stream {
        let mut stream = self.stream.take().expect("a session is made once");
        {
            let mut state = stream.table.lock();
            state.pending -= 1;
            state.sessions.insert(
                id.to_string(),
                Entry {
                    token: stream.token,
                    streams: 1,
                    last_used: now,
                },
            );
        }
        stream.session = Some(id.to_string());
        stream
    }

    /// No session was made (a refused or failed initialize): the stream stays the request's.
    pub(super) fn failed(mut self) -> Stream {
        let stream = self.stream.take().expect("a session is made once");
        unmade(&stream);
        stream
    }
}

/// Gives back the session place `stream`'s initialize held.
fn unmade(stream: &Stream) {
    let mut state = stream.table.lock();
    state.pending -= 1;
    state.token(stream.token).sessions -= 1;
}

impl Drop for Making {
    fn drop(&mut self) {
        if let Some(stream) = &self.stream {
            unmade(stream);
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let mut state = self.table.lock();
        state.streams -= 1;
        state.token(self.token).streams -= 1;
        if let Some(entry) = self
            .session
            .as_deref()
            .and_then(|id| state.sessions.get_mut(id))
        {
            entry.streams -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Arc<Table> {
        Table::new(Limits {
            max_sessions: 2,
            max_sessions_per_token: 2,
            max_streams: 3,
            max_streams_per_token: 3,
            max_streams_per_session: 2,
            idle: Duration::from_secs(60),
        })
    }

    #[test]
    fn a_session_answers_only_to_the_token_that_made_it() {
        let t = table();
        let now = Instant::now();
        drop(t.begin(0).unwrap().made("s1", now));
        assert!(t.admit("s1", 0, now).is_ok());
        assert_eq!(t.admit("s1", 1, now).err(), Some(Refused::NoSession));
        assert_eq!(t.admit("s2", 0, now).err(), Some(Refused::NoSession));
        assert!(t.owns("s1", 0) && !t.owns("s1", 1) && !t.owns("s2", 0));
        t.remove("s1");
        assert_eq!(t.admit("s1", 0, now).err(), Some(Refused::NoSession));
    }

    #[test]
    fn sessions_and_streams_are_bounded_and_given_back() {
        let t = table();
        let now = Instant::now();
        let a = t.begin(0).unwrap().made("a", now);
        let making = t.begin(0).unwrap();
        // Two sessions, one of them still being made: no third.
        assert_eq!(t.begin(0).err(), Some(Refused::Sessions));
        drop(making);
        let b = t.begin(0).unwrap().failed();
        drop(b);
        // Session a: its initialize stream and one more, then no more in it.
        let a2 = t.admit("a", 0, now).unwrap();
        assert_eq!(t.admit("a", 0, now).err(), Some(Refused::Streams));
        drop(a);
        let a3 = t.admit("a", 0, now).unwrap();
        // Three streams in all: another session gets none until one closes.
        let c = t.begin(0).unwrap().made("c", now);
        assert_eq!(t.admit("c", 0, now).err(), Some(Refused::Streams));
        assert_eq!(t.counts(), (2, 3));
        drop((a2, a3, c));
        assert_eq!(t.counts(), (2, 0));
        assert!(t.admit("c", 0, now).is_ok());
    }

    #[test]
    fn each_token_has_its_share() {
        let t = Table::new(Limits {
            max_sessions: 4,
            max_sessions_per_token: 2,
            max_streams: 4,
            max_streams_per_token: 2,
            max_streams_per_session: 8,
            idle: Duration::from_secs(60),
        });
        let now = Instant::now();
        let a = t.begin(0).unwrap().made("a", now);
        drop(t.begin(0).unwrap().made("b", now));
        // Token 0 has its two sessions; token 1 still gets its own.
        assert_eq!(t.begin(0).err(), Some(Refused::Sessions));
        let c = t.begin(1).unwrap().made("c", now);
        // Token 0's streams: a's initialize and one more.
        let a2 = t.admit("a", 0, now).unwrap();
        assert_eq!(t.admit("b", 0, now).err(), Some(Refused::Streams));
        assert!(t.admit("c", 1, now).is_ok());
        drop((a, a2, c));
        // Ended sessions give their places back to their token.
        t.remove("b");
        assert!(t.begin(0).is_ok());
    }

    #[test]
    fn idle_sessions_expire_and_use_keeps_them() {
        let t = table();
        let start = Instant::now();
        drop(t.begin(0).unwrap().made("old", start));
        drop(t.begin(0).unwrap().made("used", start));
        drop(t.admit("used", 0, start + Duration::from_secs(30)).unwrap());
        assert!(t.expire(start + Duration::from_secs(59)).is_empty());
        assert_eq!(t.expire(start + Duration::from_secs(60)), ["old"]);
        assert_eq!(t.admit("old", 0, start).err(), Some(Refused::NoSession));
        // Its place is free again.
        drop(t.begin(0).unwrap());
        assert_eq!(t.expire(start + Duration::from_secs(90)), ["used"]);
        assert_eq!(t.counts(), (0, 0));
    }
}
