//! The accept loop's failures: the pause after accepting failed for want of descriptors or
//! memory, and their log lines, at most one per interval.

use std::io;
use std::time::{Duration, Instant};

use super::config::ServerConfig;

/// Accept failures are logged at most once per this interval, with a count of the others.
const ACCEPT_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// The first pause after accepting failed for want of descriptors or memory; it doubles with
/// every further failure up to [`MAX_ACCEPT_PAUSE`] and resets on the next success.
const MIN_ACCEPT_PAUSE: Duration = Duration::from_millis(10);
/// The longest pause between two accepts while descriptors or memory are exhausted.
const MAX_ACCEPT_PAUSE: Duration = Duration::from_millis(500);
/// Descriptors the server needs besides its connections: the runtime, the listener, the roots,
/// the audit log, and the files that requests have open.
const DESCRIPTOR_HEADROOM: u64 = 64;

/// Warns when `RLIMIT_NOFILE` cannot hold every connection and handshake the bounds allow:
/// the server still works, but accepts pause whenever the descriptors run out.
pub(super) fn warn_about_descriptor_limit(config: &ServerConfig) {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let Some(current) = limit.current else {
        return;
    };
    let wanted = (config.max_connections + config.max_handshakes) as u64 + DESCRIPTOR_HEADROOM;
    if current < wanted {
        tracing::warn!(
            "RLIMIT_NOFILE is {current}, below --max-connections + --max-handshakes + \
             {DESCRIPTOR_HEADROOM} ({wanted}): accepts will pause while descriptors run out"
        );
    }
}

/// What the accept loop remembers of its failures: when it last logged one, how many it has
/// not logged since, and how long to pause after the next one.
pub(super) struct AcceptFailures {
    logged_at: Option<Instant>,
    unlogged: u64,
    pause: Duration,
}

impl Default for AcceptFailures {
    fn default() -> Self {
        Self {
            logged_at: None,
            unlogged: 0,
            pause: MIN_ACCEPT_PAUSE,
        }
    }
}

impl AcceptFailures {
    /// Logs `error` unless one was logged less than [`ACCEPT_LOG_INTERVAL`] ago (then it is
    /// counted for the next line), and returns the pause to take before accepting again: one
    /// that grows for exhausted descriptors or memory, which no retry can fix at once, and none
    /// for a failure of one connection (a peer that reset before it was accepted).
    pub(super) fn record(&mut self, error: &io::Error) -> Option<Duration> {
        let exhausted = is_resource_exhaustion(error);
        let now = Instant::now();
        if self
            .logged_at
            .is_some_and(|at| now.duration_since(at) < ACCEPT_LOG_INTERVAL)
        {
            self.unlogged += 1;
        } else {
            let unlogged = std::mem::take(&mut self.unlogged);
            let every = ACCEPT_LOG_INTERVAL;
            if exhausted {
                tracing::warn!(
                    unlogged,
                    "accept failed: {error}; pausing accepts (logged at most once every {every:?})"
                );
            } else {
                tracing::warn!(
                    unlogged,
                    "accept failed: {error} (logged at most once every {every:?})"
                );
            }
            self.logged_at = Some(now);
        }
        if !exhausted {
            return None;
        }
        let pause = self.pause;
        self.pause = (self.pause * 2).min(MAX_ACCEPT_PAUSE);
        Some(pause)
    }

    pub(super) fn reset_pause(&mut self) {
        self.pause = MIN_ACCEPT_PAUSE;
    }
}

/// `EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`: the process or the system is out of descriptors or
/// memory, and accepting again at once would fail the same way.
fn is_resource_exhaustion(error: &io::Error) -> bool {
    use rustix::io::Errno;
    let Some(raw) = error.raw_os_error() else {
        return false;
    };
    [Errno::MFILE, Errno::NFILE, Errno::NOBUFS, Errno::NOMEM]
        .iter()
        .any(|errno| errno.raw_os_error() == raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exhausted_resources_pause_accepts() {
        use rustix::io::Errno;
        let os = |errno: Errno| io::Error::from_raw_os_error(errno.raw_os_error());
        let mut failures = AcceptFailures::default();
        assert_eq!(failures.record(&os(Errno::MFILE)), Some(MIN_ACCEPT_PAUSE));
        assert_eq!(
            failures.record(&os(Errno::NFILE)),
            Some(MIN_ACCEPT_PAUSE * 2)
        );
        for _ in 0..20 {
            failures.record(&os(Errno::MFILE));
        }
        assert_eq!(failures.record(&os(Errno::MFILE)), Some(MAX_ACCEPT_PAUSE));
        // All but the first were counted, not logged: the interval has not passed.
        assert_eq!(failures.unlogged, 22);
        assert_eq!(failures.record(&os(Errno::CONNABORTED)), None);
        failures.reset_pause();
        assert_eq!(failures.record(&os(Errno::MFILE)), Some(MIN_ACCEPT_PAUSE));
    }
}
