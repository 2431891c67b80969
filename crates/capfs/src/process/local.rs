//! `LocalProcesses`: processes on this host, each confined by the kernel to a sandbox's roots.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use rustix::process::Resource;

use super::cgroup::CgroupParent;
use super::child::{self, ChildSetup};
use super::confine;
use super::egress::Proxy;
use super::exec::Exec;
use super::id_maps::IdMaps;
use super::mounts::{self, Mounts};
use super::policy::{Network, ProcessPolicy};
use super::prepare::{Slot, make_temp, validate};
use super::run::{self, Wiring};
use super::run_dir::RunDir;
use super::session_net::SessionNet;
use super::{Confinement, ExecutorProcesses, ProcessRequest, StartedProcess};
use crate::error;
use crate::sandbox::{Access, Sandbox};

/// Starts processes on this host, each held by the kernel to the sandbox's roots: Landlock
/// for the file system, TCP, signals and abstract sockets; a network namespace of its own for
/// every other network family; a cgroup (or `RLIMIT_NPROC`) bounding its tasks; an
/// unprivileged identity and `no_new_privs`. The security document of the repository
/// (SECURITY.md, "Processes") lists each guarantee with its mechanism and test.
///
/// # Examples
///
/// ```no_run
/// use capfs::process::{ExecutorProcesses, LocalProcesses, ProcessEvent, ProcessPolicy, ProcessRequest};
/// use capfs::{Access, Sandbox};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let sandbox = Sandbox::new().with_root("/srv/ws", Access::ReadWrite)?;
/// let cwd = sandbox.roots()[0].path().clone();
/// let processes = LocalProcesses::new(sandbox, ProcessPolicy::default().with_run_as(65534, 65534))?;
/// let mut request = ProcessRequest::new(vec!["ls".into()], cwd);
/// request.env.push(("PATH".into(), "/usr/bin:/bin".into()));
/// let mut started = processes.start(request).await?;
/// while let Some(event) = started.events.recv().await {
///     if let ProcessEvent::Output { bytes, .. } = event {
///         print!("{}", String::from_utf8_lossy(&bytes));
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LocalProcesses {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    sandbox: Sandbox,
    policy: ProcessPolicy,
    cgroups: Option<CgroupParent>,
    as_root: bool,
    running: Arc<AtomicUsize>,
    confinement: Confinement,
    /// The seccomp filter of processes without the host's network, built once.
    unix_filter: Option<seccompiler::BpfProgram>,
    /// The run directory made under each parent of homes and temporary directories, made at
    /// the first use of that parent.
    run_dirs: Mutex<Vec<Arc<RunDir>>>,
}

impl Inner {
    /// This server's run directory under `parent`.
    fn run_dir(&self, parent: &Path) -> io::Result<Arc<RunDir>> {
        let mut dirs = self.run_dirs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(dir) = dirs.iter().find(|d| d.parent() == parent) {
            return Ok(Arc::clone(dir));
        }
        let dir = Arc::new(RunDir::open(parent)?);
        dirs.push(Arc::clone(&dir));
        Ok(dir)
    }
}

impl LocalProcesses {
    /// Processes confined to `sandbox`'s roots under `policy`.
    ///
    /// # Errors
    ///
    /// Unless the policy is [unconfined](ProcessPolicy::unconfined): `PermissionDenied` when the
    /// kernel cannot enforce it (no Landlock, or an ABI older than 6) or when the starter is
    /// root and the policy names no unprivileged user; `InvalidInput` for a user or group 0,
    /// or for roots nested in one another other than a read-only root inside a writable one
    /// (which processes get as a read-only mount): a process could move a nested writable
    /// root away.
    pub fn new(sandbox: Sandbox, policy: ProcessPolicy) -> io::Result<Self> {
        let as_root = rustix::process::geteuid().is_root();
        if let Some(run_as) = policy.run_as {
            if run_as.uid == 0 || run_as.gid == 0 {
                return Err(error::run_as_root_id());
            }
            if !as_root {
                return Err(error::run_as_needs_root());
            }
        }
        // A starter that is not root gives each process a user namespace of its own, in which
        // `RLIMIT_NPROC` counts that process's tree alone: the task bound needs no cgroup, and
        // the PID namespace kills the tree. A cgroup is for a root starter's processes, which
        // share the host's user namespace.
        let cgroups = match policy.unconfined || !as_root {
            true => None,
            false => CgroupParent::detect(),
        };
        let unix_filter = match (policy.unconfined, policy.network) {
            (false, Network::None | Network::Loopback) => Some(super::seccomp::no_unix_sockets()?),
            _ => None,
        };
        let confinement = if policy.unconfined {
            Confinement::Unconfined
        } else {
            if policy.egress.is_some() && policy.network == Network::All {
                return Err(error::egress_with_host_network());
            }
            if let Some(egress) = &policy.egress {
                // Refuses more transparent ports than a child can hand over, now.
                super::listen::transparent_ports(egress)?;
            }
            if as_root && policy.run_as.is_none() {
                return Err(error::root_needs_run_as());
            }
            // A read-only root inside a writable one is held by a read-only mount; any other
            // nesting is refused.
            mounts::read_only_inside_writable(&sandbox)?;
            confine::probe(policy.network)?;
            Confinement::Enforced(describe(&policy, cgroups.is_some()))
        };
        Ok(Self {
            inner: Arc::new(Inner {
                sandbox,
                policy,
                cgroups,
                as_root,
                running: Arc::new(AtomicUsize::new(0)),
                confinement,
                unix_filter,
                run_dirs: Mutex::default(),
            }),
        })
    }

    /// The sandbox processes are confined to.
    pub fn sandbox(&self) -> &Sandbox {
        &self.inner.sandbox
    }
}

fn describe(policy: &ProcessPolicy, cgroup: bool) -> String {
    let network = match policy.network {
        _ if policy.egress.as_ref().is_some_and(|e| e.transparent_tcp()) => {
            "egress by name only (own namespace, tcp to its proxy and to allowed ports through \
             capfs only (transparent), dns by capfs, no unix sockets)"
        }
        _ if policy.egress.is_some() => {
            "egress by name only (own namespace, tcp to its proxy only, no unix sockets)"
        }
        Network::None => {
            "no network (a namespace with no interface up, one per session, tcp refused, no unix sockets)"
        }
        Network::Loopback => "own loopback only (own namespace, no unix sockets)",
        Network::All => "host network",
    };
    let tasks = if cgroup {
        "cgroup pids"
    } else if policy.run_as.is_none() {
        "RLIMIT_NPROC in its own user namespace"
    } else {
        "RLIMIT_NPROC"
    };
    let mounts = "own mount namespace (host read-only, roots writable); own pid namespace";
    let user = match policy.run_as {
        Some(run_as) => format!("uid {} gid {}", run_as.uid, run_as.gid),
        None => "the starter's uid".to_owned(),
    };
    format!(
        "landlock (fs, tcp, signal and abstract socket scopes); {network}; {mounts}; tasks bounded by {tasks}; {user}; no_new_privs"
    )
}

#[async_trait]
impl ExecutorProcesses for LocalProcesses {
    fn confinement(&self) -> Confinement {
        self.inner.confinement.clone()
    }

    async fn start(&self, request: ProcessRequest) -> io::Result<StartedProcess> {
        validate(&request)?;
        let inner = &self.inner;
        let slot = Slot::take(&inner.running, inner.policy.max_processes)?;
        let narrowed;
        let mut mount_dirs = Vec::new();
        let sandbox = match &request.narrowing {
            None => {
                if !inner.policy.unconfined {
                    for root in mounts::read_only_inside_writable(&inner.sandbox)? {
                        mount_dirs.push(mounts::Located::of(root.dir().as_fd())?);
                    }
                }
                &inner.sandbox
            }
            Some(dirs) => {
                let narrowing = inner.sandbox.narrowed(dirs)?;
                let mut opened = Vec::with_capacity(dirs.len());
                for (result, (asked, _)) in narrowing.dirs.into_iter().zip(dirs) {
                    opened.push((result?.0, asked));
                }
                narrowed = narrowing.sandbox;
                for root in mounts::read_only_inside_writable(&narrowed)? {
                    // A link at the directory's name could be replaced by the process with a
                    // writable directory; only the directory itself can be held read-only.
                    if !opened
                        .iter()
                        .any(|(name, asked)| name == root.path() && *asked == name)
                    {
                        return Err(error::read_only_dir_through_link(root.path()));
                    }
                    mount_dirs.push(mounts::Located::of(root.dir().as_fd())?);
                }
                &narrowed
            }
        };
        let cwd = open_cwd(sandbox, &request)?;
        let policy = &inner.policy;
        let egress = policy.egress.clone().filter(|_| !policy.unconfined);
        let transparent = egress.as_deref().filter(|e| e.transparent_tcp());
        let transparent_ports = match transparent {
            Some(egress) => super::listen::transparent_ports(egress)?,
            None => Vec::new(),
        };
        let (proxy_end, proxy_channel) = match &egress {
            Some(_) => {
                let ports = transparent.map(|_| &transparent_ports[..]);
                let (ours, theirs) = super::listen::channel(ports)?;
                (Some(ours), Some(theirs))
            }
            None => (None, None),
        };
        let temp = make_temp(&inner.run_dir(&policy.temp_parent)?, policy)?;
        let temp_dir = std::fs::File::open(&temp.path)?;
        let (resolv_conf, resolv_file) = match transparent {
            Some(_) => {
                let (made, file) = make_resolv_conf(&temp)?;
                (Some(made), Some(file))
            }
            None => (None, None),
        };
        let home = request.home.as_deref();
        let confined = !policy.unconfined;
        let mounts = match confined {
            false => None,
            true => {
                let mut writable = Vec::new();
                for root in sandbox.roots() {
                    if root.access() == Access::ReadWrite {
                        writable.push(mounts::Located::of(root.dir().as_fd())?);
                    }
                }
                writable.push(mounts::Located::of(temp_dir.as_fd())?);
                if let Some(home) = home {
                    writable.push(mounts::Located::of(home.dir().as_fd())?);
                }
                let cwd = mounts::Located::of(cwd.as_fd())?;
                let mut mounts = Mounts::new(writable, mount_dirs, cwd);
                if let Some(file) = &resolv_file {
                    mounts.resolv_conf = Some(mounts::Located::of_file(file.as_fd())?);
                }
                Some(mounts)
            }
        };
        let ruleset = match confined {
            false => None,
            true => Some(confine::ruleset(&confine::Reach {
                roots: sandbox.roots(),
                temp: &temp_dir,
                home: home.map(|h| h.dir() as &dyn AsFd),
                read_only: &policy.read_only_paths,
                network: policy.network,
                proxy: egress.is_some(),
                transparent_ports: &transparent_ports,
                resolv_conf: resolv_file.as_ref().map(|f| f as &dyn AsFd),
            })?),
        };
        // The `/proc` of the process's PID namespace exists only once the child mounted it:
        // the child adds its rule through a second descriptor of the ruleset.
        let proc_rule = match &ruleset {
            Some(ruleset) => Option::<OwnedFd>::from(ruleset.try_clone()?),
            None => None,
        };
        let cgroup = match &inner.cgroups {
            Some(parent) => Some(parent.create(policy.max_tasks)?),
            None => None,
        };
        let cgroup_procs = cgroup.as_ref().map(|c| c.procs_for_entry()).transpose()?;
        let tty = request.tty;
        let pty = tty
            .map(|size| super::pty::open(size, policy.run_as))
            .transpose()?;
        // The request's variables, then capfs's own over them.
        let mut env: BTreeMap<OsString, OsString> = request
            .env
            .iter()
            .map(|(name, value)| (name.into(), value.into()))
            .collect();
        env.insert("TMPDIR".into(), temp.path.clone().into());
        if let Some(home) = home {
            env.insert("HOME".into(), home.path().into());
        }
        if egress.is_some() {
            env.extend(
                super::egress::environment()
                    .into_iter()
                    .map(|(name, value)| (name.into(), value.into())),
            );
        }
        // A confined program makes its own `execve` (exec.rs); the command's is for the others.
        let exec = confined
            .then(|| Exec::new(&request.argv, request.arg0.as_deref(), &env))
            .transpose()?;
        // Processes without a network share their session's empty network namespace: making
        // and tearing down one per process was the largest single cost of a start
        // (session_net.rs). A request without a home (no session) keeps a namespace of its own.
        let join = match (confined, policy.network, &egress, home) {
            (true, Network::None, None, Some(home)) => Some(home.session_net(|| {
                let maps = (!inner.as_root).then(IdMaps::of_current);
                SessionNet::create(maps.as_ref())
            })?),
            _ => None,
        };
        let tasks = match inner.cgroups.is_some() {
            // The cgroup bounds each process's tree; the user's count is a second line.
            true => policy.max_tasks.saturating_mul(policy.max_processes as u64),
            false => policy.max_tasks,
        };
        let setup = ChildSetup {
            cwd,
            tty: tty.is_some(),
            cgroup_procs,
            namespaces: confined
                .then(|| child::namespaces(policy.network, inner.as_root, join.is_some()))
                .flatten(),
            join,
            id_maps: (confined && !inner.as_root).then(IdMaps::of_current),
            mounts,
            proc_rule,
            loopback_up: (confined && (policy.network == Network::Loopback || egress.is_some()))
                .then(child::loopback_up_request),
            all_local: (confined && transparent.is_some()).then(child::all_local_request),
            proxy: proxy_channel,
            limits: [
                (Resource::Core, 0),
                (Resource::Fsize, policy.file_size_limit),
                (Resource::Nproc, tasks),
            ],
            run_as: policy.run_as,
            ruleset,
            seccomp: inner.unix_filter.clone(),
            exec,
        };
        let (mut child, wiring) = match confined {
            true => start_confined(setup, pty, request.pipe_stdin),
            false => spawn_unconfined(&request, &env, setup, pty),
        }
        .map_err(|e| error::spawn_failed(&request.argv[0], &e))?;
        let narrowing = request.egress.clone().unwrap_or_default();
        let proxy = match Proxy::of_child(proxy_end, egress, narrowing, child.id().unwrap_or(0)) {
            Ok(proxy) => proxy,
            Err(e) => {
                let _ = child.start_kill();
                return Err(e);
            }
        };
        let pidfd = child.pidfd()?;
        run::launch(
            child,
            pidfd,
            confined,
            cgroup,
            wiring,
            policy.time_limit,
            run::Held {
                things: Box::new((slot, temp, resolv_conf, request.home.clone())),
                proxy,
            },
        )
    }

    fn time_limit(&self) -> Option<Duration> {
        self.inner.policy.time_limit
    }

    fn holds_egress_narrowing(&self) -> bool {
        let policy = &self.inner.policy;
        !policy.unconfined && policy.network != Network::All
    }

    fn serves_transparent_tcp(&self) -> bool {
        let policy = &self.inner.policy;
        self.holds_egress_narrowing() && policy.egress.as_ref().is_some_and(|e| e.transparent_tcp())
    }

    fn new_home(&self) -> io::Result<Option<super::Home>> {
        let policy = &self.inner.policy;
        let owner = if self.inner.as_root {
            policy.run_as
        } else {
            None
        };
        super::Home::create(&self.inner.run_dir(&policy.home_parent)?, owner).map(Some)
    }
}

/// The working directory opened through the sandbox: a directory under no root, or reached
/// through a link that leads out of its root, is `PermissionDenied`.
fn open_cwd(sandbox: &Sandbox, request: &ProcessRequest) -> io::Result<OwnedFd> {
    let narrowing = sandbox.narrowed(&[(request.cwd.clone(), Access::ReadOnly)])?;
    if let Some(Err(e)) = narrowing.dirs.into_iter().next() {
        return Err(e);
    }
    let root = narrowing
        .sandbox
        .roots()
        .first()
        .ok_or_else(|| crate::error::outside_roots(&request.cwd))?;
    let dir = root.dir().try_clone()?;
    Ok(dir.into_std_file().into())
}

/// The `/etc/resolv.conf` of a process with transparent TCP, beside its temporary directory
/// (outside it, so the process cannot change it), removed when the process closes.
pub(crate) struct ResolvConf(std::path::PathBuf);

impl Drop for ResolvConf {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Writes it, and keeps it open (read and write: the mount and the Landlock rule need the
/// open file, and the mode applies to later opens only).
fn make_resolv_conf(temp: &super::prepare::TempDir) -> io::Result<(ResolvConf, std::fs::File)> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut path = temp.path.clone().into_os_string();
    path.push(".resolv.conf");
    let path = std::path::PathBuf::from(path);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(&path)?;
    let made = ResolvConf(path);
    let text = format!(
        "# capfs: names are answered by capfs inside this process's namespace\nnameserver {}\n",
        super::egress::DNS_ADDRESS
    );
    file.write_all(text.as_bytes())?;
    Ok((made, file))
}

/// Starts a confined process under its keeper (`keeper.rs`), with pipes for its input and
/// output, or the terminal `pty`.
fn start_confined(
    setup: ChildSetup,
    pty: Option<super::pty::Pty>,
    pipe_stdin: bool,
) -> io::Result<(run::Child, Wiring)> {
    if let Some(pty) = pty {
        let terminal = pty.terminal.as_fd();
        let keeper = child::start(setup, [terminal, terminal, terminal])?;
        drop(pty.terminal);
        return Ok((run::Child::kept(keeper)?, Wiring::Terminal(pty.controller)));
    }
    let (stdin, stdin_writer) = match pipe_stdin {
        true => {
            let (reader, writer) = std::io::pipe()?;
            (OwnedFd::from(reader), Some(writer))
        }
        false => (OwnedFd::from(std::fs::File::open("/dev/null")?), None),
    };
    let (stdout_reader, stdout) = std::io::pipe()?;
    let (stderr_reader, stderr) = std::io::pipe()?;
    let keeper = child::start(setup, [stdin.as_fd(), stdout.as_fd(), stderr.as_fd()])?;
    // The program's ends are the keeper's and the program's alone from here.
    drop((stdin, stdout, stderr));
    let child = run::Child::kept(keeper)?;
    let wiring = Wiring::Pipes {
        stdin: stdin_writer
            .map(|w| {
                tokio::process::ChildStdin::from_std(std::process::ChildStdin::from(OwnedFd::from(
                    w,
                )))
            })
            .transpose()?,
        stdout: tokio::process::ChildStdout::from_std(std::process::ChildStdout::from(
            OwnedFd::from(stdout_reader),
        ))?,
        stderr: tokio::process::ChildStderr::from_std(std::process::ChildStderr::from(
            OwnedFd::from(stderr_reader),
        ))?,
    };
    Ok((child, wiring))
}

/// Spawns an unconfined process by the standard library, `setup` run in its child.
fn spawn_unconfined(
    request: &ProcessRequest,
    env: &BTreeMap<OsString, OsString>,
    setup: ChildSetup,
    pty: Option<super::pty::Pty>,
) -> io::Result<(run::Child, Wiring)> {
    let mut command = tokio::process::Command::new(&request.argv[0]);
    command.args(&request.argv[1..]);
    if let Some(arg0) = &request.arg0 {
        command.arg0(arg0);
    }
    command.env_clear();
    command.envs(env);
    match &pty {
        Some(pty) => {
            command.stdin(Stdio::from(pty.terminal.try_clone()?));
            command.stdout(Stdio::from(pty.terminal.try_clone()?));
            command.stderr(Stdio::from(pty.terminal.try_clone()?));
        }
        None => {
            command.stdin(match request.pipe_stdin {
                true => Stdio::piped(),
                false => Stdio::null(),
            });
            command.stdout(Stdio::piped());
            command.stderr(Stdio::piped());
        }
    }
    child::install(&mut command, setup);
    let mut child = command.spawn()?;
    drop(command);
    let wiring = match pty {
        Some(pty) => Wiring::Terminal(pty.controller),
        None => Wiring::Pipes {
            stdin: child.stdin.take(),
            stdout: child
                .stdout
                .take()
                .ok_or_else(|| error::child_lacks("no stdout"))?,
            stderr: child
                .stderr
                .take()
                .ok_or_else(|| error::child_lacks("no stderr"))?,
        },
    };
    Ok((run::Child::Spawned(child), wiring))
}
