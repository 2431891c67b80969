//! Shared harness for the integration tests: a temporary sandbox with a read-write root `ws/`, a
//! second read-write root `ws2/`, a read-only root `ro/`, a read-only root nested inside the
//! read-write one (`ws/outer/inner_ro/`), and an `outside/` canary tree that no operation may ever
//! change.
//!
//! Every test takes `remote: bool` (or a [`Backend`]) and builds its environment with [`env`], so
//! adding a `#[test_case(true ; "remote")]` line runs the same body against the remote backend,
//! and `#[test_case(Backend::Relay ; "relay")]` through a relay. The servers behind them run in
//! the test process (the library's own server, on TCP or an in-memory pair), not the binary:
//! these tests are about what a client sees, and the binary's own flags and exits have tests of
//! their own.

// Each test binary uses a different subset of the helpers.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use capfs::{AbsolutePathBuf, Access, ExecutorFileSystem, LocalFileSystem, Sandbox};
use capfs_wire::{RemoteFileSystem, RemoteOptions};
use rustix::fs::{CWD, FileType, Mode};

/// The content of `outside/secret`.
mod trees;
pub use trees::{Entry, Kind, assert_no_outside_content, assert_same_tree, snapshot};

pub const SECRET: &[u8] = b"SECRET";
/// A token that appears in every file of the outside tree and in no file inside the roots.
pub const CANARY: &str = "CANARY-OUTSIDE-7f3a";

/// A temporary sandbox and the file system serving it.
pub struct TestEnv {
    /// Keeps the temporary directory alive; removed on drop.
    _dir: tempfile::TempDir,
    /// Canonical host path of the temporary directory holding `ws/`, `ws2/`, `ro/`, `outside/`.
    pub base: PathBuf,
    /// The backend under test.
    pub fs: Arc<dyn ExecutorFileSystem>,
    /// Canonical path of the read-write root, as the sandbox reports it.
    pub ws: AbsolutePathBuf,
    /// Canonical path of the second read-write root.
    pub ws2: AbsolutePathBuf,
    /// Canonical path of the read-only root.
    pub ro: AbsolutePathBuf,
    /// Canonical path of the read-only root nested in `ws` (`ws/outer/inner_ro`).
    pub inner_ro: AbsolutePathBuf,
    /// Host path of the canary tree.
    pub outside: PathBuf,
    /// The server behind a remote backend, stopped with the environment.
    _server: Option<InProcessServer>,
}

/// Which file system a test environment serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A `LocalFileSystem` in the test process.
    Local,
    /// A `RemoteFileSystem` connected over TCP (`127.0.0.1:0`) to a capfs server in the test
    /// process serving a `LocalFileSystem`.
    Remote,
    /// A `RemoteFileSystem` connected over TCP to an in-process capfs server whose own file
    /// system is a `RemoteFileSystem` on an in-memory pair with a server of a
    /// `LocalFileSystem`: every call crosses two servers and both transports.
    Relay,
}

impl From<bool> for Backend {
    fn from(remote: bool) -> Self {
        if remote {
            Backend::Remote
        } else {
            Backend::Local
        }
    }
}

/// An in-process capfs server serving another file system, stopped when dropped.
pub struct InProcessServer {
    pub url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl InProcessServer {
    /// Serves `fs` on `127.0.0.1:0` with `config`'s limits.
    pub async fn start(
        fs: Arc<dyn ExecutorFileSystem>,
        config: capfs_wire::server::ServerConfig,
    ) -> Self {
        let server = capfs_wire::server::Server::bind(fs, config)
            .await
            .expect("bind the in-process server");
        let url = server.url().to_string();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server.run_until(async {
            let _ = stopped.await;
        }));
        Self {
            url,
            stop: Some(stop),
            task: Some(task),
        }
    }
}

impl InProcessServer {
    /// Serves `root` read-write with the default limits, as `capfs serve --root ROOT` does,
    /// for tests of the server that need no process of its own.
    pub async fn serving(root: &std::path::Path) -> Self {
        Self::serving_roots(&[(root, capfs::Access::ReadWrite)], Default::default()).await
    }

    /// Serves `roots` (`--root` / `--read-only`) with `config`'s limits.
    pub async fn serving_roots(
        roots: &[(&std::path::Path, capfs::Access)],
        config: capfs_wire::server::ServerConfig,
    ) -> Self {
        let mut sandbox = capfs::Sandbox::new();
        for (root, access) in roots {
            sandbox = sandbox.with_root(root, *access).expect("open the root");
        }
        let fs: Arc<dyn ExecutorFileSystem> = Arc::new(capfs::LocalFileSystem::new(sandbox));
        Self::start(fs, config).await
    }

    /// Stops the server: its listener closes and its connections are given the shutdown
    /// deadline, as at SIGTERM.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for InProcessServer {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A `RemoteFileSystem` over TCP to a new in-process server of `fs`.
async fn serve_remote(
    fs: Arc<dyn ExecutorFileSystem>,
) -> (Arc<dyn ExecutorFileSystem>, InProcessServer) {
    let server = InProcessServer::start(fs, Default::default()).await;
    let client = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .expect("connect to the in-process server");
    (Arc::new(client), server)
}

/// A `RemoteFileSystem` on an in-memory pair with a server of `fs`; the server ends when the
/// client is dropped.
async fn serve_paired(fs: Arc<dyn ExecutorFileSystem>) -> Arc<dyn ExecutorFileSystem> {
    let (client, _serving) = capfs_wire::server::pair(fs, Default::default())
        .await
        .expect("pair a client with an in-process server");
    Arc::new(client)
}

/// Builds a fresh environment with the default read limit.
pub async fn env(backend: impl Into<Backend>) -> TestEnv {
    env_with_read_limit(backend, capfs::DEFAULT_READ_LIMIT).await
}

/// Builds a fresh environment whose backend refuses to read files over `read_limit` bytes.
pub async fn env_with_read_limit(backend: impl Into<Backend>, read_limit: u64) -> TestEnv {
    let backend = backend.into();
    let dir = tempfile::tempdir().expect("tempdir");
    let base = fs::canonicalize(dir.path()).expect("canonical tempdir");
    for name in ["ws", "ws2", "ro", "outside"] {
        fs::create_dir(base.join(name)).expect("create root");
    }
    let outside = base.join("outside");
    plant_canary(&outside);
    fs::write(base.join("ro/file"), b"read-only content").unwrap();
    fs::create_dir(base.join("ro/dir")).unwrap();
    fs::write(base.join("ro/dir/inner"), b"inner").unwrap();
    fs::create_dir_all(base.join("ws/outer/inner_ro/dir")).unwrap();
    fs::write(base.join("ws/outer/inner_ro/file"), b"nested read-only").unwrap();

    let sandbox = Sandbox::new()
        .with_root(base.join("ws"), Access::ReadWrite)
        .and_then(|s| s.with_root(base.join("ws2"), Access::ReadWrite))
        .and_then(|s| s.with_root(base.join("ro"), Access::ReadOnly))
        .and_then(|s| s.with_root(base.join("ws/outer/inner_ro"), Access::ReadOnly))
        .expect("sandbox");
    let roots: Vec<AbsolutePathBuf> = sandbox.roots().iter().map(|r| r.path().clone()).collect();
    let local: Arc<dyn ExecutorFileSystem> =
        Arc::new(LocalFileSystem::with_read_limit(sandbox, read_limit));
    let (fs, server) = match backend {
        Backend::Local => (local, None),
        Backend::Remote => {
            let (fs, server) = serve_remote(local).await;
            (fs, Some(server))
        }
        Backend::Relay => {
            let (fs, relay) = serve_remote(serve_paired(local).await).await;
            (fs, Some(relay))
        }
    };
    TestEnv {
        _server: server,
        _dir: dir,
        base,
        fs,
        ws: roots[0].clone(),
        ws2: roots[1].clone(),
        ro: roots[2].clone(),
        inner_ro: roots[3].clone(),
        outside,
    }
}

/// Fills `dir` with the canary tree: distinctive files, a subdirectory, and `secret`.
fn plant_canary(dir: &Path) {
    fs::write(dir.join("secret"), SECRET).unwrap();
    fs::write(dir.join("notes.txt"), format!("{CANARY} notes\n")).unwrap();
    fs::write(dir.join("empty"), b"").unwrap();
    fs::create_dir(dir.join("sub")).unwrap();
    fs::write(dir.join("sub/deep.txt"), format!("{CANARY} deep\n")).unwrap();
    fs::set_permissions(dir.join("sub/deep.txt"), fs::Permissions::from_mode(0o640)).unwrap();
}

impl TestEnv {
    /// The sandbox path of `rel` below the read-write root (`rel` may contain `.` and `..`).
    pub fn p(&self, rel: &str) -> AbsolutePathBuf {
        AbsolutePathBuf::new(format!("{}/{rel}", self.ws)).unwrap()
    }

    /// The absolute path `base/rel` as the sandbox sees it; `rel` starting with `/` is taken as an
    /// absolute host path. `rel` is not normalised by the host, only by `AbsolutePathBuf`.
    pub fn at(&self, rel: &str) -> AbsolutePathBuf {
        if rel.starts_with('/') {
            AbsolutePathBuf::new(rel).unwrap()
        } else {
            AbsolutePathBuf::new(format!("{}/{rel}", self.base.display())).unwrap()
        }
    }

    /// Host path `base/rel`, for setting up and checking trees without the library.
    pub fn host(&self, rel: &str) -> PathBuf {
        self.base.join(rel)
    }

    /// Host path of `rel` inside the read-write root.
    pub fn ws_host(&self, rel: &str) -> PathBuf {
        self.ws.as_path().join(rel)
    }

    /// Writes `contents` to `ws/rel` on the host, creating parents.
    pub fn mkfile(&self, rel: &str, contents: &[u8]) -> PathBuf {
        let path = self.ws_host(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&path, contents).unwrap();
        path
    }

    /// Creates the directory `ws/rel` (and parents) on the host.
    pub fn mkdir(&self, rel: &str) -> PathBuf {
        let path = self.ws_host(rel);
        fs::create_dir_all(&path).unwrap();
        path
    }

    /// Creates the symlink `ws/rel -> target` on the host (`target` verbatim).
    pub fn symlink(&self, rel: &str, target: impl AsRef<Path>) -> PathBuf {
        let path = self.ws_host(rel);
        std::os::unix::fs::symlink(target, &path).unwrap();
        path
    }

    /// Creates a FIFO at `ws/rel`.
    pub fn mkfifo(&self, rel: &str) -> PathBuf {
        let path = self.ws_host(rel);
        rustix::fs::mknodat(CWD, &path, FileType::Fifo, Mode::from_raw_mode(0o644), 0).unwrap();
        path
    }

    /// Binds a unix socket at `ws/rel`; the listener must stay alive while the socket is used.
    pub fn mksocket(&self, rel: &str) -> std::os::unix::net::UnixListener {
        std::os::unix::net::UnixListener::bind(self.ws_host(rel)).unwrap()
    }

    /// Snapshot of the outside canary tree.
    pub fn outside_snapshot(&self) -> BTreeMap<PathBuf, Entry> {
        snapshot(&self.outside)
    }

    /// Asserts that the outside canary tree equals `before`, byte for byte.
    pub fn assert_outside_unchanged(&self, before: &BTreeMap<PathBuf, Entry>) {
        assert_same_tree(before, &self.outside_snapshot(), "outside canary tree");
    }
}

/// The kind of `result`'s error, or a panic naming the unexpected success.
pub fn err_kind<T: std::fmt::Debug>(result: io::Result<T>) -> io::ErrorKind {
    match result {
        Ok(value) => panic!("expected an error, got Ok({value:?})"),
        Err(e) => e.kind(),
    }
}

/// True when `err` is the loop-of-symlinks error (`ELOOP`, whose `ErrorKind` is not nameable on
/// stable Rust).
pub fn is_loop(err: &io::Error) -> bool {
    format!("{:?}", err.kind()) == "FilesystemLoop"
}

/// A file system over the single root `root` (for roots the standard environment does not have,
/// such as `/proc/self`).
pub async fn fs_over(
    remote: bool,
    root: impl AsRef<Path>,
    access: Access,
    read_limit: u64,
) -> (Arc<dyn ExecutorFileSystem>, AbsolutePathBuf) {
    let sandbox = Sandbox::new().with_root(&root, access).expect("sandbox");
    let path = sandbox.roots()[0].path().clone();
    let local: Arc<dyn ExecutorFileSystem> =
        Arc::new(LocalFileSystem::with_read_limit(sandbox, read_limit));
    if remote {
        // These file systems carry no handle to stop a server: on a pair, the server ends
        // with its client.
        return (serve_paired(local).await, path);
    }
    (local, path)
}

/// How long an operation that must not block may take.
pub const NO_HANG: std::time::Duration = std::time::Duration::from_secs(10);

/// How long an operation on a very deep tree may take: it cannot block, but it is slow in debug
/// builds on a loaded machine; the bound only turns an endless walk into a failure.
pub const DEEP_TREE_BOUND: std::time::Duration = std::time::Duration::from_secs(300);

/// Awaits `fut`, and ends the whole test process when it takes longer than [`NO_HANG`]: a
/// blocking task that never returns would otherwise keep the test runtime from shutting down,
/// so a panic alone would turn the hang into a hung test run instead of a failure.
pub async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    within_for(NO_HANG, what, fut).await
}

/// [`within`] with an explicit bound.
pub async fn within_for<T>(
    bound: std::time::Duration,
    what: &str,
    fut: impl std::future::Future<Output = T>,
) -> T {
    match tokio::time::timeout(bound, fut).await {
        Ok(value) => value,
        Err(_) => {
            // Printed outside the test harness's capture, since the process ends here.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr().lock(),
                "{what}: still running after {bound:?}; the operation hangs"
            );
            std::process::exit(101);
        }
    }
}

/// Creates a chain of `depth` nested directories named `d` starting with `top` (which counts as
/// the first), working through directory handles so that no path grows with the depth. A file
/// `bottom` is put in the deepest directory.
pub fn build_deep_tree(top: &Path, depth: usize) {
    use rustix::fs::OFlags;
    fs::create_dir(top).unwrap();
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let mut dir = rustix::fs::open(top, flags, Mode::empty()).unwrap();
    for _ in 1..depth {
        rustix::fs::mkdirat(&dir, "d", Mode::from_raw_mode(0o755)).unwrap();
        dir = rustix::fs::openat(&dir, "d", flags, Mode::empty()).unwrap();
    }
    let file = rustix::fs::openat(
        &dir,
        "bottom",
        OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .unwrap();
    rustix::io::write(&file, b"bottom").unwrap();
}

/// The depth of the chain of `d` directories starting at `top` (counting `top`), and whether the
/// deepest one holds the file `bottom` with its original contents.
pub fn deep_tree_depth(top: &Path) -> (usize, bool) {
    use rustix::fs::OFlags;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let mut dir = rustix::fs::open(top, flags, Mode::empty()).unwrap();
    let mut depth = 1;
    while let Ok(child) = rustix::fs::openat(&dir, "d", flags, Mode::empty()) {
        dir = child;
        depth += 1;
    }
    let bottom = rustix::fs::openat(
        &dir,
        "bottom",
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
    .map(|fd| {
        let mut buf = [0u8; 16];
        let n = rustix::io::read(&fd, &mut buf).unwrap();
        buf[..n] == *b"bottom"
    });
    (depth, bottom == Some(true))
}
