//! A test-only [`ExecutorProcesses`]: plain `tokio::process` children on pipes, unconfined,
//! that record every request they get and the pids they started, so that tests of the wire
//! can check what the server asked for and end what it started. Confinement is not its
//! concern (the local implementation's tests cover it); the wire's is.

use std::io;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use capfs::process::{
    Confinement, ExecutorProcesses, OutputStream, PROCESS_EVENT_QUEUE, ProcessControl,
    ProcessEvent, ProcessExit, ProcessRequest, StartedProcess, TerminalSize,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// Starts children and remembers what it was asked.
#[derive(Default)]
pub struct TestProcesses {
    pub requests: Mutex<Vec<ProcessRequest>>,
    pub pids: Mutex<Vec<u32>>,
}

#[derive(Debug)]
struct Control {
    pid: u32,
    stdin: tokio::sync::Mutex<Option<tokio::process::ChildStdin>>,
    ended: Arc<std::sync::atomic::AtomicBool>,
}

fn kill(pid: u32, signal: i32) {
    use rustix::process::{Pid, Signal, kill_process_group};
    // The child leads a process group of its own: the signal reaches what it started too. A
    // pid that could name every process (`-1`) or the caller's group (`0`) is never signalled.
    let Some(group) = i32::try_from(pid)
        .ok()
        .filter(|p| *p > 1)
        .and_then(Pid::from_raw)
    else {
        return;
    };
    let signal = match signal {
        2 => Signal::INT,
        15 => Signal::TERM,
        _ => Signal::KILL,
    };
    let _ = kill_process_group(group, signal);
}

#[async_trait]
impl ProcessControl for Control {
    async fn write(&self, bytes: &[u8]) -> io::Result<()> {
        let mut stdin = self.stdin.lock().await;
        let Some(pipe) = stdin.as_mut() else {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "input closed"));
        };
        pipe.write_all(bytes).await?;
        pipe.flush().await
    }

    async fn close_input(&self) -> io::Result<()> {
        self.stdin.lock().await.take();
        Ok(())
    }

    async fn resize(&self, _size: TerminalSize) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "process has no terminal",
        ))
    }

    async fn signal(&self, signal: i32) -> io::Result<()> {
        if !self.ended.load(std::sync::atomic::Ordering::SeqCst) {
            kill(self.pid, signal);
        }
        Ok(())
    }

    async fn terminate(&self) -> io::Result<bool> {
        let running = !self.ended.load(std::sync::atomic::Ordering::SeqCst);
        if running {
            kill(self.pid, 9);
        }
        Ok(running)
    }
}

async fn pump(
    mut from: impl AsyncRead + Unpin,
    stream: OutputStream,
    events: mpsc::Sender<ProcessEvent>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let event = ProcessEvent::Output {
            stream,
            bytes: buf[..n].to_vec(),
        };
        if events.send(event).await.is_err() {
            break;
        }
    }
}

#[async_trait]
impl ExecutorProcesses for TestProcesses {
    fn confinement(&self) -> Confinement {
        Confinement::Unconfined
    }

    async fn start(&self, request: ProcessRequest) -> io::Result<StartedProcess> {
        self.requests.lock().unwrap().push(request.clone());
        let mut command = tokio::process::Command::new(&request.argv[0]);
        command
            .args(&request.argv[1..])
            .current_dir(request.cwd.as_path())
            .env_clear()
            .envs(request.env.iter().cloned())
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .stdin(if request.pipe_stdin {
                std::process::Stdio::piped()
            } else {
                std::process::Stdio::null()
            })
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let pid = child.id().expect("a running child");
        self.pids.lock().unwrap().push(pid);
        let (tx, rx) = mpsc::channel(PROCESS_EVENT_QUEUE);
        let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let out = tokio::spawn(pump(
            child.stdout.take().unwrap(),
            OutputStream::Stdout,
            tx.clone(),
        ));
        let err = tokio::spawn(pump(
            child.stderr.take().unwrap(),
            OutputStream::Stderr,
            tx.clone(),
        ));
        let control = Arc::new(Control {
            pid,
            stdin: tokio::sync::Mutex::new(child.stdin.take()),
            ended: Arc::clone(&ended),
        });
        tokio::spawn(async move {
            let status = child.wait().await;
            ended.store(true, std::sync::atomic::Ordering::SeqCst);
            use std::os::unix::process::ExitStatusExt;
            let exit = match status {
                Ok(s) => match s.signal() {
                    Some(signal) => ProcessExit::signal(signal, signal == 9),
                    None => ProcessExit::code(s.code().unwrap_or(-1)),
                },
                Err(_) => ProcessExit::code(-1),
            };
            let _ = tx.send(ProcessEvent::Exited(exit)).await;
            let _ = (out.await, err.await);
            let _ = tx.send(ProcessEvent::Closed).await;
        });
        Ok(StartedProcess::new(pid, control, rx))
    }
}

/// Whether process `pid` still exists (a zombie counts as gone).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// An in-process server serving `env`'s file system and `processes`, stopped when dropped.
pub struct ProcessServer {
    pub url: String,
    _stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<io::Result<()>>,
}

impl ProcessServer {
    pub async fn start(
        fs: Arc<dyn capfs::ExecutorFileSystem>,
        processes: Arc<TestProcesses>,
        config: capfs_wire::server::ServerConfig,
    ) -> Self {
        let server = capfs_wire::server::Server::bind(fs, config)
            .await
            .expect("bind")
            .with_processes(processes);
        let url = server.url().to_string();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server.run_until(async {
            let _ = stopped.await;
        }));
        Self {
            url,
            _stop: stop,
            task,
        }
    }

    /// Stops the server and waits until it has.
    pub async fn stop(self) {
        drop(self._stop);
        let _ = self.task.await;
    }
}

impl Drop for TestProcesses {
    fn drop(&mut self) {
        for pid in self.pids.lock().unwrap().iter() {
            if alive(*pid) {
                kill(*pid, 9);
            }
        }
    }
}
