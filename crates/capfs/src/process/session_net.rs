//! One empty network namespace per session, for processes without a network
//! ([`Network::None`](super::policy::Network::None)). Making a network namespace and tearing
//! it down again are the largest part of a confined start (the loopback device, its sysctl
//! tables and its teardown on a kernel worker), and a namespace with no interface up is the
//! same for every process that has none: the processes of a session share one, made at its
//! first start, and each still gets a user, mount and PID namespace of its own.
//!
//! Nothing passes between processes through it: its loopback stays down (no process has the
//! capability to bring it up), TCP is refused by Landlock and UNIX sockets, the only sockets a
//! namespace scopes, by seccomp. The processes sharing it are those of one session, which
//! already share their home. Processes with a loopback, a proxy or transparent TCP keep a
//! network namespace of their own, whose listeners are theirs alone.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::net::RecvFlags;

use super::id_maps::IdMaps;
use super::listen::{receive_descriptors, send_descriptors};

/// The namespaces a session's processes join: its network namespace and, when the starter
/// is not root, the user namespace that owns it (joining a network namespace takes
/// `CAP_SYS_ADMIN` over its owner).
#[derive(Debug)]
pub(crate) struct SessionNet {
    user: Option<OwnedFd>,
    net: OwnedFd,
}

impl SessionNet {
    /// Makes the namespaces in a short-lived child, which sends their descriptors back and
    /// ends; `maps` (a starter that is not root) asks for the user namespace too.
    pub(crate) fn create(maps: Option<&IdMaps>) -> io::Result<Self> {
        let (ours, theirs) = rustix::net::socketpair(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )?;
        let mut flags = rustix::thread::UnshareFlags::NEWNET;
        if maps.is_some() {
            flags |= rustix::thread::UnshareFlags::NEWUSER;
        }
        let child = fork_then(|| make_and_send(flags, maps, &theirs))?;
        drop(theirs);
        let received = receive(&ours, maps.is_some());
        let waited = wait(child);
        let unmade = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("cannot make the session's network namespace: {e}"),
            )
        };
        waited.map_err(unmade)?;
        let (user, net) = received.map_err(unmade)?;
        Ok(Self { user, net })
    }

    /// The user namespace to join first, if any.
    pub(crate) fn user(&self) -> Option<BorrowedFd<'_>> {
        self.user.as_ref().map(AsFd::as_fd)
    }

    /// The network namespace.
    pub(crate) fn net(&self) -> BorrowedFd<'_> {
        self.net.as_fd()
    }
}

/// In the child: the namespaces, the maps of the user namespace, and both descriptors sent
/// on `channel`. Only system calls on memory prepared beforehand, as between fork and exec.
fn make_and_send(
    flags: rustix::thread::UnshareFlags,
    maps: Option<&IdMaps>,
    channel: &OwnedFd,
) -> io::Result<()> {
    #[allow(unsafe_code)]
    // SAFETY: the child has one thread and unshares no descriptor table (no CLONE_FILES).
    unsafe {
        rustix::thread::unshare_unsafe(flags)?;
    }
    if let Some(maps) = maps {
        maps.write()?;
    }
    let open = |path: &std::ffi::CStr| {
        rustix::fs::open(
            path,
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
    };
    let net = open(c"/proc/self/ns/net")?;
    let user = match maps {
        Some(_) => Some(open(c"/proc/self/ns/user")?),
        None => None,
    };
    let fds: [BorrowedFd<'_>; 2] = [net.as_fd(), user.as_ref().unwrap_or(&net).as_fd()];
    let count = if user.is_some() { 2 } else { 1 };
    send_descriptors(channel, &fds[..count])
}

/// The descriptors the child sent: the network namespace's, then the user namespace's when
/// `with_user` (each process's `setns` names the type it expects of each).
fn receive(channel: &OwnedFd, with_user: bool) -> io::Result<(Option<OwnedFd>, OwnedFd)> {
    let fds = receive_descriptors(channel, RecvFlags::empty())?;
    let unmade = || io::Error::other("the session's network namespace was not made");
    let mut fds = fds.into_iter();
    let net = fds.next().ok_or_else(unmade)?;
    let user = if with_user {
        Some(fds.next().ok_or_else(unmade)?)
    } else {
        None
    };
    Ok((user, net))
}

/// Forks a child that runs `work` and ends: with status 0 when it returned `Ok`, else with
/// its errno.
#[allow(unsafe_code)]
fn fork_then(work: impl FnOnce() -> io::Result<()>) -> io::Result<libc::pid_t> {
    // SAFETY: the child of a threaded process only makes system calls on memory prepared
    // before the fork (`work` allocates nothing and takes no lock), then `_exit`s.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            let status = match work() {
                Ok(()) => 0,
                Err(e) => e.raw_os_error().unwrap_or(libc::EIO).clamp(1, 255),
            };
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(status) }
        }
        child => Ok(child),
    }
}

/// Waits for `child` and turns its status into the error it ended with.
fn wait(child: libc::pid_t) -> io::Result<()> {
    let pid = rustix::process::Pid::from_raw(child)
        .ok_or_else(|| io::Error::other("fork returned no child"))?;
    loop {
        match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()) {
            Ok(Some((_, status))) => {
                return match status.exit_status() {
                    Some(0) => Ok(()),
                    Some(code) => Err(io::Error::from_raw_os_error(code)),
                    None => Err(io::Error::other(
                        "the maker of the session's network namespace was killed",
                    )),
                };
            }
            Ok(None) => return Err(io::Error::other("no child to wait for")),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}
