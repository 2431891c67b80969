//! A running process: its control, the readers that turn its output into events only as fast
//! as they are taken, and the task that waits for it, ends what it left behind and closes.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rustix::process::{Pid, Signal};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::ChildStdin;
use tokio::sync::{mpsc, oneshot};

use crate::error;

use super::cgroup::Cgroup;
use super::egress::Proxy;
use super::init::Memory;
use super::keeper::Keeper;
use super::{
    OutputStream, PROCESS_EVENT_QUEUE, ProcessControl, ProcessEvent, ProcessExit, StartedProcess,
    TerminalSize,
};

/// The largest output chunk an event carries.
pub(crate) const OUTPUT_CHUNK: usize = 64 * 1024;

/// What a process holds until it closes: released before `Closed`, its egress proxy (if any)
/// first, once each of its connections wrote its audit line.
pub(crate) struct Held {
    pub(crate) things: Box<dyn std::any::Any + Send>,
    pub(crate) proxy: Option<Proxy>,
}

/// How the process's output and input are connected.
pub(crate) enum Wiring {
    /// Pipes; `stdin` when its input was kept open.
    Pipes {
        stdin: Option<ChildStdin>,
        stdout: tokio::process::ChildStdout,
        stderr: tokio::process::ChildStderr,
    },
    /// A terminal's controller side, for input and output both.
    Terminal(OwnedFd),
}

/// A started process as this module waits for it: a child the standard library spawned, or a
/// confined process's keeper.
pub(crate) enum Child {
    Spawned(tokio::process::Child),
    Kept {
        keeper: Keeper,
        /// The keeper's descriptor, readable once it has ended.
        ended: AsyncFd<OwnedFd>,
    },
}

impl Child {
    pub(crate) fn kept(keeper: Keeper) -> io::Result<Self> {
        // `with_interest` is deprecated for descriptors the `AsyncFd` does not own; this one
        // owns its copy of the keeper's.
        #[allow(deprecated)]
        let ended = AsyncFd::with_interest(
            keeper.pidfd().try_clone_to_owned()?,
            tokio::io::Interest::READABLE,
        )?;
        Ok(Self::Kept { keeper, ended })
    }

    pub(crate) fn id(&self) -> Option<u32> {
        match self {
            Self::Spawned(child) => child.id(),
            Self::Kept { keeper, .. } => Some(keeper.id()),
        }
    }

    /// A descriptor of the process: a copy of its keeper's, else one opened for its id.
    pub(crate) fn pidfd(&self) -> io::Result<OwnedFd> {
        match self {
            Self::Spawned(child) => {
                let pid = child
                    .id()
                    .and_then(|id| Pid::from_raw(id as i32))
                    .ok_or_else(|| error::child_lacks("the process has no id"))?;
                Ok(rustix::process::pidfd_open(
                    pid,
                    rustix::process::PidfdFlags::empty(),
                )?)
            }
            Self::Kept { keeper, .. } => keeper.pidfd().try_clone_to_owned(),
        }
    }

    pub(crate) fn start_kill(&mut self) -> io::Result<()> {
        match self {
            Self::Spawned(child) => child.start_kill(),
            Self::Kept { keeper, .. } => keeper.kill(),
        }
    }

    /// Waits for the process to end (and reaps it); cancel-safe, and again ready at once
    /// after it has.
    async fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
        match self {
            Self::Spawned(child) => child.wait().await,
            Self::Kept { keeper, ended } => loop {
                let mut ready = ended.readable().await?;
                if let Some(status) = keeper.try_wait()? {
                    return Ok(status);
                }
                ready.clear_ready();
            },
        }
    }

    /// What is left to let go of once the process has been waited for.
    fn into_memory(self) -> Option<Memory> {
        match self {
            Self::Spawned(_) => None,
            Self::Kept { keeper, .. } => keeper.into_memory(),
        }
    }
}

enum Input {
    Closed,
    Pipe(ChildStdin),
    Terminal(Arc<AsyncFd<OwnedFd>>),
}

#[derive(Default)]
struct State {
    exited: bool,
    killed: bool,
}

struct Shared {
    pid: u32,
    pidfd: OwnedFd,
    /// The process runs under a keeper that relays signals (a PID namespace of its own): a
    /// signal goes to the keeper alone, which passes it on once.
    relayed: bool,
    cgroup: Mutex<Option<Cgroup>>,
    had_cgroup: bool,
    state: Mutex<State>,
    input: tokio::sync::Mutex<Input>,
    terminal: Option<Arc<AsyncFd<OwnedFd>>>,
}

impl Shared {
    /// Kills the main process (by its pidfd, which cannot name another process) and
    /// everything in its cgroup, or its process group when there is no cgroup.
    fn kill_tree(&self, main_reaped: bool) {
        if !main_reaped {
            let _ = rustix::process::pidfd_send_signal(&self.pidfd, Signal::KILL);
        }
        let cgroup = self.cgroup.lock().unwrap_or_else(|e| e.into_inner());
        match (&*cgroup, self.had_cgroup) {
            (Some(cgroup), _) => {
                cgroup.kill_all();
            }
            // The cgroup is removed once the process closed: nothing of it is left.
            (None, true) => {}
            // A process group's id is not reused while any member lives, so this reaches
            // only the process's own group.
            (None, false) => {
                if let Some(pid) = Pid::from_raw(self.pid as i32) {
                    let _ = rustix::process::kill_process_group(pid, Signal::KILL);
                }
            }
        }
    }
}

/// The half of a process any task may use.
struct Control {
    shared: Arc<Shared>,
    /// Dropped with the control: tells the waiting task that no one can end the process any
    /// more, so it is ended once its events are dropped too.
    _alive: oneshot::Sender<()>,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProcessControl")
            .field("pid", &self.shared.pid)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl ProcessControl for Control {
    async fn write(&self, bytes: &[u8]) -> io::Result<()> {
        let mut input = self.shared.input.lock().await;
        match &mut *input {
            Input::Closed => Err(error::input_closed()),
            Input::Pipe(stdin) => {
                stdin.write_all(bytes).await?;
                stdin.flush().await
            }
            Input::Terminal(fd) => write_terminal(fd, bytes).await,
        }
    }

    async fn close_input(&self) -> io::Result<()> {
        let mut input = self.shared.input.lock().await;
        match &*input {
            // A terminal has no end of input; its end-of-file character is what a reader
            // sees as one.
            Input::Terminal(fd) => write_terminal(fd, &[0x04]).await,
            _ => {
                *input = Input::Closed;
                Ok(())
            }
        }
    }

    async fn resize(&self, size: TerminalSize) -> io::Result<()> {
        match &self.shared.terminal {
            Some(fd) => super::pty::resize(fd.get_ref(), size),
            None => Err(error::no_terminal()),
        }
    }

    async fn signal(&self, signal: i32) -> io::Result<()> {
        let signal = Signal::from_named_raw(signal).ok_or_else(|| error::not_a_signal(signal))?;
        let state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.exited {
            return Ok(());
        }
        if self.shared.relayed {
            return match rustix::process::pidfd_send_signal(&self.shared.pidfd, signal) {
                Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
                Err(e) => Err(e.into()),
            };
        }
        let pid = Pid::from_raw(self.shared.pid as i32).ok_or_else(error::input_closed)?;
        // The group may be gone while the main process lingers: nothing to signal then.
        match rustix::process::kill_process_group(pid, signal) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn terminate(&self) -> io::Result<bool> {
        let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        let running = !state.exited;
        if running {
            state.killed = true;
        }
        self.shared.kill_tree(state.exited);
        Ok(running)
    }
}

async fn write_terminal(fd: &AsyncFd<OwnedFd>, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        let mut ready = fd.writable().await?;
        match ready.try_io(|fd| Ok(rustix::io::write(fd.get_ref(), bytes)?)) {
            Ok(Ok(n)) => bytes = &bytes[n..],
            Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Err(error::input_closed()),
            Ok(Err(e)) => return Err(e),
            Err(_would_block) => {}
        }
    }
    Ok(())
}

/// Starts the readers and the waiting task of a spawned `child`, and returns its halves;
/// `relayed` when the child is a keeper that relays signals to the program.
pub(crate) fn launch(
    mut child: Child,
    pidfd: OwnedFd,
    relayed: bool,
    cgroup: Option<Cgroup>,
    wiring: Wiring,
    time_limit: Option<Duration>,
    held: Held,
) -> io::Result<StartedProcess> {
    let pid = child.id().unwrap_or(0);
    let (sender, events) = mpsc::channel(PROCESS_EVENT_QUEUE);
    let mut readers = Vec::new();
    let (input, terminal) = match wiring {
        Wiring::Pipes {
            stdin,
            stdout,
            stderr,
        } => {
            readers.push(tokio::spawn(pump(
                stdout,
                OutputStream::Stdout,
                sender.clone(),
            )));
            readers.push(tokio::spawn(pump(
                stderr,
                OutputStream::Stderr,
                sender.clone(),
            )));
            (stdin.map_or(Input::Closed, Input::Pipe), None)
        }
        Wiring::Terminal(controller) => {
            // `new` is deprecated for descriptors the `AsyncFd` does not own; an `OwnedFd`
            // stays open exactly as long as the `AsyncFd` holding it.
            #[allow(deprecated)]
            let fd = Arc::new(AsyncFd::new(controller)?);
            readers.push(tokio::spawn(pump_terminal(fd.clone(), sender.clone())));
            (Input::Terminal(fd.clone()), Some(fd))
        }
    };
    let shared = Arc::new(Shared {
        pid,
        pidfd,
        relayed,
        had_cgroup: cgroup.is_some(),
        cgroup: Mutex::new(cgroup),
        state: Mutex::new(State::default()),
        input: tokio::sync::Mutex::new(input),
        terminal,
    });
    let (alive, control_gone) = oneshot::channel();
    let control = Arc::new(Control {
        shared: shared.clone(),
        _alive: alive,
    });
    tokio::spawn(async move {
        let abandoned = async {
            let _ = control_gone.await;
            sender.closed().await;
        };
        let limit = async {
            match time_limit {
                Some(limit) => tokio::time::sleep(limit).await,
                None => std::future::pending().await,
            }
        };
        let status = tokio::select! {
            status = child.wait() => status,
            () = limit => end(&shared, &mut child).await,
            () = abandoned => end(&shared, &mut child).await,
        };
        let exit = {
            let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            state.exited = true;
            exit_of(status, state.killed)
        };
        // Everything it started goes with it, so that its output ends and `Closed` comes.
        shared.kill_tree(true);
        let _ = sender.send(ProcessEvent::Exited(exit)).await;
        for reader in readers {
            let _ = reader.await;
        }
        // Its connections out are cut, each with its audit line written, before it closes.
        let Held { things, proxy } = held;
        if let Some(proxy) = proxy {
            proxy.close().await;
        }
        // Closed means nothing of the process is left: its cgroup, its temporary directory
        // and its place among the running are given back first, off this task's thread
        // (the cgroup waits for its last tasks to leave, the directory may be large).
        let cgroup = shared
            .cgroup
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        // The helpers' memory too: it waits for an init that outlives a killed keeper.
        let memory = child.into_memory();
        let _ = tokio::task::spawn_blocking(move || drop((things, cgroup, memory))).await;
        let _ = sender.send(ProcessEvent::Closed).await;
    });
    Ok(StartedProcess::new(pid, control, events))
}

/// Ends the process as the implementation's decision and waits for it.
async fn end(shared: &Shared, child: &mut Child) -> io::Result<std::process::ExitStatus> {
    {
        let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        state.killed = true;
        shared.kill_tree(false);
    }
    child.wait().await
}

fn exit_of(status: io::Result<std::process::ExitStatus>, killed: bool) -> ProcessExit {
    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => ProcessExit {
                code,
                signal: None,
                killed,
            },
            (None, Some(signal)) => ProcessExit::signal(signal, killed),
            (None, None) => ProcessExit {
                code: -1,
                signal: None,
                killed,
            },
        },
        // Waiting failed: the process cannot be known to run, so it is reported ended.
        Err(_) => ProcessExit {
            code: -1,
            signal: None,
            killed: true,
        },
    }
}

/// Moves one output to events, reading only once there is room for what it reads.
async fn pump(
    mut output: impl AsyncRead + Unpin,
    stream: OutputStream,
    sender: mpsc::Sender<ProcessEvent>,
) {
    // Read into spare capacity, never zeroed: a process that writes little touches little of
    // the buffer (each page the server writes after a fork costs it a page fault).
    let mut buf = Vec::with_capacity(OUTPUT_CHUNK);
    loop {
        let Ok(permit) = sender.reserve().await else {
            return;
        };
        buf.clear();
        match output.read_buf(&mut buf).await {
            Ok(0) => return,
            Ok(_) => permit.send(ProcessEvent::Output {
                stream,
                bytes: buf.clone(),
            }),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// [`pump`] for a terminal, whose end (every terminal side closed) reads as `EIO`.
async fn pump_terminal(fd: Arc<AsyncFd<OwnedFd>>, sender: mpsc::Sender<ProcessEvent>) {
    let mut buf = Vec::with_capacity(OUTPUT_CHUNK);
    loop {
        let Ok(permit) = sender.reserve().await else {
            return;
        };
        let n = loop {
            let Ok(mut ready) = fd.readable().await else {
                return;
            };
            buf.clear();
            let spare = rustix::buffer::spare_capacity(&mut buf);
            match ready.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), spare)?)) {
                Ok(Ok(n)) => break n,
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(_)) => return,
                Err(_would_block) => {}
            }
        };
        if n == 0 {
            return;
        }
        permit.send(ProcessEvent::Output {
            stream: OutputStream::Stdout,
            bytes: buf.clone(),
        });
    }
}
