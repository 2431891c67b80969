//! Polling before sleeping. On a machine whose idle CPUs halt (a virtual machine without guest
//! halt-polling above all), a connection thread that sleeps in `epoll_wait` between two
//! requests pays a wake-up of its CPU on each one: tens of microseconds, more than a small
//! call's own work. Before its runtime parks, a connection thread therefore polls the runtime's
//! epoll descriptor for a while. That descriptor is readable as soon as anything the runtime
//! waits for is ready (a socket, a pipe, a task woken by another thread), and then the park
//! that follows returns at once, without a sleep.
//!
//! How long it polls adapts as the kernel's guest halt-polling does: the window grows (up to
//! the configured bound) after a sleep the bound would have avoided, and shrinks after a sleep
//! longer than the bound, down to none. A connection making calls one after the other gets
//! answers without wake-ups; an idle server, or one whose clients call now and then, spends
//! nothing after its window has shrunk.
//!
//! A thread does not poll while a streamed write runs on it ([`Receiving`]). Its frames come
//! one after another, so a poll would catch each and the window would stay at its bound; but
//! the time is then spent where the stream's other work needs the CPU: the backend writing the
//! last batch on the blocking pool, and a client on the same machine reading and sending the
//! next frames. On two cores, a 256 MiB `put` took about a tenth longer, and a tenth more of
//! the server's CPU, with the thread polling between its frames.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

thread_local! {
    /// The streamed writes a connection thread is receiving, counted for its own window; set
    /// once on the thread by [`Polling::enter`]. Other threads have none.
    static RECEIVING: RefCell<Option<Arc<AtomicUsize>>> = const { RefCell::new(None) };
}

/// A runtime built to poll before it parks, and what its thread must know to stop polling
/// while it receives a stream.
pub(crate) struct Polling {
    pub(crate) runtime: tokio::runtime::Runtime,
    /// It polls: not with a zero bound, nor when the runtime's epoll descriptor was not found.
    pub(crate) polls: bool,
    receiving: Arc<AtomicUsize>,
}

impl Polling {
    /// Makes the calling thread the one whose streamed writes [`Receiving`] counts for this
    /// runtime's window: call it on the thread that runs the runtime, before it runs.
    pub(crate) fn enter(&self) {
        RECEIVING.with(|receiving| *receiving.borrow_mut() = Some(Arc::clone(&self.receiving)));
    }
}

/// Held while a streamed write runs: the thread it was made on does not poll before it
/// sleeps until it is dropped (wherever it is dropped). Made on a thread that never polls, it
/// counts nothing.
pub(crate) struct Receiving(Option<Arc<AtomicUsize>>);

impl Receiving {
    pub(crate) fn start() -> Self {
        let count = RECEIVING.with(|receiving| receiving.borrow().clone());
        if let Some(count) = &count {
            count.fetch_add(1, Ordering::Relaxed);
        }
        Self(count)
    }
}

impl Drop for Receiving {
    fn drop(&mut self) {
        if let Some(count) = &self.0 {
            count.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Builds a runtime with `builder`, polling for at most `bound` before each park.
pub(crate) fn build(
    builder: &mut tokio::runtime::Builder,
    bound: Duration,
) -> std::io::Result<Polling> {
    let receiving = Arc::new(AtomicUsize::new(0));
    if bound.is_zero() {
        let runtime = builder.build()?;
        return Ok(Polling {
            runtime,
            polls: false,
            receiving,
        });
    }
    let window = Arc::new(Window::new(bound, Arc::clone(&receiving)));
    let (before, after) = (Arc::clone(&window), Arc::clone(&window));
    let runtime = builder
        .on_thread_park(move || before.before_park())
        .on_thread_unpark(move || after.after_unpark())
        .build()?;
    if let Some(epoll) = epoll_of(&runtime) {
        let _ = window.epoll.set(epoll);
    }
    Ok(Polling {
        runtime,
        polls: window.epoll.get().is_some(),
        receiving,
    })
}

/// The epoll descriptor `runtime` waits on: the one whose registrations (listed in
/// `/proc/self/fdinfo`) include a socket just registered with the runtime. Other epoll
/// instances, other runtimes' among them, never see that descriptor while it is open.
fn epoll_of(runtime: &tokio::runtime::Runtime) -> Option<RawFd> {
    let (socket, _peer) = std::os::unix::net::UnixStream::pair().ok()?;
    socket.set_nonblocking(true).ok()?;
    let registered = {
        let _context = runtime.enter();
        tokio::net::UnixStream::from_std(socket).ok()?
    };
    let target = registered.as_raw_fd().to_string();
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            std::fs::read_link(entry.path())
                .is_ok_and(|link| link.as_os_str() == "anon_inode:[eventpoll]")
        })
        .filter_map(|entry| entry.file_name().to_str()?.parse::<RawFd>().ok())
        .filter(|epoll| {
            std::fs::read_to_string(format!("/proc/self/fdinfo/{epoll}")).is_ok_and(|info| {
                info.lines().any(|line| {
                    let mut words = line.split_whitespace();
                    words.next() == Some("tfd:") && words.next() == Some(target.as_str())
                })
            })
        })
        .min()
}

/// One runtime's polling window. Only its own thread uses it; the atomics are there because
/// the runtime's hooks must be `Sync`.
struct Window {
    epoll: OnceLock<RawFd>,
    bound: Duration,
    /// The current window, in nanoseconds.
    window: AtomicU64,
    /// When the thread went to sleep after a window that caught nothing (nanoseconds since
    /// `epoch`, plus one), or 0.
    slept_at: AtomicU64,
    epoch: Instant,
    /// Streamed writes the thread is receiving ([`Receiving`]).
    receiving: Arc<AtomicUsize>,
}

impl Window {
    fn new(bound: Duration, receiving: Arc<AtomicUsize>) -> Self {
        Self {
            epoll: OnceLock::new(),
            bound,
            window: AtomicU64::new(nanos(bound)),
            slept_at: AtomicU64::new(0),
            epoch: Instant::now(),
            receiving,
        }
    }

    fn now(&self) -> u64 {
        nanos(self.epoch.elapsed()).saturating_add(1)
    }

    fn before_park(&self) {
        let Some(&epoll) = self.epoll.get() else {
            return;
        };
        if self.receiving.load(Ordering::Relaxed) > 0 {
            // A sleep between a stream's frames says nothing of the next call: the window
            // is left as it is.
            self.slept_at.store(0, Ordering::Relaxed);
            return;
        }
        let window = Duration::from_nanos(self.window.load(Ordering::Relaxed));
        if !window.is_zero() && poll_until_ready(epoll, window) {
            self.slept_at.store(0, Ordering::Relaxed);
        } else {
            self.slept_at.store(self.now(), Ordering::Relaxed);
        }
    }

    fn after_unpark(&self) {
        let slept_at = self.slept_at.swap(0, Ordering::Relaxed);
        if slept_at == 0 {
            return;
        }
        let slept = self.now().saturating_sub(slept_at);
        let window = self.window.load(Ordering::Relaxed);
        let next = next_window(window, slept, nanos(self.bound));
        self.window.store(next, Ordering::Relaxed);
    }
}

/// The window after a sleep of `slept` that followed a window of `window` catching nothing
/// (all in nanoseconds): twice as long (at least an eighth of `bound`, at most `bound`) when
/// `bound` would have caught what woke the thread, half as long (none below an eighth of the
/// bound) when even `bound` would not have.
fn next_window(window: u64, slept: u64, bound: u64) -> u64 {
    let floor = bound / 8;
    if slept <= bound {
        window.saturating_mul(2).clamp(floor, bound)
    } else if window / 2 < floor {
        0
    } else {
        window / 2
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Polls `epoll` without sleeping until it is readable (`true`) or `window` has passed.
#[allow(unsafe_code)]
fn poll_until_ready(epoll: RawFd, window: Duration) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec};
    // SAFETY: `epoll` is the descriptor of the runtime whose park this hook precedes, on that
    // runtime's own thread: the runtime holds it open while it runs. Only `poll`, which changes
    // nothing, uses it.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(epoll) };
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let end = Instant::now() + window;
    loop {
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&now)) {
            Ok(0) => {}
            Ok(_) => return true,
            Err(_) => return false,
        }
        if Instant::now() >= end {
            return false;
        }
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: u64 = 200_000;

    #[test]
    fn the_window_grows_to_the_bound_after_short_sleeps_and_shrinks_to_none_after_long_ones() {
        // Short sleeps: from none, through the floor, to the bound, and never past it.
        let mut window = 0;
        let mut seen = Vec::new();
        for _ in 0..6 {
            window = next_window(window, BOUND / 2, BOUND);
            seen.push(window);
        }
        assert_eq!(seen, [25_000, 50_000, 100_000, 200_000, 200_000, 200_000]);
        // Long sleeps: halved down to the floor, then none, and none stays none.
        let mut seen = Vec::new();
        for _ in 0..5 {
            window = next_window(window, BOUND * 10, BOUND);
            seen.push(window);
        }
        assert_eq!(seen, [100_000, 50_000, 25_000, 0, 0]);
        // A sleep exactly as long as the bound counts as one the bound would have caught.
        assert_eq!(next_window(0, BOUND, BOUND), BOUND / 8);
    }

    #[test]
    fn polling_returns_as_soon_as_the_epoll_instance_is_ready_and_not_before_the_window() {
        use rustix::event::epoll;
        let instance = epoll::create(epoll::CreateFlags::CLOEXEC).unwrap();
        let (reader, mut writer) = std::io::pipe().unwrap();
        epoll::add(
            &instance,
            &reader,
            epoll::EventData::new_u64(1),
            epoll::EventFlags::IN | epoll::EventFlags::ET,
        )
        .unwrap();
        let window = Duration::from_millis(20);
        let started = Instant::now();
        assert!(!poll_until_ready(instance.as_raw_fd(), window));
        assert!(started.elapsed() >= window, "gave up before its window");
        std::io::Write::write_all(&mut writer, b"x").unwrap();
        // Ready already: true at once, whatever the window (an hour would hang the test).
        assert!(poll_until_ready(
            instance.as_raw_fd(),
            Duration::from_secs(3_600)
        ));
    }

    #[test]
    fn a_built_runtime_knows_its_own_epoll_instance_and_serves_while_polling() {
        let Polling { runtime, polls, .. } = build(
            tokio::runtime::Builder::new_current_thread().enable_all(),
            Duration::from_millis(1),
        )
        .unwrap();
        assert!(polls, "the runtime's epoll instance was not found");
        // Calls one after another on a socket of the runtime: each is answered, the thread
        // polling between them.
        let answered = runtime.block_on(async {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            let peer = std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut stream = std::net::TcpStream::connect(address).unwrap();
                let mut byte = [0u8; 1];
                for round in 0..100u8 {
                    stream.write_all(&[round]).unwrap();
                    stream.read_exact(&mut byte).unwrap();
                    assert_eq!(byte[0], round);
                }
            });
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut byte = [0u8; 1];
            let mut answered = 0;
            while socket.read(&mut byte).await.unwrap() == 1 {
                socket.write_all(&byte).await.unwrap();
                answered += 1;
            }
            peer.join().unwrap();
            answered
        });
        assert_eq!(answered, 100);
    }

    #[test]
    fn a_thread_receiving_a_stream_sleeps_without_polling_until_the_stream_ends() {
        // Run on a thread of its own, so that a poll that does not stop fails the test
        // instead of hanging it.
        let (done, finished) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            // A timer is not an epoll event: a thread polling before it sleeps on one spins
            // the whole window (an hour here) before it sleeps.
            let polling = build(
                tokio::runtime::Builder::new_current_thread().enable_all(),
                Duration::from_secs(3_600),
            )
            .unwrap();
            assert!(polling.polls, "the runtime's epoll instance was not found");
            polling.enter();
            let receiving = Receiving::start();
            let other = std::thread::spawn(Receiving::start).join().unwrap();
            assert_eq!(polling.receiving.load(Ordering::Relaxed), 1);
            polling
                .runtime
                .block_on(async { tokio::time::sleep(Duration::from_millis(5)).await });
            drop((receiving, other));
            let _ = done.send(());
            polling.receiving.load(Ordering::Relaxed)
        });
        match finished.recv_timeout(Duration::from_secs(60)) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("the thread polled while it received a stream")
            }
            // Sent, or the thread ended without sending: its result says which.
            _ => assert_eq!(thread.join().unwrap(), 0, "the stream's count outlived it"),
        }
    }

    /// Through a real connection: a streamed write holds its thread's count from its request
    /// until it ends, and a call that is not a stream holds none.
    #[test]
    fn a_connection_counts_its_streamed_write_from_its_request_to_its_end() {
        use capfs::{Access, ExecutorFileSystem, LocalFileSystem, Sandbox, WriteOptions};
        use tokio::io::AsyncWriteExt;

        let polling = build(
            tokio::runtime::Builder::new_current_thread().enable_all(),
            Duration::from_millis(1),
        )
        .unwrap();
        polling.enter();
        let count = Arc::clone(&polling.receiving);
        let now = move || count.load(Ordering::Relaxed);
        // Gives the connection's tasks their turns until `done` holds, a bounded number of
        // times: everything here runs on this one thread.
        async fn until(done: impl Fn() -> bool) -> bool {
            for _ in 0..10_000 {
                if done() {
                    return true;
                }
                tokio::task::yield_now().await;
            }
            done()
        }
        polling.runtime.block_on(async move {
            let dir = tempfile::tempdir().unwrap();
            let sandbox = Sandbox::new()
                .with_root(dir.path(), Access::ReadWrite)
                .unwrap();
            let file = sandbox.roots()[0].path().join("streamed").unwrap();
            let fs = Arc::new(LocalFileSystem::new(sandbox));
            let (remote, _serving) = super::super::pair(fs, Default::default()).await.unwrap();
            remote.get_metadata(&file.parent().unwrap()).await.unwrap();
            assert_eq!(now(), 0, "a call that is no stream counted");

            let size = 3 * crate::protocol::DATA_CHUNK_BYTES;
            let (mut sender, mut source) = tokio::io::duplex(size);
            let target = file.clone();
            let client = remote.clone();
            let write = tokio::spawn(async move {
                client
                    .write_file_from(
                        &target,
                        &mut source,
                        Some(size as u64),
                        WriteOptions::default(),
                        &mut |_| {},
                    )
                    .await
            });
            let first = vec![7u8; crate::protocol::DATA_CHUNK_BYTES];
            sender.write_all(&first).await.unwrap();
            assert!(
                until(|| now() == 1).await,
                "the write did not count: {}",
                now()
            );
            sender
                .write_all(&vec![7u8; size - first.len()])
                .await
                .unwrap();
            drop(sender);
            assert_eq!(write.await.unwrap().unwrap(), size as u64);
            assert!(
                until(|| now() == 0).await,
                "the count outlived the write: {}",
                now()
            );
            assert_eq!(remote.read_file(&file).await.unwrap().len(), size);
        });
    }
}
