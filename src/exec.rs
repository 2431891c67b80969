//! `capfs exec [-t] -- CMD [ARGS...]`: runs one command in the sandbox, as `ssh host cmd` runs
//! one on a host: through a server's process methods (`--remote`, a `capfs serve --exec`) or
//! confined on this host (`--root`). Its input, output and error are streamed as bytes; Ctrl-C
//! reaches it (as an interrupt, or as `^C` on its terminal with `-t`); its exit status is the
//! command's (128 + the signal for a command a signal ended). Text of the server's that reaches
//! the terminal (an error) is escaped; the command's own output is passed through as it is.

use std::io::{IsTerminal, Write};
use std::os::fd::AsFd;
use std::sync::Arc;

use capfs::AbsolutePathBuf;
use capfs::process::{
    ExecutorProcesses, LocalProcesses, Network, OutputStream, ProcessEvent, ProcessPolicy,
    ProcessRequest, TerminalSize,
};
use capfs_wire::protocol::{RootAccess, RootDescription};
use tokio::io::AsyncReadExt;

use crate::args::{ExecArgs, Target};
use crate::exec_flags::ExecNetwork;
use crate::fail::{self, Failure};
use crate::open::Opener;

/// Puts the terminal on stdin in raw mode until dropped.
struct RawMode(Option<rustix::termios::Termios>);

impl RawMode {
    fn enter(wanted: bool) -> Self {
        let stdin = std::io::stdin();
        if !wanted || !stdin.is_terminal() {
            return Self(None);
        }
        let Ok(saved) = rustix::termios::tcgetattr(stdin.as_fd()) else {
            return Self(None);
        };
        let mut raw = saved.clone();
        raw.make_raw();
        let now = rustix::termios::OptionalActions::Now;
        match rustix::termios::tcsetattr(stdin.as_fd(), now, &raw) {
            Ok(()) => Self(Some(saved)),
            Err(_) => Self(None),
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            let now = rustix::termios::OptionalActions::Now;
            let _ = rustix::termios::tcsetattr(std::io::stdin().as_fd(), now, saved);
        }
    }
}

fn terminal_size() -> TerminalSize {
    rustix::termios::tcgetwinsize(std::io::stdout().as_fd())
        .ok()
        .filter(|w| w.ws_row > 0 && w.ws_col > 0)
        .map_or_else(TerminalSize::default, |w| TerminalSize {
            rows: w.ws_row,
            cols: w.ws_col,
        })
}

/// The processes `target` names: a server's, or confined here to `--root`'s roots.
async fn processes(
    target: &Target,
    args: &ExecArgs,
) -> Result<(Arc<dyn ExecutorProcesses>, Vec<RootDescription>), Failure> {
    let opener = Opener::for_target(target)?;
    let environment = opener.open().await?;
    let roots = environment.file_system().served_roots();
    let processes: Arc<dyn ExecutorProcesses> = if opener.is_local() {
        let mut policy = ProcessPolicy::default().with_network(match args.network {
            ExecNetwork::None => Network::None,
            ExecNetwork::Loopback => Network::Loopback,
            ExecNetwork::All => Network::All,
        });
        if let Some((uid, gid)) = args.user {
            policy = policy.with_run_as(uid, gid);
        }
        let local = LocalProcesses::new(opener.sandbox()?, policy).map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::PermissionDenied && args.user.is_none() {
                " (give one with --user UID[:GID])"
            } else {
                ""
            };
            Failure::plain(
                format!("cannot run commands: {}{hint}", fail::reason(&e, "")),
                1,
            )
        })?;
        Arc::new(local)
    } else {
        environment
            .processes()
            .ok_or_else(|| Failure::plain("the server runs no commands (capfs serve --exec)", 1))?
    };
    Ok((processes, roots))
}

/// Runs the command; `Ok` when it exited with 0, else a quiet failure with its status.
pub async fn run(target: &Target, args: ExecArgs) -> Result<(), Failure> {
    let (processes, roots) = processes(target, &args).await?;
    let cwd = match &args.cwd {
        Some(dir) => AbsolutePathBuf::new(dir)
            .map_err(|e| Failure::usage(format!("--cwd {dir}: {}", fail::reason(&e, ""))))?,
        None => roots
            .iter()
            .find(|r| r.access == RootAccess::ReadWrite)
            .or(roots.first())
            .map(|r| r.path.clone())
            .ok_or_else(|| Failure::usage("no root to run the command in (--cwd)"))?,
    };
    let term = std::env::var("TERM").unwrap_or_else(|_| "xterm-256color".to_string());
    let mut request = ProcessRequest::new(args.command.clone(), cwd.clone());
    request.env = vec![
        ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
        ("HOME".into(), cwd.to_string()),
        ("LANG".into(), "C.UTF-8".into()),
        ("TERM".into(), if args.tty { term } else { "dumb".into() }),
    ];
    request.tty = args.tty.then(terminal_size);
    request.pipe_stdin = true;
    let started = processes
        .start(request)
        .await
        .map_err(|e| Failure::at("cannot run", &args.command[0], &e))?;
    let _raw = RawMode::enter(args.tty);
    let control = started.control;
    let input = {
        let control = Arc::clone(&control);
        tokio::spawn(async move {
            let mut stdin = tokio::io::stdin();
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(n) = stdin.read(&mut buf).await {
                if n == 0 || control.write(&buf[..n]).await.is_err() {
                    break;
                }
            }
            let _ = control.close_input().await;
        })
    };
    let mut events = started.events;
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| Failure::plain(format!("cannot catch Ctrl-C: {e}"), 1))?;
    let mut winch = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
        .map_err(|e| Failure::plain(format!("cannot watch the terminal: {e}"), 1))?;
    let mut code = None;
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            _ = interrupt.recv() => {
                let _ = control.signal(2).await;
                continue;
            }
            _ = winch.recv(), if args.tty => {
                let _ = control.resize(terminal_size()).await;
                continue;
            }
        };
        match event {
            Some(ProcessEvent::Output { stream, bytes }) => {
                let written = match stream {
                    OutputStream::Stdout => {
                        let mut out = std::io::stdout().lock();
                        out.write_all(&bytes).and_then(|()| out.flush())
                    }
                    OutputStream::Stderr => std::io::stderr().lock().write_all(&bytes),
                };
                if written.is_err() {
                    let _ = control.terminate().await;
                }
            }
            Some(ProcessEvent::Exited(exit)) => code = Some(exit.code),
            Some(ProcessEvent::Closed) | None => break,
            // An event this client does not know has nothing to show.
            Some(_) => {}
        }
    }
    input.abort();
    match code {
        Some(0) => Ok(()),
        Some(code) => Err(Failure::quiet(u8::try_from(code).unwrap_or(1))),
        None => Err(Failure::plain(
            "the command's end was never told: connection lost",
            5,
        )),
    }
}
