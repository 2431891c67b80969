//! A confined process runs under two small processes of capfs's own, made between the
//! starter's `fork` and the program's `exec`, so that it can have a PID namespace of its own:
//!
//! - the **keeper**, the child the starter spawned, stays in the starter's PID namespace: it is
//!   the process the starter waits for and signals. It relays the signals it gets to the
//!   program's process group, waits for the program, then ends the init (and with it the
//!   namespace) and ends as the program ended (the same exit code, or the same signal).
//! - the **init**, the first process of the new namespace, reaps the orphans the program
//!   leaves. When it ends, the kernel kills everything left in the namespace: nothing the
//!   program started outlives it, daemons included. It dies with the keeper
//!   (`PR_SET_PDEATHSIG`) and ignores the signals the keeper relays. A process inside the
//!   namespace cannot end it (an init gets no signal it has no handler for); a `SIGCHLD`,
//!   which it waits for, only makes it reap.
//! - the **program**, the keeper's second child and the namespace's second process, goes on
//!   to be confined and run. It is never the init, for the same reason.
//!
//! Neither the init nor the program copies the keeper's memory (itself a copy of the
//! starter's): copying its page tables, and unmapping them again, was the largest part of a
//! start after the namespaces. Each is made by `clone(CLONE_VM)` on a stack of its own:
//!
//! - the init runs a few system calls for its whole life. It and the keeper never touch the
//!   same memory after it starts: each waits and reaps by raw system calls that leave the C
//!   library's `errno`, which they share, untouched.
//! - the program is also `CLONE_VFORK`: the keeper is stopped until the program has replaced
//!   itself by `execve` (`exec.rs`) or ended, so the two never run at once on the same memory.
//!   Of the keeper's memory, the program writes only what the keeper never uses again (the
//!   setup it consumes, the slots of its mount copies, the shell's arguments of `exec.rs`) and
//!   the error that stopped it, which the keeper then returns.
//!
//! The init also shares the keeper's descriptor table (`CLONE_FILES`): it needs no descriptor
//! of its own, and the keeper closes every one once the program runs (the program's output
//! included, so that it ends when the program's does). Neither helper returns to the caller;
//! everything here is a system call on memory prepared beforehand.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

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

/// The program the keeper relays its signals to: its process group first, else the process.
static RELAY_TO: AtomicI32 = AtomicI32::new(0);

/// The init's stack; the init runs a loop of system calls.
const INIT_STACK_BYTES: usize = 128 << 10;

extern "C" fn relay(signal: libc::c_int) {
    let Some(target) = Pid::from_raw(RELAY_TO.load(Ordering::Relaxed)) else {
        return;
    };
    let Some(signal) = Signal::from_named_raw(signal) else {
        return;
    };
    // Raw system calls: errno, which the init shares, is left alone.
    if rustix::process::kill_process_group(target, signal).is_err() {
        let _ = rustix::process::kill_process(target, signal);
    }
}

/// Sets every signal to its default action, so that the helpers and the program start alike
/// and none of the starter's handlers runs in them (a fork keeps them, an exec does not): the
/// starter's `SIGCHLD` handler, for one, would read the starter's memory, which the keeper
/// lets go of.
#[allow(unsafe_code)]
fn default_signals() {
    // Linux numbers its signals 1 to 64; those it cannot change (SIGKILL, SIGSTOP) and those
    // the C library keeps for itself refuse the call, and stay as they are.
    for signal in 1..=64 {
        // SAFETY: plain calls with a constant disposition.
        unsafe { libc::signal(signal, libc::SIG_DFL) };
    }
}

/// Makes `handler` handle `signal` (`SIG_IGN` to ignore it), restarting what it interrupts.
#[allow(unsafe_code)]
fn handle(signal: i32, handler: libc::sighandler_t) {
    // SAFETY: a zeroed `sigaction` on the stack; the handlers make raw system calls only.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&raw mut action.sa_mask);
        libc::sigaction(signal, &raw const action, std::ptr::null_mut());
    }
}

/// Blocks or unblocks (`how`) `signal` for this process, and returns the set holding it alone.
#[allow(unsafe_code)]
fn mask(how: libc::c_int, signal: libc::c_int) -> libc::sigset_t {
    // SAFETY: a set on this stack, filled by the C library's own functions.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut set);
        libc::sigaddset(&raw mut set, signal);
        libc::sigprocmask(how, &raw const set, std::ptr::null_mut());
        set
    }
}

/// Names this process as `ps` shows it.
#[allow(unsafe_code)]
fn name(name: &std::ffi::CStr) {
    // SAFETY: the kernel copies at most 16 bytes of the string.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
}

/// Closes every descriptor.
#[allow(unsafe_code)]
fn close_all() {
    // SAFETY: closing descriptors no one uses from now on (the init shares this table and
    // uses none).
    unsafe { libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) };
}

/// In the child the starter spawned, right after it unshared a new PID namespace: makes the
/// init, then the program, which runs `program` (its confinement and its `execve`, which
/// returns only an error). This process becomes the keeper once the program runs, and never
/// returns; if the program could not run, the init is ended and the error returned, for the
/// starter to read.
pub(crate) fn split(release: &Release, program: &mut dyn FnMut() -> io::Error) -> io::Error {
    // On this stack: the keeper reads it after it let the starter's heap go.
    let release = *release;
    default_signals();
    register_keeper_lives();
    let (init, init_stack) = match start_init() {
        Ok(started) => started,
        Err(e) => return e,
    };
    match start_program(program) {
        Ok(program) => keep(program, init, &release, init_stack),
        Err(e) => {
            let _ = rustix::process::kill_process(init, Signal::KILL);
            let _ = reap(init);
            e
        }
    }
}

/// The program's stack, until its `execve`; the confinement steps run on it.
const PROGRAM_STACK_BYTES: usize = 1 << 20;

/// What the keeper hands the program: the work to run, and where the program leaves the
/// error that stopped it (0 while none did).
struct ProgramStart<'a> {
    run: &'a mut dyn FnMut() -> io::Error,
    failed: AtomicI32,
}

extern "C" fn program_main(start: *mut libc::c_void) -> libc::c_int {
    // SAFETY: the keeper passes its `ProgramStart`, and is stopped until this process has
    // replaced itself or ended (`CLONE_VFORK`).
    #[allow(unsafe_code)]
    let start = unsafe { &mut *start.cast::<ProgramStart<'_>>() };
    let error = (start.run)();
    let errno = error
        .raw_os_error()
        .filter(|e| *e != 0)
        .unwrap_or(libc::EIO);
    start.failed.store(errno, Ordering::Relaxed);
    127
}

/// Makes the program (`CLONE_VM | CLONE_VFORK`) and returns its id once it has run its
/// `execve`, or the error it ended with before.
#[allow(unsafe_code)]
fn start_program(run: &mut dyn FnMut() -> io::Error) -> io::Result<Pid> {
    let stack = Stack::map(PROGRAM_STACK_BYTES)?;
    let mut start = ProgramStart {
        run,
        failed: AtomicI32::new(0),
    };
    // SAFETY: the program runs `program_main` on the top of its own stack, sharing this
    // memory; this call returns only once it has called `execve` or ended, so nothing here
    // runs meanwhile, and `start` outlives its use.
    let pid = unsafe {
        libc::clone(
            program_main,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&raw mut start).cast(),
        )
    };
    let made = Pid::from_raw(pid).ok_or_else(io::Error::last_os_error);
    // The program no longer runs on it.
    stack.unmap();
    let pid = made?;
    match start.failed.load(Ordering::Relaxed) {
        0 => Ok(pid),
        errno => {
            let _ = reap(pid);
            Err(io::Error::from_raw_os_error(errno))
        }
    }
}

/// A stack of its own for a process that shares this memory: a private mapping whose lowest
/// page, made inaccessible, is its guard.
struct Stack {
    base: *mut libc::c_void,
    bytes: usize,
}

impl Stack {
    #[allow(unsafe_code)]
    fn map(usable: usize) -> io::Result<Self> {
        // SAFETY: sysconf reads a constant; mmap makes a new private mapping this value owns;
        // mprotect takes every access from its lowest page.
        unsafe {
            let page = usize::try_from(libc::sysconf(libc::_SC_PAGESIZE)).unwrap_or(4096);
            let bytes = usable + page;
            let base = libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let stack = Self { base, bytes };
            if libc::mprotect(base, page, libc::PROT_NONE) != 0 {
                let error = io::Error::last_os_error();
                stack.unmap();
                return Err(error);
            }
            Ok(stack)
        }
    }

    /// The stack's first address, where it starts growing down from.
    #[allow(unsafe_code)]
    fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the end of this mapping.
        unsafe { self.base.cast::<u8>().add(self.bytes).cast() }
    }

    /// The range it takes: the keeper spares the init's.
    fn range(&self) -> (usize, usize) {
        (self.base as usize, self.bytes)
    }

    /// Gives the stack back, once no process runs on it.
    #[allow(unsafe_code)]
    fn unmap(self) {
        // SAFETY: this value's own mapping, used by no one any more.
        unsafe { libc::munmap(self.base, self.bytes) };
    }
}

/// How long ranges read for [`Release`] are used again before the maps are read anew.
const RELEASE_FRESH: Duration = Duration::from_secs(1);

/// An address in this thread's thread-local storage (beside the C library's `errno` and
/// stack guard).
fn thread_storage() -> usize {
    thread_local! {
        static MARK: u8 = const { 0 };
    }
    MARK.with(|mark| std::ptr::from_ref(mark) as usize)
}

/// The most ranges of the starter's memory a keeper lets go of; any more are kept.
const RELEASE_RANGES: usize = 64;

/// Ranges of the starter's anonymous memory that the keeper and the init never use once the
/// program has run its `execve`: the starter's heap, its allocator's arenas, its other threads' stacks.
///
/// A keeper lives as long as its program and holds a copy of the starter's memory, copy on
/// write: while it does, every page the starter writes again is copied for it first (some
/// 70 pages of allocator state on each start, measured). Letting those ranges go
/// (`MADV_DONTNEED`) in the keeper, once the program has left its memory, spares the starter
/// the copies. Kept: the mapping of the starting thread's stack (the keeper runs on it), of
/// its thread-local storage (the C library's `errno` and stack guard), of this module's
/// statics, anything that is not private, writable and anonymous, and any anonymous mapping
/// that directly follows a file's (a library's zero-initialised data).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Release {
    ranges: [(usize, usize); RELEASE_RANGES],
    len: usize,
}

impl Release {
    /// Nothing to let go of.
    pub(crate) const NONE: Self = Self {
        ranges: [(0, 0); RELEASE_RANGES],
        len: 0,
    };

    /// The ranges, read from `/proc/self/maps` at most once in each [`RELEASE_FRESH`] (in the
    /// parent: this allocates; reading the maps costs as much as a tenth of a start). A range
    /// read earlier may have been unmapped and its place taken since: the keeper checks again
    /// that none holds what it still uses ([`apply`](Self::apply)). Unreadable maps release
    /// nothing.
    pub(crate) fn gather() -> Self {
        static GATHERED: Mutex<Option<(Instant, Release)>> = Mutex::new(None);
        let mut gathered = GATHERED.lock().unwrap_or_else(PoisonError::into_inner);
        match *gathered {
            Some((at, release)) if at.elapsed() < RELEASE_FRESH => release,
            _ => {
                let release = Self::read();
                *gathered = Some((Instant::now(), release));
                release
            }
        }
    }

    fn read() -> Self {
        let mut release = Self::NONE;
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
            return release;
        };
        // The keeper's stack and thread-local storage are for it to spare (`apply`): the thread
        // that reads the maps here is not always the one that forks.
        let kept = [
            std::ptr::addr_of!(RELAY_TO) as usize,
            std::ptr::addr_of!(KEEPER_LIVES) as usize,
        ];
        let (mut after_file, mut previous_end) = (false, 0);
        for line in maps.lines() {
            let mut fields = line.split_ascii_whitespace();
            let (Some(range), Some(perms), Some(_), Some(_), Some(inode)) = (
                fields.next(),
                fields.next(),
                fields.next(),
                fields.next(),
                fields.next(),
            ) else {
                continue;
            };
            let path = fields.next();
            let Some((start, end)) = range.split_once('-').and_then(|(start, end)| {
                let start = usize::from_str_radix(start, 16).ok()?;
                Some((start, usize::from_str_radix(end, 16).ok()?))
            }) else {
                continue;
            };
            let file = inode != "0";
            let follows_file = after_file && previous_end == start;
            (after_file, previous_end) = (file, end);
            let anonymous = !file && matches!(path, None | Some("[heap]"));
            if !anonymous
                || follows_file
                || !perms.starts_with("rw")
                || !perms.ends_with('p')
                || kept.iter().any(|at| (start..end).contains(at))
            {
                continue;
            }
            if release.len == RELEASE_RANGES {
                break;
            }
            release.ranges[release.len] = (start, end - start);
            release.len += 1;
        }
        release
    }

    /// In the keeper: lets every range go but any that overlaps `spared` (the init's stack)
    /// or what the keeper still uses: its live stack, from this call's frame to this
    /// `Release` (a copy on the stack of the call that made the keeper), and its thread-local
    /// storage.
    #[allow(unsafe_code)]
    fn apply(&self, spared: (usize, usize)) {
        let here = 0u8;
        let live = (
            std::ptr::addr_of!(here) as usize,
            std::ptr::from_ref(self) as usize + size_of::<Self>(),
        );
        let storage = thread_storage();
        for &(start, len) in &self.ranges[..self.len] {
            let end = start + len;
            if (start < spared.0 + spared.1 && spared.0 < end)
                || (start < live.1 && live.0 < end)
                || (start..end).contains(&storage)
            {
                continue;
            }
            // SAFETY: neither the keeper nor the init reads or writes these ranges from here
            // on; a private mapping let go reads as zeroes, never as another's data.
            unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
        }
    }
}

/// Nonzero while the keeper lives: the kernel sets it to 0 when the keeper ends
/// (`set_tid_address`), in its memory, which the init shares.
///
/// The init needs it because it arms its death signal (`PR_SET_PDEATHSIG`) after it starts,
/// and the keeper does not wait for that: a keeper killed before would leave the init, and the
/// program, running. The kernel clears this word (and wakes its futex, a full barrier) before
/// it reads its children's death signals in the same exit; the init arms its signal, makes a
/// full barrier, then reads this word. So either the keeper's end sees the armed signal and
/// kills the init, or the init sees the word cleared and ends itself: a store and a load on
/// each side, each pair separated by a full barrier, cannot both miss the other's store. (The
/// kernel clears the word only while another process shares this memory, as the init does
/// from its start to its end: a keeper with no init left has no one to tell.)
static KEEPER_LIVES: AtomicU32 = AtomicU32::new(0);

/// Sets [`KEEPER_LIVES`] and has the kernel clear it when this process ends. Made before the
/// init exists, so that any init reads a word the kernel will clear.
#[allow(unsafe_code)]
fn register_keeper_lives() {
    KEEPER_LIVES.store(1, Ordering::SeqCst);
    // SAFETY: the word is a static that lives as long as this process's memory; the call only
    // records its address (and returns this process's id: it cannot fail).
    unsafe { libc::syscall(libc::SYS_set_tid_address, KEEPER_LIVES.as_ptr()) };
}

/// Starts the init on a stack of its own, sharing this process's memory and descriptor table.
/// It dies with this process from the moment it starts (see [`KEEPER_LIVES`]). The stack is
/// never unmapped: it lives as long as the keeper's memory, which outlives the init.
#[allow(unsafe_code)]
fn start_init() -> io::Result<(Pid, (usize, usize))> {
    let stack = Stack::map(INIT_STACK_BYTES)?;
    // SAFETY: clone runs `init` on the top of its own stack with its own registers and a copy
    // of this process's signal handlers; the init reads no argument.
    let pid = unsafe {
        libc::clone(
            init,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_FILES | libc::SIGCHLD,
            std::ptr::null_mut(),
        )
    };
    let Some(pid) = Pid::from_raw(pid) else {
        let error = io::Error::last_os_error();
        stack.unmap();
        return Err(error);
    };
    Ok((pid, stack.range()))
}

/// The keeper: relays signals to the program, waits for it, ends the init (whose end kills
/// whatever is left in the namespace) and waits for that, then ends as the program did.
#[allow(unsafe_code)]
fn keep(program: Pid, init: Pid, release: &Release, init_stack: (usize, usize)) -> ! {
    name(c"capfs-keeper");
    RELAY_TO.store(program.as_raw_nonzero().get(), Ordering::Relaxed);
    for signal in RELAYED {
        handle(
            signal,
            relay as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
    close_all();
    release.apply(init_stack);
    let status = reap(program);
    RELAY_TO.store(0, Ordering::Relaxed);
    let _ = rustix::process::kill_process(init, Signal::KILL);
    // The init is gone once this returns: errno is this process's alone again.
    let _ = reap(init);
    // SAFETY: signal, kill and _exit on values of this function's own.
    unsafe {
        let Some(status) = status else {
            libc::kill(libc::getpid(), libc::SIGKILL);
            libc::_exit(137);
        };
        if let Some(signal) = status.terminating_signal() {
            libc::signal(signal, libc::SIG_DFL);
            mask(libc::SIG_UNBLOCK, signal);
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(status.exit_status().unwrap_or(1));
    }
}

/// Waits for the child `pid` to end, by the raw system call.
fn reap(pid: Pid) -> Option<rustix::process::WaitStatus> {
    loop {
        match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()) {
            Ok(Some((_, status))) => return Some(status),
            Err(rustix::io::Errno::INTR) => {}
            Ok(None) | Err(_) => return None,
        }
    }
}

/// The init: reaps every orphan that the program leaves to it, whenever one ends, until the
/// keeper ends it (or ends, which ends it too). It shares the keeper's memory, the C library's
/// `errno` included, and leaves that alone: its few C library calls (`prctl`, `sigaction`,
/// `sigprocmask`) cannot fail here, and its waits are raw system calls.
#[allow(unsafe_code)]
extern "C" fn init(_: *mut libc::c_void) -> libc::c_int {
    name(c"capfs-init");
    // The init dies with the keeper, so that a kill of the keeper ends the namespace; a keeper
    // that ended before this was armed has cleared its word, and the init ends itself (its
    // end ends the namespace, and no process can join it after).
    #[cfg(test)]
    tests::arm_late();
    let _ = rustix::process::set_parent_process_death_signal(Some(Signal::KILL));
    std::sync::atomic::fence(Ordering::SeqCst);
    if KEEPER_LIVES.load(Ordering::SeqCst) == 0 {
        return 0;
    }
    for signal in RELAYED {
        handle(signal, libc::SIG_IGN);
    }
    // `SIGCHLD` blocked: one that comes while the init reaps stays pending for its next wait
    // (a blocked signal is queued even for an init, and even with no handler).
    let children = mask(libc::SIG_BLOCK, libc::SIGCHLD);
    loop {
        // Any child (`wait`, the `-1` of `waitpid`): the orphans are in the program's process
        // groups, never in the init's.
        while let Ok(Some(_)) = rustix::process::wait(rustix::process::WaitOptions::NOHANG) {}
        // SAFETY: the raw call reads the set on this stack (the kernel's 8 bytes of it) and
        // takes the pending `SIGCHLD`; its return is the signal, and `errno` is written only
        // on a failure, which an init with no handler does not meet.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigtimedwait,
                &raw const children,
                std::ptr::null_mut::<libc::siginfo_t>(),
                std::ptr::null::<libc::timespec>(),
                8usize,
            )
        };
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
        // set_tid_address, mmap, clone, pause) on values made before the fork, and allocates
        // nothing.
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
                register_keeper_lives();
                start_init()?;
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
