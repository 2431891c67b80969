//! The starter's side of a confined process: it makes the keeper (`init.rs`) without copying
//! its own memory, waits until the program runs, and later reaps the keeper and lets the
//! helpers' memory go.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::event::{EventfdFlags, PollFd, PollFlags};
use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};

use super::init::{self, KeeperStart, Memory, Steps};

/// A confined process's keeper, a child of this process until it is reaped.
#[derive(Debug)]
pub(crate) struct Keeper {
    pid: Pid,
    pidfd: OwnedFd,
    /// How it ended, once reaped.
    status: Option<WaitStatus>,
    /// The helpers' memory, kept until the keeper is reaped and then let go of by
    /// [`Keeper::into_memory`]'s caller, or by the drop.
    memory: Option<Memory>,
}

/// Blocks every signal in this thread until dropped, then restores its mask.
struct SignalsBlocked(libc::sigset_t);

impl SignalsBlocked {
    #[allow(unsafe_code)]
    fn new() -> Self {
        // SAFETY: sets on this stack, filled by the C library's own functions.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut before: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&raw mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &raw const all, &raw mut before);
            Self(before)
        }
    }
}

impl Drop for SignalsBlocked {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: the mask this thread had.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &raw const self.0, std::ptr::null_mut())
        };
    }
}

impl Keeper {
    /// Starts a keeper whose program has `stdio` as its standard input, output and error; the
    /// keeper runs `steps`' first, then makes the init and the program, which runs the rest.
    /// Returns once the program has run its `execve`, or with the error that stopped a step.
    ///
    /// This thread blocks every signal and waits meanwhile: the keeper shares its memory and
    /// thread-local storage (`init.rs`), and runs on the values borrowed here until then.
    pub(crate) fn start(stdio: [BorrowedFd<'_>; 3], steps: &mut dyn Steps) -> io::Result<Self> {
        let memory = Memory::take()?;
        let started = rustix::event::eventfd(0, EventfdFlags::CLOEXEC)?;
        let (pid, pidfd, outcome) = {
            let mut start = KeeperStart {
                memory: &memory,
                stdio: stdio.map(|fd| fd.as_raw_fd()),
                steps,
                started: started.as_raw_fd(),
                outcome: AtomicI32::new(0),
            };
            let blocked = SignalsBlocked::new();
            // SAFETY: every signal is blocked here, and this thread waits below, by raw
            // system calls and without touching `start`, until the keeper says it is done
            // with it or ends.
            #[allow(unsafe_code)]
            let (pid, pidfd) = unsafe { init::start_keeper(&mut start)? };
            wait_started(&started, &pidfd);
            drop(blocked);
            (pid, pidfd, start.outcome.load(Ordering::SeqCst))
        };
        let mut keeper = Self {
            pid,
            pidfd,
            status: None,
            memory: Some(memory),
        };
        match outcome {
            init::STARTED => Ok(keeper),
            0 => {
                let status = keeper.reap();
                Err(io::Error::other(format!(
                    "the process's keeper ended before it reported the program's start ({status:?})"
                )))
            }
            errno => {
                keeper.reap();
                Err(io::Error::from_raw_os_error(errno))
            }
        }
    }

    /// The keeper's process id.
    pub(crate) fn id(&self) -> u32 {
        self.pid.as_raw_nonzero().get().unsigned_abs()
    }

    /// A descriptor of the keeper (readable once it has ended).
    pub(crate) fn pidfd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }

    /// Sends `SIGKILL` to the keeper, unless it has been reaped.
    pub(crate) fn kill(&self) -> io::Result<()> {
        match self.status {
            Some(_) => Ok(()),
            None => Ok(rustix::process::pidfd_send_signal(
                &self.pidfd,
                Signal::KILL,
            )?),
        }
    }

    /// How the keeper ended, reaping it if it has; `None` while it runs.
    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = rustix::process::waitpid(Some(self.pid), WaitOptions::NOHANG)?
                .map(|(_, status)| status);
        }
        Ok(self
            .status
            .map(|status| ExitStatus::from_raw(status.as_raw())))
    }

    /// The helpers' memory once the keeper is reaped, for the caller to drop where it may
    /// wait (the drop waits for an init that outlives its keeper for a moment); `None`
    /// before (the keeper is then killed, reaped and its memory let go of here).
    pub(crate) fn into_memory(mut self) -> Option<Memory> {
        match self.status {
            Some(_) => self.memory.take(),
            None => None,
        }
    }

    /// Waits for the keeper to end, and reaps it.
    fn reap(&mut self) -> Option<WaitStatus> {
        while self.status.is_none() {
            match rustix::process::waitpid(Some(self.pid), WaitOptions::empty()) {
                Ok(Some((_, status))) => self.status = Some(status),
                Err(rustix::io::Errno::INTR) => {}
                // Not this process's child any more: nothing runs on its memory.
                Ok(None) | Err(_) => break,
            }
        }
        self.status
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.kill();
            self.reap();
        }
    }
}

/// Waits until the keeper writes `started` or ends. Every signal is blocked in this thread, so
/// the wait ends only by one of the two.
fn wait_started(started: &OwnedFd, keeper: &OwnedFd) {
    loop {
        let mut fds = [
            PollFd::new(started, PollFlags::IN),
            PollFd::new(keeper, PollFlags::IN),
        ];
        match rustix::event::poll(&mut fds, None) {
            Ok(n) if n > 0 => return,
            _ => {}
        }
    }
}
