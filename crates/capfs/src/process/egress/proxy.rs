//! One process's proxy: the accept loops on the two listeners its child handed over, the
//! bounds of its connections, and one audit line per connection.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::AbortHandle;

use super::session::{Line, Session};
use super::{EgressNarrowing, EgressPolicy};
use crate::process::listen::Listeners;

/// A process's running proxy; [`close`](Self::close) (or a drop) ends its listeners and cuts
/// every connection.
#[derive(Debug)]
pub(crate) struct Proxy {
    tasks: Vec<AbortHandle>,
    cut: watch::Sender<bool>,
    open: Arc<Semaphore>,
    max: usize,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        self.cut.send_replace(true);
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Http,
    Socks,
    Transparent,
}

fn tcp(fd: OwnedFd) -> io::Result<TcpListener> {
    let listener = std::net::TcpListener::from(fd);
    listener.set_nonblocking(true)?;
    TcpListener::from_std(listener)
}

impl Proxy {
    /// Serves `listeners` for the process `pid` under `policy` and `narrowing`.
    pub(crate) fn start(
        listeners: Listeners,
        policy: Arc<EgressPolicy>,
        narrowing: EgressNarrowing,
        pid: u32,
    ) -> io::Result<Self> {
        // A semaphore's permits, and all of them taken back at once (`close`), fit in a u32.
        let max = policy.max_connections.min(u32::MAX as usize);
        let session = Arc::new(Session {
            open: Arc::new(Semaphore::new(max)),
            left: AtomicU64::new(policy.max_bytes),
            names: Mutex::default(),
            ports: policy.transparent_ports(),
            policy,
            narrowing,
            pid,
        });
        let (cut, _) = watch::channel(false);
        let mut ready = vec![
            (tcp(listeners.http)?, Kind::Http),
            (tcp(listeners.socks)?, Kind::Socks),
        ];
        let mut dns = None;
        if let Some((udp, ports)) = listeners.transparent {
            let udp = std::net::UdpSocket::from(udp);
            udp.set_nonblocking(true)?;
            dns = Some(UdpSocket::from_std(udp)?);
            for fd in ports {
                ready.push((tcp(fd)?, Kind::Transparent));
            }
        }
        // Only once all are ready: a failure leaves no task behind.
        let mut tasks = Vec::new();
        for (listener, kind) in ready {
            let task = tokio::spawn(accept(listener, kind, session.clone(), cut.subscribe()));
            tasks.push(task.abort_handle());
        }
        if let Some(dns) = dns {
            tasks.push(tokio::spawn(super::dns::serve(dns, session.clone())).abort_handle());
        }
        Ok(Self {
            tasks,
            cut,
            open: session.open.clone(),
            max,
        })
    }

    /// The proxy of a child just spawned with the starter's end of its channel, `ours`; `None`
    /// without an egress policy.
    pub(crate) fn of_child(
        ours: Option<OwnedFd>,
        policy: Option<Arc<EgressPolicy>>,
        narrowing: EgressNarrowing,
        pid: u32,
    ) -> io::Result<Option<Self>> {
        match (ours, policy) {
            (Some(ours), Some(policy)) => {
                let listeners = crate::process::listen::receive(&ours, &policy)?;
                Self::start(listeners, policy, narrowing, pid).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Ends the listeners, cuts the connections and waits until each wrote its audit line.
    pub(crate) async fn close(self) {
        for task in &self.tasks {
            task.abort();
        }
        self.cut.send_replace(true);
        // Every connection holds a permit until its line is written.
        let all = u32::try_from(self.max).unwrap_or(u32::MAX);
        let _ = self.open.acquire_many(all).await;
    }
}

async fn accept(
    listener: TcpListener,
    kind: Kind,
    session: Arc<Session>,
    cut: watch::Receiver<bool>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors, say: let the connections that hold them go on first.
            tokio::task::yield_now().await;
            continue;
        };
        let permit = match session.open.clone().try_acquire_owned() {
            Ok(permit) if !session.spent() => permit,
            refused => {
                let reason = match refused {
                    Ok(_) => "the process's byte budget is spent",
                    Err(_) => "too many connections at once",
                };
                session.record(&Line {
                    via: kind.name(),
                    outcome: "refused",
                    reason: Some(reason.into()),
                    ..Line::default()
                });
                continue;
            }
        };
        tokio::spawn(serve(stream, kind, session.clone(), cut.clone(), permit));
    }
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Http => "http",
            Kind::Socks => "socks5",
            Kind::Transparent => "transparent",
        }
    }
}

/// One connection, to its audit line, which is written even when the process's end cuts it.
async fn serve(
    stream: TcpStream,
    kind: Kind,
    session: Arc<Session>,
    mut cut: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let mut line = Line {
        via: kind.name(),
        ..Line::default()
    };
    let served = async {
        match kind {
            Kind::Http => super::web::serve(stream, &session, &mut line).await,
            Kind::Socks => super::socks::serve(stream, &session, &mut line).await,
            Kind::Transparent => super::transparent::serve(stream, &session, &mut line).await,
        }
    };
    let was_cut = tokio::select! {
        () = served => false,
        _ = cut.wait_for(|cut| *cut) => true,
    };
    if was_cut && line.outcome.is_empty() {
        line.outcome = "cut";
        line.reason = Some("the process closed".into());
    }
    session.record(&line);
}
