//! What a process's child does before the program's `execve`: a confined process's keeper and
//! program, which share the server's memory (`init.rs`), or an unconfined process's fork.
//! Everything it needs (descriptors, the Landlock ruleset, the netlink message that brings
//! `lo` up, the limits) is built by the parent beforehand, so the child only makes system
//! calls: it allocates nothing and takes no lock another thread of the parent might hold.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use rustix::io::Errno;
use rustix::process::{Gid, Resource, Rlimit, Uid};
use rustix::thread::UnshareFlags;

use super::exec::Exec;
use super::id_maps::IdMaps;
use super::init;
use super::keeper::Keeper;
use super::listen::ProxyChannel;
use super::mounts::Mounts;
use super::policy::{Network, RunAs};
use super::session_net::SessionNet;

/// The steps the child takes, in order, before it runs the program. Any failure stops the
/// child before the program runs; the parent's spawn then fails with that error.
#[derive(Debug)]
pub(crate) struct ChildSetup {
    /// The working directory, opened through the sandbox in the parent.
    pub cwd: OwnedFd,
    /// Makes standard input (a terminal) the controlling terminal of the new session.
    pub tty: bool,
    /// The process's cgroup's `cgroup.procs`, which the child enters by writing `0`.
    pub cgroup_procs: Option<OwnedFd>,
    /// The session's network namespace (and its owner) to join before unsharing the rest.
    pub join: Option<std::sync::Arc<SessionNet>>,
    /// Namespaces to unshare; with `NEWPID`, the process runs under a keeper and an init of
    /// its own (`init.rs`) and is the first process of the new PID namespace after its init.
    pub namespaces: Option<UnshareFlags>,
    /// The maps of a new user namespace (the starter is not root): its own ids, mapped to
    /// themselves.
    pub id_maps: Option<IdMaps>,
    /// The mount table of the process (`namespaces` then holds `NEWNS` and `NEWPID`).
    pub mounts: Option<Mounts>,
    /// A second descriptor of the Landlock ruleset, for the rule of the `/proc` the child
    /// mounts (which did not exist when the parent built the ruleset).
    pub proc_rule: Option<OwnedFd>,
    /// The netlink request that sets `lo` up in the new network namespace.
    pub loopback_up: Option<[u8; LOOPBACK_UP_LEN]>,
    /// The netlink request that makes every IPv4 address local (transparent TCP), sent once
    /// `lo` is up.
    pub all_local: Option<[u8; ALL_LOCAL_LEN]>,
    /// The channel the proxy's listeners go back on, made in the network namespace once `lo`
    /// is up.
    pub proxy: Option<ProxyChannel>,
    /// The limits to set.
    pub limits: [(Resource, u64); 3],
    /// The identity to drop to (the starter is root).
    pub run_as: Option<RunAs>,
    /// The Landlock ruleset, built in the parent; `None` only for unconfined processes.
    pub ruleset: Option<landlock::RulesetCreated>,
    /// The seccomp filter refusing UNIX sockets, for processes without the host's network.
    pub seccomp: Option<seccompiler::BpfProgram>,
    /// The program's `execve`, which it makes itself under a PID namespace (`init.rs`); the
    /// standard library's makes it otherwise.
    pub exec: Option<Exec>,
}

/// A netlink `RTM_NEWLINK` request: a 16-byte header and a 16-byte `ifinfomsg`.
pub(crate) const LOOPBACK_UP_LEN: usize = 32;

/// The request that sets interface 1 (`lo`, always index 1 in a new network namespace) up,
/// and asks for an acknowledgement.
pub(crate) fn loopback_up_request() -> [u8; LOOPBACK_UP_LEN] {
    const RTM_NEWLINK: u16 = 16;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_ACK: u16 = 4;
    const IFF_UP: u32 = 1;
    let mut msg = [0u8; LOOPBACK_UP_LEN];
    msg[0..4].copy_from_slice(&(LOOPBACK_UP_LEN as u32).to_ne_bytes());
    msg[4..6].copy_from_slice(&RTM_NEWLINK.to_ne_bytes());
    msg[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    msg[8..12].copy_from_slice(&1u32.to_ne_bytes()); // sequence number
    // ifinfomsg: family (AF_UNSPEC) and padding, type, index, flags, change.
    msg[20..24].copy_from_slice(&1i32.to_ne_bytes());
    msg[24..28].copy_from_slice(&IFF_UP.to_ne_bytes());
    msg[28..32].copy_from_slice(&IFF_UP.to_ne_bytes());
    msg
}

/// A netlink `RTM_NEWROUTE` request: a 16-byte header, a 12-byte `rtmsg`, two 8-byte
/// attributes.
pub(crate) const ALL_LOCAL_LEN: usize = 44;

/// The request that adds `local 0.0.0.0/0 dev lo` to the local table (as `ip route add local
/// 0.0.0.0/0 dev lo` does): every IPv4 address is then one of the namespace's own, so a
/// connection to any of them reaches a listener on `0.0.0.0` of its port, and nothing is
/// routed anywhere else (the namespace has no other interface).
pub(crate) fn all_local_request() -> [u8; ALL_LOCAL_LEN] {
    const RTM_NEWROUTE: u16 = 24;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_ACK: u16 = 4;
    const NLM_F_EXCL: u16 = 0x200;
    const NLM_F_CREATE: u16 = 0x400;
    const AF_INET: u8 = 2;
    const RT_TABLE_LOCAL: u8 = 255;
    const RTPROT_BOOT: u8 = 3;
    const RT_SCOPE_HOST: u8 = 254;
    const RTN_LOCAL: u8 = 2;
    const RTA_OIF: u16 = 4;
    const RTA_TABLE: u16 = 15;
    let mut msg = [0u8; ALL_LOCAL_LEN];
    msg[0..4].copy_from_slice(&(ALL_LOCAL_LEN as u32).to_ne_bytes());
    msg[4..6].copy_from_slice(&RTM_NEWROUTE.to_ne_bytes());
    let flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    msg[6..8].copy_from_slice(&flags.to_ne_bytes());
    msg[8..12].copy_from_slice(&2u32.to_ne_bytes()); // sequence number
    // rtmsg: family, destination length (0: every address), source length, tos, table,
    // protocol, scope, type, then four bytes of flags.
    msg[16..24].copy_from_slice(&[
        AF_INET,
        0,
        0,
        0,
        RT_TABLE_LOCAL,
        RTPROT_BOOT,
        RT_SCOPE_HOST,
        RTN_LOCAL,
    ]);
    // Attributes: length, type, a 32-bit value.
    msg[28..30].copy_from_slice(&8u16.to_ne_bytes());
    msg[30..32].copy_from_slice(&RTA_TABLE.to_ne_bytes());
    msg[32..36].copy_from_slice(&u32::from(RT_TABLE_LOCAL).to_ne_bytes());
    msg[36..38].copy_from_slice(&8u16.to_ne_bytes());
    msg[38..40].copy_from_slice(&RTA_OIF.to_ne_bytes());
    msg[40..44].copy_from_slice(&1u32.to_ne_bytes()); // lo
    msg
}

impl ChildSetup {
    /// The steps before namespaces are unshared: a new session (the starter's controlling
    /// terminal becomes unreachable), the terminal (unless the process gets it under its init),
    /// the directory, the cgroup.
    fn enter(&self) -> io::Result<()> {
        rustix::process::setsid()?;
        if self.tty && !self.pid_namespace() {
            rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
        }
        rustix::process::fchdir(&self.cwd)?;
        if let Some(procs) = &self.cgroup_procs {
            let written = rustix::io::write(procs, b"0")?;
            if written != 1 {
                return Err(Errno::IO.into());
            }
        }
        Ok(())
    }

    /// Joins the session's namespaces: its user namespace first (whose owner the starter is,
    /// so it gets every capability in it), then the network namespace that user namespace owns.
    fn join(&self) -> io::Result<()> {
        use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};
        let Some(session) = &self.join else {
            return Ok(());
        };
        if let Some(user) = session.user() {
            move_into_link_name_space(user, Some(LinkNameSpaceType::User))?;
        }
        move_into_link_name_space(session.net(), Some(LinkNameSpaceType::Network))?;
        Ok(())
    }

    fn pid_namespace(&self) -> bool {
        self.namespaces
            .is_some_and(|flags| flags.contains(UnshareFlags::NEWPID))
    }

    /// The steps right after the namespaces, which the keeper, the init and the process all
    /// share: the maps of a new user namespace, `lo`, the limits.
    fn share(&self) -> io::Result<()> {
        if let Some(maps) = &self.id_maps {
            maps.write()?;
        }
        if let Some(request) = &self.loopback_up {
            netlink_request(request)?;
        }
        if let Some(request) = &self.all_local {
            netlink_request(request)?;
        }
        if let Some(channel) = &self.proxy {
            channel.send_listeners()?;
        }
        for (resource, limit) in self.limits {
            rustix::process::setrlimit(
                resource,
                Rlimit {
                    current: Some(limit),
                    maximum: Some(limit),
                },
            )?;
        }
        Ok(())
    }

    /// The steps of the process itself under its init: a session of its own, with the
    /// terminal as its controlling terminal.
    fn lead(&self) -> io::Result<()> {
        rustix::process::setsid()?;
        if self.tty {
            rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
        }
        Ok(())
    }

    /// The rule of the new `/proc`: read its files and list its directories.
    fn allow_proc(&self) -> io::Result<()> {
        let Some(ruleset) = &self.proc_rule else {
            return Ok(());
        };
        let proc = rustix::fs::open(
            c"/proc",
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        init::add_path_rule(ruleset, &proc, init::PROC_ACCESS)
    }

    /// The last steps: identity, then Landlock (which also sets `no_new_privs`), then seccomp,
    /// so that nothing after them needs what they take away.
    fn confine(&mut self) -> io::Result<()> {
        self.allow_proc()?;
        if let Some(run_as) = self.run_as {
            rustix::thread::set_thread_groups(&[])?;
            rustix::thread::set_thread_res_gid(
                Gid::from_raw(run_as.gid),
                Gid::from_raw(run_as.gid),
                Gid::from_raw(run_as.gid),
            )?;
            rustix::thread::set_thread_res_uid(
                Uid::from_raw(run_as.uid),
                Uid::from_raw(run_as.uid),
                Uid::from_raw(run_as.uid),
            )?;
        }
        if let Some(ruleset) = self.ruleset.take() {
            rustix::thread::set_no_new_privs(true)?;
            match ruleset.restrict_self() {
                Ok(status) if status.ruleset != landlock::RulesetStatus::NotEnforced => {}
                // Only an errno travels back to the parent; this one says "refused".
                _ => return Err(Errno::PERM.into()),
            }
        }
        if let Some(filter) = &self.seccomp {
            seccompiler::apply_filter(filter).map_err(|_| Errno::PERM)?;
        }
        Ok(())
    }

    /// The steps every confined process takes last, in itself: its mount table, its
    /// confinement, and close-on-exec on every descriptor the starter left without it.
    fn finish(&mut self) -> io::Result<()> {
        if let Some(mounts) = &mut self.mounts {
            mounts.apply(set_read_only)?;
        }
        self.confine()?;
        close_on_exec_past_stdio()
    }

    /// The program under its init: leads its session, finishes, and replaces itself by the
    /// program; returns only the error that stopped it.
    fn program(&mut self) -> io::Error {
        if let Err(e) = self.lead().and_then(|()| self.finish()) {
            return e;
        }
        match &mut self.exec {
            Some(exec) => exec.run(),
            None => Errno::INVAL.into(),
        }
    }
}

/// Sends `request` on a new netlink socket and checks the kernel's acknowledgement.
fn netlink_request(request: &[u8]) -> io::Result<()> {
    use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
    // Protocol 0 of the netlink family is NETLINK_ROUTE.
    let socket = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::RAW,
        SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::send(&socket, request, SendFlags::empty())?;
    // The answer is an `nlmsgerr`: a header, then the error (0 for success).
    let mut answer = [0u8; 64];
    let (got, _) = rustix::net::recv(&socket, &mut answer, RecvFlags::empty())?;
    if got < 20 {
        return Err(Errno::IO.into());
    }
    let error = i32::from_ne_bytes([answer[16], answer[17], answer[18], answer[19]]);
    if error != 0 {
        return Err(Errno::from_raw_os_error(-error).into());
    }
    Ok(())
}

/// The namespaces a process gets for `network`: a network namespace of its own unless it may
/// use the host's or `joins` its session's, and a user namespace too when the starter is not
/// root (an unprivileged user may create a network namespace only inside a user namespace it
/// owns).
/// Always a mount namespace (the host read-only, the roots writable) and a PID namespace (the
/// process sees its own processes only, and they all end with it), inside a user namespace
/// when not root, for the same reason.
pub(crate) fn namespaces(network: Network, as_root: bool, joins: bool) -> Option<UnshareFlags> {
    let mut flags = match network {
        Network::All => UnshareFlags::empty(),
        _ if joins => UnshareFlags::empty(),
        _ => UnshareFlags::NEWNET,
    };
    flags |= UnshareFlags::NEWNS | UnshareFlags::NEWPID;
    if !as_root && !flags.is_empty() {
        flags |= UnshareFlags::NEWUSER;
    }
    (!flags.is_empty()).then_some(flags)
}

/// Makes the command run `setup` in the child before it runs the program: for a process
/// without a PID namespace of its own, whose program the standard library's `execve` runs.
#[allow(unsafe_code)]
pub(crate) fn install(command: &mut tokio::process::Command, mut setup: ChildSetup) {
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe work is allowed: the steps listed above `impl Steps for ChildSetup`
    // below, which allocate nothing and take no lock.
    unsafe {
        command.pre_exec(move || {
            init::Steps::before(&mut setup)?;
            setup.finish()
        });
    }
}

/// Starts a confined process (`setup.namespaces` holds `NEWPID`) whose program has `stdio` as
/// its standard input, output and error: its keeper takes the steps before the namespaces'
/// first process, then makes the init and the program (`init.rs`).
pub(crate) fn start(mut setup: ChildSetup, stdio: [BorrowedFd<'_>; 3]) -> io::Result<Keeper> {
    Keeper::start(stdio, &mut setup)
}

// What runs in the keeper and the program, which share the starter's memory while the thread
// that started them waits (`init.rs`): system calls only, through rustix, libc and the
// landlock and seccompiler crates, on values the starter made beforehand (descriptors,
// buffers, the ruleset, the filter, the slots of the mount copies, the `execve`'s arrays);
// nothing allocates or takes a lock, and errors are errno values:
// - session and directory: setsid, ioctl TIOCSCTTY, fchdir, a write to `cgroup.procs`;
// - namespaces: setns into the session's (descriptors the starter holds); unshare of NEWNET,
//   NEWNS, NEWPID and NEWUSER only, never FILES; open and write of the id maps from buffers
//   the starter filled;
// - network: socket, send and recv of the netlink requests on the stack; socket, bind and
//   listen of the proxy's listeners (and transparent TCP's, on ports the starter listed, in an
//   array on the stack), and a sendmsg of them from a control buffer on the stack;
// - limits and identity: setrlimit, setgroups, setresgid, setresuid, prctl;
// - mounts: mount (propagation, a new procfs), openat2 and fstat on paths the starter
//   prepared, open of `/etc/resolv.conf`, open_tree, mount_setattr on a `mount_attr` on the
//   stack, move_mount;
// - confinement: landlock_add_rule and landlock_restrict_self on the starter's ruleset
//   (landlock 0.4.8's `restrict_self` makes the prctl and the call and returns a status on the
//   stack; a `RulesetCreated` holds no heap data), seccomp with the starter's filter
//   (seccompiler 0.5's `apply_filter` makes the prctl and the call on a `sock_fprog` on the
//   stack), close_range;
// - in `init.rs`: fcntl and dup2 of the standard descriptors, sigaction, rt_sigprocmask,
//   signalfd4, set_tid_address, clone of the init and of the program on their stacks, prctl,
//   write of the starter's event descriptor, read, wait4, kill, close_range, rt_sigaction,
//   pause, _exit and exit_group; and the program's execve (`exec.rs`) of arrays the starter
//   built.
impl init::Steps for ChildSetup {
    fn before(&mut self) -> io::Result<()> {
        self.enter()?;
        self.join()?;
        if let Some(flags) = self.namespaces {
            // SAFETY: `namespaces` never holds FILES (nor anything but NEWNET, NEWNS, NEWPID
            // and NEWUSER), and this process has one thread.
            #[allow(unsafe_code)]
            unsafe {
                rustix::thread::unshare_unsafe(flags)?;
            }
            self.share()?;
        }
        Ok(())
    }

    fn program(&mut self) -> io::Error {
        ChildSetup::program(self)
    }
}

/// Marks every descriptor past the standard three close-on-exec: those the starter inherited
/// without it stay with it.
#[allow(unsafe_code)]
fn close_on_exec_past_stdio() -> io::Result<()> {
    // SAFETY: close_range changes flags of this process's own descriptors only.
    match unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Makes the mount tree at `tree` read-only, with everything mounted below it when `recursive`.
#[allow(unsafe_code)]
fn set_read_only(tree: std::os::fd::BorrowedFd<'_>, recursive: bool) -> io::Result<()> {
    let attr = libc::mount_attr {
        attr_set: libc::MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let mut flags = libc::AT_EMPTY_PATH;
    if recursive {
        flags |= libc::AT_RECURSIVE;
    }
    // SAFETY: `mount_setattr` reads the `mount_attr` on the stack and the empty path.
    match unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            flags,
            &raw const attr,
            size_of::<libc::mount_attr>(),
        )
    } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}
