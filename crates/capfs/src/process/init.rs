//! A confined process runs under two small processes of capfs's own, made between `fork` and
//! `exec`, so that it can have a PID namespace of its own:
//!
//! - the **keeper**, the child the starter spawned, stays in the starter's PID namespace: it is
//!   the process the starter waits for and signals. It relays the signals it gets to the init
//!   and, once the init is gone, ends as the program ended (the same exit code, or the same
//!   signal).
//! - the **init**, the first process of the new namespace, relays signals to the program's
//!   process group (an init gets no signal it has no handler for, so the program cannot be
//!   the init), reaps orphans, and reports the program's end to the keeper through a pipe.
//!   When it ends, the kernel kills everything left in the namespace: nothing the program
//!   started outlives it, daemons included. It dies with the keeper (`PR_SET_PDEATHSIG`).
//! - the **program**, the init's child, goes on to be confined and run.
//!
//! Both helpers close every descriptor they do not need (the program's output included, so
//! that it ends when the program's does) and never return to the caller; everything here is
//! a system call on memory prepared beforehand.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// The rights of the `/proc` a process gets: read files and list directories.
pub(crate) const PROC_ACCESS: u64 = (landlock_abi::READ_FILE | landlock_abi::READ_DIR) as u64;

/// The Landlock access bits this module names (the kernel's ABI, stable since ABI 1).
mod landlock_abi {
    pub(super) const READ_FILE: u32 = 1 << 2;
    pub(super) const READ_DIR: u32 = 1 << 3;
    pub(super) const RULE_PATH_BENEATH: u32 = 1;
}

/// The signals a keeper and an init pass on: those a person or the starter sends to stop,
/// interrupt, suspend or resume a program. `SIGKILL` and `SIGSTOP` cannot be caught: a kill
/// of the keeper ends the init (and so the namespace) with it.
const RELAYED: [i32; 12] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGTERM,
    libc::SIGCONT,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
    libc::SIGWINCH,
];

/// Whom this helper relays its signals to: a process group first, else the process.
static RELAY_TO: AtomicI32 = AtomicI32::new(0);

extern "C" fn relay(signal: libc::c_int) {
    let target = RELAY_TO.load(Ordering::Relaxed);
    if target <= 0 {
        return;
    }
    #[allow(unsafe_code)]
    // SAFETY: kill is async-signal-safe; errno is kept for the code the handler interrupted.
    unsafe {
        let errno = *libc::__errno_location();
        if libc::kill(-target, signal) != 0 {
            libc::kill(target, signal);
        }
        *libc::__errno_location() = errno;
    }
}

/// Sets every signal the program could be given to its default action, so that the helpers
/// and the program start alike (the starter's handlers survive a fork, not an exec).
#[allow(unsafe_code)]
fn default_signals() {
    for signal in RELAYED {
        // SAFETY: plain calls with a constant disposition.
        unsafe { libc::signal(signal, libc::SIG_DFL) };
    }
}

/// Relays every signal of [`RELAYED`] to `target` from now on.
#[allow(unsafe_code)]
fn relay_to(target: libc::pid_t) {
    RELAY_TO.store(target, Ordering::Relaxed);
    for signal in RELAYED {
        // SAFETY: a zeroed `sigaction` on the stack with a handler that only calls kill.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = relay as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&raw mut action.sa_mask);
            libc::sigaction(signal, &raw const action, std::ptr::null_mut());
        }
    }
}

/// A pipe whose ends close on `exec`.
#[allow(unsafe_code)]
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills the two integers; each descriptor is then owned once.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

/// What a helper does first: take its `name`, relay signals to `target`, and close every
/// descriptor but its `report` pipe.
fn settle(name_of: &std::ffi::CStr, target: libc::pid_t, report: &OwnedFd) {
    name(name_of);
    relay_to(target);
    close_all_but(report.as_raw_fd());
}

/// Names this process as `ps` shows it.
#[allow(unsafe_code)]
fn name(name: &std::ffi::CStr) {
    // SAFETY: the kernel copies at most 16 bytes of the string.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
}

/// `fork` without the C library's handlers: the raw call, as a thread-free child may make it.
#[allow(unsafe_code)]
fn fork() -> io::Result<libc::pid_t> {
    // SAFETY: clone with only SIGCHLD and no new stack is fork; the child continues on a copy
    // of this single thread's stack.
    let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0) };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        pid => Ok(pid as libc::pid_t),
    }
}

/// Closes every descriptor but `keep`.
#[allow(unsafe_code)]
fn close_all_but(keep: i32) {
    // SAFETY: closing descriptors this process alone uses from now on.
    unsafe {
        if keep > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, (keep - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32);
    }
}

/// In the child the starter spawned, right after it unshared a new PID namespace: makes the
/// keeper (this process) and the init, and returns `Ok` only in the program's process, the
/// init's child. An error before the split returns here in the spawned child; after it, the
/// process that failed returns it (the starter reads it all the same) and the others end.
pub(crate) fn split() -> io::Result<()> {
    default_signals();
    let (report_read, report_write) = pipe()?;
    let init = fork()?;
    if init > 0 {
        drop(report_write);
        keep(init, report_read);
    }
    drop(report_read);
    // The init dies with the keeper, so that a kill of the keeper ends the namespace.
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
    let program = fork()?;
    if program > 0 {
        init_loop(program, report_write);
    }
    Ok(())
}

/// The keeper: relays signals to the init, waits for it, then ends as the program did.
#[allow(unsafe_code)]
fn keep(init: libc::pid_t, report: OwnedFd) -> ! {
    settle(c"capfs-keeper", init, &report);
    let mut status = 0;
    // SAFETY: waitpid, read, signal, kill and _exit on values of this function's own.
    unsafe {
        while libc::waitpid(init, &raw mut status, 0) < 0
            && *libc::__errno_location() == libc::EINTR
        {}
        let mut bytes = [0u8; 4];
        let got = loop {
            let got = libc::read(report.as_raw_fd(), bytes.as_mut_ptr().cast(), bytes.len());
            if got >= 0 || *libc::__errno_location() != libc::EINTR {
                break got;
            }
        };
        RELAY_TO.store(0, Ordering::Relaxed);
        if got != 4 {
            // The init was killed before the program ended: so is the keeper.
            libc::kill(libc::getpid(), libc::SIGKILL);
            libc::_exit(137);
        }
        let status = i32::from_ne_bytes(bytes);
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            libc::signal(signal, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&raw mut set);
            libc::sigaddset(&raw mut set, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &raw const set, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(libc::WEXITSTATUS(status));
    }
}

/// The init: relays signals to the program's group, reaps every child, and reports the
/// program's end to the keeper, then ends (and the kernel ends the rest of the namespace).
#[allow(unsafe_code)]
fn init_loop(program: libc::pid_t, report: OwnedFd) -> ! {
    settle(c"capfs-init", program, &report);
    let mut status = 0;
    // SAFETY: waitpid, write and _exit on values of this function's own.
    unsafe {
        loop {
            let pid = libc::waitpid(-1, &raw mut status, 0);
            if pid == program {
                let bytes = status.to_ne_bytes();
                libc::write(report.as_raw_fd(), bytes.as_ptr().cast(), bytes.len());
                libc::_exit(0);
            }
            if pid < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(1);
            }
        }
    }
}

/// Adds to the Landlock ruleset `ruleset` the rule that grants `access` beneath `dir`.
#[allow(unsafe_code)]
pub(crate) fn add_path_rule(ruleset: &OwnedFd, dir: &OwnedFd, access: u64) -> io::Result<()> {
    // The kernel's `struct landlock_path_beneath_attr`, packed.
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    let attr = PathBeneath {
        allowed_access: access,
        parent_fd: dir.as_raw_fd(),
    };
    // SAFETY: the call reads the attribute on the stack.
    let done = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            landlock_abi::RULE_PATH_BENEATH,
            &raw const attr,
            0u32,
        )
    };
    match done {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}
