//! A confined process runs under two small processes of capfs's own, made before the
//! program's `execve`, so that it can have a PID namespace of its own:
//!
//! - the **keeper**, the child the starter makes ([`Keeper`](super::keeper::Keeper)), stays in
//!   the starter's PID namespace: it is the process the starter waits for and signals. It
//!   runs the steps before the namespaces' first process (its namespaces, their maps, its
//!   limits), relays the signals it gets to the program's process group, waits for the
//!   program, then ends the init (and with it the namespace) and ends as the program ended
//!   (the same exit code, or the same signal).
//! - the **init**, the first process of the new namespace, ignores `SIGCHLD`, so that the
//!   kernel reaps each orphan the program leaves as it ends. When it ends, the kernel kills
//!   everything left in the namespace: nothing the program started outlives it, daemons
//!   included. It dies with the keeper (`PR_SET_PDEATHSIG`) and ignores the signals the keeper
//!   relays. A process inside the namespace cannot end it (an init gets no signal it has no
//!   handler for).
//! - the **program**, the keeper's second child and the namespace's second process, goes on
//!   to be confined and run. It is never the init, for the same reason.
//!
//! None of the three copies the starter's memory: copying its page tables, the copy-on-write
//! faults that followed on both sides and the copy's unmapping when the keeper ended were the
//! largest part of a confined start. Each is made by `clone(CLONE_VM)` and runs on a stack of
//! its own, in one mapping the starter makes for the start ([`Memory`]):
//!
//! - the keeper shares the starter's memory and the thread-local storage of the thread that
//!   made it (the C library's `errno` among it); it has copies of the starter's descriptor
//!   table, signal handlers and working directory. That thread waits until the program has run its
//!   `execve` (so that the keeper may use the C library, and the starter's values it was
//!   given, until then); from then on the keeper makes raw system calls only, which leave
//!   `errno` alone, and reads nothing of the starter's. No C library function runs in it
//!   then either: the starting thread may end while the keeper lives, its thread-local
//!   storage with it, and a C library function built with a stack guard reads that storage.
//!   (A raw call through the C library's `syscall` writes `errno` only when it fails, which
//!   the calls made there cannot.) Its first step sets every signal to its default action: no
//!   handler of the starter runs in it.
//! - the init runs a few raw system calls for its whole life, under the same rule.
//! - the program is also `CLONE_VFORK`: the keeper is stopped until the program has replaced
//!   itself by `execve` (`exec.rs`) or ended, so the two never run at once on the same memory.
//!   Of that memory, the program writes only what the keeper never uses again (the setup it
//!   consumes, the slots of its mount copies, the shell's arguments of `exec.rs`) and the error
//!   that stopped it, which the keeper then returns.
//!
//! The init also shares the keeper's descriptor table (`CLONE_FILES`): it needs no descriptor
//! of its own, and the keeper closes every one but its signal descriptor once the program
//! runs (the program's output included, so that it ends when the program's does). Nothing
//! here allocates or takes a lock: the starter's other threads run meanwhile, on the same
//! memory. The starter unmaps the mapping only once none of the three can run on it (see
//! [`Memory`]).

use std::ffi::c_void;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};

use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};

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

/// The keeper's stack: the steps before the program (namespaces, id maps, netlink requests)
/// run on it.
const KEEPER_STACK_BYTES: usize = 1 << 20;

/// The init's stack; the init runs a few system calls.
const INIT_STACK_BYTES: usize = 128 << 10;

/// The program's stack, until its `execve`; the confinement steps run on it.
const PROGRAM_STACK_BYTES: usize = 1 << 20;

/// The words a start's helpers and its starter share, at the start of its [`Memory`].
#[repr(C)]
pub(crate) struct Words {
    /// Nonzero while the keeper lives: the kernel sets it to 0 when the keeper ends
    /// (`set_tid_address`).
    ///
    /// The init needs it because it arms its death signal (`PR_SET_PDEATHSIG`) after it
    /// starts, and the keeper does not wait for that: a keeper killed before would leave the
    /// init, and the program, running. The kernel clears this word (and wakes its futex, a
    /// full barrier) before it reads its children's death signals in the same exit; the init
    /// arms its signal, makes a full barrier, then reads this word. So either the keeper's end
    /// sees the armed signal and kills the init, or the init sees the word cleared and ends
    /// itself: a store and a load on each side, each pair separated by a full barrier, cannot
    /// both miss the other's store. (The kernel clears the word only while another process
    /// shares the keeper's memory, as the starter always does.)
    keeper_lives: AtomicU32,
    /// The init's id while it may run on this memory: the kernel writes it before the init
    /// first runs (`CLONE_PARENT_SETTID`) and clears it, waking its futex, once the init has
    /// let go of the memory in its end (`CLONE_CHILD_CLEARTID`).
    init: AtomicU32,
    /// The same for the program, which lets go of the memory at its `execve` or its end.
    program: AtomicU32,
}

/// The memory of one confined start's helpers: a private mapping the starter makes, holding
/// their shared [`Words`], then a stack each for the keeper, the init and the program, each
/// above an inaccessible guard page. Only what a helper writes is backed by memory: a stack's
/// untouched pages cost nothing, and a kept mapping's touched ones are not faulted in again.
///
/// The value is dropped only once the keeper can no longer run (reaped, or never made); the
/// drop then waits until the init and the program have let go of the memory (their words are
/// cleared by the kernel, so an init that outlives a killed keeper for a moment is waited
/// for: its death signal or its own check ends it), then keeps the mapping for a later start
/// or unmaps it.
#[derive(Debug)]
pub(crate) struct Memory {
    base: *mut c_void,
    page: usize,
}

// SAFETY: the mapping belongs to this value alone; nothing in it is tied to a thread, and the
// words in it are atomics.
#[allow(unsafe_code)]
unsafe impl Send for Memory {}

impl Memory {
    fn bytes(page: usize) -> usize {
        page * 4 + KEEPER_STACK_BYTES + INIT_STACK_BYTES + PROGRAM_STACK_BYTES
    }

    /// One for a start: a kept one, else a new mapping.
    pub(crate) fn take() -> io::Result<Self> {
        let spare = SPARE.lock().unwrap_or_else(PoisonError::into_inner).pop();
        match spare {
            Some((base, page)) => Ok(Self {
                base: base as *mut c_void,
                page,
            }),
            None => Self::map(),
        }
    }

    /// Maps a new one.
    #[allow(unsafe_code)]
    fn map() -> io::Result<Self> {
        // SAFETY: sysconf reads a constant; mmap makes a new private mapping this value owns;
        // mprotect takes every access from the three guard pages in it.
        unsafe {
            let page = usize::try_from(libc::sysconf(libc::_SC_PAGESIZE)).unwrap_or(4096);
            let base = libc::mmap(
                std::ptr::null_mut(),
                Self::bytes(page),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let memory = Self { base, page };
            for guard in [
                page,
                page * 2 + KEEPER_STACK_BYTES,
                page * 3 + KEEPER_STACK_BYTES + INIT_STACK_BYTES,
            ] {
                if libc::mprotect(memory.at(guard), page, libc::PROT_NONE) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(memory)
        }
    }

    /// The address `offset` bytes into the mapping.
    #[allow(unsafe_code)]
    fn at(&self, offset: usize) -> *mut c_void {
        // SAFETY: every offset asked for is at most the mapping's size.
        unsafe { self.base.cast::<u8>().add(offset).cast() }
    }

    /// The top of the keeper's stack, where it starts growing down from.
    pub(crate) fn keeper_top(&self) -> *mut c_void {
        self.at(self.page * 2 + KEEPER_STACK_BYTES)
    }

    fn init_top(&self) -> *mut c_void {
        self.at(self.page * 3 + KEEPER_STACK_BYTES + INIT_STACK_BYTES)
    }

    fn program_top(&self) -> *mut c_void {
        self.at(Self::bytes(self.page))
    }

    pub(crate) fn words(&self) -> &Words {
        // SAFETY: the mapping's first page, aligned to a page, written only through these
        // atomics (zero when it is mapped, and cleared again before it is kept).
        #[allow(unsafe_code)]
        unsafe {
            &*self.base.cast::<Words>()
        }
    }
}

impl Drop for Memory {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        let words = self.words();
        for word in [&words.init, &words.program] {
            loop {
                let id = word.load(Ordering::SeqCst);
                if id == 0 {
                    break;
                }
                // Not a private futex: the kernel's wake at a process's end is a shared one.
                let _ = rustix::thread::futex::wait(
                    word,
                    rustix::thread::futex::Flags::empty(),
                    id,
                    None,
                );
            }
        }
        // The keeper's word too, which its end cleared unless it never set it.
        words.keeper_lives.store(0, Ordering::SeqCst);
        let mut spare = SPARE.lock().unwrap_or_else(PoisonError::into_inner);
        if spare.len() < SPARE_MEMORIES {
            spare.push((self.base as usize, self.page));
            return;
        }
        drop(spare);
        // SAFETY: no process runs on the mapping any more (see above), and no reference into
        // it outlives this value.
        unsafe { libc::munmap(self.base, Self::bytes(self.page)) };
    }
}

/// How many memories of ended starts are kept for the next: their stacks' pages are already
/// this process's, so a start neither maps nor faults them in again.
const SPARE_MEMORIES: usize = 8;

/// The memories kept (their addresses and page sizes), each with its words cleared and no
/// process on it.
static SPARE: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

/// What a keeper runs, on values the starter made.
pub(crate) trait Steps {
    /// The steps before the init and the program: the namespaces, their maps, the limits.
    fn before(&mut self) -> io::Result<()>;
    /// The program's own steps and its `execve`; returns only the error that stopped them.
    fn program(&mut self) -> io::Error;
}

/// The keeper's `outcome` once the program runs.
pub(crate) const STARTED: i32 = -1;

/// What the starter hands the keeper. The starting thread waits until the keeper writes
/// `started` or ends, so the keeper may use all of it until then, and none of it after.
pub(crate) struct KeeperStart<'a> {
    pub(crate) memory: &'a Memory,
    /// The program's standard input, output and error.
    pub(crate) stdio: [RawFd; 3],
    pub(crate) steps: &'a mut dyn Steps,
    /// An event descriptor the keeper writes once the program runs.
    pub(crate) started: RawFd,
    /// 0 while the keeper runs its steps, then [`STARTED`], or the errno that stopped them.
    pub(crate) outcome: AtomicI32,
}

/// Makes the keeper, sharing this memory, on its stack in `start.memory`, and returns its id
/// and a descriptor of it.
///
/// # Safety
///
/// Every signal must be blocked in the calling thread: the keeper starts with the same mask
/// and the starter's handlers, which must not run in it. The calling thread must then wait,
/// neither running nor using `start`, until the keeper has written `start.started` or ended:
/// the keeper runs on `start` and shares the thread's thread-local storage until then.
#[allow(unsafe_code)]
pub(crate) unsafe fn start_keeper(start: &mut KeeperStart<'_>) -> io::Result<(Pid, OwnedFd)> {
    let mut pidfd: libc::c_int = -1;
    // SAFETY: the keeper runs `keeper_main` on the top of its own stack, with `start`, which
    // the caller keeps until the keeper is done with it (the caller's promise); the kernel
    // writes the keeper's descriptor into `pidfd` (`CLONE_PIDFD` with the C library's
    // `clone`).
    let pid = unsafe {
        libc::clone(
            keeper_main,
            start.memory.keeper_top(),
            libc::CLONE_VM | libc::CLONE_PIDFD | libc::SIGCHLD,
            std::ptr::from_mut(start).cast(),
            &raw mut pidfd,
        )
    };
    let pid = Pid::from_raw(pid).ok_or_else(io::Error::last_os_error)?;
    // SAFETY: the descriptor the kernel made for this call, owned by no one else.
    let pidfd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(pidfd) };
    Ok((pid, pidfd))
}

/// The keeper: places the program's standard descriptors, runs the steps before the init and
/// the program, makes them, and becomes the keeper proper ([`keep`]); if any step failed,
/// leaves its errno for the starter and ends.
#[allow(unsafe_code)]
extern "C" fn keeper_main(start: *mut c_void) -> libc::c_int {
    default_signals();
    // SAFETY: the starter passes its `KeeperStart`, and keeps it until this process writes
    // `started` or ends.
    let KeeperStart {
        memory,
        stdio,
        steps,
        started,
        outcome,
    } = unsafe { &mut *start.cast::<KeeperStart<'_>>() };
    let error = match place_stdio(*stdio).and_then(|()| steps.before()) {
        Ok(()) => split(memory, &mut || steps.program(), &mut || {
            outcome.store(STARTED, Ordering::SeqCst);
            // SAFETY: the starter's event descriptor, in this process's copy of its table.
            let started = unsafe { BorrowedFd::borrow_raw(*started) };
            let _ = rustix::io::write(started, &1u64.to_ne_bytes());
        }),
        Err(e) => e,
    };
    outcome.store(errno_of(&error), Ordering::SeqCst);
    // SAFETY: ends this process alone, without running anything of the starter's.
    unsafe { libc::_exit(127) }
}

/// The errno an error stands for, `EIO` when it has none.
fn errno_of(error: &io::Error) -> i32 {
    error.raw_os_error().filter(|e| *e > 0).unwrap_or(libc::EIO)
}

/// Makes `stdio` the standard input, output and error: each is first copied above them, so
/// that placing one never closes another still to be placed. The copies are close-on-exec,
/// and the keeper closes them with the rest.
#[allow(unsafe_code)]
fn place_stdio(stdio: [RawFd; 3]) -> io::Result<()> {
    let mut high = [-1; 3];
    for (copy, fd) in high.iter_mut().zip(stdio) {
        // SAFETY: fcntl on a descriptor of this process's table.
        *copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
        if *copy < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    for (target, copy) in high.into_iter().enumerate() {
        // SAFETY: dup2 onto one of the three standard numbers, which the program is to have;
        // the copy is above them, so it is never the target (dup2 then leaves close-on-exec
        // off on the target).
        if unsafe { libc::dup2(copy, target as RawFd) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Passes `signal` on to the program's process group, else to the program.
fn relay(program: Pid, signal: i32) {
    let Some(signal) = Signal::from_named_raw(signal) else {
        return;
    };
    if rustix::process::kill_process_group(program, signal).is_err() {
        let _ = rustix::process::kill_process(program, signal);
    }
}

/// Sets every signal to its default action, so that the helpers and the program start alike
/// and none of the starter's handlers runs in them (a clone keeps them, an exec does not).
#[allow(unsafe_code)]
fn default_signals() {
    // Linux numbers its signals 1 to 64; those it cannot change (SIGKILL, SIGSTOP) and those
    // the C library keeps for itself refuse the call, and stay as they are.
    for signal in 1..=64 {
        // SAFETY: plain calls with a constant disposition.
        unsafe { libc::signal(signal, libc::SIG_DFL) };
    }
}

/// The signals the keeper takes from its signal descriptor: those it relays, and `SIGCHLD`.
fn kept_signals() -> u64 {
    kernel_set(&RELAYED) | kernel_set(&[libc::SIGCHLD])
}

/// A signal descriptor for [`kept_signals`], which stay blocked (as every signal is from the
/// keeper's start until it waits).
#[allow(unsafe_code)]
fn signal_descriptor() -> io::Result<OwnedFd> {
    let set = kept_signals();
    // SAFETY: a new descriptor for the kernel's 8-byte set on this stack.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_signalfd4,
            -1,
            &raw const set,
            size_of::<u64>(),
            libc::SFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor just made, owned by no one else.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as RawFd) })
}

/// In the keeper, once its steps before the namespaces' first process have run: makes the
/// init, then the program, which runs `program` (its confinement and its `execve`, which
/// returns only an error). This process becomes the keeper proper once the program runs,
/// calls `started` and never returns; if the program could not run, the init is ended and the
/// error returned.
pub(crate) fn split(
    memory: &Memory,
    program: &mut dyn FnMut() -> io::Error,
    started: &mut dyn FnMut(),
) -> io::Error {
    let signals = match signal_descriptor() {
        Ok(fd) => fd,
        Err(e) => return e,
    };
    register_keeper_lives(memory.words());
    let init = match start_init(memory) {
        Ok(init) => init,
        Err(e) => return e,
    };
    match start_program(memory, program) {
        Ok(program) => keep(program, init, &signals, started),
        Err(e) => {
            let _ = rustix::process::kill_process(init, Signal::KILL);
            let _ = reap(init);
            e
        }
    }
}

/// What the keeper hands the program: the work to run, and where the program leaves the
/// error that stopped it (0 while none did).
struct ProgramStart<'a> {
    run: &'a mut dyn FnMut() -> io::Error,
    failed: AtomicI32,
}

extern "C" fn program_main(start: *mut c_void) -> libc::c_int {
    // The keeper blocks every signal until it waits; the program starts with none blocked.
    raw_mask(libc::SIG_SETMASK, 0);
    // SAFETY: the keeper passes its `ProgramStart`, and is stopped until this process has
    // replaced itself or ended (`CLONE_VFORK`).
    #[allow(unsafe_code)]
    let start = unsafe { &mut *start.cast::<ProgramStart<'_>>() };
    let error = (start.run)();
    start.failed.store(errno_of(&error), Ordering::Relaxed);
    127
}

/// Makes the program (`CLONE_VM | CLONE_VFORK`) on its stack in `memory` and returns its id
/// once it has run its `execve`, or the error it ended with before.
#[allow(unsafe_code)]
fn start_program(memory: &Memory, run: &mut dyn FnMut() -> io::Error) -> io::Result<Pid> {
    let mut start = ProgramStart {
        run,
        failed: AtomicI32::new(0),
    };
    let word = memory.words().program.as_ptr().cast::<libc::pid_t>();
    // SAFETY: the program runs `program_main` on the top of its own stack, sharing this
    // memory; this call returns only once it has called `execve` or ended, so nothing here
    // runs meanwhile, and `start` outlives its use. The kernel writes and clears the
    // program's word, which lives as long as `memory`.
    let pid = unsafe {
        libc::clone(
            program_main,
            memory.program_top(),
            libc::CLONE_VM
                | libc::CLONE_VFORK
                | libc::CLONE_PARENT_SETTID
                | libc::CLONE_CHILD_CLEARTID
                | libc::SIGCHLD,
            (&raw mut start).cast(),
            word,
            std::ptr::null_mut::<c_void>(),
            word,
        )
    };
    let pid = Pid::from_raw(pid).ok_or_else(io::Error::last_os_error)?;
    match start.failed.load(Ordering::Relaxed) {
        0 => Ok(pid),
        errno => {
            let _ = reap(pid);
            Err(io::Error::from_raw_os_error(errno))
        }
    }
}

/// Sets [`Words::keeper_lives`] and has the kernel clear it when this process ends. Made
/// before the init exists, so that any init reads a word the kernel will clear.
#[allow(unsafe_code)]
fn register_keeper_lives(words: &Words) {
    words.keeper_lives.store(1, Ordering::SeqCst);
    // SAFETY: the word lives as long as the memory this process runs on; the call only
    // records its address (and returns this process's id: it cannot fail).
    unsafe { libc::syscall(libc::SYS_set_tid_address, words.keeper_lives.as_ptr()) };
}

/// Starts the init on its stack in `memory`, sharing this process's memory and descriptor
/// table. It dies with this process from the moment it starts (see [`Words::keeper_lives`]).
#[allow(unsafe_code)]
fn start_init(memory: &Memory) -> io::Result<Pid> {
    let words = memory.words();
    let word = words.init.as_ptr().cast::<libc::pid_t>();
    // SAFETY: clone runs `init` on the top of its own stack with its own registers and a copy
    // of this process's signal handlers; the init reads only the words, which live as long as
    // `memory`, as does the init's word the kernel writes and clears.
    let pid = unsafe {
        libc::clone(
            init,
            memory.init_top(),
            libc::CLONE_VM
                | libc::CLONE_FILES
                | libc::CLONE_PARENT_SETTID
                | libc::CLONE_CHILD_CLEARTID
                | libc::SIGCHLD,
            std::ptr::from_ref(words).cast_mut().cast(),
            word,
            std::ptr::null_mut::<c_void>(),
            word,
        )
    };
    Pid::from_raw(pid).ok_or_else(io::Error::last_os_error)
}

/// The keeper proper: lets the starter go on (`started`), then relays signals to the program,
/// waits for it, ends the init (whose end kills whatever is left in the namespace) and waits
/// for that, then ends as the program did. From `started` on it makes raw system calls only
/// (the starter's thread, whose `errno` it shares, runs again) and reads nothing but its own
/// stack.
fn keep(program: Pid, init: Pid, signals: &OwnedFd, started: &mut dyn FnMut()) -> ! {
    let _ = rustix::thread::set_name(c"capfs-keeper");
    // Every signal was blocked so far; those the descriptor takes stay blocked.
    raw_mask(libc::SIG_SETMASK, kept_signals());
    let first_free = libc::SIGRTMIN();
    let signals = signals.as_raw_fd();
    started();
    close_all_but(signals);
    // SAFETY: the descriptor `close_all_but` kept, which this process never closes.
    #[allow(unsafe_code)]
    let signals = unsafe { BorrowedFd::borrow_raw(signals) };
    let status = loop {
        // A `signalfd_siginfo`: 128 bytes, the signal's number first.
        let mut info = [0u8; 128];
        match rustix::io::read(signals, &mut info) {
            Ok(128) => {}
            Ok(_) | Err(rustix::io::Errno::INTR) => continue,
            Err(_) => break reap(program),
        }
        let signal = u32::from_ne_bytes([info[0], info[1], info[2], info[3]]) as i32;
        if signal != libc::SIGCHLD {
            relay(program, signal);
            continue;
        }
        match rustix::process::waitpid(Some(program), WaitOptions::NOHANG) {
            Ok(Some((_, status))) => break Some(status),
            Ok(None) => {}
            Err(_) => break None,
        }
    };
    let _ = rustix::process::kill_process(init, Signal::KILL);
    let _ = reap(init);
    exit_as(status, first_free)
}

/// Ends this process as `status` says the program ended: by the same signal, else with the
/// same code (137, as for `SIGKILL`, when it is not known). `first_free` is the first signal
/// the C library leaves free (those from 32 below it are its own, whose handlers this process
/// kept from the starter: for those the code says it). Raw system calls only.
#[allow(unsafe_code)]
fn exit_as(status: Option<WaitStatus>, first_free: i32) -> ! {
    let signal = match status {
        Some(status) => status.terminating_signal(),
        None => Some(libc::SIGKILL),
    };
    let code = match signal {
        Some(signal) => {
            // Every other signal is at its default action.
            if !(libc::SIGSYS + 1..first_free).contains(&signal) {
                raw_mask(libc::SIG_UNBLOCK, kernel_set(&[signal]));
                // SAFETY: a number the kernel reported as a signal.
                let signal = unsafe { Signal::from_raw_unchecked(signal) };
                let _ = rustix::process::kill_process(rustix::process::getpid(), signal);
            }
            128 + signal
        }
        None => status.and_then(WaitStatus::exit_status).unwrap_or(1),
    };
    loop {
        // SAFETY: ends this process alone, by the raw system call (which does not return).
        unsafe { libc::syscall(libc::SYS_exit_group, code) };
    }
}

/// The kernel's mask of `signals` (bit `n - 1` for signal `n`), the form `rt_sigprocmask`,
/// `rt_sigaction` and `signalfd4` read.
fn kernel_set(signals: &[i32]) -> u64 {
    signals
        .iter()
        .fold(0, |set, signal| set | 1 << (signal - 1))
}

/// `rt_sigprocmask` by the raw system call (`how` is `SIG_BLOCK`, `SIG_UNBLOCK` or
/// `SIG_SETMASK`).
#[allow(unsafe_code)]
fn raw_mask(how: libc::c_int, set: u64) {
    // SAFETY: the kernel reads the 8-byte set on this stack; with a valid `how` the call cannot
    // fail, so the C library's `syscall` leaves `errno` alone.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            how,
            &raw const set,
            std::ptr::null_mut::<u64>(),
            size_of::<u64>(),
        )
    };
}

/// Ignores `signal`, by the raw system call.
#[allow(unsafe_code)]
fn raw_ignore(signal: i32) {
    /// The kernel's `struct sigaction` (handler, flags, restorer, mask).
    #[repr(C)]
    struct KernelAction {
        handler: libc::sighandler_t,
        flags: libc::c_ulong,
        restorer: usize,
        mask: u64,
    }
    let action = KernelAction {
        handler: libc::SIG_IGN,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    // SAFETY: the kernel reads the action on this stack; for a signal that may be ignored the
    // call cannot fail, so the C library's `syscall` leaves `errno` alone.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            signal,
            &raw const action,
            std::ptr::null_mut::<KernelAction>(),
            size_of::<u64>(),
        )
    };
}

/// Closes every descriptor but `kept`.
#[allow(unsafe_code)]
fn close_all_but(kept: RawFd) {
    let kept = kept as u32;
    // SAFETY: closing descriptors no one uses from now on (the init shares this table and
    // uses none). `close_range` fails only for a first number above the last, which these
    // never are, so `errno` is left alone.
    unsafe {
        if kept > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, kept - 1, 0u32);
        }
        libc::syscall(libc::SYS_close_range, kept + 1, u32::MAX, 0u32);
    }
}

/// Waits for the child `pid` to end, by the raw system call.
fn reap(pid: Pid) -> Option<WaitStatus> {
    loop {
        match rustix::process::waitpid(Some(pid), WaitOptions::empty()) {
            Ok(Some((_, status))) => return Some(status),
            Err(rustix::io::Errno::INTR) => {}
            Ok(None) | Err(_) => return None,
        }
    }
}

/// The init: ignores `SIGCHLD`, so that the kernel reaps every orphan the program leaves to
/// it as it ends, and waits until the keeper ends it (or ends, which ends it too). It shares
/// the starter's memory and a thread's storage, and makes raw system calls only (see the
/// module's documentation).
#[allow(unsafe_code)]
extern "C" fn init(words: *mut c_void) -> libc::c_int {
    // SAFETY: the keeper passes the words of its memory, which outlives this process.
    let words = unsafe { &*words.cast::<Words>() };
    let _ = rustix::thread::set_name(c"capfs-init");
    // The init dies with the keeper, so that a kill of the keeper ends the namespace; a keeper
    // that ended before this was armed has cleared its word, and the init ends itself (its
    // end ends the namespace, and no process can join it after).
    #[cfg(test)]
    tests::arm_late();
    let _ = rustix::process::set_parent_process_death_signal(Some(Signal::KILL));
    std::sync::atomic::fence(Ordering::SeqCst);
    if words.keeper_lives.load(Ordering::SeqCst) == 0 {
        return 0;
    }
    raw_ignore(libc::SIGCHLD);
    for signal in RELAYED {
        raw_ignore(signal);
    }
    // Every signal is blocked (as the keeper's were when it made the init): no handler runs,
    // and a pause lasts until the init is killed.
    loop {
        rustix::event::pause();
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

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::fd::{AsRawFd, BorrowedFd, IntoRawFd};
    use std::os::unix::process::CommandExt;
    use std::thread::JoinHandle;

    use rustix::process::PidfdFlags;
    use rustix::thread::UnshareFlags;

    use super::*;

    /// Set in one test keeper's memory (after its fork, so in no other): a descriptor that
    /// reads once the keeper has ended, which its init waits for before it arms its death
    /// signal, the order a slow init meets. -1 everywhere else.
    static ARM_LATE: AtomicI32 = AtomicI32::new(-1);

    /// In the init, before it arms its death signal: waits for the keeper's end when
    /// [`ARM_LATE`] says so. The keeper's descriptor (a pidfd) reads once the keeper is a
    /// zombie, which is after its end sent its children's death signals.
    #[allow(unsafe_code)]
    pub(super) fn arm_late() {
        let fd = ARM_LATE.load(Ordering::Relaxed);
        if fd >= 0 {
            // SAFETY: the keeper opened it for this wait, in the table the init shares.
            let keeper = unsafe { BorrowedFd::borrow_raw(fd) };
            let mut ended = [rustix::event::PollFd::new(
                &keeper,
                rustix::event::PollFlags::IN,
            )];
            let _ = rustix::event::poll(&mut ended, None);
        }
    }

    /// How a test keeper ends.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum End {
        /// Right after it made its init, which may or may not have armed its death signal.
        Early,
        /// Right after it made its init, which arms its death signal only after.
        BeforeArming,
        /// Killed from outside once it has made its init.
        Killed,
    }

    /// A keeper in a PID namespace of its own, as a start makes one, with its init. The keeper
    /// writes its id on the pipe whose reader this returns, makes its init, then ends as `end`
    /// says (when killed, it writes one byte more and waits). The init shares the keeper's
    /// descriptor table: the pipe reads its end only once the keeper and the init are both
    /// gone. The spawn runs on a thread of its own, since it returns only once the keeper ends.
    #[allow(unsafe_code)]
    fn keeper_and_init(
        end: End,
    ) -> (
        std::io::PipeReader,
        Pid,
        JoinHandle<io::Result<std::process::Child>>,
    ) {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let fd = writer.as_raw_fd();
        let mut command = std::process::Command::new("/bin/true");
        // SAFETY: the child makes system calls only (unshare, getpid, write, pidfd_open,
        // mmap, mprotect, set_tid_address, clone, pause) on values made before the fork, and
        // allocates nothing.
        unsafe {
            command.pre_exec(move || {
                let pipe = BorrowedFd::borrow_raw(fd);
                rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWPID)?;
                let pid = rustix::process::getpid();
                rustix::io::write(pipe, &pid.as_raw_nonzero().get().to_ne_bytes())?;
                if end == End::BeforeArming {
                    let keeper = rustix::process::pidfd_open(pid, PidfdFlags::empty())?;
                    ARM_LATE.store(keeper.into_raw_fd(), Ordering::Relaxed);
                }
                // This process's own copy, left mapped: the init runs on it.
                let memory = std::mem::ManuallyDrop::new(Memory::map()?);
                register_keeper_lives(memory.words());
                start_init(&memory)?;
                if end == End::Killed {
                    rustix::io::write(pipe, &[1])?;
                    loop {
                        libc::pause();
                    }
                }
                Err(io::Error::from_raw_os_error(libc::ECANCELED))
            });
        }
        let spawning = std::thread::spawn(move || command.spawn());
        let mut id = [0u8; 4];
        reader.read_exact(&mut id).unwrap();
        if end == End::Killed {
            reader.read_exact(&mut [0]).unwrap();
        }
        drop(writer);
        let keeper = Pid::from_raw(i32::from_ne_bytes(id)).unwrap();
        (reader, keeper, spawning)
    }

    /// Kills every other process that holds the pipe `reader` reads (an init left behind).
    fn kill_holders(reader: &std::io::PipeReader) {
        let pipe = format!("pipe:[{}]", rustix::fs::fstat(reader).unwrap().st_ino);
        for process in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = process.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            if pid == std::process::id() as i32 {
                continue;
            }
            let Ok(fds) = std::fs::read_dir(process.path().join("fd")) else {
                continue;
            };
            if fds
                .flatten()
                .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == &*pipe))
            {
                let _ = rustix::process::kill_process(Pid::from_raw(pid).unwrap(), Signal::KILL);
            }
        }
    }

    /// A keeper's end ends its init, however early it comes: a keeper that ends right after it
    /// made its init, one that ends before its init armed its death signal (the init sees the
    /// cleared word and ends itself), and one killed from outside once it has made its init
    /// (mostly after the init armed: the death signal ends it).
    #[test]
    fn an_init_ends_with_its_keeper_however_early_the_keeper_ends() {
        for round in 0..20 {
            for end in [End::Early, End::BeforeArming, End::Killed] {
                let killed = end == End::Killed;
                let (mut reader, keeper, spawning) = keeper_and_init(end);
                if killed {
                    rustix::process::kill_process(keeper, Signal::KILL).unwrap();
                }
                let ended = rustix::event::poll(
                    &mut [rustix::event::PollFd::new(
                        &reader,
                        rustix::event::PollFlags::IN,
                    )],
                    Some(&rustix::event::Timespec {
                        tv_sec: 20,
                        tv_nsec: 0,
                    }),
                )
                .unwrap();
                let mut rest = Vec::new();
                if ended == 1 {
                    reader.read_to_end(&mut rest).unwrap();
                } else {
                    kill_holders(&reader);
                }
                assert!(
                    ended == 1 && rest.is_empty(),
                    "round {round}, {end:?}: the init outlived its keeper"
                );
                // The spawn returns once the keeper's error pipe is closed, which the init
                // holds too (so only now, whatever the outcome).
                match spawning.join().unwrap() {
                    Ok(mut child) => {
                        assert!(killed, "round {round}: the keeper ran its program");
                        child.wait().unwrap();
                    }
                    Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ECANCELED), "round {round}"),
                }
            }
        }
    }
}
