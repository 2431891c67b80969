//! The signals that stop `capfs serve`: the first SIGINT or SIGTERM drains, the second cuts.

use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// SIGINT and SIGTERM, counted: the first asks the server to drain, the second cuts the drain.
pub struct Signals {
    first: CancellationToken,
    second: CancellationToken,
}

impl Signals {
    /// Watches the signals on a task of its own.
    pub fn new() -> Self {
        let first = CancellationToken::new();
        let second = CancellationToken::new();
        let (f, s) = (first.clone(), second.clone());
        use tokio::signal::unix::{SignalKind, signal};
        let watched = signal(SignalKind::terminate()).and_then(|term| {
            let int = signal(SignalKind::interrupt())?;
            Ok((term, int))
        });
        tokio::spawn(async move {
            let Ok((mut term, mut int)) = watched else {
                tracing::warn!("cannot watch SIGTERM and SIGINT");
                return;
            };
            // The same two streams throughout: a signal that comes while the first is handled
            // waits in them.
            for (token, said) in [(f, "draining"), (s, "cutting the drain")] {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
                tracing::info!("asked to stop: {said}");
                token.cancel();
            }
        });
        Self { first, second }
    }

    pub fn first(&self) -> WaitForCancellationFutureOwned {
        self.first.clone().cancelled_owned()
    }

    pub fn second(&self) -> WaitForCancellationFutureOwned {
        self.second.clone().cancelled_owned()
    }
}
